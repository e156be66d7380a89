"""What the run folder of a plain-PyTorch example holds: started, finished, its metrics.

``examples/digits_budget.py`` (and any trainer that writes the same files) writes, in its
``--out`` folder, only at the end of the budget and in this order:

- ``metrics.jsonl``: one JSON line per iteration (``iteration``, ``lr``, ``loss``), with
  ``--validate-every K`` an evaluation line after every ``K`` iterations (``iteration`` = the
  iterations done, the held-out metrics, no ``lr`` or ``loss``), then one final line
  (``iteration`` = the budget, ``final: true`` and the held-out metrics, e.g. ``val_accuracy``);
- ``lr_trace.csv``: ``iteration,lr``;
- ``results.json``: the run's summary, written last: a folder with it is a finished run;
- while it trains, with ``--validate-every K``, ``validations.jsonl``: each periodic evaluation
  line as it happens (what ``budgeted-search --method asha``'s pruner reads).

A diverged run (exit status 3) and a killed one write nothing, so a folder without
``results.json`` holds no run. The folder is untrusted: the files are read as JSON data only.

Example:
    >>> import json, tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> lines = [{"iteration": 0, "lr": 0.1, "loss": 2.3}, {"iteration": 1, "val_accuracy": 0.4},
    ...          {"iteration": 1, "lr": 0.05, "loss": 2.1},
    ...          {"iteration": 2, "val_accuracy": 0.5, "final": True}]
    >>> _ = (run / "metrics.jsonl").write_text("\\n".join(map(json.dumps, lines)))
    >>> holds_run(run), final_metrics(run)
    (True, None)
    >>> _ = (run / "results.json").write_text('{"val_accuracy": 0.5, "budget_iters": 2}')
    >>> holds_run(run), final_metrics(run), evaluations(run)
    (True, {'val_accuracy': 0.5}, [(1, {'val_accuracy': 0.4}), (2, {'val_accuracy': 0.5})])
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import RecordError
from .records import curve, number, read_json_lines

__all__ = [
    "CURVE_NAMES",
    "RESULTS_FILE",
    "evaluations",
    "final_metrics",
    "holds_run",
    "resume_checkpoint",
    "saved_schedulers",
    "train_curve",
]

RESULTS_FILE = "results.json"
"""The summary a finished run writes last."""
METRICS_FILE = "metrics.jsonl"
"""One JSON line per iteration, then the final evaluation's line."""
LIVE_FILE = "validations.jsonl"
"""The periodic evaluations, each appended as it happens (read before the run finished)."""
CURVE_NAMES = {"lr": "lr", "loss": "loss", "grad_norm": "grad_norm"}
""":data:`budgeted.runs.records.CURVE_KEYS` -> the key in ``metrics.jsonl``."""
_NOT_METRICS = frozenset({"iteration", "final", "lr", "loss"})


def resume_checkpoint(folder: str | os.PathLike[str]) -> None:
    """None: the example saves no checkpoint (a stopped run starts again)."""
    return None


def saved_schedulers(checkpoint: Any) -> dict[str, dict[str, Any]]:
    """``{"scheduler": state}`` where a checkpoint of a PyTorch script keeps its LR scheduler's
    state under ``scheduler`` (the usual ``torch.save({"model": ..., "scheduler": ...})``);
    ``{}`` otherwise.

    >>> saved_schedulers({"scheduler": {"budget": {"total": 9}}}), saved_schedulers([1])
    ({'scheduler': {'budget': {'total': 9}}}, {})
    """
    state = checkpoint.get("scheduler") if isinstance(checkpoint, dict) else None
    return {"scheduler": state} if isinstance(state, dict) else {}


def holds_run(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a run: its ``results.json`` (written last) or its log."""
    root = Path(folder)
    return (root / RESULTS_FILE).is_file() or (root / METRICS_FILE).is_file()


def _results(root: Path) -> dict[str, Any] | None:
    path = root / RESULTS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise RecordError(f"{path}: not a JSON object; allowed: the summary a run writes") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: not a JSON object; allowed: the summary a run writes")
    return data


def _final_line(root: Path) -> dict[str, Any] | None:
    path = root / METRICS_FILE
    lines = read_json_lines(path) if path.is_file() else []
    return next((r for r in reversed(lines) if r.get("final") is True), None)


def _metrics(record: dict[str, Any]) -> dict[str, float]:
    found = {k: number(v) for k, v in record.items() if k not in _NOT_METRICS}
    return {k: v for k, v in found.items() if v is not None}


def final_metrics(folder: str | os.PathLike[str]) -> dict[str, float] | None:
    """The held-out metrics at the end of a finished run (its final ``metrics.jsonl`` line's
    numbers, e.g. ``{"val_accuracy": 0.93}``); None without ``results.json`` (not finished)."""
    root = Path(folder)
    if _results(root) is None:
        return None
    final = _final_line(root)
    if final is None:
        raise RecordError(
            f"{root / METRICS_FILE}: no final line; allowed: the log a finished run writes"
        )
    return _metrics(final)


def train_curve(folder: str | os.PathLike[str]) -> list[dict[str, float]]:
    """The LR and training loss per iteration from ``metrics.jsonl``; ``[]`` without it."""
    path = Path(folder) / METRICS_FILE
    return curve(read_json_lines(path), "iteration", CURVE_NAMES) if path.is_file() else []


def evaluations(folder: str | os.PathLike[str]) -> list[tuple[int, dict[str, float]]]:
    """Every evaluation of a finished run, in order: ``(iterations done, metrics)`` for each line
    of ``metrics.jsonl`` with numeric metrics, an ``iteration`` that is a whole number >= 0 and
    no ``lr`` or ``loss`` (the periodic ones of ``--validate-every``, then the final one at the
    end of its budget); before it finished, the periodic ones so far (``validations.jsonl``)."""
    root = Path(folder)
    log = root / (METRICS_FILE if _results(root) is not None else LIVE_FILE)
    if not log.is_file():
        return []
    found = []
    for record in read_json_lines(log):
        at = record.get("iteration")
        whole = isinstance(at, int) and not isinstance(at, bool) and at >= 0
        if "lr" in record or "loss" in record or not whole:
            continue
        metrics = _metrics(record)
        if metrics:
            found.append((at, metrics))
    return found

"""Reading the JSON-lines logs that run folders hold (framework-free).

>>> import tempfile, pathlib
>>> log = pathlib.Path(tempfile.mkdtemp()) / "metrics.json"
>>> _ = log.write_text('{"iteration": 0}\\n{"iteration": 1, "lr": 0.1}\\n{"iterat')
>>> read_json_lines(log)
[{'iteration': 0}, {'iteration': 1, 'lr': 0.1}]
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import RecordError

__all__ = [
    "CELL_STATUSES", "CURVE_KEYS", "RecordError", "cell_record_problem", "curve", "non_finite_loss",
    "number", "read_json_lines", "shown"
]  # fmt: skip


CURVE_KEYS = ("lr", "loss", "grad_norm")
"""What a training curve holds per logged iteration (where the run logged it)."""


def read_json_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines log, in order; a line cut short by a crash (or any
    line that is not a JSON object, or not text) is left out. Values are data only: use
    :func:`number` to read one as a number.

    Args:
        path: the log (Detectron2's ``metrics.json``, MMEngine's ``vis_data/scalars.json``).
    """
    records = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # not JSON; an integer too long, too deep
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def number(value: Any) -> float | None:
    """``value`` as a float where a log holds a number there (NaN and infinities included);
    None for anything else (a string, a bool, null, an integer too large for a float).

    Example:
        >>> number(3), number(2.5), number(True), number("4"), number(10**400)
        (3.0, 2.5, None, None, None)
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def curve(
    records: list[dict[str, Any]], step: str, names: dict[str, str]
) -> list[dict[str, float]]:
    """The training curve in ``records``: one dict per logged iteration, ascending, with
    ``iteration`` and each of :data:`CURVE_KEYS` the records hold (under ``names[key]``).

    A record without any of them (an evaluation) is left out; an iteration logged twice (a run
    resumed from a checkpoint before it) keeps its last record.

    Args:
        records: the log's records, in order (:func:`read_json_lines`).
        step: the key of the iteration (``"iteration"``, ``"step"``).
        names: :data:`CURVE_KEYS` name -> key in the log (``{"loss": "total_loss"}``).

    Example:
        >>> rows = [{"step": 1, "lr": 0.1, "loss": 2.0}, {"step": 1, "mIoU": 40.0},
        ...         {"step": 1, "lr": 0.2, "loss": 1.5}]
        >>> curve(rows, "step", {"lr": "lr", "loss": "loss", "grad_norm": "grad_norm"})
        [{'iteration': 1.0, 'lr': 0.2, 'loss': 1.5}]
    """
    points: dict[float, dict[str, float]] = {}
    for record in records:
        point = {name: number(record.get(key)) for name, key in names.items()}
        point = {name: value for name, value in point.items() if value is not None}
        at = number(record.get(step))
        if point and at is not None and math.isfinite(at):
            points[at] = {"iteration": at, **point}
    return [points[k] for k in sorted(points)]


def non_finite_loss(points: list[dict[str, float]]) -> dict[str, float] | None:
    """The first point of a training curve (:func:`curve`) whose loss is NaN or infinite: the
    run diverged, whatever it evaluated afterwards; None where every logged loss is finite.

    Example:
        >>> points = [{"iteration": 1.0, "loss": 2.0}, {"iteration": 2.0, "loss": math.nan}]
        >>> non_finite_loss(points)
        {'iteration': 2.0, 'loss': nan}
    """
    return next((p for p in points if "loss" in p and not math.isfinite(p["loss"])), None)


# --- sweep cell records (``sweep_cell.json``) ---------------------------------------------------

CELL_STATUSES = ("finished", "undecayed", "diverged", "failed", "interrupted", "stopped")
"""What a sweep cell's last try came to (``status`` in ``sweep_cell.json``): ``finished`` (a
result), ``undecayed`` (a result of a time budget that ended before its LR decayed: shown,
marked, never the best LR), ``diverged`` (a non-finite loss: a result of "this LR diverges", not
retrained), ``failed`` (rerun to retry), ``interrupted`` (rerun to resume) or ``stopped``
(``budgeted-search --method asha`` stopped it early: no result; a sweep trains it again)."""


def _number(value: Any) -> bool:
    found = number(value)  # an integer too large for a float is none
    return found is not None and math.isfinite(found)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _seconds(value: Any) -> bool:
    return value is None or (_number(value) and value >= 0)


def _exit(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _metrics(value: Any) -> bool:
    return value is None or (
        isinstance(value, dict) and all(isinstance(k, str) and _number(v) for k, v in value.items())
    )


_TRY_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "action": (_text, "a word (run, resume)"),
    "started": (_text, "a time"),
    "wall_s": (_seconds, "a number of seconds >= 0 or null"),
    "exit": (_exit, "an exit status (an integer) or null"),
    "signal": (_text, "a signal's name"),
}


def _tries(value: Any) -> bool:
    return value is None or (
        isinstance(value, list)
        and all(
            isinstance(t, dict) and all(ok(t[k]) for k, (ok, _) in _TRY_FIELDS.items() if k in t)
            for t in value
        )
    )


_CELL_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "framework": (_text, "a framework's name"),
    "schedule": (lambda v: isinstance(v, str), "a schedule's name"),
    "config": (_text, "a config file"),
    "data": (_text, "a folder or null"),
    "evaluated_from": (_text, "a run folder"),
    "overrides": (_strings, "a list of strings"),
    "command": (_strings, "a list of strings"),
    "tries": (_tries, "a list of tries ({action, started, wall_s, exit, signal})"),
    "wall_s": (_seconds, "a number of seconds >= 0 or null"),
    "exit": (_exit, "an exit status (an integer) or null"),
    "metrics": (_metrics, 'an object of metric: number ({"mIoU": 41.2}) or null'),
    "status": (lambda v: v in CELL_STATUSES, f"one of {', '.join(CELL_STATUSES)}"),
}
"""The fields ``budgeted-sweep`` writes into ``sweep_cell.json`` (besides the cell's budget, LR
and seed): type check, what is allowed."""


def cell_record_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields of a sweep cell record, in words; None if nothing is.

    Each field ``budgeted-sweep`` writes must have its type (:data:`_CELL_FIELDS`): a record
    edited by hand or written by something else is refused, not half-read.

    Example:
        >>> cell_record_problem({"schedule": "linear", "budget": 0.1, "wall_s": 12.5})
        >>> cell_record_problem({"schedule": "linear", "budget": 0.1, "tries": "garbage"})
        "its tries 'garbage' is not a list of tries ({action, started, wall_s, exit, signal})"
    """
    for key, (ok, allowed) in _CELL_FIELDS.items():
        if key in record and not ok(record[key]):
            return f"its {key} {shown(record[key])} is not {allowed}"
    return None


def shown(value: Any) -> str:
    """``repr(value)`` as a one-line message shows a value read from a file: cut to 60
    characters (a 400-digit integer, a long list).

    >>> shown(0.5), shown(10**100)
    ('0.5', '100000000000000000000000000000000000000000000000000000000...')
    """
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."

"""Run folders of the Detectron2 tools (``OUTPUT_DIR``, ``train.output_dir``): whether a folder
holds a run, its lock file and the words of the lines about it (:mod:`budgeted.control.folder`),
and the final evaluation of a finished run.

Reads only the files Detectron2 writes (``config.yaml``, ``metrics.json``, ``last_checkpoint``,
``model_final.pth``); imports no Detectron2 module itself. A run folder is untrusted (it may come
from anyone), so it is read as data only: ``metrics.json`` as JSON, ``config.yaml`` with
``yaml.safe_load`` (never yacs' or Detectron2's config loaders, which fall back to an unsafe
load that can run code), and of the checkpoints only their names (loading one is the training
tools' job, through :func:`budgeted.safety.load_checkpoint`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._require import require
from . import SavedLRs, check_new_run
from .records import curve, number, read_json_lines

__all__ = [
    "CURVE_NAMES",
    "EVAL_CONFIG_NAME",
    "EVAL_TASKS",
    "LOCK_NAME",
    "RUN_FILES",
    "WORDS",
    "check_new_run_folder",
    "evaluations",
    "final_metrics",
    "holds_run",
    "max_iter",
    "resume_checkpoint",
    "run_config_kept",
    "run_files",
    "saved_base_lrs",
    "saved_schedulers",
    "train_curve",
    "write_evaluation",
]

RUN_FILES = ("last_checkpoint", "metrics.json", "model_final.pth")
"""Files that mark an output folder as holding a run."""

LOCK_NAME = ".train_net.lock"
"""The lock file the Detectron2 tools hold in their output folder while they train."""

WORDS = {
    "folder": "{key}",
    "writable": "a folder this run can write (set another {key}, e.g. {key} ./output/run)",
    "in_use": "{key} {folder} is in use: {holder} is training there (it holds {lock}); wait for "
    "it to end, stop it, or set another {key} (nothing was written)",
    "holds_run": "{key} {folder!r} already holds a run; pass --resume to continue it, or set "
    "another {key} (e.g. {key} ./output/new_run) to start a new one",
    "removed": "removed {count} temporary file(s) a killed checkpoint write left in {folder}: "
    "{names}",
}
"""The Detectron2 tools' lines about their output folder (:mod:`budgeted.control.folder`), ``key``
being ``OUTPUT_DIR`` or ``train.output_dir``."""

EVAL_TASKS = ("bbox", "segm", "keypoints", "sem_seg", "panoptic_seg")
"""Prefixes of the evaluation results in ``metrics.json`` (``bbox/AP``, ``segm/AP50``, ...)."""


def run_files(folder: str | os.PathLike[str]) -> list[str]:
    """The files of :data:`RUN_FILES` in ``folder``: those that show a run was started there."""
    return [name for name in RUN_FILES if os.path.exists(os.path.join(folder, name))]


def holds_run(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a (started or finished) training run.

    Args:
        folder (str or PathLike): an ``OUTPUT_DIR``.

    Example:
        >>> holds_run("/nonexistent/folder")
        False
    """
    return bool(run_files(folder))


def check_new_run_folder(
    folder: str | os.PathLike[str] | None, resume: bool, *, key: str = "OUTPUT_DIR"
) -> None:
    """Refuse to start a new run in a folder that already holds one (it would be overwritten).

    Args:
        folder (str or PathLike, optional): the run's output folder; empty or None: no check.
        resume (bool): ``--resume`` was given (continuing the run there is what is asked).
        key (str): the config key of the folder, for the message.

    Raises:
        ValueError: one line naming the folder and both ways out.

    Example:
        >>> check_new_run_folder("/nonexistent/folder", resume=False)  # nothing there: fine
    """
    check_new_run(folder, resume, run_files, WORDS["holds_run"], key)


def max_iter(folder: str | os.PathLike[str]) -> int | None:
    """The run's budget in iterations: ``SOLVER.MAX_ITER`` (``train.max_iter``) of the
    ``config.yaml`` Detectron2 saved in ``folder``, before any ``REFERENCE_WORLD_SIZE`` scaling;
    None without one.

    Example:
        >>> max_iter("/nonexistent/folder") is None
        True
    """
    require("reading a Detectron2 run folder (its config.yaml)", "yaml")
    import yaml

    config = Path(folder) / "config.yaml"
    try:  # safe_load: a python tag (!!python/object/apply:...) is an error, never a call
        data = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError, RecursionError):  # ValueError: not UTF-8
        return None
    for section, key in (("SOLVER", "MAX_ITER"), ("train", "max_iter")):  # yacs, LazyConfig
        value = (data.get(section) or {}).get(key) if isinstance(data, dict) else None
        if isinstance(value, int):
            return value
    return None


def resume_checkpoint(folder: str | os.PathLike[str]) -> str | None:
    """The checkpoint file ``--resume`` would load from run ``folder``: the one its
    ``last_checkpoint`` names (maybe a missing file); None without a readable ``last_checkpoint``.

    Example:
        >>> resume_checkpoint("/nonexistent/folder") is None
        True
    """
    try:
        name = Path(folder, "last_checkpoint").read_bytes().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    return os.path.join(folder, name.strip())


def saved_schedulers(checkpoint: Any) -> dict[str, dict[str, Any]]:
    """The LR scheduler states a loaded (untrusted) checkpoint holds, by where they are:
    ``{"LRScheduler": state}`` (``trainer.hooks.LRScheduler``, what Detectron2's
    ``hooks.LRScheduler`` saves; a state that is not a dict reads as ``{}``, which no scheduler
    loads); ``{}`` where there is none.

    Example:
        >>> saved_schedulers({"trainer": {"hooks": {"LRScheduler": {"last_epoch": 4}}}})
        {'LRScheduler': {'last_epoch': 4}}
        >>> saved_schedulers({"trainer": ["junk"]})
        {}
    """
    trainer = checkpoint.get("trainer") if isinstance(checkpoint, dict) else None
    hooks = trainer.get("hooks") if isinstance(trainer, dict) else None
    if not isinstance(hooks, dict) or hooks.get("LRScheduler") is None:
        return {}
    state = hooks["LRScheduler"]
    return {"LRScheduler": state if isinstance(state, dict) else {}}


def saved_base_lrs(checkpoint: Any) -> list[SavedLRs]:
    """Every record of the base LRs in a loaded (untrusted) checkpoint: the LR scheduler's
    ``base_lrs``, then each optimizer state's ``initial_lr`` per param group.

    Example:
        >>> [r.where for r in saved_base_lrs({"trainer": {"hooks": {"LRScheduler": {
        ...     "base_lrs": [0.02]}}}, "optimizer": {"param_groups": [{"initial_lr": 0.02}]}})]
        ["the LR scheduler's base_lrs", "the optimizer param groups' initial_lr"]
    """
    scheduler = saved_schedulers(checkpoint).get("LRScheduler", {})
    found = []
    if "base_lrs" in scheduler:
        found.append(SavedLRs(None, "the LR scheduler's base_lrs", scheduler["base_lrs"]))
    trainer = checkpoint.get("trainer") if isinstance(checkpoint, dict) else None
    inner = trainer.get("_trainer") if isinstance(trainer, dict) else None
    for where, holder in (("trainer._trainer", inner), ("trainer", trainer), ("", checkpoint)):
        state = holder.get("optimizer") if isinstance(holder, dict) else None
        groups = state.get("param_groups") if isinstance(state, dict) else None
        if isinstance(groups, list) and all(
            isinstance(g, dict) and "initial_lr" in g for g in groups
        ):
            key = f"{where}.optimizer" if where else "optimizer"
            values = [g["initial_lr"] for g in groups]
            found.append(SavedLRs(None, f"the {key} param groups' initial_lr", values))
    return found


def _is_eval_key(key: str) -> bool:
    return key.split("/", 1)[0] in EVAL_TASKS and "/" in key


def final_metrics(folder: str | os.PathLike[str]) -> dict[str, float] | None:
    """The final evaluation of a finished run in ``folder``; None if it has not finished.

    A run has finished when its evaluation after the last iteration is in ``metrics.json``:
    ``model_final.pth`` is written (the trainer reached its ``max_iter``, however
    ``REFERENCE_WORLD_SIZE`` scaled it) or the evaluation's iteration is at least the
    ``SOLVER.MAX_ITER - 1`` (``train.max_iter - 1``) of the run's ``config.yaml``, and no
    training iteration was logged after it.

    Args:
        folder (str or PathLike): a run's ``OUTPUT_DIR``.

    Returns:
        dict[str, float] or None: every evaluation result of that evaluation, keyed as in
        ``metrics.json`` (``bbox/AP``, ``bbox/AP50``, ``segm/AP``, ...).

    Example:
        >>> final_metrics("/nonexistent/folder") is None
        True
    """
    folder = Path(folder)
    metrics = folder / "metrics.json"
    if not metrics.is_file():
        return None
    rows = read_json_lines(metrics)
    evals = [r for r in rows if any(_is_eval_key(k) for k in r)]
    if not evals:
        return None
    last = evals[-1]
    at = _iteration(last)
    if any(_iteration(r) > at for r in rows):
        return None  # training went on after it: not the final evaluation
    budget = max_iter(folder)
    ended = (folder / "model_final.pth").is_file() or (budget is not None and at >= budget - 1)
    if not ended:
        return None
    out = {key: number(value) for key, value in last.items() if _is_eval_key(key)}
    return {key: value for key, value in out.items() if value is not None} or None


def _iteration(row: Mapping[str, Any]) -> float:
    """A ``metrics.json`` row's ``iteration``; -1 where it has none (or not a number)."""
    at = number(row.get("iteration"))
    return -1.0 if at is None or math.isnan(at) else at


EVAL_CONFIG_NAME = "config.eval.yaml"
"""Where an ``--eval-only`` in a training run's folder keeps the config it evaluated with."""


@contextmanager
def run_config_kept(output_dir: str, eval_only: bool) -> Iterator[None]:
    r"""Around Detectron2's ``default_setup``: an ``--eval-only`` in a folder whose
    ``config.yaml`` records a run keeps that file as it was (``default_setup`` would overwrite it
    with the evaluation's config, and :func:`max_iter` would read the wrong budget); the
    evaluation's config goes beside it, as ``config.eval.yaml``.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _ = Path(folder, "config.yaml").write_text("SOLVER:\n  MAX_ITER: 4\n")
        >>> with run_config_kept(folder, eval_only=True):
        ...     _ = Path(folder, "config.yaml").write_text("SOLVER:\n  MAX_ITER: 40\n")
        >>> Path(folder, "config.yaml").read_text(), Path(folder, EVAL_CONFIG_NAME).read_text()
        ('SOLVER:\n  MAX_ITER: 4\n', 'SOLVER:\n  MAX_ITER: 40\n')
    """
    path = Path(output_dir, "config.yaml")
    before = path.read_bytes() if eval_only and path.is_file() else None
    try:
        yield
    finally:
        if before is not None and path.is_file() and path.read_bytes() != before:
            Path(output_dir, EVAL_CONFIG_NAME).write_bytes(path.read_bytes())
            path.write_bytes(before)


def write_evaluation(
    folder: str | os.PathLike[str], results: Mapping[str, Any], iteration: int | None
) -> Path | None:
    """Append an ``--eval-only`` evaluation to ``folder/metrics.json`` as training logs one:
    one JSON line, ``{"iteration": i, "bbox/AP": ..., "segm/AP": ...}``, at the iteration the
    weights were saved at (``model_final.pth``: ``MAX_ITER - 1``; training logs its own final
    evaluation one later, at ``MAX_ITER``).

    Detectron2's ``--eval-only`` prints its results and keeps no record; with this line the
    folder reads like a finished run (:func:`final_metrics`), so ``budgeted-report`` can
    tabulate a sweep of evaluations (``budgeted-sweep --evaluate-from``). A training run's
    ``metrics.json`` (one with any training record) is left as it is, and so are empty results:
    an evaluation in the run's own folder must not change what that run logged.

    Args:
        folder (str or PathLike): the evaluation's ``OUTPUT_DIR``.
        results (Mapping): the evaluators' results, ``{task: {metric: value}}``, as
            ``Trainer.test`` returns them (nested deeper: keys joined with ``/``).
        iteration (int, optional): the iteration the weights were saved at (their checkpoint's
            ``iteration``); None (weights without one): the line has no ``iteration``.

    Returns:
        Path or None: the file written; None where nothing was (a training run's log, or no
        results).

    Example:
        >>> import tempfile
        >>> path = write_evaluation(tempfile.mkdtemp(), {"bbox": {"AP": 41.5}}, 399)
        >>> print(path.read_text().strip())
        {"iteration": 399, "bbox/AP": 41.5}
    """

    line: dict[str, Any] = {} if iteration is None else {"iteration": int(iteration)}

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, sub in value.items():
                add(f"{prefix}/{key}" if prefix else str(key), sub)
        else:
            line[prefix] = value

    add("", results)
    path = Path(folder) / "metrics.json"
    if not any(_is_eval_key(k) for k in line):
        return None
    if path.is_file() and any(
        any(k != "iteration" and not _is_eval_key(k) for k in r) for r in read_json_lines(path)
    ):
        return None  # a training run's log
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    return path


CURVE_NAMES = {"lr": "lr", "loss": "total_loss", "grad_norm": "full_grad_norm"}
""":data:`budgeted.runs.records.CURVE_KEYS` -> the key in ``metrics.json``."""


def train_curve(folder: str | os.PathLike[str]) -> list[dict[str, float]]:
    """The LR, training loss and full-gradient norm (where logged) per logged iteration, from
    ``metrics.json`` (Detectron2 logs every ``SOLVER.BUDGET.WRITER_PERIOD`` iterations); ``[]``
    without one.

    Example:
        >>> train_curve("/nonexistent/folder")
        []
    """
    metrics = Path(folder) / "metrics.json"
    if not metrics.is_file():
        return []
    return curve(read_json_lines(metrics), "iteration", CURVE_NAMES)


def evaluations(folder: str | os.PathLike[str]) -> list[tuple[int, dict[str, float]]]:
    """Every evaluation logged in ``metrics.json``: (iteration counted from 1, its results keyed
    as logged), in order; ``[]`` without one. With ``TEST.EVAL_PERIOD`` there is one per
    period, else one at the end.

    Example:
        >>> evaluations("/nonexistent/folder")
        []
    """
    metrics = Path(folder) / "metrics.json"
    if not metrics.is_file():
        return []
    found = []
    for row in read_json_lines(metrics):
        results = {k: number(v) for k, v in row.items() if _is_eval_key(k)}
        results = {k: v for k, v in results.items() if v is not None}
        at = _iteration(row)
        if results and math.isfinite(at):
            found.append((int(at) + 1, results))
    return found

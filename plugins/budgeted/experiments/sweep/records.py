"""A sweep folder read as data: its records (``sweep.json``, each cell's ``sweep_cell.json``),
each cell's final metrics and what it came to (finished, undecayed, diverged).

``budgeted-sweep`` writes these records and reads them back to plan (what is finished, what is
resumed), and ``budgeted-report`` / ``budgeted-rank`` read whole sweep folders with
:func:`load_sweep`. A run folder is read through its framework's
:class:`~budgeted.runs.RunFolderReader` (:func:`budgeted.runs.reader`); a record is read as JSON
and checked field by field (:func:`read_record`), never run.

This module imports no framework.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import RecordError, ReportError
from ...runs import reader
from ...runs.records import cell_record_problem, non_finite_loss
from ..families import FAMILIES, ConfigFamily, budget_tag

__all__ = [
    "CELL_FILE",
    "LOGGED_AS_FRACTION",
    "METRICS",
    "NOTHING_PREDICTED",
    "SWEEP_FILE",
    "SWEEP_LOCK",
    "Cell",
    "CellKey",
    "Final",
    "Sweep",
    "cell_key",
    "cell_name",
    "divergence",
    "family_label",
    "family_of",
    "holds_run",
    "load_sweep",
    "number_text",
    "read_final",
    "read_record",
    "run_status",
]

SWEEP_FILE = "sweep.json"
"""The sweep folder's record: framework, config family, planned cells."""
CELL_FILE = "sweep_cell.json"
"""Each cell folder's record: config, overrides, command, wall time."""
SWEEP_LOCK = ".sweep.lock"
"""The lock file a running sweep holds (``flock``) in its ``--out`` folder."""
METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "detectron2": (("box AP", "bbox/AP"), ("mask AP", "segm/AP")),
    "mmseg": (("mIoU", "mIoU"),),
    "mmdet": (("box AP", "coco/bbox_mAP"), ("mask AP", "coco/segm_mAP")),
    "mmpretrain": (("top-1", "accuracy/top1"),),
    "mmaction": (("top-1", "acc/top1"),),
    "pytorch": (("top-1", "val_accuracy"),),
}
"""framework -> (name shown, key in the training tool's log) of each reported metric."""
LOGGED_AS_FRACTION = frozenset({"mmdet", "mmaction", "pytorch"})
"""Frameworks whose metrics are logged as fractions (MMDetection's ``CocoMetric``: 0.375;
MMAction2's ``AccMetric``; the plain-PyTorch examples' ``val_accuracy``): the report shows them
in percent (37.5), as Detectron2's COCO AP, MMSegmentation's mIoU and MMPretrain's accuracy are
logged."""
NOTHING_PREDICTED = {"detectron2": "logged as NaN", "mmdet": "not logged"}
"""framework -> how its COCO evaluation logs a metric when the model predicted nothing: the
report counts such a metric as 0, the COCO AP of no detections, and names the run. Other
frameworks' metrics are never missing from a finished run's final evaluation."""


@dataclass
class Final:
    """A finished run: its length in iterations and its final metrics (shown names).

    ``no_predictions``: the metrics its evaluation could not compute because the model predicted
    nothing (Detectron2's ``COCOEvaluator`` after "No predictions from the model!" logs NaN, or
    leaves a metric out beside a NaN; MMDetection's ``CocoMetric`` after "The testing results of
    the whole dataset is empty." logs no metric at all, see :data:`NOTHING_PREDICTED`); they
    count as 0, the COCO AP of no detections, and the report's tables name those runs.
    """

    iters: int
    metrics: dict[str, float]
    no_predictions: tuple[str, ...] = ()


class CellKey(NamedTuple):
    """What one run of a sweep trains: a schedule at a budget, with a base LR and a seed (None:
    the config's own)."""

    schedule: str
    budget: float
    lr: float | None = None
    seed: int | None = None


@dataclass
class Cell:
    """One run of a sweep; ``final`` is None until it has finished (and for a run that
    diverged). ``status``: :func:`run_status` (``"finished"``, ``"undecayed"``,
    ``"diverged"``; None while it has not finished)."""

    key: CellKey
    run_dir: Path
    final: Final | None = None
    wall_s: float | None = None
    status: str | None = None

    @property
    def schedule(self) -> str:
        return self.key.schedule

    @property
    def budget(self) -> float:
        return self.key.budget


@dataclass
class Sweep:
    """A sweep folder: what it trains and its cells (planned and started)."""

    path: Path
    framework: str
    family: str
    cells: list[Cell] = field(default_factory=list)


def number_text(value: float) -> str:
    """``value`` as short as it reads back exactly: ``f"{value:g}"`` where that is ``value``,
    else ``repr(value)`` (``:g`` keeps 6 significant digits).

    >>> number_text(0.03), number_text(1e-05), number_text(0.12345678)
    ('0.03', '1e-05', '0.12345678')
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def cell_name(
    schedule: str, budget: float, lr: float | None = None, seed: int | None = None
) -> str:
    """The cell's folder name: the schedule, the configs' budget tag (``budget5`` for 5 %) and,
    where the sweep sets them, the base LR and the seed.

    >>> cell_name("linear", 0.05), cell_name("step", 0.005)
    ('linear_budget5', 'step_budget0p5')
    >>> cell_name("poly", 0.1, 0.03, 2)
    'poly_budget10_lr0.03_seed2'
    """
    name = f"{schedule}_budget{budget_tag(budget)}"
    if lr is not None:
        name += f"_lr{number_text(lr)}"
    if seed is not None:
        name += f"_seed{seed}"
    return name


def family_label(family: ConfigFamily) -> str:
    """How a sweep records its config family: the budget files' path prefix in a checkout (a
    script family: its script).

    >>> from budgeted.experiments.families import LENET5_DIGITS_PYTORCH, PSPNET_TOY
    >>> family_label(PSPNET_TOY), family_label(LENET5_DIGITS_PYTORCH)
    ('configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget', 'examples/digits_budget.py')
    """
    return family.script or f"configs/{family.folder}/{family.prefix}"


def read_record(path: Path) -> dict[str, Any]:
    """A sweep record (``sweep.json``, ``sweep_cell.json``) as a dict; :class:`ReportError` in
    one line if it is not one (damaged, hand-edited, another file under that name).

    Example:
        >>> import tempfile
        >>> bad = Path(tempfile.mkdtemp()) / SWEEP_FILE
        >>> _ = bad.write_text('{"framework": ')
        >>> try:
        ...     read_record(bad)
        ... except ReportError as err:
        ...     print(str(err).split(" is ", 1)[1][:64])
        not a sweep record: not valid JSON (line 1, column 15: Expecting
    """
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        problem = f"not UTF-8 text ({err.reason})"
    except json.JSONDecodeError as err:
        problem = f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
    except (ValueError, RecursionError) as err:  # an integer of 5000 digits; nested too deep
        problem = f"not JSON a reader can take ({type(err).__name__})"
    else:
        problem = _record_problem(path.name, value)
    if problem is not None:
        raise ReportError(
            f"{path} is not a sweep record: {problem}; allowed: a JSON object written by "
            "budgeted-sweep (move the file away to start that sweep or cell over)"
        )
    return value


def _record_problem(name: str, value: Any) -> str | None:
    """What is wrong with a parsed sweep record (``name``: :data:`SWEEP_FILE` or
    :data:`CELL_FILE`), in words; None if nothing is."""
    needed = ("framework", "family", "cells") if name == SWEEP_FILE else ("schedule", "budget")
    missing = [k for k in needed if not isinstance(value, dict) or k not in value]
    if missing:
        return f"no {', '.join(missing)}"
    if name == SWEEP_FILE:
        if not all(isinstance(value[k], str) for k in ("framework", "family")):
            return "its framework or family is not a name"
        try:
            if not isinstance(value["cells"], list):
                raise TypeError
            for cell in value["cells"]:
                if not isinstance(cell, list):
                    raise TypeError
                cell_key(*cell)
        except (TypeError, ValueError, OverflowError):
            return "its cells are not [schedule, budget(, lr, seed)] lists"
        return None
    try:
        cell_key(value["schedule"], value["budget"], value.get("lr"), value.get("seed"))
    except (TypeError, ValueError, OverflowError):
        return (
            f"its budget {value['budget']!r}, lr {value.get('lr')!r} or seed "
            f"{value.get('seed')!r} is not a number"
        )
    return cell_record_problem(value)


def family_of(label: str) -> ConfigFamily:
    """The config family a sweep records as ``label`` (:func:`family_label`)."""
    for fam in FAMILIES.values():
        if family_label(fam) == label:
            return fam
    known = ", ".join(family_label(f) for f in FAMILIES.values())
    raise ReportError(f"unknown config family {label!r}; allowed: {known}")


def read_final(fam: ConfigFamily, budget: float, run_dir: Path) -> Final | None:
    """The final metrics of a finished run of ``fam`` at ``budget`` in ``run_dir``; else None.

    Whether the run finished and its metrics come from the framework's run-folder reader
    (:func:`budgeted.runs.reader`: its module is imported here, not before); its length is the
    budget's iterations in the family (the sweep refuses overrides that change it).
    """
    if not run_dir.is_dir():
        return None
    try:
        found = reader(fam.framework).final_metrics(run_dir)
    except RecordError as err:
        raise ReportError(str(err)) from None
    if found is None or (not found and fam.framework not in NOTHING_PREDICTED):
        return None
    if not found:  # validated, but no metric logged: the model predicted nothing
        found = {key: math.nan for _, key in METRICS[fam.framework]}
    scale = 100.0 if fam.framework in LOGGED_AS_FRACTION else 1.0
    metrics = {
        name: scale * float(found[key]) for name, key in METRICS[fam.framework] if key in found
    }
    if not any(math.isnan(v) for v in metrics.values()):
        return Final(fam.iters(budget), metrics)
    empty = tuple(n for n, _ in METRICS[fam.framework] if math.isnan(metrics.get(n, math.nan)))
    return Final(fam.iters(budget), {**metrics, **dict.fromkeys(empty, 0.0)}, empty)


def run_status(framework: str, run_dir: Path, final: Final | None, recorded: Any) -> str | None:
    """What a run came to: ``"diverged"`` (the sweep recorded it so: the training tool exited with
    :data:`~budgeted.safety.preemption.DIVERGED_EXIT_CODE`; or its log holds a non-finite training
    loss, whatever it evaluated after), else None for a run that has not finished, ``"undecayed"``
    (the sweep recorded a time budget that ended before its LR decayed) or ``"finished"``.

    Args:
        framework: the sweep's framework.
        run_dir: the run folder.
        final: its final metrics (:func:`read_final`).
        recorded: the ``status`` its ``sweep_cell.json`` holds (None without one).
    """
    if recorded == "diverged":
        return "diverged"
    if final is None:
        return None
    if divergence(framework, run_dir) is not None:
        return "diverged"
    return "undecayed" if recorded == "undecayed" else "finished"


def divergence(framework: str, run_dir: Path) -> str | None:
    """Where the run's log shows it diverged (``the training loss logged at iteration 3 is
    nan``); None where every logged loss is finite."""
    point = non_finite_loss(reader(framework).train_curve(run_dir))
    if point is None:
        return None
    return f"the training loss logged at iteration {point['iteration']:g} is {point['loss']}"


def holds_run(framework: str, run_dir: Path) -> bool:
    """Whether the training tool of ``framework`` has left a run (checkpoints, logs) there."""
    return run_dir.is_dir() and bool(reader(framework).holds_run(run_dir))


def load_sweep(path: Path) -> Sweep:
    """Read a sweep folder: planned cells (``sweep.json``) plus started ones, with final metrics."""
    record = path / SWEEP_FILE
    if not record.is_file():
        raise ReportError(
            f"{path} is not a sweep folder (no {SWEEP_FILE}); allowed: a folder written by "
            "budgeted-sweep --out"
        )
    meta = read_record(record)
    if meta.get("framework") not in METRICS:
        raise ReportError(
            f"{record} names framework {meta.get('framework')!r}; allowed: "
            f"{', '.join(sorted(METRICS))}"
        )
    sweep = Sweep(path, meta["framework"], meta["family"])
    fam = family_of(sweep.family)
    planned = [cell_key(*cell) for cell in meta["cells"]]  # read_record checked them
    for cell_file in sorted(path.glob(f"*/{CELL_FILE}")):
        spec = read_record(cell_file)
        key = cell_key(spec["schedule"], spec["budget"], spec.get("lr"), spec.get("seed"))
        if key not in planned:
            planned.append(key)
    for key in planned:
        run_dir = path / cell_name(*key)
        spec_file = run_dir / CELL_FILE
        spec = read_record(spec_file) if spec_file.is_file() else {}
        final = read_final(fam, key.budget, run_dir)
        status = run_status(sweep.framework, run_dir, final, spec.get("status"))
        final = None if status == "diverged" else final  # not a result: in no mean, no best
        sweep.cells.append(Cell(key, run_dir, final, spec.get("wall_s"), status))
    return sweep


def cell_key(
    schedule: str, budget: float, lr: float | None = None, seed: int | None = None
) -> CellKey:
    """A cell's key from a record's values; ``ValueError`` (or ``TypeError``) where they are not
    a name, a positive budget, a positive LR or None, and an integer seed or None.

    >>> cell_key("linear", 0.1, "0.03", 2)
    CellKey(schedule='linear', budget=0.1, lr=0.03, seed=2)
    """
    key = CellKey(
        str(schedule), float(budget), None if lr is None else float(lr),
        None if seed is None else int(seed),
    )  # fmt: skip
    if not all(math.isfinite(v) and v > 0 for v in (key.budget, 1.0 if key.lr is None else key.lr)):
        raise ValueError(f"budget {budget!r} or lr {lr!r} is not a positive number")
    return key

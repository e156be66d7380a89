"""Tabulate and plot a sweep (``budgeted-sweep``) in the paper's form.

    budgeted-report output/sweep/mmseg_toy [MORE_SWEEPS ...] [--csv FILE.csv] [--plot FILE.png]

For each metric (Detectron2: box AP and mask AP; MMSegmentation: mIoU), read from the training
tool's own logs by the adapter (:func:`budgeted.runs.detectron2.final_metrics`,
:func:`budgeted.runs.mmengine.final_metrics`; a run counts only once its evaluation after the last
iteration is logged, else it is ``-``), the report prints Markdown tables:

- every cell: rows budget, columns schedule (and base LR with ``--lrs``), ``mean ± std (n)``
  over seeds;
- with several base LRs or seeds: the best-LR table (for each budget and schedule the LR with the
  best mean, flagged where it lies at the edge of the grid), the paired differences linear - step
  and linear - poly at those LRs with a 95 % t-interval over seeds and a verdict, and the
  normalized metric (a fraction of the full budget's best);
- with ``--best-progress``: where in training the best periodic evaluation fell (the paper's
  Table 4).

``--csv`` writes one row per run; ``--plot`` the metric against the budget with error bars, one
line per schedule at its best LR (the paper's Figure 1), plus the LR and the training loss the
runs logged against the iteration, and the full-gradient norm against the LR where the runs logged
it (the paper's Figure 3); needs matplotlib. See docs/sweeps.md.

This module imports no framework: a framework's adapter is imported only to read a sweep of it.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib
import importlib.util
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from ..errors import ReportError
from ..runs.records import RecordError, cell_record_problem, non_finite_loss
from ..safety.checkpoints import atomic_write
from ..safety.locks import unwritable
from .families import FAMILIES, ConfigFamily, budget_tag
from .stats import best_lr, paired_difference, summarize, verdict

__all__ = [
    "CELL_FILE",
    "COMPARISONS",
    "CSV_HEADER",
    "MARKED_PLOT_FORMATS",
    "METRICS",
    "PLOT_ENDINGS",
    "PLOT_MARK",
    "RUNS_MODULES",
    "SWEEP_FILE",
    "Cell",
    "CellKey",
    "Final",
    "Group",
    "ReportError",
    "Sweep",
    "best_progress",
    "cell_name",
    "check_outputs",
    "divergence",
    "family_label",
    "family_of",
    "group_sweeps",
    "holds_run",
    "load_sweep",
    "main",
    "markdown",
    "number_text",
    "plot_files",
    "read_final",
    "read_record",
    "run_status",
    "runs_module",
    "write_csv",
    "written_by_report",
]

SWEEP_FILE = "sweep.json"
"""The sweep folder's record: framework, config family, planned cells."""
CELL_FILE = "sweep_cell.json"
"""Each cell folder's record: config, overrides, command, wall time."""
METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "detectron2": (("box AP", "bbox/AP"), ("mask AP", "segm/AP")),
    "mmseg": (("mIoU", "mIoU"),),
    "mmdet": (("box AP", "coco/bbox_mAP"), ("mask AP", "coco/segm_mAP")),
    "mmpretrain": (("top-1", "accuracy/top1"),),
    "mmaction": (("top-1", "acc/top1"),),
}
"""framework -> (name shown, key in the training tool's log) of each reported metric."""
LOGGED_AS_FRACTION = frozenset({"mmdet", "mmaction"})
"""Frameworks whose metrics are logged as fractions (MMDetection's ``CocoMetric``: 0.375;
MMAction2's ``AccMetric``): the report shows them in percent (37.5), as Detectron2's COCO AP,
MMSegmentation's mIoU and MMPretrain's accuracy are logged."""
RUNS_MODULES = {
    "detectron2": "budgeted.runs.detectron2",
    **dict.fromkeys(("mmseg", "mmdet", "mmpretrain", "mmaction"), "budgeted.runs.mmengine"),
}
"""framework -> the adapter module that reads its run folders (imported when needed)."""
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
    """How a sweep records its config family: the budget files' path prefix in a checkout.

    >>> from budgeted.experiments.families import PSPNET_TOY
    >>> family_label(PSPNET_TOY)
    'configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget'
    """
    return f"configs/{family.folder}/{family.prefix}"


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
                _cell_key(*cell)
        except (TypeError, ValueError, OverflowError):
            return "its cells are not [schedule, budget(, lr, seed)] lists"
        return None
    try:
        _cell_key(value["schedule"], value["budget"], value.get("lr"), value.get("seed"))
    except (TypeError, ValueError, OverflowError):
        return (
            f"its budget {value['budget']!r}, lr {value.get('lr')!r} or seed "
            f"{value.get('seed')!r} is not a number"
        )
    return cell_record_problem(value)


def runs_module(framework: str) -> Any:
    """The adapter's ``runs`` module (``ImportError`` in one line without the framework)."""
    if framework not in RUNS_MODULES:
        raise ReportError(
            f"unknown framework {framework!r}; allowed: {', '.join(sorted(RUNS_MODULES))}"
        )
    return importlib.import_module(RUNS_MODULES[framework])


def family_of(label: str) -> ConfigFamily:
    """The config family a sweep records as ``label`` (:func:`family_label`)."""
    for fam in FAMILIES.values():
        if family_label(fam) == label:
            return fam
    known = ", ".join(family_label(f) for f in FAMILIES.values())
    raise ReportError(f"unknown config family {label!r}; allowed: {known}")


def read_final(fam: ConfigFamily, budget: float, run_dir: Path) -> Final | None:
    """The final metrics of a finished run of ``fam`` at ``budget`` in ``run_dir``; else None.

    Whether the run finished and its metrics come from the adapter
    (``budgeted.runs.detectron2`` / ``budgeted.runs.mmengine``, imported here, not before); its
    length is the budget's iterations in the family (the sweep refuses overrides that change it).
    """
    if not run_dir.is_dir():
        return None
    try:
        found = runs_module(fam.framework).final_metrics(run_dir)
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
    point = non_finite_loss(runs_module(framework).train_curve(run_dir))
    if point is None:
        return None
    return f"the training loss logged at iteration {point['iteration']:g} is {point['loss']}"


def holds_run(framework: str, run_dir: Path) -> bool:
    """Whether the training tool of ``framework`` has left a run (checkpoints, logs) there."""
    return run_dir.is_dir() and bool(runs_module(framework).holds_run(run_dir))


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
    planned = [_cell_key(*cell) for cell in meta["cells"]]  # read_record checked them
    for cell_file in sorted(path.glob(f"*/{CELL_FILE}")):
        spec = read_record(cell_file)
        key = _cell_key(spec["schedule"], spec["budget"], spec.get("lr"), spec.get("seed"))
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


def _cell_key(
    schedule: str, budget: float, lr: float | None = None, seed: int | None = None
) -> CellKey:
    key = CellKey(
        str(schedule), float(budget), None if lr is None else float(lr),
        None if seed is None else int(seed),
    )  # fmt: skip
    if not all(math.isfinite(v) and v > 0 for v in (key.budget, 1.0 if key.lr is None else key.lr)):
        raise ValueError(f"budget {budget!r} or lr {lr!r} is not a positive number")
    return key


@dataclass
class Group:
    """Cells of the same framework and config family, from one sweep folder or several."""

    framework: str
    family: str
    sources: list[Path] = field(default_factory=list)
    cells: dict[CellKey, Cell] = field(default_factory=dict)

    @property
    def schedules(self) -> list[str]:
        return list(dict.fromkeys(k.schedule for k in self.cells))

    @property
    def budgets(self) -> list[float]:
        return sorted({k.budget for k in self.cells})

    @property
    def lrs(self) -> list[float | None]:
        """The base LRs of the grid, ascending (None, the config's own, first)."""
        found = {k.lr for k in self.cells}
        return [None] * (None in found) + sorted(lr for lr in found if lr is not None)

    @property
    def seeds(self) -> list[int | None]:
        found = {k.seed for k in self.cells}
        return [None] * (None in found) + sorted(s for s in found if s is not None)

    def values(self, metric: str, schedule: str, budget: float, lr: float | None) -> dict:
        """seed -> the metric of each finished run of that schedule, budget and LR."""
        return {
            key.seed: cell.final.metrics[metric]
            for key, cell in self.cells.items()
            if (key.schedule, key.budget, key.lr) == (schedule, budget, lr)
            and cell.final is not None
            and metric in cell.final.metrics
        }

    def with_status(self, status: str, schedule: str, budget: float, lr: float | None) -> int:
        """How many runs of that schedule, budget and LR came to ``status``."""
        return sum(
            (key.schedule, key.budget, key.lr) == (schedule, budget, lr) and cell.status == status
            for key, cell in self.cells.items()
        )

    def best(self, metric: str, schedule: str, budget: float) -> tuple[float | None, bool] | None:
        """(best base LR, at the grid's edge) of ``schedule`` at ``budget``; None if no run of
        it finished. An LR at which a run diverged or ended undecayed is never the best (it
        still counts as searched, for the edge)."""
        by_lr = {
            lr: []
            if self.with_status("diverged", schedule, budget, lr)
            or self.with_status("undecayed", schedule, budget, lr)
            else list(self.values(metric, schedule, budget, lr).values())
            for lr in self.lrs
        }
        if not any(by_lr.values()):
            return None
        return best_lr(by_lr)


def group_sweeps(sweeps: Sequence[Sweep]) -> list[Group]:
    """Merge the sweeps' cells per (framework, family); a cell finished twice is an error."""
    groups: dict[tuple[str, str], Group] = {}
    for sweep in sweeps:
        group = groups.setdefault(
            (sweep.framework, sweep.family), Group(sweep.framework, sweep.family)
        )
        group.sources.append(sweep.path)
        for cell in sweep.cells:
            old = group.cells.get(cell.key)
            if old is not None and old.final is not None and cell.final is not None:
                raise ReportError(
                    f"cell {cell_name(*cell.key)} is finished in both {old.run_dir.parent} and "
                    f"{sweep.path}; allowed: each cell finished in one of the sweeps reported"
                )
            if old is None or old.final is None:
                group.cells[cell.key] = cell
    for group in groups.values():
        seeded = [k for k in group.cells if k.seed is not None]
        unseeded = [k for k in group.cells if k.seed is None]
        if seeded and unseeded:
            raise ReportError(
                f"the {group.framework} sweeps of {group.family} in "
                f"{', '.join(map(str, group.sources))} mix runs at the config's seed "
                f"({cell_name(*unseeded[0])}, ...) with runs at --seeds "
                f"({cell_name(*seeded[0])}, ...): they cannot be paired seed by seed; allowed: "
                "sweeps that all set --seeds, or none of them (report those apart)"
            )
    return list(groups.values())


def _fmt(value: float | None) -> str:
    return "-" if value is None else ("nan" if math.isnan(value) else f"{value:.2f}")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: int) -> list[str]:
    """A Markdown table whose first ``right`` columns are right-aligned (numbers)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * right + "---|" * (len(head) - right)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _lr_text(lr: float | None) -> str:
    return "config's" if lr is None else number_text(lr)


def _iterations(group: Group, budget: float) -> str:
    iters = sorted(
        {c.final.iters for k, c in group.cells.items() if k.budget == budget and c.final}
    )
    return "/".join(str(i) for i in iters) or "-"


def _cell_text(group: Group, metric: str, schedule: str, budget: float, lr: float | None) -> str:
    """One cell of the every-run table: ``mean ± std (n)`` of its finished runs, `` *`` where
    runs that ended undecayed are among them, ``, k diverged`` beside; ``diverged`` where every
    run that ended diverged; ``-`` where none finished."""
    values = list(group.values(metric, schedule, budget, lr).values())
    diverged = group.with_status("diverged", schedule, budget, lr)
    if not values:
        return "diverged" if diverged else "-"
    undecayed = " *" if group.with_status("undecayed", schedule, budget, lr) else ""
    return f"{summarize(values).text()}{undecayed}{f', {diverged} diverged' if diverged else ''}"


def _status_notes(group: Group) -> list[str]:
    """The notes under the every-run table that name the runs that diverged or ended
    undecayed (neither is ever a best LR)."""
    lines = []
    for status, what in (
        ("diverged", "diverged (a non-finite training loss): no result, and their base LR is "
         "never picked as the best"),
        ("undecayed", "ended undecayed (the time budget ran out before the LR decayed): their "
         "metrics are marked *, and their base LR is never picked as the best"),
    ):  # fmt: skip
        names = sorted(cell_name(*k) for k, c in group.cells.items() if c.status == status)
        if names:
            lines += ["", f"{len(names)} run(s) {what}: {', '.join(names)}."]
    return lines


def markdown(group: Group) -> str:
    """The report's tables for ``group``, one section per metric (see the module's docstring):
    every cell as ``mean ± std (n)`` over seeds (``-`` where none finished); with several base
    LRs or seeds, the best-LR, paired-difference and normalized tables."""
    blocks = []
    done = sum(c.final is not None for c in group.cells.values())
    diverged = sum(c.status == "diverged" for c in group.cells.values())
    also = f", {diverged} diverged" if diverged else ""
    lrs, seeds = group.lrs, group.seeds
    axes = len(lrs) > 1 or lrs != [None] or len(seeds) > 1 or seeds != [None]
    for metric, _ in METRICS[group.framework]:
        columns = [(s, lr) for s in group.schedules for lr in lrs]
        head = [
            "budget", "iterations",
            *(s if lr is None else f"{s} lr={number_text(lr)}" for s, lr in columns),
        ]  # fmt: skip
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}", _iterations(group, budget)]
            row += [_cell_text(group, metric, schedule, budget, lr) for schedule, lr in columns]
            rows.append(row)
        lines = [
            f"### {metric}: {group.framework} {group.family}* "
            f"({', '.join(str(p) for p in group.sources)}; {done}/{len(group.cells)} runs "
            f"finished{also})",
            "",
            *_table(head, rows, len(head)),
            *_status_notes(group),
        ]
        empty = [
            cell_name(*k)
            for k, c in group.cells.items()
            if c.final and metric in c.final.no_predictions
        ]
        if empty:
            lines += [
                "",
                f"{len(empty)} finished run(s) predicted nothing at the final evaluation ({metric} "
                f"{NOTHING_PREDICTED[group.framework]}): counted as {metric} 0: "
                f"{', '.join(sorted(empty))}.",
            ]
        if axes:
            lines += ["", *_best_tables(group, metric)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


COMPARISONS = (("linear", "step"), ("linear", "poly"), ("linear", "wsd"), ("rex", "linear"))
"""The paired differences the report shows, where both schedules are in the sweep."""


def _best_tables(group: Group, metric: str) -> list[str]:
    """The best-LR, paired-difference and normalized tables of ``metric``."""
    lines = [
        f"#### {metric} at the best base LR per budget and schedule (the paper's protocol: mean "
        '± std over seeds (n) @ LR; "edge": the best LR is at the edge of the grid, widen it)',
        "",
    ]
    best: dict[tuple[str, float], tuple[float | None, bool]] = {}
    rows = []
    for budget in group.budgets:
        row = [f"{budget:g}"]
        for schedule in group.schedules:
            found = group.best(metric, schedule, budget)
            if found is None:
                row.append("-")
                continue
            best[schedule, budget] = found
            values = list(group.values(metric, schedule, budget, found[0]).values())
            edge = " (edge)" if found[1] else ""
            row.append(f"{summarize(values).text()} @ {_lr_text(found[0])}{edge}")
        rows.append(row)
    lines += _table(["budget", *group.schedules], rows, 1 + len(group.schedules))
    pairs = [(a, b) for a, b in COMPARISONS if a in group.schedules and b in group.schedules]
    if pairs:
        lines += [
            "",
            f"#### {metric}: paired differences at each schedule's best LR (seed k against seed "
            "k; mean [95 % t-interval] (pairs))",
            "",
        ]
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}"]
            for a, b in pairs:
                if (a, budget) not in best or (b, budget) not in best:
                    row += ["-", "-"]
                    continue
                interval = paired_difference(
                    group.values(metric, a, budget, best[a, budget][0]),
                    group.values(metric, b, budget, best[b, budget][0]),
                )
                row += [interval.text() if interval else "-", verdict(interval, a, b)]
            rows.append(row)
        head = ["budget", *(c for a, b in pairs for c in (f"{a} − {b}", "verdict"))]
        lines += _table(head, rows, 1)
    reference = max((b for _, b in best), default=None)  # the largest budget that has results
    means = {
        key: summarize(list(group.values(metric, key[0], key[1], lr).values())).mean
        for key, (lr, _) in best.items()
    }
    top = max((m for (_, b), m in means.items() if b == reference), default=None)
    if top:
        what = "the full budget" if reference == 1.0 else f"budget {reference:g}, the largest run"
        lines += [
            "",
            f"#### {metric} normalized: mean at the best LR / the best schedule's at {what} "
            f"({top:.2f})",
            "",
        ]
        rows = [
            [f"{budget:g}", *(
                f"{means[s, budget] / top:.3f}" if (s, budget) in means else "-"
                for s in group.schedules
            )]
            for budget in group.budgets
        ]  # fmt: skip
        lines += _table(["budget", *group.schedules], rows, 1 + len(group.schedules))
    return lines


def best_progress(group: Group) -> str:
    """Where the best periodic evaluation fell in training (iteration / the run's length), per
    budget and schedule at the best base LR: mean over seeds (the paper's Table 4). Runs need
    periodic evaluation (``TEST.EVAL_PERIOD``, ``train_cfg.val_interval``) for it to say
    anything; with one evaluation at the end it is 1.00."""
    runs = runs_module(group.framework)
    blocks = []
    for metric, key in METRICS[group.framework]:
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}"]
            for schedule in group.schedules:
                found = group.best(metric, schedule, budget)
                fractions = []
                for cell_key, cell in group.cells.items():
                    if found is None or cell.final is None:
                        continue
                    if (cell_key.schedule, cell_key.budget, cell_key.lr) != (
                        schedule, budget, found[0],
                    ):  # fmt: skip
                        continue
                    evals = [(it, m[key]) for it, m in runs.evaluations(cell.run_dir) if key in m]
                    if evals:
                        at = max(evals, key=lambda e: e[1])[0]
                        fractions.append(at / cell.final.iters)
                row.append(summarize(fractions).text() if fractions else "-")
            rows.append(row)
        blocks.append("\n".join([
            f"#### {metric}: where the best evaluation fell (fraction of training, at the best "
            "LR; mean ± std over seeds (n))",
            "",
            *_table(["budget", *group.schedules], rows, 1 + len(group.schedules)),
        ]))  # fmt: skip
    return "\n\n".join(blocks)


CSV_HEADER = ("framework", "family", "schedule", "budget", "lr", "seed", "iterations")
"""The first columns of :func:`write_csv`'s file (and how an earlier report's CSV is recognized);
then one column per metric, ``wall_s``, ``run_dir`` and ``status`` (:func:`run_status`)."""


def write_csv(groups: Sequence[Group], path: Path) -> None:
    """One row per run: its axes, iterations, each metric (empty where the run has not
    finished or diverged), wall time, folder and status (``finished``, ``undecayed``,
    ``diverged``; empty while unfinished). Written atomically (a temporary file renamed into
    place)."""
    metrics = list(dict.fromkeys(m for g in groups for m, _ in METRICS[g.framework]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([*CSV_HEADER, *metrics, "wall_s", "run_dir", "status"])
        for group in groups:
            for key, cell in sorted(group.cells.items(), key=lambda kv: _sort_key(kv[0])):
                final = cell.final
                values = [final.metrics.get(m) if final else None for m in metrics]
                writer.writerow(
                    [group.framework, group.family, key.schedule, f"{key.budget:g}",
                     "" if key.lr is None else number_text(key.lr),
                     "" if key.seed is None else key.seed,
                     final.iters if final else "", *("" if v is None else v for v in values),
                     "" if cell.wall_s is None else f"{cell.wall_s:.1f}", _shown(cell.run_dir),
                     cell.status or ""]
                )  # fmt: skip


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when it lies under it (portable CSVs)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _sort_key(key: CellKey) -> tuple:
    return (key.budget, key.schedule, -1 if key.lr is None else key.lr,
            -1 if key.seed is None else key.seed)  # fmt: skip


PLOT_MARK = "budgeted-report"
"""The ``Creator`` the ``--plot`` figures carry where the file type keeps one (the report's
own figures are recognized by it, to be replaced; any other file is left alone)."""

MARKED_PLOT_FORMATS = ("eps", "pdf", "png", "ps", "svg", "svgz")
"""The file types that keep :data:`PLOT_MARK` (matplotlib writes no metadata into the others)."""


PLOT_ENDINGS = ("", "_lr", "_loss", "_grad_norm")
"""What :func:`plot_files` adds to the ``--plot`` file's stem, the metric figure first."""


def plot_files(path: Path) -> list[Path]:
    """The figures ``--plot path`` may write: ``path`` and, beside it, the ``_lr``, ``_loss``
    and ``_grad_norm`` ones.

    >>> [p.name for p in plot_files(Path("out/g.png"))]
    ['g.png', 'g_lr.png', 'g_loss.png', 'g_grad_norm.png']
    """
    return [path.with_name(f"{path.stem}{end}{path.suffix}") for end in PLOT_ENDINGS]


def written_by_report(path: Path) -> bool:
    """Whether the file at ``path`` is a figure an earlier ``--plot`` wrote (it carries
    :data:`PLOT_MARK`)."""
    data = path.read_bytes()
    if path.suffix.lower() == ".svgz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return False
    return PLOT_MARK.encode() in data


def plot_formats() -> list[str]:
    """The file types ``--plot`` can write (matplotlib's: png, pdf, svg, ...)."""
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def check_outputs(csv_path: Path | None, plot_path: Path | None, sweeps: Sequence[Path]) -> None:
    """Refuse, before reading anything, an output that would overwrite what is not ours.

    ``--csv`` must end in ``.csv`` and be new or an earlier report's CSV (its first row is
    :data:`CSV_HEADER`); ``--plot`` must end in a format matplotlib writes, and each of its
    :func:`plot_files` be new or an earlier report's figure (:func:`written_by_report`);
    neither may be a folder, lie inside a run folder of a reported sweep or in a folder that
    cannot be written (read-only). Raises :class:`ReportError`.
    """
    for flag, out in (("--csv", csv_path), ("--plot", plot_path)):
        if out is None:
            continue
        if out.is_dir():
            raise ReportError(f"{flag} {out} is a folder; allowed: a file path")
        problem = unwritable(out.parent)
        if problem is not None:
            raise ReportError(
                f"{flag} {out} cannot be written ({problem}); allowed: a path in a folder you "
                "can write to (nothing was written)"
            )
        inside = next(
            (s for s in sweeps if out.resolve().parent != s.resolve()
             and out.resolve().is_relative_to(s.resolve())), None,
        )  # fmt: skip
        if inside is not None:
            raise ReportError(
                f"{flag} {out} lies inside a run folder of the sweep {inside}; allowed: a path "
                "outside the run folders (the sweep folder itself, or anywhere else)"
            )
    if csv_path is not None:
        if csv_path.suffix.lower() != ".csv":
            raise ReportError(
                f"--csv {csv_path} does not end in .csv; allowed: a FILE.csv path (new, or an "
                "earlier report's CSV, which is replaced)"
            )
        if csv_path.is_file():
            with csv_path.open(newline="", errors="replace") as f:
                first = next(csv.reader(f), None)
            if tuple(first or ())[: len(CSV_HEADER)] != CSV_HEADER:
                raise ReportError(
                    f"--csv {csv_path} exists and is not a CSV written by budgeted-report; "
                    "allowed: a new path, or an earlier report's CSV (which is replaced)"
                )
    if plot_path is not None:
        formats = plot_formats()
        if plot_path.suffix[1:].lower() not in formats:
            raise ReportError(
                f"--plot {plot_path} has no image file type matplotlib writes; allowed: a file "
                f"ending in one of .{', .'.join(formats)}"
            )
        for figure in plot_files(plot_path):
            if figure.exists() and (not figure.is_file() or not written_by_report(figure)):
                raise ReportError(
                    f"--plot {plot_path} would replace {figure}, which budgeted-report did not "
                    "write; allowed: a path whose figures are new, or an earlier report's (.png, "
                    ".pdf, .svg, .svgz, .eps, .ps), which are replaced"
                )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"report: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-report``: print the tables, write ``--csv`` / ``--plot``; the exit status.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Example:
        >>> main(["output/sweep/mmseg_toy", "--csv", "mmseg.csv"])  # doctest: +SKIP
        0
    """
    parser = _Parser(prog="budgeted-report", description=__doc__.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", type=Path, help="sweep folders (budgeted-sweep --out)")
    parser.add_argument("--csv", type=Path, metavar="FILE.csv", help="write one row per run")
    parser.add_argument(
        "--plot", type=Path, metavar="FILE.png",
        help="metric vs budget (error bars, best LR); beside it FILE_lr.png, FILE_loss.png and "
        "FILE_grad_norm.png from the runs' logs (any matplotlib file type)",
    )  # fmt: skip
    parser.add_argument(
        "--best-progress", action="store_true",
        help="also tabulate where the best periodic evaluation fell in training (Table 4)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
            raise ReportError(
                f"--plot {args.plot} needs matplotlib, which is not installed; install it with "
                'pip install "budgeted-training[plot]", or leave out --plot'
            )
        check_outputs(args.csv, args.plot, args.sweeps)
        groups = group_sweeps([load_sweep(p) for p in args.sweeps])
    except (ReportError, ImportError) as err:
        print(f"report: error: {err}", file=sys.stderr)
        return 2
    print("\n\n".join(markdown(g) for g in groups))
    if args.best_progress:
        print("\n\n" + "\n\n".join(best_progress(g) for g in groups))
    try:
        _write_outputs(groups, args.csv, args.plot)
    except OSError as err:  # checked writable before; a disk that filled up meanwhile, say
        print(f"report: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


def _write_outputs(groups: Sequence[Group], csv_path: Path | None, plot: Path | None) -> None:
    """Write ``--csv`` and ``--plot`` (each atomically) and name them."""
    if csv_path is not None:
        write_csv(groups, csv_path)
        print(f"\nCSV: {csv_path}")
    if plot is not None:
        from .sweep_plots import plot_sweeps

        print("\n" + "\n".join(f"plot: {path}" for path in plot_sweeps(groups, plot)))


if __name__ == "__main__":
    sys.exit(main())

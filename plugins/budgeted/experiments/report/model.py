"""The report's model: the cells of one or more sweep folders merged per framework and config
family into a :class:`Group`, whose :meth:`Group.best` picks each schedule's best base LR at a
budget (the highest mean over seeds, never an LR at which a run diverged or ended undecayed).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ReportError
from ...runs.records import cell_record_problem
from ..stats import best_lr, decimals
from ..sweep.metrics import Final
from ..sweep.records import METRICS, Cell, CellKey, Sweep, cell_key, cell_name, check_no_links

__all__ = ["Group", "group_sweeps", "load_report_csv", "metric_range", "read_report_csv"]


@dataclass
class Group:
    """Cells of the same framework and config family, from one sweep folder or several."""

    framework: str
    family: str
    sources: list[Path] = field(default_factory=list)
    cells: dict[CellKey, Cell] = field(default_factory=dict)
    metrics: tuple[tuple[str, str], ...] = ()
    """(name shown, key logged) of each metric reported (:func:`~..sweep.records.metrics_of`;
    default: the framework's)."""

    def __post_init__(self) -> None:
        self.metrics = self.metrics or METRICS.get(self.framework, ())

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

    def lrs_of(self, schedule: str) -> list[float | None]:
        """The base LRs of ``schedule``'s cells, ascending (``--lrs-for`` gives a cell's text,
        arm or optimizer a grid of its own)."""
        found = {k.lr for k in self.cells if k.schedule == schedule}
        return [lr for lr in self.lrs if lr in found]

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

    def metric_range(self, metric: str) -> tuple[float, float] | None:
        """The range ``metric`` lies in (:func:`metric_range`); None where it is not known."""
        return metric_range(self.framework, metric)

    def digits(self, metric: str) -> int:
        """The decimals ``metric`` is shown with (:func:`~..stats.decimals`): by its range's top
        where known (percent: 2), else by its largest value (a 0-1 scale: 4)."""
        found = self.metric_range(metric)
        if found is not None:
            return decimals(found[1:])
        return decimals(
            c.final.metrics[metric]
            for c in self.cells.values()
            if c.final is not None and metric in c.final.metrics
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
            for lr in self.lrs_of(schedule)
        }
        if not any(by_lr.values()):
            return None
        return best_lr(by_lr)

    def best_cells(self, metric: str, schedule: str, budget: float) -> list[Cell]:
        """The finished runs of ``schedule`` at ``budget`` at its best base LR (:meth:`best`)."""
        found = self.best(metric, schedule, budget)
        return [
            c for k, c in self.cells.items()
            if found is not None and (k.schedule, k.budget, k.lr) == (schedule, budget, found[0])
            and c.final is not None
        ]  # fmt: skip


def group_sweeps(sweeps: Sequence[Sweep]) -> list[Group]:
    """Merge the sweeps' cells per (framework, family); a cell finished twice is an error."""
    groups: dict[tuple[str, str], Group] = {}
    for sweep in sweeps:
        group = groups.setdefault(
            (sweep.framework, sweep.family),
            Group(sweep.framework, sweep.family, metrics=sweep.metrics),
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


CSV_AXES = ("framework", "family", "schedule", "budget", "lr", "seed", "iterations")
"""The first columns of a report's CSV (:data:`.tables.CSV_HEADER`); then one column per metric,
``wall_s``, ``run_dir`` and (since 2026-11-30) ``status``."""

RUN_STATUSES = ("finished", "undecayed", "diverged")
"""What a run came to (:func:`~..sweep.records.run_status`), as a report's CSV records it (empty:
not finished)."""


def metric_range(framework: str, metric: str) -> tuple[float, float] | None:
    """The range a reported metric lies in: [0, 100] for a framework's own (percent: the sweep
    refuses a log outside it), None for a key of the user's (``--metric``: any finite number).

    >>> metric_range("mmseg", "mIoU"), metric_range("pytorch", "val_f1")
    ((0.0, 100.0), None)
    """
    return (0.0, 100.0) if metric in {name for name, _ in METRICS.get(framework, ())} else None


def load_report_csv(path: Path) -> Sweep:
    """A CSV that ``budgeted-report --csv`` wrote of one config family, read back as a sweep
    (:func:`read_report_csv`; :class:`ReportError` for a CSV of several families)."""
    sweeps = read_report_csv(path)
    if len(sweeps) > 1:
        raise ReportError(f"{path} holds runs of {len(sweeps)} config families; allowed: a "
                          "CSV of one (budgeted-report reads a CSV of several)")  # fmt: skip
    return sweeps[0]


def read_report_csv(path: Path) -> list[Sweep]:
    """A CSV that ``budgeted-report --csv`` wrote, read back as sweeps, one per framework and
    config family in it (data only: the csv module), so every table reads committed evidence as
    it reads a sweep folder. A CSV is untrusted as a sweep folder is: each row is checked as a
    sweep's records are (:func:`~..sweep.records.cell_key`,
    :func:`~budgeted.runs.records.cell_record_problem`, each metric in its range:
    :func:`metric_range`), and its ``run_dir`` lies inside the CSV's folder (relative to it),
    through no symbolic link. A run without a metric is unfinished (or, with status
    ``diverged``, diverged).

    Raises:
        ReportError: not such a CSV, or a row that is not one of its runs (one line naming it).
    """
    try:
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ReportError(
            f"{path} cannot be read ({err}); allowed: a CSV budgeted-report wrote"
        ) from None
    head = tuple(rows[0]) if rows else ()
    if head[: len(CSV_AXES)] != CSV_AXES or "wall_s" not in head or "run_dir" not in head:
        raise ReportError(f"{path} is not a CSV written by budgeted-report --csv (its first "
                          f"columns are not {', '.join(CSV_AXES)}); allowed: such a CSV, or a "
                          "sweep folder")  # fmt: skip
    names = head[len(CSV_AXES) : head.index("wall_s")]
    if not all(names) or len(set(names)) < len(names):
        raise ReportError(f"{path}: its metric columns {', '.join(map(repr, names))} are not "
                          "distinct names; allowed: the columns a report's CSV has")  # fmt: skip
    sweeps: dict[tuple[str, str], Sweep] = {}
    seen: dict[tuple, int] = {}
    for number, row in enumerate(rows[1:], 2):
        try:
            framework, family, cell = _csv_run(path, head, names, row)
        except ValueError as err:
            raise ReportError(
                f"{path} line {number} is not a run of a report's CSV: {err}; "
                "allowed: the rows budgeted-report --csv writes"
            ) from None
        where = (framework, family, cell.key)
        if where in seen:
            raise ReportError(f"{path} line {number} repeats the run of line {seen[where]} "
                              f"({cell_name(*cell.key)}); allowed: one row per run")  # fmt: skip
        seen[where] = number
        sweep = sweeps.setdefault(
            (framework, family),
            Sweep(path, framework, family, metrics=tuple((m, m) for m in names)),
        )
        sweep.cells.append(cell)
    if not sweeps:
        raise ReportError(f"{path} holds no runs; allowed: a CSV budgeted-report wrote")
    return list(sweeps.values())


def _csv_run(path: Path, head: tuple[str, ...], names: Sequence[str], row: list[str]) -> tuple:
    """(framework, family, :class:`Cell`) of one row of a report's CSV; ``ValueError`` naming
    the field that is not what the report writes."""
    if len(row) != len(head):
        raise ValueError(f"{len(row)} fields, its header {len(head)}")
    fields = dict(zip(head, row))
    framework, family = fields["framework"], fields["family"]
    if framework not in METRICS:
        raise ValueError(f"framework {framework!r} is not one of {', '.join(sorted(METRICS))}")
    if not family:
        raise ValueError("no family")
    key = cell_key(fields["schedule"], _parsed(fields["budget"], float),
                   _parsed(fields["lr"], float), _parsed(fields["seed"], int))  # fmt: skip
    iters = _parsed(fields["iterations"], int)
    if iters is not None and (not isinstance(iters, int) or iters < 1):
        raise ValueError(f"iterations {fields['iterations']!r} is not a number >= 1 or empty")
    values = {m: _parsed(fields[m], float) for m in names if fields[m]}
    status = fields.get("status") or None
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(RUN_STATUSES)} or empty")
    record = {"wall_s": _parsed(fields["wall_s"], float), "metrics": values}
    problem = cell_record_problem(record)
    if problem is not None:
        raise ValueError(problem.removeprefix("its "))
    for metric, value in values.items():
        found = metric_range(framework, metric)
        if found is not None and not found[0] <= value <= found[1]:
            raise ValueError(f"{metric} {value!r} is not in [{found[0]:g}, {found[1]:g}]")
    results = ("finished", "undecayed") if "status" in fields else (None,)
    if values and (iters is None or status not in results):
        raise ValueError(f"metrics {record['metrics']} beside iterations {iters} and status "
                         f"{status or 'empty (not finished)'}; a metric is a finished run's, "
                         "with its iterations")  # fmt: skip
    if not values and status in ("finished", "undecayed"):
        raise ValueError(f"status {status} without a metric")
    final = Final(iters, values) if values else None
    status = status or ("finished" if final else None)  # a CSV of before 2026-11-30: no status
    return framework, family, Cell(key, _run_folder(path, fields["run_dir"], key), final,
                                   record["wall_s"], status)  # fmt: skip


def _parsed(text: str, kind: type) -> object:
    """``text`` as a ``kind`` (None where empty; the text itself where it is not one, for the
    check to name it)."""
    if not text:
        return None
    try:
        return kind(text)
    except (ValueError, OverflowError):
        return text


def _run_folder(path: Path, text: str, key: CellKey) -> Path:
    """A row's run folder: ``text`` relative to the CSV's folder (empty: the cell's name there),
    refused (``ValueError``) where it is absolute, leads outside that folder or passes through a
    symbolic link (or holds one)."""
    folder, relative = path.parent, Path(text or cell_name(*key))
    inside = (folder / relative).resolve().is_relative_to(folder.resolve())
    if relative.is_absolute() or not inside:
        raise ValueError(f"run_dir {text!r} is not a folder inside the CSV's folder {folder} "
                         "(run folders are read relative to it, and only inside it)")  # fmt: skip
    run_dir = folder
    try:
        for part in relative.parts:  # a link on the way, or in the run folder
            run_dir = run_dir / part
            if run_dir.is_symlink():
                check_no_links(run_dir)
        check_no_links(run_dir)
    except ReportError as err:
        problem = str(err).split("; allowed")[0]
        raise ValueError(
            f"run_dir {text!r}: {problem} (run folders are read only inside the "
            "CSV's folder, through no link)"
        ) from None
    return run_dir

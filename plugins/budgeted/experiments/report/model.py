"""The report's model: the cells of one or more sweep folders merged per framework and config
family into a :class:`Group`, whose :meth:`Group.best` picks each schedule's best base LR at a
budget (the highest mean over seeds, never an LR at which a run diverged or ended undecayed).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ReportError
from ..stats import best_lr
from ..sweep.metrics import Final
from ..sweep.records import METRICS, Cell, CellKey, Sweep, cell_name

__all__ = ["Group", "group_sweeps", "load_report_csv"]


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


def load_report_csv(path: Path) -> Sweep:
    """A CSV that ``budgeted-report --csv`` wrote, read back as a sweep (data only: the csv
    module), so every table reads committed evidence as it reads a sweep folder; a run without a
    metric is unfinished (or, with status ``diverged``, diverged).

    Raises:
        ReportError: not such a CSV, or a row that is not one of its runs (one line naming it).
    """
    try:
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as err:
        raise ReportError(
            f"{path} cannot be read ({err}); allowed: a CSV budgeted-report wrote"
        ) from None
    head = tuple(rows[0]) if rows else ()
    if head[: len(CSV_AXES)] != CSV_AXES or "wall_s" not in head:
        raise ReportError(f"{path} is not a CSV written by budgeted-report --csv (its first "
                          f"columns are not {', '.join(CSV_AXES)}); allowed: such a CSV, or a "
                          "sweep folder")  # fmt: skip
    names = head[len(CSV_AXES) : head.index("wall_s")]
    sweep: Sweep | None = None
    for number, row in enumerate(rows[1:], 2):
        fields = dict(zip(head, row))
        try:
            key = CellKey(fields["schedule"], float(fields["budget"]),
                          float(fields["lr"]) if fields["lr"] else None,
                          int(fields["seed"]) if fields["seed"] else None)  # fmt: skip
            values = {m: float(fields[m]) for m in names if fields.get(m)}
            iters = int(fields["iterations"]) if fields["iterations"] else None
        except (KeyError, ValueError) as err:
            raise ReportError(
                f"{path} line {number} is not a run of a report's CSV ({err}); allowed: the rows "
                "budgeted-report --csv wrote"
            ) from None
        if not all(map(math.isfinite, values.values())) or not 0 < key.budget <= 1:
            raise ReportError(f"{path} line {number}: a budget or metric out of range; allowed: "
                              "budgets in (0, 1] and finite metrics")  # fmt: skip
        if sweep is None:
            metrics = tuple((m, m) for m in names)
            sweep = Sweep(path, fields["framework"], fields["family"], metrics=metrics)
        final = Final(iters, values) if values and iters else None
        status = fields.get("status") or ("finished" if final else None)
        run_dir = Path(fields.get("run_dir") or path.parent / cell_name(*key))
        sweep.cells.append(Cell(key, run_dir, final, None, status))
    if sweep is None:
        raise ReportError(f"{path} holds no runs; allowed: a CSV budgeted-report wrote")
    return sweep

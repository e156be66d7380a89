"""Tabulate and plot a sweep (``budgeted-sweep``): each cell's final metric against the budget.

    budgeted-report output/sweep/mmseg_toy [MORE_SWEEPS ...] [--csv FILE] [--plot FILE.png]

Prints one Markdown table per metric (rows: budget fraction, columns: schedule); Detectron2 sweeps
give box AP and mask AP, MMSegmentation sweeps the mIoU, each read from the training tool's own
logs by the adapter (:func:`budgeted.detectron2.runs.final_metrics`,
:func:`budgeted.mmengine.runs.final_metrics`): a cell counts only once its evaluation after the
last iteration is logged, else it is ``-``. ``--csv`` writes every (cell, metric) value,
``--plot`` the metric against the budget fraction on a log axis, one line per schedule (the
paper's figures; needs matplotlib). See docs/sweeps.md.

This module imports no framework: a framework's adapter is imported only to read a sweep of it.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .checkpoints import atomic_write
from .families import FAMILIES, ConfigFamily, budget_tag

__all__ = [
    "CELL_FILE",
    "METRICS",
    "RUNS_MODULES",
    "SWEEP_FILE",
    "Cell",
    "Final",
    "Group",
    "ReportError",
    "Sweep",
    "cell_name",
    "family_label",
    "family_of",
    "group_sweeps",
    "holds_run",
    "load_sweep",
    "main",
    "markdown",
    "plot",
    "read_final",
    "write_csv",
]

SWEEP_FILE = "sweep.json"
"""The sweep folder's record: framework, config family, planned cells."""
CELL_FILE = "sweep_cell.json"
"""Each cell folder's record: config, overrides, command, wall time."""
METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "detectron2": (("box AP", "bbox/AP"), ("mask AP", "segm/AP")),
    "mmseg": (("mIoU", "mIoU"),),
}
"""framework -> (name shown, key in the training tool's log) of each reported metric."""
RUNS_MODULES = {"detectron2": "budgeted.detectron2.runs", "mmseg": "budgeted.mmengine.runs"}
"""framework -> the adapter module that reads its run folders (imported when needed)."""


class ReportError(ValueError):
    """Bad input: reported as one line."""


@dataclass
class Final:
    """A finished run: its length in iterations and its final metrics (shown names)."""

    iters: int
    metrics: dict[str, float]


@dataclass
class Cell:
    """One (schedule, budget) run of a sweep; ``final`` is None until it has finished."""

    schedule: str
    budget: float
    run_dir: Path
    final: Final | None = None
    wall_s: float | None = None


@dataclass
class Sweep:
    """A sweep folder: what it trains and its cells (planned and started)."""

    path: Path
    framework: str
    family: str
    cells: list[Cell] = field(default_factory=list)


def cell_name(schedule: str, budget: float) -> str:
    """The cell's folder name, with the configs' budget tag: ``linear_budget5`` for 5 %.

    >>> cell_name("linear", 0.05), cell_name("step", 0.005)
    ('linear_budget5', 'step_budget0p5')
    """
    return f"{schedule}_budget{budget_tag(budget)}"


def family_label(family: ConfigFamily) -> str:
    """How a sweep records its config family: the budget files' path prefix in a checkout.

    >>> from budgeted.families import PSPNET_TOY
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
    allowed = (
        "allowed: a JSON object written by budgeted-sweep (move the file away to start that "
        "sweep or cell over)"
    )
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ReportError(
            f"{path} is not a sweep record: not UTF-8 text ({err.reason}); {allowed}"
        ) from None
    except json.JSONDecodeError as err:
        raise ReportError(
            f"{path} is not a sweep record: not valid JSON (line {err.lineno}, column "
            f"{err.colno}: {err.msg}); {allowed}"
        ) from None
    needed = ("framework", "family", "cells") if path.name == SWEEP_FILE else ("schedule", "budget")
    missing = [k for k in needed if not isinstance(value, dict) or k not in value]
    if missing:
        raise ReportError(f"{path} is not a sweep record: no {', '.join(missing)}; {allowed}")
    return value


def _runs(framework: str) -> Any:
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
    (``budgeted.detectron2.runs`` / ``budgeted.mmengine.runs``, imported here, not before); its
    length is the budget's iterations in the family (the sweep refuses overrides that change it).
    """
    if not run_dir.is_dir():
        return None
    found = _runs(fam.framework).final_metrics(run_dir)
    if found is None:
        return None
    metrics = {name: float(found[key]) for name, key in METRICS[fam.framework] if key in found}
    return Final(fam.iters(budget), metrics)


def holds_run(framework: str, run_dir: Path) -> bool:
    """Whether the training tool of ``framework`` has left a run (checkpoints, logs) there."""
    return run_dir.is_dir() and bool(_runs(framework).holds_run(run_dir))


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
    try:
        planned = [(str(s), float(b)) for s, b in meta["cells"]]
    except (TypeError, ValueError):
        raise ReportError(
            f"{record} is not a sweep record: its cells are not [schedule, budget] pairs; "
            "allowed: a JSON object written by budgeted-sweep"
        ) from None
    for cell_file in sorted(path.glob(f"*/{CELL_FILE}")):
        spec = read_record(cell_file)
        if (spec["schedule"], float(spec["budget"])) not in planned:
            planned.append((spec["schedule"], float(spec["budget"])))
    for schedule, budget in planned:
        run_dir = path / cell_name(schedule, budget)
        spec_file = run_dir / CELL_FILE
        wall = read_record(spec_file).get("wall_s") if spec_file.is_file() else None
        final = read_final(fam, budget, run_dir)
        sweep.cells.append(Cell(schedule, budget, run_dir, final, wall))
    return sweep


@dataclass
class Group:
    """Cells of the same framework and config family, from one sweep folder or several."""

    framework: str
    family: str
    sources: list[Path] = field(default_factory=list)
    cells: dict[tuple[str, float], Cell] = field(default_factory=dict)

    @property
    def schedules(self) -> list[str]:
        return list(dict.fromkeys(s for s, _ in self.cells))

    @property
    def budgets(self) -> list[float]:
        return sorted({b for _, b in self.cells})


def group_sweeps(sweeps: Sequence[Sweep]) -> list[Group]:
    """Merge the sweeps' cells per (framework, family); a cell finished twice is an error."""
    groups: dict[tuple[str, str], Group] = {}
    for sweep in sweeps:
        group = groups.setdefault(
            (sweep.framework, sweep.family), Group(sweep.framework, sweep.family)
        )
        group.sources.append(sweep.path)
        for cell in sweep.cells:
            key = (cell.schedule, cell.budget)
            old = group.cells.get(key)
            if old is not None and old.final is not None and cell.final is not None:
                raise ReportError(
                    f"cell {cell_name(*key)} is finished in both {old.run_dir.parent} and "
                    f"{sweep.path}; allowed: each cell finished in one of the sweeps reported"
                )
            if old is None or old.final is None:
                group.cells[key] = cell
    return list(groups.values())


def _fmt(value: float | None) -> str:
    return "-" if value is None else ("nan" if math.isnan(value) else f"{value:.2f}")


def markdown(group: Group) -> str:
    """One Markdown table per metric: rows = budget fraction (and iterations), columns =
    schedules; ``-`` where the run has not finished."""
    blocks = []
    done = sum(c.final is not None for c in group.cells.values())
    for metric, _ in METRICS[group.framework]:
        lines = [
            f"### {metric}: {group.framework} {group.family}* "
            f"({', '.join(str(p) for p in group.sources)}; {done}/{len(group.cells)} cells "
            "finished)",
            "",
            "| budget | iterations | " + " | ".join(group.schedules) + " |",
            "|---:|---:|" + "---:|" * len(group.schedules),
        ]
        for budget in group.budgets:
            row = [group.cells.get((s, budget)) for s in group.schedules]
            iters = sorted({c.final.iters for c in row if c is not None and c.final is not None})
            values = [
                _fmt(c.final.metrics.get(metric) if c is not None and c.final else None)
                for c in row
            ]
            label = "/".join(str(i) for i in iters) or "-"
            lines.append(f"| {budget:g} | {label} | " + " | ".join(values) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


CSV_HEADER = ("framework", "family", "schedule", "budget", "iterations", "metric", "value",
              "wall_s", "run_dir")  # fmt: skip
"""The first row of :func:`write_csv`'s file (and how an earlier report's CSV is recognized)."""


def write_csv(groups: Sequence[Group], path: Path) -> None:
    """One row per (cell, metric); ``value`` is empty where the run has not finished. Written
    atomically (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for group in groups:
            for (schedule, budget), cell in sorted(group.cells.items(), key=lambda kv: kv[0][1]):
                for metric, _ in METRICS[group.framework]:
                    final = cell.final
                    value = final.metrics.get(metric) if final else None
                    writer.writerow(
                        [group.framework, group.family, schedule, f"{budget:g}",
                         final.iters if final else "", metric, "" if value is None else value,
                         "" if cell.wall_s is None else f"{cell.wall_s:.1f}", cell.run_dir]
                    )  # fmt: skip


def plot(groups: Sequence[Group], path: Path) -> None:
    """Each metric against the budget fraction (log x), one line per schedule; unfinished cells
    are gaps, not points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = [(g, metric) for g in groups for metric, _ in METRICS[g.framework]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, (group, metric) in zip(axes[0], panels):
        for schedule in group.schedules:
            ys = []
            for budget in group.budgets:
                cell = group.cells.get((schedule, budget))
                value = cell.final.metrics.get(metric) if cell and cell.final else None
                ys.append(math.nan if value is None else value)
            ax.plot(group.budgets, ys, marker="o", label=schedule)
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(group.budgets)
        ax.set_xticklabels([f"{b:g}" for b in group.budgets])
        ax.set_xlabel("budget (fraction of the full schedule)")
        ax.set_ylabel(metric)
        ax.set_title(f"{group.framework}: {Path(group.family).name}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        fig.savefig(f, dpi=120, format=path.suffix[1:].lower())
    plt.close(fig)


def plot_formats() -> list[str]:
    """The file types ``--plot`` can write (matplotlib's: png, pdf, svg, ...)."""
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def check_outputs(csv_path: Path | None, plot_path: Path | None, sweeps: Sequence[Path]) -> None:
    """Refuse, before reading anything, an output that would overwrite what is not ours.

    ``--csv`` must end in ``.csv`` and be new or an earlier report's CSV (its first row is
    :data:`CSV_HEADER`); ``--plot`` must end in a format matplotlib writes; neither may be a
    folder or lie inside a run folder of a reported sweep. Raises :class:`ReportError`.
    """
    for flag, out in (("--csv", csv_path), ("--plot", plot_path)):
        if out is None:
            continue
        if out.is_dir():
            raise ReportError(f"{flag} {out} is a folder; allowed: a file path")
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
            if tuple(first or ()) != CSV_HEADER:
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
    parser.add_argument("--csv", type=Path, metavar="FILE", help="write every value as CSV")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="metric vs budget plot")
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
    if args.csv is not None:
        write_csv(groups, args.csv)
        print(f"\nCSV: {args.csv}")
    if args.plot is not None:
        plot(groups, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

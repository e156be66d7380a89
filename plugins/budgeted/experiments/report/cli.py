"""Tabulate and plot a sweep (``budgeted-sweep``) in the paper's form.

``budgeted-report``'s command line (:func:`check_outputs` before reading anything).
"""

from __future__ import annotations

import csv
import importlib.util
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from ...errors import RecordError, ReportError
from ...safety.locks import unwritable
from ..sweep.cli import tool_parser
from ..sweep.records import METRICS, Sweep, load_sweep
from .model import Group, group_sweeps, read_report_csv
from .plots import plot_files, plot_formats, plot_sweeps, written_by_report
from .tables import CSV_HEADER, best_progress, markdown, write_csv

__all__ = ["check_outputs", "main", "read_input"]


def check_outputs(
    csv_path: Path | None, plot_path: Path | None, sweeps: Sequence[Path], advice: bool = False
) -> None:
    """Refuse (:class:`ReportError`), before reading anything, an output that would overwrite
    what is not ours: ``--csv`` new or an earlier report's CSV, ``--plot`` in a format matplotlib
    writes and each of its :func:`plot_files` (``advice``: the advisor's one figure) new or an
    earlier report's figure; none a folder, inside a run folder of a reported sweep, or in a
    folder that cannot be written."""
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
        for figure in [plot_path] if advice else plot_files(plot_path):
            if figure.exists() and (not figure.is_file() or not written_by_report(figure)):
                raise ReportError(
                    f"--plot {plot_path} would replace {figure}, which budgeted-report did not "
                    "write; allowed: a path whose figures are new, or an earlier report's (.png, "
                    ".pdf, .svg, .svgz, .eps, .ps), which are replaced"
                )


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-report``: print the tables, write ``--csv`` / ``--plot``; the exit status."""
    parser = tool_parser("report", "budgeted-report", __doc__)
    parser.add_argument(
        "sweeps", nargs="+", type=Path,
        help="sweep folders (budgeted-sweep --out), or CSVs an earlier report wrote (--csv)",
    )  # fmt: skip
    parser.add_argument("--csv", type=Path, metavar="FILE.csv", help="write one row per run")
    parser.add_argument(
        "--plot", type=Path, metavar="FILE.png",
        help="metric vs budget (error bars, best LR); beside it FILE_lr.png, FILE_loss.png and "
        "FILE_grad_norm.png from the runs' logs (any matplotlib file type); with --predict or "
        "--holdout: the advisor's figure alone",
    )  # fmt: skip
    parser.add_argument(
        "--metric", default="", metavar="KEY",
        help="report this metric alone: one the report shows (mIoU, box AP, top-1), or any key "
        "of the runs' final evaluation, as logged (higher is better)",
    )  # fmt: skip
    parser.add_argument(
        "--best-progress", action="store_true",
        help="also tabulate where the best periodic evaluation fell in training (Table 4)",
    )  # fmt: skip
    add_advice_arguments(parser)
    args = parser.parse_args(argv)
    check_advice_arguments(parser, args)
    advising = args.predict is not None or args.holdout
    try:
        if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
            raise ReportError(
                f"--plot {args.plot} needs matplotlib, which is not installed; install it with "
                'pip install "budgeted-training[plot]", or leave out --plot'
            )
        check_outputs(args.csv, args.plot, args.sweeps, advising)
        sweeps = [sweep for p in args.sweeps for sweep in read_input(p, args.metric)]
        groups = group_sweeps(sweeps)
        blocks = ["\n\n".join(markdown(g) for g in groups)]
        if args.best_progress:
            blocks.append("\n\n" + "\n\n".join(best_progress(g) for g in groups))
        if advising:  # numpy and scipy only for the advice
            from .advise import advice_blocks

            blocks += advice_blocks(groups, args.predict, args.holdout, args.curve, args.target)
    except (ReportError, RecordError, ImportError) as err:
        print(f"report: error: {err}", file=sys.stderr)
        return 2
    print(blocks[0])
    for sweep in sweeps:  # a partial sweep (cells queued, running, failed): say how many
        missing = [c.run_dir.name for c in sweep.cells if c.final is None and c.status is None]
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            print(f"report: note: {sweep.path} is partial: {len(missing)} of {len(sweep.cells)} "
                  f"cells have no result yet ({shown}); budgeted-sweep --status {sweep.path} "
                  "shows where they are", file=sys.stderr)  # fmt: skip
    for block in blocks[1:]:
        print(block)
    try:
        if advising and args.plot is not None:  # the advice's figure, not the sweep's
            from .advise import plot_advice

            print(f"\nplot: {plot_advice(groups[0], args.curve, args.plot, args.holdout)}")
            args.plot = None
        _write_outputs(groups, args.csv, args.plot)
    except OSError as err:  # checked writable before; a disk that filled up meanwhile, say
        print(f"report: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


def read_input(path: Path, metric: str = "") -> list[Sweep]:
    """A sweep folder, or the sweeps of a CSV an earlier report wrote
    (:func:`~.model.read_report_csv`); with ``metric``, that metric alone: one the report shows
    (its name: ``mIoU``, ``box AP``), else a key of the runs' final evaluation, as logged (a
    sweep folder read with it: :func:`~..sweep.records.load_sweep`; a CSV: its column).
    ``budgeted-rank --metric`` reads the same way."""
    if path.is_file():
        sweeps = read_report_csv(path)
    elif metric in {name for shown in METRICS.values() for name, _ in shown}:
        sweeps = [load_sweep(path)]  # a name the report shows: its own metric, if the sweep's
    else:
        return [load_sweep(path, metric)]  # no name: a key (or none)
    if not metric:
        return sweeps
    found = []
    for sweep in sweeps:
        names = [name for name, _ in sweep.metrics]
        if metric in names:
            sweep.metrics = tuple(m for m in sweep.metrics if m[0] == metric)
        elif path.is_file():
            raise ReportError(f"--metric {metric!r} is not a column of {path}; allowed: "
                              f"{', '.join(names)}")  # fmt: skip
        else:
            sweep = load_sweep(path, metric)
        found.append(sweep)
    return found


def add_advice_arguments(parser) -> None:
    """The budget advisor's options (:mod:`.advise`; docs/sweeps.md, "Predicting a larger
    budget")."""
    group = parser.add_argument_group("the budget advisor: what a larger budget would buy")
    group.add_argument(
        "--predict", type=float, nargs="+", metavar="FRACTION",
        help="fit each schedule's metric against the budget and predict it at these budgets "
        "(fractions of the full schedule; 2 = twice it), with a 95 %% bootstrap interval",
    )  # fmt: skip
    group.add_argument(
        "--target", type=float, metavar="T",
        help="with --predict: the smallest budget predicted to reach T (T <= 1: that share of "
        "the predicted full-schedule metric; T > 1: the metric itself)",
    )  # fmt: skip
    group.add_argument(
        "--holdout", action="store_true",
        help="leave the largest budget out of the fit, predict it, print the error and whether "
        "the interval covered it",
    )  # fmt: skip
    group.add_argument(
        "--curve", metavar="CURVE",
        help="the curve fitted, with --predict or --holdout: power: a - b B^-c (default); "
        "log: a + b ln B",
    )  # fmt: skip


def check_advice_arguments(parser, args) -> None:
    """Bad advisor values: one line naming the value and what is allowed."""
    for value in args.predict or ():
        if not (math.isfinite(value) and value > 0):
            parser.error(f"--predict {value:g} is invalid; allowed: budgets > 0 (fractions of "
                         "the full schedule, 2 = twice it)")  # fmt: skip
    if args.target is not None and not (math.isfinite(args.target) and args.target > 0):
        parser.error(f"--target {args.target:g} is invalid; allowed: a share in (0, 1] of the "
                     "full schedule's metric, or a metric value > 1")  # fmt: skip
    if args.target is not None and args.predict is None:
        parser.error("--target is --predict's; allowed: --predict FRACTION ... --target T")
    if args.curve is not None and args.predict is None and not args.holdout:
        parser.error(f"--curve {args.curve} is the advisor's; allowed: with --predict or --holdout")
    if args.predict is not None or args.holdout:  # the advisor's module imports numpy
        try:
            from .advise import CURVES
        except ImportError as err:
            parser.error(f"--predict and --holdout need numpy and scipy ({err}); allowed: "
                         "pip install scipy, or leave them out")  # fmt: skip

        args.curve = args.curve or next(iter(CURVES))
        if args.curve not in CURVES:
            parser.error(f"--curve {args.curve} is not a curve; allowed: {', '.join(CURVES)}")


def _write_outputs(groups: Sequence[Group], csv_path: Path | None, plot: Path | None) -> None:
    """Write ``--csv`` and ``--plot`` (each atomically) and name them."""
    if csv_path is not None:
        write_csv(groups, csv_path)
        print(f"\nCSV: {csv_path}")
    if plot is not None:
        print("\n" + "\n".join(f"plot: {path}" for path in plot_sweeps(groups, plot)))

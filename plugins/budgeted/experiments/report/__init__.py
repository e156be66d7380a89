"""Tabulate and plot a sweep (``budgeted-sweep``) in the paper's form.

    budgeted-report output/sweep/mmseg_toy [MORE_SWEEPS ...] [--csv FILE.csv] [--plot FILE.png]

For each metric (Detectron2: box AP and mask AP; MMSegmentation: mIoU), read from the training
tool's own logs by the framework's run-folder reader (:func:`budgeted.runs.reader`; a run counts
only once its evaluation after the last iteration is logged, else it is ``-``), the report prints
Markdown tables:

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

The parts: the sweep folders are read by :mod:`budgeted.experiments.sweep.records` (the sweep's
own records module); :mod:`.model` merges them into groups and picks the best LRs; :mod:`.tables`
writes the Markdown and CSV; :mod:`.plots` the figures; :mod:`.cli` is the command line.

This package imports no framework: a framework's run-folder reader is imported only to read a
sweep of it.
"""

from __future__ import annotations

from typing import Any

from ...errors import RecordError, ReportError
from ...runs import reader
from ..sweep.records import (
    CELL_FILE,
    METRICS,
    SWEEP_FILE,
    Cell,
    CellKey,
    Final,
    Sweep,
    cell_name,
    divergence,
    family_label,
    family_of,
    holds_run,
    load_sweep,
    number_text,
    read_final,
    read_record,
    run_status,
)
from .cli import check_outputs, main
from .model import Group, group_sweeps
from .plots import MARKED_PLOT_FORMATS, PLOT_ENDINGS, PLOT_MARK, plot_files, written_by_report
from .tables import COMPARISONS, CSV_HEADER, best_progress, markdown, write_csv

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

RUNS_MODULES = {
    "detectron2": "budgeted.runs.detectron2",
    **dict.fromkeys(("mmseg", "mmdet", "mmpretrain", "mmaction"), "budgeted.runs.mmengine"),
    "pytorch": "budgeted.runs.pytorch",
}
"""framework -> the module that reads its run folders. Kept for old callers: the experiments
find a framework's reader with :func:`budgeted.runs.reader`."""


def runs_module(framework: str) -> Any:
    """The run-folder reader of ``framework`` (:func:`budgeted.runs.reader`, which the
    experiments call); kept for old callers. :class:`ReportError` for an unknown framework."""
    if framework not in RUNS_MODULES:
        raise ReportError(
            f"unknown framework {framework!r}; allowed: {', '.join(sorted(RUNS_MODULES))}"
        )
    try:
        return reader(framework)
    except RecordError as err:
        raise ReportError(str(err)) from None

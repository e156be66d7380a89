"""Tabulate and plot a sweep (``budgeted-sweep``) in the paper's form.

    budgeted-report output/sweep/mmseg_toy [MORE_SWEEPS ...] [--csv FILE.csv] [--plot FILE.png]

Markdown tables per metric (every cell as ``mean ± std (n)`` over seeds; with several base LRs
or seeds the best-LR, paired-difference and normalized tables), ``--csv`` one row per run,
``--plot`` the paper's Figures 1 and 3 (docs/sweeps.md, "Reports"). The parts: :mod:`.model`,
:mod:`.tables`, :mod:`.plots`, :mod:`.cli`; the folders are read by
:mod:`budgeted.experiments.sweep.records`.
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
    "CELL_FILE", "COMPARISONS", "CSV_HEADER", "MARKED_PLOT_FORMATS", "METRICS", "PLOT_ENDINGS",
    "PLOT_MARK", "RUNS_MODULES", "SWEEP_FILE", "Cell", "CellKey", "Final", "Group",
    "ReportError", "Sweep", "best_progress", "cell_name", "check_outputs", "divergence",
    "family_label", "family_of", "group_sweeps", "holds_run", "load_sweep", "main", "markdown",
    "number_text", "plot_files", "read_final", "read_record", "run_status", "runs_module",
    "write_csv", "written_by_report"
]  # fmt: skip

RUNS_MODULES = {
    "detectron2": "budgeted.runs.detectron2",
    **dict.fromkeys(("mmseg", "mmdet", "mmpretrain", "mmaction"), "budgeted.runs.mmengine"),
    "pytorch": "budgeted.runs.pytorch",
}
"""framework -> the module reading its run folders (old callers; :func:`budgeted.runs.reader`)."""


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

"""The figures of ``budgeted-report --plot FILE.png`` (matplotlib, imported only to plot):
``FILE.png`` each metric against the budget (the paper's Figure 1), ``FILE_lr.png`` and
``FILE_loss.png`` the logged LR and loss against the iteration, ``FILE_grad_norm.png`` the
full-gradient norm against the LR (Figure 3); each schedule at its best base LR, unfinished runs
left out (docs/sweeps.md). Each figure carries :data:`PLOT_MARK`, so a later report replaces its
own figures and nothing else.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...runs import reader
from ...safety import atomic_write
from ..stats import summarize
from ..sweep.records import Cell
from .model import Group

__all__ = [
    "MARKED_PLOT_FORMATS", "PLOT_ENDINGS", "PLOT_MARK", "plot_files", "plot_formats", "plot_sweeps",
    "save_figure", "written_by_report",
]  # fmt: skip


PLOT_MARK = "budgeted-report"
"""The ``Creator`` the ``--plot`` figures carry where the file type keeps one (the report's
own figures are recognized by it, to be replaced; any other file is left alone)."""

MARKED_PLOT_FORMATS = ("eps", "pdf", "png", "ps", "svg", "svgz")
"""The file types that keep :data:`PLOT_MARK` (matplotlib writes no metadata into the others)."""


PLOT_ENDINGS = ("", "_lr", "_loss", "_grad_norm")
"""What :func:`plot_files` adds to the ``--plot`` file's stem, the metric figure first."""


def plot_files(path: Path) -> list[Path]:
    """The figures ``--plot path`` may write.

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


def save_figure(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` atomically, marked with :data:`PLOT_MARK` where the file type
    keeps it (so that a later report may replace it), and close it; ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = path.suffix[1:].lower()
    marked = {"metadata": {"Creator": PLOT_MARK}} if kind in MARKED_PLOT_FORMATS else {}
    with atomic_write(path, "wb") as f:  # the mark: a later report may replace this figure
        fig.savefig(f, dpi=110, format=kind, **marked)
    plt.close(fig)
    return path


def _best_cell(group: Group, schedule: str, budget: float) -> Cell | None:
    """The first finished run (lowest seed) of ``schedule`` at ``budget`` at its best LR."""
    cells = group.best_cells(group.metrics[0][0], schedule, budget)
    return min(cells, key=lambda c: -1 if c.key.seed is None else c.key.seed, default=None)


Curves = dict[tuple[int, str, float], list[dict[str, float]]]
"""(id of the group, schedule, budget) -> the training curve of its best cell."""


def plot_sweeps(groups: Sequence[Group], path: Path) -> list[Path]:
    """Write the figures of ``groups`` (module docstring), named after ``path``; the files."""
    import matplotlib

    matplotlib.use("Agg")
    metric_file, lr_file, loss_file, grad_norm_file = plot_files(path)
    # every log is read before any figure is written: a log refused writes nothing
    curves: Curves = {
        (id(g), s, b): reader(g.framework).train_curve(cell.run_dir)
        for g in groups for s in g.schedules for b in g.budgets
        if (cell := _best_cell(g, s, b)) is not None
    }  # fmt: skip
    written = [_metric_figure(groups, metric_file)]
    for key, label, file in (
        ("lr", "learning rate (logged)", lr_file),
        ("loss", "training loss (logged)", loss_file),
    ):
        if any(key in p for points in curves.values() for p in points):
            written.append(_curve_figure(groups, curves, key, label, file))
    if any("grad_norm" in p for points in curves.values() for p in points):
        written.append(_grad_norm_figure(groups, curves, grad_norm_file))
    return written


def _metric_figure(groups: Sequence[Group], file: Path) -> Path:
    """Each metric against the budget, one line per schedule at its best LR (± 1 std)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = [(g, metric) for g in groups for metric, _ in g.metrics]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, (group, metric) in zip(axes[0], panels):
        for schedule in group.schedules:
            means, stds = [], []
            for budget in group.budgets:
                found = group.best(metric, schedule, budget)
                values = [] if found is None else list(
                    group.values(metric, schedule, budget, found[0]).values()
                )  # fmt: skip
                summary = summarize(values) if values else None
                means.append(math.nan if summary is None else summary.mean)
                stds.append(0.0 if summary is None or summary.std is None else summary.std)
            ax.errorbar(group.budgets, means, yerr=stds, marker="o", capsize=3, label=schedule)
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(group.budgets)
        ax.set_xticklabels([f"{b:g}" for b in group.budgets])
        ax.set_xlabel("budget (fraction of the full schedule)")
        ax.set_ylabel(f"{metric} (best base LR; ± 1 std over seeds)")
        ax.set_title(f"{group.framework}: {Path(group.family).name}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, file)


def _curve_figure(
    groups: Sequence[Group], curves: Curves, key: str, label: str, file: Path
) -> Path:
    """The logged ``key`` (``lr``, ``loss``) against the iteration: a panel per budget, a line
    per schedule."""
    import matplotlib.pyplot as plt

    panels = [(g, b) for g in groups for b in g.budgets]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (group, budget) in zip(axes[0], panels):
        for schedule in group.schedules:
            points = [p for p in curves.get((id(group), schedule, budget), []) if key in p]
            ax.plot([p["iteration"] for p in points], [p[key] for p in points],
                    label=schedule, lw=1.2)  # fmt: skip
        ax.set_title(f"{group.framework}, budget {budget:g}", fontsize=9)
        ax.set_xlabel("iteration")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, file)


def _grad_norm_figure(groups: Sequence[Group], curves: Curves, file: Path) -> Path:
    """The full-gradient norm against the logged LR: a panel per schedule, a line per budget
    (the paper's Figure 3)."""
    import matplotlib.pyplot as plt

    panels = [(g, s) for g in groups for s in g.schedules]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (group, schedule) in zip(axes[0], panels):
        for budget in group.budgets:
            points = [
                p for p in curves.get((id(group), schedule, budget), [])
                if "grad_norm" in p and "lr" in p
            ]  # fmt: skip
            ax.plot([p["lr"] for p in points], [p["grad_norm"] for p in points],
                    marker=".", lw=1, label=f"budget {budget:g}")  # fmt: skip
        ax.set_title(f"{group.framework}: {schedule}", fontsize=9)
        ax.set_xlabel("learning rate (logged)")
        ax.set_ylabel("full-gradient norm")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, file)

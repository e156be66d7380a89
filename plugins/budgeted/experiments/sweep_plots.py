"""The figures of ``budgeted-report --plot FILE.png`` (needs matplotlib).

- ``FILE.png``: each metric against the budget fraction (log x), one line per schedule at its
  best base LR, error bars one std over seeds (the paper's Figure 1, right);
- ``FILE_lr.png`` and ``FILE_loss.png``: the LR and the training loss the runs *logged* against
  the iteration (not the formula: a broken run shows), one panel per budget, one line per
  schedule at its best LR (the first seed that finished); each only where runs logged it (a
  sweep of evaluations, ``budgeted-sweep --evaluate-from``, logged neither);
- ``FILE_grad_norm.png``, where runs logged it (``FullGradNormHook``): the full-gradient norm
  against the LR, one panel per schedule, one line per budget (the paper's Figure 3).

Unfinished runs are left out; the best LR is chosen by the group's first metric (box AP, mIoU).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..safety.checkpoints import atomic_write
from .report import MARKED_PLOT_FORMATS, METRICS, PLOT_MARK, Cell, Group, plot_files, runs_module

__all__ = ["plot_sweeps"]


def _save(fig: Any, path: Path) -> Path:
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
    metric = METRICS[group.framework][0][0]
    found = group.best(metric, schedule, budget)
    if found is None:
        return None
    cells = [
        c for k, c in group.cells.items()
        if (k.schedule, k.budget, k.lr) == (schedule, budget, found[0]) and c.final is not None
    ]  # fmt: skip
    return min(cells, key=lambda c: -1 if c.key.seed is None else c.key.seed, default=None)


def plot_sweeps(groups: Sequence[Group], path: Path) -> list[Path]:
    """Write the figures (see the module's docstring) beside ``path``; the files written.

    Args:
        groups: the report's groups (:func:`budgeted.experiments.report.group_sweeps`).
        path: the metric figure; its stem and file type name the others.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    from .stats import summarize

    written = []
    panels = [(g, metric) for g in groups for metric, _ in METRICS[g.framework]]
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
    metric_file, lr_file, loss_file, grad_norm_file = plot_files(path)
    written.append(_save(fig, metric_file))

    curves = {
        (id(g), s, b): runs_module(g.framework).train_curve(cell.run_dir)
        for g in groups for s in g.schedules for b in g.budgets
        if (cell := _best_cell(g, s, b)) is not None
    }  # fmt: skip
    for key, label in (("lr", "learning rate (logged)"), ("loss", "training loss (logged)")):
        if not any(key in p for points in curves.values() for p in points):
            continue
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
        written.append(_save(fig, {"lr": lr_file, "loss": loss_file}[key]))

    if any("grad_norm" in p for points in curves.values() for p in points):
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
        written.append(_save(fig, grad_norm_file))
    return written

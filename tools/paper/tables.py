"""The tables of docs/paper.md (tools/paper/report.py), each a pure function of report groups.

Every number is top-1 (%) on the held-out images at an arm's best base LR for that budget (the
highest mean over seeds, :meth:`Group.best`), mean ± std over the seeds; a difference is seed k
against seed k (same initialisation and batches), mean [95 % t-interval], bold where the interval
excludes 0 (:func:`budgeted.experiments.stats.paired_difference`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from budgeted.experiments.report import Group
from budgeted.experiments.stats import paired_difference, summarize
from budgeted.runs import reader

NOT_RUN = "*not run yet*"


def _metric(group: Group) -> str:
    return group.metrics[0][0]


def _head(group: Group, first: str) -> list[str]:
    """``| first | 1 % (17 it.) | ...`` and its rule, the budgets of ``group``."""
    cells = [first]
    for budget in group.budgets:
        its = next((c.final.iters for k, c in group.cells.items()
                    if k.budget == budget and c.final), None)  # fmt: skip
        cells.append(f"{budget * 100:g} %" + (f" ({its} it.)" if its else ""))
    return [f"| {' | '.join(cells)} |", "| --- |" + " ---: |" * len(group.budgets)]


def _row(cells: Sequence[str]) -> str:
    return f"| {' | '.join(cells)} |"


def best_text(group: Group, arm: str, budget: float) -> str:
    """``mean ± std (n) @ LR`` of ``arm`` at its best LR (``(edge)`` at the grid's edge)."""
    found = group.best(_metric(group), arm, budget)
    if found is None:
        return "-"
    values = list(group.values(_metric(group), arm, budget, found[0]).values())
    return f"{summarize(values).text()} @ {found[0]:g}" + (" (edge)" if found[1] else "")


def difference_text(group: Group, a: str, b: str, budget: float, other: Group | None = None) -> str:
    """``a - b`` at each one's best LR, seed against seed (``b`` from ``other`` if given)."""
    other = other or group
    metric = _metric(group)
    best_a, best_b = group.best(metric, a, budget), other.best(metric, b, budget)
    if best_a is None or best_b is None:
        return "-"
    interval = paired_difference(
        group.values(metric, a, budget, best_a[0]), other.values(metric, b, budget, best_b[0])
    )
    if interval is None:
        return "-"
    text = interval.text().rsplit(" (", 1)[0]
    return f"**{text}**" if interval.resolved else text


def ordered(group: Group, order: Sequence[str] = ()) -> list[str]:
    """``group``'s arms, those named in ``order`` first in that order (a sweep folder and its
    CSV list them in different orders)."""
    return [*(a for a in order if a in group.schedules),
            *(a for a in group.schedules if a not in order)]  # fmt: skip


def arms_table(arms: Group | None, order: Sequence[str] = ()) -> str:
    """Table 2: every arm at its best LR per budget; then each arm − linear."""
    if arms is None:
        return NOT_RUN
    lines = _head(arms, "arm")
    lines += [_row([f"`{a}`", *(best_text(arms, a, b) for b in arms.budgets)])
              for a in ordered(arms, order)]  # fmt: skip
    lines += ["", *_head(arms, "arm − linear")]
    lines += [_row([f"`{a}`", *(difference_text(arms, a, "linear", b) for b in arms.budgets)])
              for a in ordered(arms, order) if a != "linear"]  # fmt: skip
    return "\n".join(lines)


def _best_and_gain(group: Group, arm: str, budget: float) -> str:
    """Where the best periodic evaluation fell (share of the run) and what it gains over the
    final one (points), means over the seeds at the arm's best LR."""
    key = group.metrics[0][1]
    where, gain = [], []
    for cell in group.best_cells(_metric(group), arm, budget):
        evals = [(it, m[key]) for it, m in reader(group.framework).evaluations(cell.run_dir)
                 if key in m]  # fmt: skip
        if evals:
            at, value = max(evals, key=lambda e: e[1])
            where.append(at / cell.final.iters)
            gain.append(100 * (value - evals[-1][1]))
    if not where:
        return "-"
    return f"{summarize(where).mean:.2f} / {summarize(gain).mean:+.2f}"


def best_table(arms: Group | None, order: Sequence[str] = ()) -> str:
    """The best checkpoint (the paper's Table 4): where the best evaluation fell / its gain."""
    if arms is None:
        return NOT_RUN
    lines = _head(arms, "arm")
    lines += [_row([f"`{a}`", *(_best_and_gain(arms, a, b) for b in arms.budgets)])
              for a in ordered(arms, order)]  # fmt: skip
    return "\n".join(lines)


def _pair_rows(group: Group, label: str, suffix: str) -> list[str]:
    """linear, step and linear − step of ``group``'s cells ``linear<suffix>``."""
    lin, step = f"linear{suffix}", f"step{suffix}"
    budgets = group.budgets
    return [
        _row([f"linear, {label}", *(best_text(group, lin, b) for b in budgets)]),
        _row([f"step, {label}", *(best_text(group, step, b) for b in budgets)]),
        _row([f"linear − step, {label}", *(difference_text(group, lin, step, b) for b in budgets)]),
    ]


def optimizers_table(arms: Group | None, optimizers: Group | None) -> str:
    """linear and step with SGD (the arms sweep), AdamW and AMSGrad, and linear − step each."""
    if arms is None or optimizers is None:
        return NOT_RUN
    lines = [*_head(arms, "schedule, optimizer"), *_pair_rows(arms, "SGD", "")]
    for name in dict.fromkeys(s.partition("@")[2] for s in optimizers.schedules):
        lines += _pair_rows(optimizers, {"adamw": "AdamW", "amsgrad": "AMSGrad"}.get(name, name),
                            f"@{name}")  # fmt: skip
    return "\n".join(lines)


def batch_table(arms: Group | None, batch: Group | None) -> str:
    """linear and step at batch 32 (the arms sweep) and 128, and linear − step at each."""
    if arms is None or batch is None:
        return NOT_RUN
    return "\n".join(
        [*_head(arms, "schedule, batch"), *_pair_rows(arms, "32", ""),
         *_pair_rows(batch, "128", "")]
    )  # fmt: skip


def cost_table(grid: dict, out: Path, timing: dict[str, float]) -> str:
    """Per sweep: runs, its wall time, the cells' wall time, their training time, and the share of
    cell time outside training (start-up, data, evaluation: ``1 - train / cell``)."""
    lines = ["| sweep | runs | wall (min) | cells (min) | training (min) | outside training |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    totals = [0, 0.0, 0.0, 0.0]
    for data in grid["sets"]:
        for sweep in grid["sweeps"]:
            name = f"{data}/{sweep['name']}"
            runs, cells, train = 0, 0.0, 0.0
            for record in sorted((out / name).glob("*/sweep_cell.json")):
                results = record.parent / "results.json"
                if results.is_file():
                    runs += 1
                    cells += json.loads(record.read_text()).get("wall_s") or 0.0
                    train += json.loads(results.read_text()).get("train_seconds") or 0.0
            wall = timing.get(name, 0.0)
            for i, v in enumerate((runs, wall, cells, train)):
                totals[i] += v
            lines.append(_cost_row(name, runs, wall, cells, train))
    lines.append(_cost_row("**all**", *totals))
    return "\n".join(lines)


def _cost_row(name: str, runs: int, wall: float, cells: float, train: float) -> str:
    share = f"{1 - train / cells:.1%}" if cells else "-"
    return _row([name, str(runs), f"{wall / 60:.1f}", f"{cells / 60:.1f}", f"{train / 60:.1f}",
                 share])  # fmt: skip


def figure(arms: Group, title: str, path: Path, order: Sequence[str] = ()) -> Path:
    """Top-1 mean ± std against budget (log x), one line per arm at its best LR."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm in ordered(arms, order):
        xs, means, stds = [], [], []
        for budget in arms.budgets:
            found = arms.best(_metric(arms), arm, budget)
            if found is not None:
                values = list(arms.values(_metric(arms), arm, budget, found[0]).values())
                summary = summarize(values)
                xs.append(budget * 100)
                means.append(summary.mean)
                stds.append(summary.std or 0.0)
        ax.errorbar(xs, means, yerr=stds, marker="o", capsize=3, label=arm)
    ax.set(xscale="log", xlabel="budget (% of the full schedule)", ylabel="top-1 (%)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def readme_table(arms: dict[str, Group], order: Sequence[str], budgets=(0.01, 0.1, 1.0)) -> str:
    """The README's results: each arm at its best LR, mean ± std, on each set at ``budgets``;
    bold where the seed-paired difference from linear resolves (its interval excludes 0)."""
    head = ["arm", *(f"{name} {b * 100:g} %" for name in arms for b in budgets)]
    lines = [_row(head), "| --- |" + " ---: |" * (len(head) - 1)]
    for arm in ordered(next(iter(arms.values())), order):
        cells = []
        for group in arms.values():
            for budget in budgets:
                found = group.best(_metric(group), arm, budget)
                if found is None:
                    cells.append("-")
                    continue
                summary = summarize(
                    list(group.values(_metric(group), arm, budget, found[0]).values())
                )
                text = f"{summary.mean:.2f} ± {summary.std or 0:.2f}"
                resolved = arm != "linear" and difference_text(
                    group, arm, "linear", budget
                ).startswith("**")
                cells.append(f"**{text}**" if resolved else text)
        lines.append(_row([f"`{arm}`", *cells]))
    return "\n".join(lines)

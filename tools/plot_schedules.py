"""Print and plot every budget-aware schedule at several budgets (the paper's Figure 2).

    python tools/plot_schedules.py [--full-iters 90000] [--budgets 0.01 0.1 1.0] [--out FILE.png]

The x axis is the iteration of the *full* schedule, so a small budget's schedule ends early: each
budget decays to zero at its own end, after the same 500-iteration warmup.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from budgeted import SCHEDULES, BudgetSchedule, budget_iters


def multiplier_table(total: int, warmup: int, points: int = 6) -> str:
    """A text table of each schedule's multiplier at evenly spaced iterations of one budget."""
    iterations = [round(i * (total - 1) / (points - 1)) for i in range(points)]
    schedules = {name: BudgetSchedule(name, total, warmup) for name in SCHEDULES}
    head = f"{'iteration':>10} " + " ".join(f"{name:>9}" for name in schedules)
    rows = [
        f"{t:>10} " + " ".join(f"{schedule(t):9.4f}" for schedule in schedules.values())
        for t in iterations
    ]
    return "\n".join([head, *rows])


def plot(full_iters: int, fractions: list[float], warmup: int, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(fractions), figsize=(5 * len(fractions), 3.6), squeeze=False)
    for ax, fraction in zip(axes[0], fractions):
        total = budget_iters(fraction=fraction, full_iters=full_iters)
        step = max(1, total // 400)
        xs = list(range(0, total + 1, step))
        for name in SCHEDULES:
            schedule = BudgetSchedule(name, total, warmup)
            ax.plot(xs, [schedule(t) for t in xs], label=name, linewidth=1.4)
        ax.set_title(f"budget {fraction:g} x {full_iters} = {total} iterations")
        ax.set_xlabel("iteration")
        ax.set_xlim(0, total)
        ax.set_ylim(-0.02, 1.05)
    axes[0][0].set_ylabel("learning-rate multiplier")
    axes[0][-1].legend(loc="upper right", fontsize=8)
    fig.suptitle(f"Budget-aware schedules, warmup {warmup} iterations")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-iters", type=int, default=90000, help="length of the full schedule")
    parser.add_argument(
        "--budgets",
        type=float,
        nargs="+",
        default=[0.01, 0.1, 1.0],
        help="budgets as fractions of the full schedule",
    )
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("output/schedules.png"))
    args = parser.parse_args(argv)
    try:
        for fraction in args.budgets:
            total = budget_iters(fraction=fraction, full_iters=args.full_iters)
            BudgetSchedule("linear", total, args.warmup)  # refuses warmup >= budget up front
    except ValueError as error:
        parser.error(str(error))
    for fraction in args.budgets:
        total = budget_iters(fraction=fraction, full_iters=args.full_iters)
        print(
            f"\nLR multipliers at {fraction:g} of {args.full_iters} = {total} iterations "
            f"(warmup {args.warmup}):"
        )
        print(multiplier_table(total, args.warmup))
    path = plot(args.full_iters, args.budgets, args.warmup, args.out)
    print(f"\nplot of every schedule written to {path}")


if __name__ == "__main__":
    main()

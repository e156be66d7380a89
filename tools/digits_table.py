"""The digits grid's results as one table (README.md's results, docs/digits.md): each schedule at
its best base LR per budget (mean ± std over the seeds @ LR), and the paired verdicts
``linear − step`` and ``rex − linear`` (mean [95 % t-interval]), as ``budgeted-report`` computes
them. Reads the sweep folder as data; writes nothing.

    python tools/digits_table.py output/sweep/digits     # tools/digits_grid.sh runs it last
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from budgeted.errors import ReportError
from budgeted.experiments.report import group_sweeps, load_sweep
from budgeted.experiments.stats import paired_difference, summarize, verdict

SCHEDULES = ("linear", "step", "cosine", "poly", "rex")
VERDICTS = (("linear", "step"), ("rex", "linear"))
METRIC = "top-1"


def best_cell(group, schedule: str, budget: float) -> tuple[str, float | None]:
    """``"81.36 ± 3.92 @ 0.3"`` (``(edge)`` where the best LR is the grid's edge), and its LR."""
    found = group.best(METRIC, schedule, budget)
    if found is None:
        return "-", None
    lr, edge = found
    values = list(group.values(METRIC, schedule, budget, lr).values())
    summary = summarize(values)
    spread = f" ± {summary.std:.2f}" if summary.std is not None else ""
    return f"{summary.mean:.2f}{spread} @ {lr:g}{' (edge)' if edge else ''}", lr


def verdict_cell(group, budget: float, best: dict[str, float | None], a: str, b: str) -> str:
    """``"+0.81 [+0.20, +1.41] linear ahead"`` (bold where the interval excludes 0)."""
    if best.get(a) is None or best.get(b) is None:
        return "-"
    interval = paired_difference(
        group.values(METRIC, a, budget, best[a]), group.values(METRIC, b, budget, best[b])
    )
    if interval is None:
        return "-"
    said = verdict(interval, a, b)
    text = interval.text().rsplit(" (", 1)[0]
    return f"{text} **{said}**" if said.endswith("ahead") else f"{text} {said}"


def table(folder: Path) -> str:
    (group,) = group_sweeps([load_sweep(folder)])
    head = ["budget", *SCHEDULES, *(f"{a} − {b}" for a, b in VERDICTS)]
    lines = ["| " + " | ".join(head) + " |", "| ---: |" + " ---: |" * len(SCHEDULES) + " --- |" * 2]
    for budget in group.budgets:
        cells, best = [], {}
        for schedule in SCHEDULES:
            text, best[schedule] = best_cell(group, schedule, budget)
            cells.append(text)
        cells += [verdict_cell(group, budget, best, a, b) for a, b in VERDICTS]
        lines.append(f"| {budget * 100:g} % | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="digits_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the digits sweep folder (output/sweep/digits)")
    args = parser.parse_args(argv)
    try:
        print(table(args.folder))
    except ReportError as err:
        print(f"digits_table: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a search answers (:func:`answer`): the schedule and base LR to run at the target budget,
the run that already did, the runner-up and whether the two are told apart, the best LR's trend
over the budgets, and what the search spent, as target runs and as a share of the grid it
replaces. Printed (:func:`print_answer`), kept in the folder (``search_answer.json``, which
``--status`` prints), drawn (:func:`plot`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ...safety import atomic_write_text
from ..sweep.commands import short, show
from .ladder import Cell, Trial, best_lr, trend
from .space import lr_grid

__all__ = [
    "ANSWER_FILE", "GRID_SEEDS", "answer", "plot", "print_answer", "print_plan", "save_answer",
    "save_search", "status_main",
]  # fmt: skip

ANSWER_FILE = "search_answer.json"
"""The answer as data, in the search folder."""
GRID_SEEDS = 3
"""The seeds of the grid a search is set against (the paper's protocol: 3 seeds a cell)."""


def rung_bests(found: list[Trial], schedule: str) -> list[tuple[float, float, float]]:
    """(budget, best LR, its value) of ``schedule`` at each budget it ran with a result."""
    points = []
    for budget in sorted({t.budget for t in found if t.schedule == schedule}):
        rows = [(t.lr, t.value) for t in found if t.schedule == schedule and t.budget == budget]
        if any(v is not None for _, v in rows):
            points.append((budget, *best_lr(rows)))
    return points


def answer(search: Any) -> dict[str, Any]:
    """The search's answer as data (see the module)."""
    p = search.proposer
    found = search.trials()
    spent = sum(t.iterations for t in found)
    grid_runs = len(p.schedules) * len(lr_grid(p.low, p.high)) * GRID_SEEDS
    result: dict[str, Any] = {
        "method": p.method, "target": p.target, "target_iters": p.target_iters,
        "metric": search.metric, "search_budget": search.budget.text,
        "spent_iters": spent, "spent_runs": round(spent / p.target_iters, 3),
        "grid_runs": grid_runs, "grid_share": round(spent / p.target_iters / grid_runs, 4),
        "trials": len(found), "pruned": sum(1 for t in found if t.value is None and t.iterations
                                            < round(t.budget * p.full_iters)),
        "trend": {}, "choice": None, "runner_up": None,
    }  # fmt: skip
    for schedule in p.schedules:
        points = rung_bests(found, schedule)
        if points:
            result["trend"][schedule] = {
                "alpha": round(trend([(b, lr) for b, lr, _ in points]), 3),
                "best_lr": {f"{b:g}": float(f"{lr:.3g}") for b, lr, _ in points},
            }
    at_target = sorted(
        (t for t in found if abs(t.budget - p.target) < 1e-12 and t.value is not None),
        key=lambda t: -t.value,  # type: ignore[operator]
    )
    if at_target:
        best = at_target[0]
        result["choice"] = _row(search, best)
        other = next((t for t in at_target[1:] if t.schedule != best.schedule), None)
        other = other or next(iter(at_target[1:]), None)
        if other is not None:
            gap = best.value - other.value  # type: ignore[operator]
            result["runner_up"] = {**_row(search, other), "separable": False, "why": (
                f"{gap:.2f} behind, one run each: not told from seed noise (a verdict needs 3 "
                "seeds of each: budgeted-sweep --seeds 0 1 2)"
            )}  # fmt: skip
    return result


def _row(search: Any, trial: Trial) -> dict[str, Any]:
    plan = search.plan(Cell(trial.schedule, trial.budget, trial.lr, trial.seed))
    return {"schedule": trial.schedule, "lr": trial.lr, "seed": trial.seed,
            "value": round(float(trial.value or 0.0), 4), "run": str(plan.run_dir),
            "command": show(plan.command)}  # fmt: skip


def print_plan(search: Any) -> None:
    """``--dry-run``: the method, the ladder's rungs and what they cost, the first cells."""
    p = search.proposer
    print(f"[search] {p.method}: target {p.target:g} ({p.target_iters} iterations of "
          f"{p.full_iters}), search budget {search.budget.text}, {len(p.schedules)} schedule(s) "
          f"({', '.join(p.schedules)}), LRs {p.low:g} to {p.high:g}")  # fmt: skip
    runs = search.runs([])
    if p.method == "ladder":
        ladder = p.ladder(runs)
        for rung in ladder.rungs:
            print(f"[search]   rung {rung.budget:g} ({rung.iters} iterations): "
                  f"{rung.schedules} schedule(s) x {rung.lrs} LR(s)")  # fmt: skip
        print(f"[search]   planned cost {ladder.cost:.2f} target runs")
    for cell in p.next_cells([], 0, 0, runs)[:20]:
        if cell is not None:
            print(f"{search.plan(cell).run_dir.name}: {show(search.plan(cell).command)}")


def print_answer(result: dict[str, Any]) -> None:
    """The answer as lines on stdout."""
    pruned = f", {result['pruned']} stopped early" if result["pruned"] else ""
    print(f"[search] spent {result['spent_iters']} iterations = {result['spent_runs']:g} target "
          f"runs of {result['target_iters']} ({100 * result['grid_share']:.1f} % of the "
          f"{result['grid_runs']}-run grid it replaces) in {result['trials']} runs"
          f"{pruned}")  # fmt: skip
    for schedule, t in result["trend"].items():
        lrs = ", ".join(f"{lr:g} at {b}" for b, lr in t["best_lr"].items())
        print(f"[search] best LR of {schedule} by budget: {lrs} (alpha {t['alpha']:g})")
    choice = result["choice"]
    if choice is None:
        print("[search] no run at the target budget has a result yet: run the same command to "
              "go on, or give a larger --search-budget")  # fmt: skip
        return
    print(f"[search] answer: {choice['schedule']} at base LR {choice['lr']:g}: "
          f"{result['metric']} {choice['value']:.2f} at budget {result['target']:g} (one run, "
          f"seed {choice['seed']}: {short(choice['run'])})")  # fmt: skip
    print(f"[search] its command: {choice['command']}")
    runner = result["runner_up"]
    if runner is not None:
        print(f"[search] runner-up: {runner['schedule']} at base LR {runner['lr']:g}, "
              f"{runner['why']}")  # fmt: skip


def save_search(search: Any, fingerprint: dict, storage: str | None, name: str) -> None:
    """Write ``search.json``: the search's fingerprint, budget, storage and study name."""
    from .run import SEARCH_FILE
    from .study import storage_text

    search.out.mkdir(parents=True, exist_ok=True)
    record = {"search": fingerprint, "search_budget": search.budget.text,
              "storage": storage_text(search.out, storage), "study": name}  # fmt: skip
    atomic_write_text(search.out / SEARCH_FILE, json.dumps(record, indent=1) + "\n")


def save_answer(search: Any, result: dict[str, Any]) -> None:
    """Write ``search_answer.json``."""
    atomic_write_text(search.out / ANSWER_FILE, json.dumps(result, indent=1) + "\n")


def status_main(out: Path) -> int:
    """``budgeted-search --status OUT``: the answer so far; 2 after one line for a folder that
    holds none."""
    try:
        result = json.loads((out / ANSWER_FILE).read_text())
        print_answer(result)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"search: error: {out / ANSWER_FILE} cannot be read ({type(err).__name__}); "
              "allowed: a folder budgeted-search wrote", file=sys.stderr)  # fmt: skip
        return 2
    return 0


def plot(search: Any, result: dict[str, Any], path: Path) -> None:
    """Every run by base LR (x) and budget (y), its value as the colour, a pruned one hollow; the
    best LR per budget and its trend line per schedule; the choice ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..report.plots import save_figure

    found = search.trials()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    values = [t.value for t in found if t.value is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    for t in found:
        shade = 0.5 if t.value is None else (t.value - low) / ((high - low) or 1.0)
        ax.scatter(t.lr, t.budget, s=40, c=[plt.cm.viridis(shade)],
                   marker="o" if t.value is not None else "x")  # fmt: skip
    for schedule in search.proposer.schedules:
        points = rung_bests(found, schedule)
        if points:
            budgets = [b for b, _, _ in points]
            alpha = trend([(b, lr) for b, lr, _ in points])
            b0, lr0, _ = points[-1]
            span = [min(budgets), search.proposer.target]
            ax.plot([lr0 * (b / b0) ** -alpha for b in span], span, "--", label=schedule)
    if result["choice"] is not None:
        ax.scatter(result["choice"]["lr"], search.proposer.target, s=160, facecolors="none",
                   edgecolors="red", label="answer")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="base LR", ylabel="budget (fraction)",
           title=f"{search.proposer.method}: {result['metric']} (colour), target "
           f"{search.proposer.target:g}")  # fmt: skip
    ax.legend(fontsize=8)
    save_figure(fig, path)

"""``--dry-run``'s first line: a sweep's size, what is left of it, and its estimated cost, from a
line fitted through the sweep's finished runs (wall time against iterations) or a prior measured
on 2 CPU cores."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from ...errors import ReportError
from .plan import Plan
from .records import CELL_FILE, read_record

__all__ = ["PRIOR_COST", "cost_model", "estimate"]

PRIOR_COST: dict[str, tuple[float, float]] = {
    "lenet5_digits_pytorch": (3.85, 0.00305),  # docs/digits.md: 3.9 s at 17 its, 9.1 s at 1,720
}
"""family name -> (seconds per run, seconds per iteration) measured on 2 CPU cores, for
``--dry-run``'s estimate before a run of the sweep has finished (see docs/sweeps.md)."""


def _finished(out: Path) -> list[dict]:
    """The records of the finished runs in ``out`` (checked by :func:`read_record`; a record
    that is not one is left out)."""
    found = []
    for cell_file in out.glob(f"*/{CELL_FILE}"):
        with contextlib.suppress(ReportError):
            record = read_record(cell_file)
            found += [record] if record.get("metrics") and record.get("wall_s") else []
    return found


def cost_model(plans: Sequence[Plan], out: Path) -> tuple[float, float, str] | None:
    """(seconds per run, seconds per iteration, where from): a least-squares line through the
    finished runs of this sweep (wall time against iterations), else :data:`PRIOR_COST`."""
    points = [(plans[0].family.iters(r["budget"]), r["wall_s"]) for r in _finished(out)]
    if len({x for x, _ in points}) >= 2:
        n = len(points)
        mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
        slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
        slope = max(slope, 0.0)
        return max(my - slope * mx, 0.0), slope, f"fitted to the {n} finished runs in --out"
    if points:
        return 0.0, sum(y for _, y in points) / sum(x for x, _ in points), "from finished runs"
    prior = PRIOR_COST.get(plans[0].family.name) if plans else None
    if prior is not None:
        return *prior, "measured on a 2-core machine (docs/sweeps.md)"
    return None


def estimate(plans: Sequence[Plan], out: Path, jobs: int = 1) -> str:
    """``--dry-run``'s first line (module docstring; with ``jobs`` > 1 also the cost shared by
    ``jobs`` runs at a time)."""
    todo = [p for p in plans if p.action != "skip"]
    if any("evaluated_from" in p.spec for p in plans):  # --evaluate-from: no training
        plural = "s" if len(plans) != 1 else ""
        head = f"[sweep] grid: {len(plans)} evaluation{plural} ({len(plans) - len(todo)} finished, "
        walls = [record["wall_s"] for record in _finished(out)]
        if not todo or not walls:
            cost = "" if not todo else "; cost unknown until one has finished"
            return f"{head}{len(todo)} to run){cost}"
        per_run = sum(walls) / len(walls)
        return (
            f"{head}{len(todo)} to run); estimated {len(todo) * per_run / 60:.0f} min at "
            f"{per_run:.0f} s each (the mean of the {len(walls)} finished in --out)"
        )
    iters = sum(p.family.iters(p.budget) for p in todo)
    diverged = sum(p.status == "diverged" for p in plans)
    head = (
        f"[sweep] grid: {len(plans)} runs ({len(plans) - len(todo) - diverged} finished, "
        f"{f'{diverged} diverged, ' if diverged else ''}{len(todo)} to run or resume, {iters} "
        "iterations)"
    )
    model = cost_model(plans, out) if todo else None
    if not todo:
        return head
    if model is None:
        return f"{head}; cost unknown until one run has finished (time one with --budgets)"
    per_run, per_iter, source = model
    seconds = len(todo) * per_run + iters * per_iter
    shared = f", about {seconds / jobs / 60:.0f} min at --jobs {jobs}" if jobs > 1 else ""
    return (
        f"{head}; estimated {seconds / 60:.0f} min at {per_run:.0f} s per run + "
        f"{per_iter * 1000:.0f} ms per iteration ({source}; resumed runs cost less){shared}"
    )

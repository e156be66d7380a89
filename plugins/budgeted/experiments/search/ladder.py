"""The budget ladder: a search that is fair to budget-aware schedules (``--method ladder``).

Every run is a **complete** budget-aware run (its LR decays to zero at its own end), so no run is
judged before its decay. Runs climb a ladder of budgets ``B / eta**k`` up to the target ``B``:
the lowest rung tries every schedule on a half-decade LR grid, each higher rung the best
schedules near the LR their **trend** predicts there, and the target rung the best one. The trend
is the best LR's fall with the budget (the "short-horizon bias" of small runs, measured here as
the best LR moving ``alpha`` decades per decade of budget)::

    log10 lr*(b) = log10 lr*(b_low) - alpha * log10(b / b_low)

``alpha`` is fitted over the rungs run so far by least squares with :data:`PRIOR_ALPHA` (the
1/sqrt(T) of Schaipp et al., ICML 2025) as a prior worth two rungs ``ETA`` apart (a ridge
towards it): with one rung it is the prior, with many the data. The best LR of a rung is the
vertex of the parabola through the best tried LR and its two lattice neighbours (in log LR),
kept within half a grid step of the best tried one.

The whole search is a pure function of the runs so far (:meth:`Ladder.next_cells`): a resumed
search plans what an uninterrupted one would, and every cell of it is a sweep cell.

Example:
    >>> ladder = Ladder(target=0.1, full_iters=1720, warmup=0, schedules=("linear",),
    ...                 low=0.01, high=1.0, runs=4.0)
    >>> [(r.budget, r.iters, r.schedules, r.lrs) for r in ladder.rungs]
    [(0.00625, 11, 1, 5), (0.025, 43, 1, 3), (0.1, 172, 1, 2)]
    >>> ladder.cost
    3.0625
    >>> [c.lr for c in ladder.next_cells([])]
    [0.01, 0.03, 0.1, 0.3, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .space import PER_DECADE, lattice_index, lattice_step, lr_grid

__all__ = ["PRIOR_ALPHA", "SHAPES", "Cell", "Ladder", "Rung", "Trial", "best_lr", "trend"]

PRIOR_ALPHA = 0.5
"""Decades the best LR falls per decade of budget before two rungs measure it: the ``1/sqrt(T)``
step size of convex theory, which Schaipp et al. (ICML 2025) find transfers across horizons."""

ETA = 4
"""Each rung's budget is the next one's over ``ETA`` (successive halving's reduction factor)."""

SHAPES: tuple[tuple[int, int, int, int], ...] = tuple(
    (per_decade, promoted, mid_lrs, top_lrs)
    for promoted, mid_lrs, top_lrs in (
        (2, 3, 2), (2, 2, 2), (2, 3, 1), (2, 2, 1), (1, 3, 2), (1, 2, 2), (1, 3, 1), (1, 2, 1)
    )
    for per_decade in (2, 1)
)  # fmt: skip
"""The ladders a search budget can buy, richest first: (lowest rung's LRs per decade, schedules
promoted to the middle rung, LRs each there, LRs at the target). The first that fits is run."""

MIN_RUNG_ITERS = 8
"""The fewest iterations a rung's runs decay over (after the warmup)."""


@dataclass(frozen=True)
class Trial:
    """One run the search knows: its cell and what it came to (``value``: the final metric,
    None where it diverged or failed: the worst)."""

    schedule: str
    budget: float
    lr: float
    seed: int
    value: float | None
    iterations: int


@dataclass(frozen=True)
class Cell:
    """A run the search asks for."""

    schedule: str
    budget: float
    lr: float
    seed: int


@dataclass(frozen=True)
class Rung:
    """One rung: its budget (fraction and iterations), how many schedules run there and how many
    LRs each (the lowest rung: its grid's size over the LR range)."""

    budget: float
    iters: int
    schedules: int
    lrs: int


def best_lr(points: Sequence[tuple[float, float | None]]) -> tuple[float, float]:
    """(the best LR, its value) of one schedule at one rung, from ``(lr, value)`` pairs: the
    vertex of the parabola through the best tried LR and its lattice neighbours in log LR, within
    half a grid step of it; the best tried one at an edge or without neighbours.

    >>> [round(x, 3) for x in best_lr([(0.1, 90.0), (0.3, 94.0), (1.0, 90.0)])]
    [0.316, 94.0]
    >>> best_lr([(0.1, 92.0), (0.3, 94.0), (1.0, 90.0)])[0] < 0.3, best_lr([(0.1, 95.0), (1, 90)])
    (True, (0.1, 95.0))
    >>> best_lr([(0.1, 90.0), (0.3, 93.0), (0.3, 95.0), (1.0, 90.0)])[1]  # one LR twice
    94.0
    """
    by_lr: dict[float, list[float]] = {}
    for lr, v in points:  # one value an LR (the mean of its runs)
        by_lr.setdefault(lr, []).append(-math.inf if v is None else v)
    scored = sorted((lr, sum(vs) / len(vs)) for lr, vs in by_lr.items())
    i = max(range(len(scored)), key=lambda j: scored[j][1])
    lr, value = scored[i]
    if not 0 < i < len(scored) - 1 or not math.isfinite(value):
        return lr, value
    (x0, y0), (x2, y2) = (
        (math.log10(scored[i - 1][0]), scored[i - 1][1]),
        (math.log10(scored[i + 1][0]), scored[i + 1][1]),
    )
    x1 = math.log10(lr)
    if not (math.isfinite(y0) and math.isfinite(y2)):
        return lr, value
    # vertex of the parabola through the three points
    den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 := value) - x2 * y0 - x1 * y2 + x0 * y2 + x1 * y0 - x0 * y1) / den
    b = (x2**2 * (y0 - y1) + x1**2 * (y2 - y0) + x0**2 * (y1 - y2)) / den
    if a >= 0:
        return lr, value
    half = min(x1 - x0, x2 - x1) / 2
    vertex = min(max(-b / (2 * a), x1 - half), x1 + half)
    return 10**vertex, value


PRIOR_WEIGHT = 0.5 * math.log10(ETA) ** 2
"""The prior's weight in the fit of ``alpha``: what two rungs ``ETA`` apart weigh (their
``sum((log10 b - mean) ** 2)``)."""


def trend(rungs: Sequence[tuple[float, float]]) -> float:
    """``alpha``: the decades the best LR falls per decade of budget, from ``(budget, best LR)``
    of the rungs run so far: least squares in log-log with :data:`PRIOR_ALPHA` as a prior of
    weight :data:`PRIOR_WEIGHT`::

        alpha = (-slope * Sxx + PRIOR_WEIGHT * PRIOR_ALPHA) / (Sxx + PRIOR_WEIGHT)

    >>> trend([(0.1, 0.3)]), round(trend([(0.025, 0.4), (0.1, 0.1)]), 3)
    (0.5, 0.75)
    """
    xs = [math.log10(b) for b, _ in rungs]
    ys = [math.log10(lr) for _, lr in rungs]
    if len(set(xs)) < 2:
        return PRIOR_ALPHA
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    return (-sxy + PRIOR_WEIGHT * PRIOR_ALPHA) / (sxx + PRIOR_WEIGHT)


@dataclass(frozen=True)
class Ladder:
    """The ladder of one search.

    Args:
        target: the budget to answer for, a fraction of the full schedule.
        full_iters: the full schedule's iterations.
        warmup: the warmup's iterations (every rung decays over at least
            :data:`MIN_RUNG_ITERS` after it).
        schedules: the arms to choose among (one: the LR alone).
        low, high: the LR range; the lowest rung's grid spans it (widened by a step where the
            best lands at an edge, while the budget lasts).
        runs: the search budget as a multiple of one target run.
        seed: every cell's seed.
    """

    target: float
    full_iters: int
    warmup: int
    schedules: tuple[str, ...]
    low: float
    high: float
    runs: float
    seed: int = 0

    def _iters(self, budget: float) -> int:
        return round(budget * self.full_iters)

    def _shape(self) -> tuple[list[float], tuple[int, int, int, int]] | None:
        """(rung budgets, lowest to target; the shape) of the richest ladder the budget buys."""
        depth = 2
        while depth and self._iters(self.target / ETA**depth) < self.warmup + MIN_RUNG_ITERS:
            depth -= 1
        budgets = [round(self.target / ETA**k, 12) for k in range(depth, -1, -1)]
        n = len(self.schedules)
        for shape in SHAPES:
            per_decade, promoted, mid_lrs, top_lrs = shape
            promoted = min(promoted, n)
            grid = len(lr_grid(self.low, self.high, per_decade))
            counts = [n * grid] + ([promoted * mid_lrs] if depth == 2 else []) + [top_lrs]
            if depth == 0:
                counts = [grid if n == 1 else n * grid]
            cost = sum(c * b / self.target for c, b in zip(counts, budgets))
            if cost <= self.runs + 1e-9:
                return budgets, (per_decade, promoted, mid_lrs, top_lrs)
        return None

    @property
    def fits(self) -> bool:
        """Whether the search budget buys a ladder at all."""
        return self._shape() is not None

    def smallest_runs(self) -> float:
        """The smallest search budget, in target runs, that buys a ladder (the leanest shape)."""
        lean = Ladder(self.target, self.full_iters, self.warmup, self.schedules, self.low,
                      self.high, math.inf, self.seed)  # fmt: skip
        budgets, _ = lean._shape()  # type: ignore[misc]
        per_decade, promoted, mid_lrs, top_lrs = SHAPES[-1]
        n = len(self.schedules)
        grid = len(lr_grid(self.low, self.high, per_decade))
        counts = [n * grid] + ([min(promoted, n) * mid_lrs] if len(budgets) == 3 else [])
        counts += [top_lrs]
        if len(budgets) == 1:
            counts = [n * grid]
        return sum(c * b / self.target for c, b in zip(counts, budgets))

    @property
    def rungs(self) -> list[Rung]:
        """The rungs, lowest first (empty where the budget buys none)."""
        found = self._shape()
        if found is None:
            return []
        budgets, (per_decade, promoted, mid_lrs, top_lrs) = found
        n = len(self.schedules)
        grid = len(lr_grid(self.low, self.high, per_decade))
        if len(budgets) == 1:
            return [Rung(budgets[0], self._iters(budgets[0]), n, grid)]
        shapes = [(n, grid)] + ([(min(promoted, n), mid_lrs)] if len(budgets) == 3 else [])
        shapes.append((1, top_lrs))
        return [Rung(b, self._iters(b), s, k) for b, (s, k) in zip(budgets, shapes)]

    @property
    def cost(self) -> float:
        """What the planned rungs cost, in target runs (widening at an edge may add to it)."""
        return sum(r.schedules * r.lrs * r.budget / self.target for r in self.rungs)

    def _per_decade(self) -> int:
        found = self._shape()
        return found[1][0] if found else 2

    def _results(self, trials: Sequence[Trial], budget: float) -> dict[str, list[tuple]]:
        found: dict[str, list[tuple]] = {}
        for t in trials:
            if abs(t.budget - budget) < 1e-12 and t.schedule in self.schedules:
                found.setdefault(t.schedule, []).append((t.lr, t.value))
        return found

    def ranking(self, trials: Sequence[Trial], budget: float) -> list[tuple[str, float, float]]:
        """The schedules run at ``budget``: (schedule, best LR, its value), best first."""
        found = self._results(trials, budget)
        rows = [(s, *best_lr(points)) for s, points in found.items()]
        return sorted(rows, key=lambda r: (-r[2], self.schedules.index(r[0])))

    def predicted_lr(self, trials: Sequence[Trial], schedule: str, budget: float) -> float:
        """The LR the trend predicts for ``schedule`` at ``budget`` from its rungs below."""
        below = sorted({t.budget for t in trials if t.schedule == schedule and t.budget < budget})
        points = []
        for b in below:
            rows = [r for r in self.ranking(trials, b) if r[0] == schedule]
            if rows:
                points.append((b, rows[0][1]))
        alpha = trend(points)
        b0, lr0 = points[-1]
        return 10 ** (math.log10(lr0) - alpha * math.log10(budget / b0))

    def _spent(self, trials: Sequence[Trial]) -> float:
        return sum(t.iterations for t in trials) / self._iters(self.target)

    def next_cells(self, trials: Sequence[Trial]) -> list[Cell]:
        """The cells of the next step, given every trial so far (empty: the search is done).
        A rung is finished before the next starts; the lowest rung widens its grid one step past
        an edge where a schedule's best lands there, while the budget lasts."""
        rungs = self.rungs
        if not rungs:
            return []
        low = rungs[0]
        grid = lr_grid(self.low, self.high, self._per_decade())
        wanted = [Cell(s, low.budget, lr, self.seed) for s in self.schedules for lr in grid]
        missing = self._missing(trials, wanted)
        if missing:
            return missing
        widened = self._widen(trials, low)
        if widened:
            return widened
        for below, rung in zip(rungs, rungs[1:]):
            ranked = self.ranking(trials, below.budget)[: rung.schedules]
            wanted = []
            stride = 1 if rung is rungs[-1] else 2  # eighths of a decade apart
            for schedule, _, _ in ranked:
                centre = self.predicted_lr(trials, schedule, rung.budget)
                wanted += [Cell(schedule, rung.budget, lr, self.seed)
                           for lr in _around(centre, rung.lrs, stride)]  # fmt: skip
            missing = self._missing(trials, wanted)
            if missing:
                return missing
            if rung is not rungs[-1]:
                beyond = self._beyond_edge(trials, rung, [r[0] for r in ranked], stride)
                if beyond:
                    return beyond
        return []

    def _left(self, trials: Sequence[Trial], after: Rung) -> float:
        """The budget left, in target runs, once the rungs above ``after`` are paid for."""
        above = [r for r in self.rungs if r.budget > after.budget]
        return (
            self.runs
            - self._spent(trials)
            - sum(r.schedules * r.lrs * r.budget / self.target for r in above)
        )

    def _beyond_edge(
        self, trials: Sequence[Trial], rung: Rung, schedules: list[str], stride: int
    ) -> list[Cell]:
        """A middle rung's schedule whose best LR is the lowest or highest it tried there: one
        more LR a step past it (once a side), while the budget lasts."""
        cells: list[Cell] = []
        left = self._left(trials, rung)
        cost = rung.budget / self.target
        for schedule, points in self._results(trials, rung.budget).items():
            if schedule not in schedules or len(points) < 2:
                continue
            tried = sorted(lr for lr, _ in points)
            best = max(points, key=lambda p: -math.inf if p[1] is None else p[1])[0]
            first = len(points) == rung.lrs  # not widened yet
            for side, edge in ((-1, tried[0]), (1, tried[-1])):
                if first and best == edge and left >= cost - 1e-9:
                    cells.append(Cell(schedule, rung.budget, lattice_step(best, side * stride),
                                      self.seed))  # fmt: skip
                    left -= cost
        return cells

    def _missing(self, trials: Sequence[Trial], wanted: list[Cell]) -> list[Cell]:
        done = {(t.schedule, round(t.budget, 12), t.lr) for t in trials}
        return [c for c in dict.fromkeys(wanted) if (c.schedule, c.budget, c.lr) not in done]

    def _widen(self, trials: Sequence[Trial], low: Rung) -> list[Cell]:
        """One step past the edge for each schedule whose best lowest-rung LR is at an edge of
        what it tried, while the budget lasts (two widenings a side at most)."""
        stride = PER_DECADE // self._per_decade()
        left = (
            self.runs
            - self._spent(trials)
            - sum(r.schedules * r.lrs * r.budget / self.target for r in self.rungs[1:])
        )
        cells = []
        for schedule, points in self._results(trials, low.budget).items():
            tried = sorted(lr for lr, _ in points)
            best = best_lr(points)[0]
            k = lattice_index(best)
            edge = (k == lattice_index(tried[0]), k == lattice_index(tried[-1]))
            grid_ks = [lattice_index(x) for x in lr_grid(self.low, self.high, self._per_decade())]
            for side, at_edge in zip((-1, 1), edge):
                far = lattice_index(tried[0] if side < 0 else tried[-1])
                beyond = abs(far - (grid_ks[0] if side < 0 else grid_ks[-1])) // stride
                if at_edge and beyond < 2 and left >= low.budget / self.target - 1e-9:
                    cells.append(Cell(schedule, low.budget, lattice_step(best, side * stride),
                                      self.seed))  # fmt: skip
                    left -= low.budget / self.target
        return cells

    def choice(self, trials: Sequence[Trial]) -> tuple[str, float, float] | None:
        """(schedule, LR, value) of the best run at the target budget, or None before one."""
        ranked = [t for t in trials if abs(t.budget - self.target) < 1e-12 and t.value is not None]
        if not ranked:
            return None
        best = max(ranked, key=lambda t: t.value)  # type: ignore[arg-type, return-value]
        return best.schedule, best.lr, best.value  # type: ignore[return-value]


def _around(centre: float, count: int, stride: int) -> list[float]:
    """``count`` lattice LRs around ``centre``, ``stride`` lattice steps apart: itself (1); a
    step below and above it (2, 3: and itself).

    >>> _around(0.1, 3, 2), _around(0.1, 2, 1)
    ([0.056, 0.1, 0.18], [0.075, 0.13])
    """
    offsets = {1: [0], 2: [-1, 1], 3: [-1, 0, 1]}[count]
    return [lattice_step(centre, o * stride) for o in offsets]

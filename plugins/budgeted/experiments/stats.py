"""Statistics for sweep reports: mean ± std over seeds, paired differences with a t-interval
(seed ``k`` against seed ``k``), the best base LR. Framework-free (``scipy.stats.t`` imported
when an interval is computed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "RESOLVED_FROM", "Interval", "Summary", "best_lr", "decimals", "paired_difference", "summarize",
    "t_quantile_975", "verdict",
]  # fmt: skip

RESOLVED_FROM = 3
"""The fewest pairs from which :func:`verdict` calls a difference (two pairs: one degree of
freedom, a standard deviation of two values; the verdict is not resolved)."""


def decimals(values: Iterable[float]) -> int:
    """The decimals that show four significant digits of the largest of ``values`` (at least 2):
    a metric's scale, so that a metric on a 0-1 scale (an F1, an accuracy as a fraction) keeps
    its differences (``0.9712 ± 0.0031``) as one in percent does (``97.12 ± 0.31``).

    Example:
        >>> decimals([97.1, 40.0]), decimals([100.0]), decimals([0.97, 0.5]), decimals([0.004])
        (2, 2, 4, 6)
    """
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    return 2 if top == 0 else max(2, 3 - math.floor(math.log10(top)))


def t_quantile_975(df: int) -> float:
    """``scipy.stats.t.ppf(0.975, df)`` rounded to three decimals, as printed t-tables are.

    Example:
        >>> t_quantile_975(2), t_quantile_975(31), t_quantile_975(1000)
        (4.303, 2.04, 1.962)
    """
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"degrees of freedom {df!r} is invalid; allowed: an integer >= 1")
    from scipy.stats import t  # numpy and scipy only once an interval is computed

    return round(float(t.ppf(0.975, df)), 3)


@dataclass(frozen=True)
class Summary:
    """Mean and sample standard deviation (``n - 1``; None for one value) of ``n`` values."""

    mean: float
    std: float | None
    n: int

    def text(self, digits: int = 2) -> str:
        """``"41.30 ± 1.20 (3)"``; one value: ``"41.30"``.

        Example:
            >>> summarize([40.0, 42.0]).text(), summarize([40.0]).text()
            ('41.00 ± 1.41 (2)', '40.00')
        """
        if self.std is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f} ({self.n})"


def summarize(values: Sequence[float]) -> Summary:
    """Mean ± sample standard deviation, ``sqrt(sum((x - mean)^2) / (n - 1))``, of ``values``.

    Example:
        >>> summarize([1.0, 2.0, 3.0])
        Summary(mean=2.0, std=1.0, n=3)
    """
    if not values:
        raise ValueError("no values to summarize; allowed: at least one")
    std = statistics.stdev(values) if len(values) > 1 else None
    return Summary(statistics.fmean(values), std, len(values))


@dataclass(frozen=True)
class Interval:
    """A mean difference and its two-sided 95 % t-interval over ``n`` pairs (``low``/``high``
    None for one pair)."""

    mean: float
    low: float | None
    high: float | None
    n: int

    @property
    def resolved(self) -> bool:
        """Whether the interval says which is ahead: it excludes 0, over at least
        :data:`RESOLVED_FROM` pairs whose differences are not all equal (a zero-width interval
        says nothing about the noise; a difference of two values hardly more)."""
        if self.low is None or self.high is None or self.n < RESOLVED_FROM:
            return False
        return self.low < self.high and (self.low > 0 or self.high < 0)

    def text(self, digits: int = 2) -> str:
        """``"+2.10 [+0.40, +3.80] (3)"``; one pair: ``"+2.10 (1)"``."""
        if self.low is None or self.high is None:
            return f"{self.mean:+.{digits}f} ({self.n})"
        return (
            f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}] ({self.n})"
        )


def paired_difference(a: Mapping[int, float], b: Mapping[int, float]) -> Interval | None:
    """``a - b`` (seed -> metric) over the seeds both have: mean ``d`` and
    ``d ± t(0.975, n-1) * s_d / sqrt(n)``; None when no seed is in both.

    Example:
        >>> paired_difference({0: 42.0, 1: 44.0, 2: 43.0}, {0: 40.0, 1: 41.0, 2: 42.0}).text()
        '+2.00 [-0.48, +4.48] (3)'
    """
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    diffs = [a[s] - b[s] for s in seeds]
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return Interval(mean, None, None, 1)
    if math.isclose(min(diffs), max(diffs), rel_tol=1e-9, abs_tol=1e-12):
        return Interval(mean, mean, mean, len(diffs))  # equal but for rounding: zero width
    half = t_quantile_975(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return Interval(mean, mean - half, mean + half, len(diffs))


def verdict(interval: Interval | None, first: str, second: str) -> str:
    """``"<first> ahead"`` / ``"<second> ahead"`` when the 95 % interval is
    :attr:`~Interval.resolved` and excludes 0, ``"within noise"`` when it includes 0; else why
    no verdict: one pair (no interval), two pairs, or every difference equal (a zero-width
    interval).

    Example:
        >>> verdict(Interval(2.0, 0.5, 3.5, 3), "linear", "step")
        'linear ahead'
        >>> verdict(Interval(1.0, -0.5, 2.5, 3), "linear", "step")
        'within noise'
        >>> verdict(Interval(1.0, 1.0, 1.0, 2), "linear", "step")
        'not resolved: 2 seeds (3 needed)'
        >>> verdict(Interval(1.0, 1.0, 1.0, 4), "linear", "step")
        'not resolved: every difference equal'
    """
    if interval is None:
        return "no common seed"
    if interval.low is None or interval.high is None:
        return "one seed: no interval"
    if interval.n < RESOLVED_FROM:
        return f"not resolved: {interval.n} seeds ({RESOLVED_FROM} needed)"
    if interval.low == interval.high:
        return "not resolved: every difference equal"
    if interval.resolved:
        return f"{first} ahead" if interval.low > 0 else f"{second} ahead"
    return "within noise"


def best_lr(by_lr: Mapping[float | None, Sequence[float]]) -> tuple[float | None, bool]:
    """The base LR (``by_lr``: LR -> each seed's metric) with the highest mean, and whether it is
    the smallest or largest of 2 or more LRs (the search was not wide enough).

    Example:
        >>> best_lr({0.01: [30.0, 31.0], 0.03: [35.0, 36.0], 0.1: [33.0]})
        (0.03, False)
        >>> best_lr({0.01: [30.0], 0.03: [35.0]})
        (0.03, True)
    """
    scored = {lr: statistics.fmean(v) for lr, v in by_lr.items() if v}
    if not scored:
        raise ValueError("no finished runs to choose a base LR from")
    lr = max(scored, key=lambda k: scored[k])
    grid = sorted(k for k in by_lr if k is not None)
    edge = lr is not None and len(grid) >= 2 and lr in (grid[0], grid[-1])
    return lr, edge

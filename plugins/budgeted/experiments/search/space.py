"""What a search searches and what it may spend: the base-LR lattice, the LR range, the target
budget and the search budget (``budgeted-search``'s ``--lr-range``, ``--budget``,
``--search-budget``), each checked in one line (:class:`~budgeted.errors.SweepError`).

Base LRs live on one lattice, eight points a decade (:data:`MANTISSAS` times a power of ten:
``10 ** (k / 8)`` to two digits, with 3 for 3.2 so that the half-decades are the usual 1-3-10),
so that the cells of every search, rung and method meet in the same folders and read as a sweep's
grid (the paper grid's 0.03, 0.1, 0.3 and 1 among them)::

    lattice(k) = MANTISSAS[k % 8] * 10 ** (k // 8)      # lattice(-8) = 0.1, lattice(-4) = 0.3

Example:
    >>> lr_grid(0.01, 1.0), snap(0.29), lattice_step(0.1, -1)
    ([0.01, 0.03, 0.1, 0.3, 1.0], 0.3, 0.075)
    >>> SearchBudget.parse("3x", target_iters=172).iters, SearchBudget.parse("500", 172).runs
    (516, 2.9069767441860463)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import SweepError
from ...schedules.clock import parse_duration

__all__ = [
    "MANTISSAS", "PER_DECADE", "SearchBudget", "lattice_index", "lattice_step", "lr_grid",
    "parse_lr_range", "snap",
]  # fmt: skip

MANTISSAS = (1.0, 1.3, 1.8, 2.4, 3.0, 4.2, 5.6, 7.5)
"""The lattice's points in one decade."""
PER_DECADE = len(MANTISSAS)


def _at(k: int) -> float:
    """The lattice point of index ``k``."""
    return float(f"{MANTISSAS[k % PER_DECADE]}e{k // PER_DECADE}")


def lattice_index(lr: float) -> int:
    """The index of the lattice point nearest ``lr`` in log scale.

    >>> lattice_index(1.0), lattice_index(0.1), lattice_index(0.031)
    (0, -8, -12)
    """
    decade = math.floor(math.log10(lr))
    ks = range(PER_DECADE * decade - 1, PER_DECADE * (decade + 1) + 1)
    return min(ks, key=lambda k: abs(math.log10(_at(k)) - math.log10(lr)))


def snap(lr: float) -> float:
    """``lr`` moved to the nearest lattice point."""
    return _at(lattice_index(lr))


def lattice_step(lr: float, steps: int) -> float:
    """The lattice point ``steps`` eighths of a decade from ``lr``'s (negative: lower)."""
    return _at(lattice_index(lr) + steps)


def lr_grid(low: float, high: float, per_decade: int = 2) -> list[float]:
    """The lattice points from ``low`` to ``high`` (both snapped), ``per_decade`` a decade
    (2: half-decades; 1: decades), always both ends.

    >>> lr_grid(0.003, 0.3, per_decade=1), lr_grid(0.1, 0.1)
    ([0.003, 0.03, 0.3], [0.1])
    """
    first, last = lattice_index(low), lattice_index(high)
    stride = PER_DECADE // per_decade
    ks = list(range(first, last + 1, stride))
    if ks[-1] != last:
        ks.append(last)
    return [_at(k) for k in ks]


def parse_lr_range(texts: list[str]) -> tuple[float, float]:
    """``--lr-range LO HI``: two positive numbers, ``LO <= HI``; :class:`SweepError`."""
    values = []
    for text in texts:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise SweepError(f"--lr-range value {text!r} is not a positive number; allowed: "
                             "--lr-range LO HI, e.g. --lr-range 0.01 1")  # fmt: skip
        values.append(value)
    low, high = values
    if low > high:
        raise SweepError(f"--lr-range {texts[0]} {texts[1]} is inverted; allowed: LO <= HI, "
                         f"e.g. --lr-range {texts[1]} {texts[0]}")  # fmt: skip
    return low, high


@dataclass(frozen=True)
class SearchBudget:
    """What a search may spend: training iterations (``iters``; ``Nx``: N target runs' worth) or
    wall-clock seconds (``seconds``); ``runs`` says either as target runs, where known."""

    text: str
    iters: int | None
    seconds: float | None
    target_iters: int

    @property
    def runs(self) -> float:
        """The iterations as a multiple of one target run (``inf`` for a time budget)."""
        return math.inf if self.iters is None else self.iters / self.target_iters

    @classmethod
    def parse(cls, text: str, target_iters: int) -> SearchBudget:
        """``Nx`` (N target runs), ``N`` (iterations) or a duration (``90m``, ``2h``, ``3600s``):
        at least one target run's iterations; :class:`SweepError`.

        >>> SearchBudget.parse("0.5x", 172)
        Traceback (most recent call last):
        budgeted.errors.SweepError: --search-budget 0.5x is smaller than one target run (172 iterations); allowed: at least 1x (e.g. 4x), 172 iterations or more, or a duration (e.g. 2h)
        """  # noqa: E501
        text = str(text).strip()
        allowed = (f"allowed: at least 1x (e.g. 4x), {target_iters} iterations or more, or a "
                   "duration (e.g. 2h)")  # fmt: skip
        iters: int | None = None
        seconds: float | None = None
        try:
            if text.endswith("x"):
                runs = float(text[:-1])
                if not math.isfinite(runs):
                    raise ValueError
                iters = math.floor(runs * target_iters + 1e-9)
            elif text.isascii() and text.isdigit():
                iters = int(text)
            else:
                seconds = parse_duration(text)
        except (ValueError, OverflowError):
            raise SweepError(f"--search-budget {text!r} is invalid; {allowed}") from None
        if iters is not None and iters < target_iters:
            raise SweepError(f"--search-budget {text} is smaller than one target run "
                             f"({target_iters} iterations); {allowed}")  # fmt: skip
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise SweepError(f"--search-budget {text} is invalid; {allowed}")
        return cls(text, iters, seconds, target_iters)

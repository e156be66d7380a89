"""The search methods, each a rule for the next cells given the trials so far and the budget left
(:data:`METHODS`), the trials made in the search's Optuna study:

- ``ladder`` (the default): complete budget-aware runs up a ladder of budgets, the best LR's trend
  extrapolated to the target (:mod:`.ladder`); fair to budget-aware schedules.
- ``asha``: the anchors' way, for comparison: Optuna's TPE sampler proposes (schedule, LR) runs
  at the target budget, each validated every ``T / 16`` iterations, and Optuna's
  ``SuccessiveHalvingPruner`` (reduction factor 4) stops those whose intermediate value trails, as
  ASHA / Hyperband do; blind to where a budget-aware schedule is in its decay.
- ``random``: Optuna's random sampler, complete runs at the target budget, as many as fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .ladder import ETA, Cell, Ladder, Trial

__all__ = ["ASHA_VALIDATIONS", "METHODS", "Proposer", "lr_text"]

ASHA_VALIDATIONS = 16
"""``asha``: validations per target run (its pruner's smallest resource is one of them)."""


def lr_text(lr: float) -> float:
    """A sampled LR as its cell takes it: three significant digits."""
    return float(f"{lr:.3g}")


@dataclass
class Proposer:
    """What a method needs to propose cells.

    Args:
        method: one of :data:`METHODS`.
        target: the target budget (a fraction); ``target_iters`` its iterations.
        full_iters, warmup: the family's full schedule and warmup.
        schedules: the arms to choose among; ``low``, ``high``: the LR range.
        budget_iters: the search budget in iterations (None: a time budget, ``runs`` then the
            ladder's budget in target runs once the first run timed it).
        seed: the search seed (each cell's seed, and the samplers').
    """

    method: str
    target: float
    target_iters: int
    full_iters: int
    warmup: int
    schedules: tuple[str, ...]
    low: float
    high: float
    budget_iters: int | None
    seed: int

    def ladder(self, runs: float) -> Ladder:
        """The ladder a budget of ``runs`` target runs buys."""
        return Ladder(self.target, self.full_iters, self.warmup, self.schedules, self.low,
                      self.high, runs, self.seed)  # fmt: skip

    def sampler(self) -> Any:
        """The Optuna sampler of ``asha`` (TPE) and ``random``; None for the ladder (its cells
        are enqueued)."""
        import optuna

        if self.method == "asha":
            return optuna.samplers.TPESampler(seed=self.seed)
        if self.method == "random":
            return optuna.samplers.RandomSampler(seed=self.seed)
        return None

    def pruner(self) -> Any:
        """``asha``'s successive-halving pruner over iterations (its first rung one validation)."""
        import optuna

        if self.method != "asha":
            return optuna.pruners.NopPruner()
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=self.validate_every(), reduction_factor=ETA
        )

    def validate_every(self) -> int | None:
        """Iterations between the validations of an ``asha`` run (None for the others)."""
        if self.method != "asha":
            return None
        return max(1, self.target_iters // ASHA_VALIDATIONS)

    def next_cells(
        self, trials: Sequence[Trial], running: int, spent: int, runs: float
    ) -> list[Cell | None]:
        """The next cells: the ladder's (see :meth:`Ladder.next_cells`), or for ``asha`` and
        ``random`` one None per target run that may start now (its schedule and LR the sampler's,
        asked by the caller). ``running``: trials under way; ``spent``: iterations trained so
        far; ``runs``: the budget in target runs (a time budget: as converted)."""
        if self.method == "ladder":
            return list(self.ladder(runs).next_cells(trials)) if not running else []
        left = runs * self.target_iters - spent - running * self.target_iters
        return [None] * max(0, math.floor(left / self.target_iters + 1e-9))


METHODS = ("ladder", "asha", "random")
"""Every ``--method``, the default first."""

"""LazyConfig (python config) support: ``lr_multiplier`` built from the core.

In a LazyConfig, ``lr_multiplier`` is an fvcore ``ParamScheduler`` that Detectron2's
``hooks.LRScheduler`` calls with ``where = iteration / train.max_iter``::

    lr_multiplier = L(BudgetParamScheduler)(
        schedule="linear", total_iters="${train.max_iter}", warmup_iters=500
    )

:class:`BudgetParamScheduler` returns ``m(where * total_iters)``, ``m`` the core's
:class:`~budgeted.core.BudgetSchedule`. ``tools/lazyconfig_train_net.py`` turns it into a
:class:`~budgeted.detectron2.BudgetLRScheduler` (via :func:`build_lazy_lr_scheduler`) so the
budget is checkpointed and a resume with another budget is refused, as with yaml configs.
"""

from __future__ import annotations

from typing import Any

import torch
from fvcore.common.param_scheduler import ParamScheduler

from ..core import BudgetSchedule
from .solver import BudgetConfigError, BudgetLRScheduler

__all__ = ["BudgetParamScheduler", "build_lazy_lr_scheduler"]


class BudgetParamScheduler(ParamScheduler):
    """fvcore ``ParamScheduler``: ``where`` in [0, 1) -> ``m(where * total_iters)``."""

    def __init__(
        self,
        schedule: str = "linear",
        total_iters: int = 90000,
        warmup_iters: int = 500,
        warmup_factor: float = 0.001,
        warmup_method: str = "linear",
        **params: Any,
    ) -> None:
        self.budget = BudgetSchedule(
            schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
        )

    def __call__(self, where: float) -> float:
        return self.budget(where * self.budget.total)


def build_lazy_lr_scheduler(
    optimizer: torch.optim.Optimizer, multiplier: Any, max_iter: int
) -> Any:
    """The scheduler for ``hooks.LRScheduler``: a :class:`BudgetLRScheduler` for a
    :class:`BudgetParamScheduler` (its ``total_iters`` must be ``max_iter``), else ``multiplier``
    unchanged (Detectron2 wraps any other ``ParamScheduler`` itself)."""
    if not isinstance(multiplier, BudgetParamScheduler):
        return multiplier
    b = multiplier.budget
    if b.total != max_iter:
        raise BudgetConfigError(
            f"lr_multiplier.total_iters={b.total} differs from train.max_iter={max_iter}; "
            'allowed: equal (write total_iters="${train.max_iter}")'
        )
    return BudgetLRScheduler.from_schedule(optimizer, b)

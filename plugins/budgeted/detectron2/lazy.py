"""LazyConfig (python config) support: ``lr_multiplier`` built from the core.

In a LazyConfig, ``lr_multiplier`` is an fvcore ``ParamScheduler`` that Detectron2's
``hooks.LRScheduler`` calls with ``where = iteration / train.max_iter``::

    from detectron2.config import LazyCall as L
    from budgeted.detectron2.lazy import BudgetLRMultiplier

    lr_multiplier = L(BudgetLRMultiplier)(
        schedule="linear", total_iters="${train.max_iter}", warmup_iters=500
    )

:class:`BudgetLRMultiplier` returns ``m(where * total_iters)``, ``m`` the core's
:class:`~budgeted.schedules.BudgetSchedule`. ``tools/lazyconfig_train_net.py`` turns it into a
:class:`~budgeted.detectron2.BudgetLRScheduler` (via :func:`build_lazy_lr_scheduler`) so the
budget is checkpointed and a resume with another budget is refused, as with yaml configs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from fvcore.common.param_scheduler import ParamScheduler

from ..schedules import BudgetSchedule, name_keys
from .solver import BudgetConfigError, BudgetLRScheduler

__all__ = ["BudgetLRMultiplier", "LazyBudgetLRScheduler", "build_lazy_lr_scheduler"]


class BudgetLRMultiplier(ParamScheduler):
    """fvcore ``ParamScheduler`` for a LazyConfig's ``lr_multiplier``: ``where`` in [0, 1) ->
    ``m(where * total_iters)``, ``m`` the core's budget schedule.

    Args:
        schedule (str): a registered schedule name. Defaults to ``"linear"``.
        total_iters (int): the budget in iterations; write ``"${train.max_iter}"``.
        warmup_iters (int): warmup length in iterations. Defaults to 500.
        warmup_factor (float): the multiplier at the first warmup iteration. Defaults to 0.001.
        warmup_method (str): ``"linear"`` or ``"constant"``. Defaults to ``"linear"``.
        **params: the schedule's parameters (``eta=0.1`` for cosine, ...).

    Example:
        >>> mult = BudgetLRMultiplier("linear", total_iters=900, warmup_iters=50)
        >>> mult(0.5)  # iteration 450: (450 - 50) / (900 - 50) of the decay done
        0.5294117647058824
    """

    def __init__(
        self,
        schedule: str = "linear",
        total_iters: int = 90000,
        warmup_iters: int = 500,
        warmup_factor: float = 0.001,
        warmup_method: str = "linear",
        **params: Any,
    ) -> None:
        try:
            self.budget = BudgetSchedule(
                schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
            )
        except ValueError as err:
            raise BudgetConfigError(name_keys(str(err), self.KEYS)) from None

    KEYS: ClassVar[dict[str, str]] = {
        "total": "lr_multiplier.total_iters",
        "warmup": "lr_multiplier.warmup_iters",
        "warmup_factor": "lr_multiplier.warmup_factor",
        "warmup_method": "lr_multiplier.warmup_method",
    }
    """The LazyConfig keys a budget's error messages name."""

    def __call__(self, where: float) -> float:
        return self.budget(where * self.budget.total)


class LazyBudgetLRScheduler(BudgetLRScheduler):
    """:class:`~budgeted.detectron2.BudgetLRScheduler` whose resume message names the
    LazyConfig's keys (``train.max_iter``, ``lr_multiplier.*``)."""

    RESUME_NAMES: ClassVar[dict[str, str]] = {
        "total": "train.max_iter",
        "warmup": "lr_multiplier.warmup_iters",
        "warmup_factor": "lr_multiplier.warmup_factor",
        "warmup_method": "lr_multiplier.warmup_method",
        "schedule": "lr_multiplier.schedule",
    }
    BASE_LR_KEY: ClassVar[str] = "optimizer.lr"
    RESUME_FIX: ClassVar[str] = (
        "resume with the checkpoint's budget (its train.max_iter, warmup, schedule and GPU "
        "count), or start a new run from its weights: train.init_checkpoint=<checkpoint>, no "
        "--resume, another train.output_dir"
    )


def build_lazy_lr_scheduler(
    optimizer: torch.optim.Optimizer, multiplier: Any, max_iter: int
) -> Any:
    """The scheduler for ``hooks.LRScheduler`` of a LazyConfig training loop.

    Args:
        optimizer (torch.optim.Optimizer): the optimizer.
        multiplier: the instantiated ``lr_multiplier``.
        max_iter (int): ``train.max_iter``.

    Returns:
        A :class:`LazyBudgetLRScheduler` for a :class:`BudgetLRMultiplier` (its ``total_iters``
        must be ``max_iter``), else ``multiplier`` unchanged (Detectron2 wraps any other
        ``ParamScheduler`` itself).

    Raises:
        BudgetConfigError: ``total_iters`` differs from ``train.max_iter`` (one line).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> mult = BudgetLRMultiplier("linear", total_iters=40, warmup_iters=3)
        >>> type(build_lazy_lr_scheduler(opt, mult, 40)).__name__
        'LazyBudgetLRScheduler'
    """
    if not isinstance(multiplier, BudgetLRMultiplier):
        return multiplier
    b = multiplier.budget
    if b.total != max_iter:
        raise BudgetConfigError(
            f"lr_multiplier.total_iters={b.total} differs from train.max_iter={max_iter}; "
            'allowed: equal (write total_iters="${train.max_iter}")'
        )
    return LazyBudgetLRScheduler.from_schedule(optimizer, b)

"""What a trainer callback trains under: one schedule over a budget of optimizer steps or of
training seconds, decided once for every framework whose trainer takes callbacks (Lightning's
``budgeted.lightning.BudgetCallback``, the Hugging Face ``budgeted.transformers.BudgetCallback``).

A :class:`TrainerBudget` checks the callback's arguments when it is built (one line each, naming
the callback), says how many steps the budget is for a trainer of a given length
(:meth:`TrainerBudget.steps`), builds the LR scheduler (:class:`~budgeted.pytorch.BudgetLR`, or
:class:`~budgeted.pytorch.BudgetTimeLR` on a clock every rank shares) and words the run's ends: a
deadline reached, a time budget that ended before its schedule decayed, a non-finite loss. The
callbacks only say when their trainer calls them.

Example:
    >>> budget = TrainerBudget("MyCallback", "cosine", fraction=0.25, warmup_iters=0)
    >>> budget.steps(1000, "max_steps")  # a quarter of the trainer's length
    250
    >>> TrainerBudget("MyCallback", total_iters=10, time=60)
    Traceback (most recent call last):
    budgeted.errors.BudgetConfigError: MyCallback: total_iters and time given; allowed: one of \
total_iters=, fraction= (of full_iters=, else of the trainer's length), time= (or none: the \
trainer's length)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch.optim import Optimizer

from .control.stops import NON_FINITE, Deadline, base_lr_of, diverged, loss_code
from .errors import BudgetConfigError, Diverged
from .pytorch import BudgetLR, BudgetTimeLR
from .safety.ranks import agree_max, broadcast_from_rank0, world_size
from .schedules import (
    TIME_RESUME_POLICIES,
    TimeBudget,
    TrainingClock,
    budget_iters,
    check_on_resume,
    parse_arm,
    parse_duration,
    whole_number,
)
from .schedules.contract import DEFAULTS

__all__ = ["TrainerBudget"]


class TrainerBudget:
    """A callback's schedule and budget, checked once.

    Args:
        owner: the callback, as each of its lines begins (``"BudgetCallback"``).
        schedule: any registered schedule, or ``NAME:KEY=VALUE,...`` (``"wsd:decay=sqrt"``).
        total_iters: the budget in optimizer steps; or
        fraction: of ``full_iters`` (``budgeted.budget_iters``), else of the trainer's length; or
        time: a budget of training seconds (``"90m"``); none of them: the trainer's length.
        warmup_iters, warmup_factor, warmup_method: the warmup, as ``BudgetLR`` takes it.
        params: the schedule's parameters, beside any in ``schedule``.
        on_resume: ``"refuse"``, ``"replan"`` or ``"branch"`` (a time budget: the first two).
    """

    def __init__(
        self,
        owner: str,
        schedule: str = "linear",
        *,
        total_iters: int | None = None,
        fraction: float | None = None,
        full_iters: int | None = None,
        time: float | str | None = None,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        params: Mapping[str, Any] | None = None,
        on_resume: str = "refuse",
    ) -> None:
        self.owner = owner
        given = [k for k, v in (("total_iters", total_iters), ("fraction", fraction),
                                ("time", time)) if v is not None]  # fmt: skip
        if len(given) > 1 or (full_iters is not None and fraction is None):
            what = " and ".join(given) if len(given) > 1 else "full_iters without fraction"
            raise BudgetConfigError(
                f"{owner}: {what} given; allowed: one of total_iters=, fraction= (of "
                "full_iters=, else of the trainer's length), time= (or none: the trainer's length)"
            )
        try:
            self.name, arm = parse_arm(schedule)
            self.params = {**arm, **(params or {})}
            self.seconds = None if time is None else parse_duration(time)
            policies = () if time is None else (TIME_RESUME_POLICIES,)
            self.on_resume = check_on_resume(on_resume, "on_resume", *policies)
            self.warmup = {"warmup_iters": warmup_iters, "warmup_factor": warmup_factor,
                           "warmup_method": warmup_method}  # fmt: skip
            TimeBudget(self.name, 1.0, params=dict(self.params), **self.warmup)  # every name
            self.total_iters = None if total_iters is None else whole_number(
                "total_iters", total_iters, least=1)  # fmt: skip
            self.fraction, self.full_iters = fraction, full_iters
            if fraction is not None:
                budget_iters(fraction=fraction, full_iters=full_iters or 10**12)  # its range
        except (TypeError, ValueError) as err:
            raise BudgetConfigError(f"{owner}: {err}") from None

    def steps(self, trainer_steps: float, limits: str) -> int:
        """The budget in optimizer steps for a trainer that stops after ``trainer_steps``
        (``math.inf``: no limit); ``limits`` names the trainer's settings of its length in the
        one-line refusal of a budget longer than the trainer, or of no budget at all."""
        steps: float = trainer_steps if self.total_iters is None else self.total_iters
        if self.fraction is not None:
            full = self.full_iters or trainer_steps
            if math.isfinite(full):
                steps = budget_iters(fraction=self.fraction, full_iters=full)
        if not math.isfinite(steps):
            raise BudgetConfigError(
                f"{self.owner}: the trainer sets no length ({limits}) and the callback no budget; "
                "allowed: a trainer length, or total_iters=, fraction= with full_iters=, time="
            )
        if steps > trainer_steps:
            raise BudgetConfigError(
                f"{self.owner}: a budget of {steps} steps is longer than the trainer's "
                f"{int(trainer_steps)} ({limits}); allowed: a trainer of at least {steps} steps"
            )
        return int(steps)

    def clock(self) -> TrainingClock:
        """A training clock every rank agrees on (rank 0's)."""
        return TrainingClock(share=broadcast_from_rank0 if world_size() > 1 else None)

    def scheduler(
        self,
        optimizer: Optimizer,
        steps: int | None = None,
        *,
        seconds: float | None = None,
        clock: TrainingClock | None = None,
    ) -> BudgetLR | BudgetTimeLR:
        """The LR scheduler of ``optimizer``: a :class:`BudgetLR` over ``steps``, or over the
        time budget (``seconds``, else the callback's) a :class:`BudgetTimeLR` on ``clock`` (a new
        one if None)."""
        seconds = self.seconds if seconds is None else seconds
        if seconds is None:
            return BudgetLR(optimizer, self.name, steps, on_resume=self.on_resume,
                            **self.warmup, **self.params)  # fmt: skip
        budget = TimeBudget(self.name, seconds, params=dict(self.params), **self.warmup)
        return BudgetTimeLR(optimizer, budget, clock or self.clock(), on_resume=self.on_resume)

    @staticmethod
    def deadline_line(scheduler: Any, step: int, tail: str) -> str | None:
        """The line of a time budget's deadline reached after ``step`` steps; None before it
        (or without a time budget)."""
        if not isinstance(scheduler, BudgetTimeLR) or not scheduler.done():
            return None
        clock = scheduler.clock
        return Deadline(scheduler.budget.seconds, clock).reached_line(step, clock.elapsed, "", tail)

    @staticmethod
    def undecayed_line(scheduler: Any, fix: str) -> str | None:
        """The line of a time budget that ended before its schedule decayed (``fix``: what to
        change); None where it decayed, or without a time budget."""
        if not isinstance(scheduler, BudgetTimeLR) or scheduler.last_trained_elapsed is None:
            return None
        why = scheduler.budget.shortfall(scheduler.last_epoch - 1, scheduler.last_trained_elapsed)
        if why is None:
            return None
        seconds = scheduler.budget.seconds
        return f"time budget of {seconds:g} s ended before the schedule decayed: {why}; {fix}"

    @staticmethod
    def diverged(
        loss: Any, iteration: int, optimizer: Optimizer, scheduler: Any, advice: str
    ) -> Diverged | None:
        """The one-line stop of a non-finite ``loss`` (a tensor or a mapping of them; agreed by
        every rank) at ``iteration``, naming the base LR; None where it is finite."""
        losses = loss if isinstance(loss, Mapping) else {"loss": loss}
        what = NON_FINITE.get(agree_max(loss_code(losses)))
        if what is None:
            return None
        bases = getattr(scheduler, "base_lrs", None)
        return diverged(what, iteration, base_lr_of(bases, optimizer.param_groups), advice)

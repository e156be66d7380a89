"""Plain-PyTorch adapter: :class:`BudgetLR`, stepped once per iteration."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from torch import Tensor
from torch.optim import Optimizer

from .compat import CheckpointedLRScheduler, set_last_lr
from .errors import BudgetConfigError
from .schedules import (
    BudgetMismatchError,
    BudgetReplanError,
    BudgetSchedule,
    TimeBudget,
    TrainingClock,
    check_on_resume,
)
from .schedules.contract import DEFAULTS
from .schedules.registry import Rule
from .schedules.state import ELAPSED, FACTOR, STEPS, base_values, check_state
from .schedules.units import whole_number

__all__ = ["BudgetLR", "BudgetMismatchError", "BudgetReplanError", "BudgetTimeLR"]


class BudgetLR(CheckpointedLRScheduler):
    """``lr = base_lr * m(t)`` with ``m`` a :class:`~budgeted.schedules.BudgetSchedule`.

    A ``torch.optim.lr_scheduler.LRScheduler`` (through the class Detectron2's
    ``hooks.LRScheduler`` checkpoints: :data:`budgeted.compat.CheckpointedLRScheduler`).

    Call ``step()`` once per iteration, after ``optimizer.step()``. ``t`` is the number of
    ``step()`` calls so far (``last_epoch`` in torch's terms), so the first iteration trains at
    ``base_lr * warmup_factor`` and the budget ends after ``total_iters`` steps.

    ``total_iters`` and ``warmup_iters`` are whole numbers of steps (one-line
    :class:`~budgeted.errors.BudgetConfigError` otherwise).

    ``on_resume`` says what :meth:`load_state_dict` does with a checkpoint of another
    ``total_iters``: ``"refuse"`` (the default: a one-line :class:`BudgetMismatchError`) or
    ``"replan"``: the multiplier goes on from where the checkpoint left it and reaches the
    schedule's end at the new ``total_iters``
    (:meth:`budgeted.schedules.BudgetSchedule.replan`; one line is logged, and the re-plan is
    saved in :meth:`state_dict`, so a later resume is exact).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> first = BudgetLR(opt, "linear", 1000, warmup_iters=0)
        >>> for _ in range(500):
        ...     first.step()
        >>> longer = BudgetLR(opt, "linear", 2000, warmup_iters=0, on_resume="replan")
        >>> longer.load_state_dict(first.state_dict())
        >>> round(longer.get_last_lr()[0], 6)  # no jump: 0.1 x (1 - 500/1000)
        0.05
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedule: str,
        total_iters: int,
        *,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        last_epoch: int = -1,
        on_resume: str = "refuse",
        **params: Any,
    ) -> None:
        budget = BudgetSchedule(
            schedule,
            whole_steps(self, "total_iters", total_iters, least=1),
            whole_steps(self, "warmup_iters", warmup_iters),
            warmup_factor,
            warmup_method,
            params,
        )
        self._start(optimizer, budget, last_epoch, on_resume)

    def _start(
        self, optimizer: Optimizer, budget: BudgetSchedule, last_epoch: int, on_resume: str
    ) -> None:
        check_on_resume(on_resume)
        whole_steps(self, "total_iters", budget.total, least=1)
        whole_steps(self, "warmup_iters", budget.warmup)
        self.budget = budget
        self.on_resume = on_resume
        super().__init__(optimizer, last_epoch)

    @classmethod
    def from_schedule(
        cls,
        optimizer: Optimizer,
        budget: BudgetSchedule,
        last_epoch: int = -1,
        on_resume: str = "refuse",
    ) -> BudgetLR:
        """The scheduler of an already validated :class:`~budgeted.schedules.BudgetSchedule`,
        as it is (a re-planned budget keeps its re-plan)."""
        scheduler = cls.__new__(cls)
        BudgetLR._start(scheduler, optimizer, budget, last_epoch, on_resume)
        return scheduler

    def get_lr(self) -> list[float]:
        """The LR of each param group at step ``last_epoch`` (torch's ``step()`` sets them)."""
        check_group_count(self)
        factor = self.budget(self.last_epoch)
        return [base_lr * factor for base_lr in self.base_lrs]

    def step(self, epoch: None = None) -> None:
        """Advance one iteration (torch's ``step()``, without its deprecated epoch argument)."""
        if epoch is not None:
            raise ValueError(
                f"BudgetLR.step() takes no epoch (got {epoch!r}); it counts steps itself"
            )
        super().step()

    RESUME_NAMES: ClassVar[dict[str, str]] = {"total": "total_iters", "warmup": "warmup_iters"}
    """How the budget's state keys are named in this adapter's messages."""
    RESUME_FIX: ClassVar[str] = (
        "build the scheduler with the checkpoint's budget to resume, or start a new run to "
        "train with another budget"
    )

    LOGGER: ClassVar[str] = __name__
    """The logger of the re-plan line (adapters name one their framework's log files show)."""
    _NOT_STATE: ClassVar[tuple[str, ...]] = ("optimizer", "budget", "on_resume")

    def state_dict(self) -> dict[str, Any]:
        """torch's scheduler state plus ``budget``: :meth:`BudgetSchedule.state`."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}
        state["budget"] = self.budget.state()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume (:meth:`budgeted.schedules.BudgetSchedule.resume`): a checkpoint of another
        budget raises :class:`BudgetMismatchError`, unless ``on_resume="replan"`` and only the
        length differs; a re-plan that cannot be made raises :class:`BudgetReplanError`. A state
        that breaks a rule of :mod:`budgeted.schedules.state` (a step count, base LR or key no
        run writes) raises :class:`~budgeted.errors.BudgetResumeError`, changing nothing."""
        check_loaded_state(self, state_dict)
        state = {k: v for k, v in state_dict.items() if k not in self._NOT_STATE}
        self.budget, line = self.budget.resume(
            state_dict.get("budget"),
            at=state.get("last_epoch", 0),
            on_resume=self.on_resume,
            names=self.RESUME_NAMES,
            fix=self.RESUME_FIX,
        )
        if line is not None:
            logging.getLogger(self.LOGGER).warning(line)
        self.__dict__.update(state)
        if line is not None:  # the LR of the next iteration, from the re-planned budget
            lrs = [base * self.budget(self.last_epoch) for base in self.base_lrs]
            set_lrs(self.optimizer, lrs)
            set_last_lr(self, lrs)


def set_lrs(optimizer: Optimizer, lrs: list[Any]) -> None:
    """Each param group's ``lr`` set to its entry of ``lrs``, in place where it is a tensor (as
    torch's schedulers do); a one-line ``ValueError`` when the optimizer's groups are not the
    ones the scheduler was built for."""
    groups = optimizer.param_groups
    if len(groups) != len(lrs):
        raise _group_count_error(len(groups), len(lrs))
    for group, lr in zip(groups, lrs):
        set_group_lr(group, lr)


def set_group_lr(group: dict[str, Any], lr: Any) -> None:
    """``group["lr"] = lr``, in place where it is a tensor (never aliasing ``lr``)."""
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(float(lr))
    else:
        group["lr"] = lr


def check_group_count(scheduler: Any) -> None:
    """The optimizer still has the param groups ``scheduler`` was built for (one line if not)."""
    groups, built_for = len(scheduler.optimizer.param_groups), len(scheduler.base_lrs)
    if groups != built_for:
        raise _group_count_error(groups, built_for)


def _group_count_error(groups: int, built_for: int) -> ValueError:
    return ValueError(
        f"the optimizer has {groups} param groups, the scheduler was built for {built_for}; "
        "allowed: build the scheduler after the last add_param_group()"
    )


def whole_steps(scheduler: Any, key: str, value: Any, least: int = 0) -> int:
    """``value`` as an ``int`` if it is a whole number of steps ``>= least`` (a scheduler that
    counts steps has no budget of 1.5 of them), else a one-line
    :class:`~budgeted.errors.BudgetConfigError` naming ``key`` and the scheduler."""
    try:
        return whole_number(key, value, least=least)
    except BudgetConfigError as err:
        raise BudgetConfigError(f"{type(scheduler).__name__} counts steps: {err}") from None


def check_loaded_state(
    scheduler: Any, state_dict: Mapping[str, Any], optional: Mapping[str, Rule] | None = None
) -> None:
    """Refuse (one-line :class:`~budgeted.errors.BudgetResumeError`) a checkpoint's state of
    ``scheduler`` (a torch LR scheduler) that no run writes: a step count (``last_epoch``,
    ``_step_count``) that is not an integer >= 0, base LRs that are not one finite number >= 0
    per param group, a key that would replace one of the scheduler's methods or class
    attributes; ``optional`` adds rules for keys of its own."""
    cls = type(scheduler)
    check_state(
        state_dict,
        {"last_epoch": STEPS, "base_lrs": base_values(len(scheduler.optimizer.param_groups))},
        owner=cls.__name__,
        optional={"_step_count": STEPS, **(optional or {})},
        reserved={name for name in dir(cls) if name not in vars(scheduler)},
    )


def _budget_state(budget: BudgetSchedule) -> dict[str, Any]:
    """Deprecated: :meth:`BudgetSchedule.state`."""
    return budget.state()


class BudgetTimeLR(CheckpointedLRScheduler):
    """``lr = base_lr * m(i, e)`` over a wall-clock budget
    (:class:`budgeted.schedules.clock.TimeBudget`).

    ``i`` is the number of ``step()`` calls so far and ``e`` the training seconds the
    :class:`~budgeted.schedules.clock.TrainingClock` reports after them (the same on every rank):
    the warmup runs over the first ``warmup_iters`` steps, the decay over the seconds left after it.
    Call ``step()`` once per iteration, after ``optimizer.step()``; :meth:`done` says when the
    budget is spent (the training loop stops there). The budget and the clock are in
    :meth:`state_dict`: a resumed run goes on with the same clock and refuses another budget.

    Example:
        >>> import torch
        >>> from budgeted.schedules.clock import TimeBudget, TrainingClock
        >>> now = iter(float(t) for t in range(100))
        >>> clock = TrainingClock(now=lambda: next(now))
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> sched = BudgetTimeLR(opt, TimeBudget("linear", "10s", warmup_iters=0), clock)
        >>> clock.start()
        >>> while not sched.done():
        ...     opt.step()  # one second per iteration on this clock
        ...     sched.step()
        >>> sched.last_epoch, sched.get_last_lr()[0]
        (10, 0.0)
        >>> sched.budget.shortfall(sched.last_epoch - 1, sched.last_trained_elapsed) is None
        True

    :meth:`budgeted.schedules.clock.TimeBudget.shortfall` with the last iteration stepped past
    (``last_epoch - 1``) and ``last_trained_elapsed`` says whether the run ended decayed.
    """

    LOGGER: ClassVar[str] = __name__
    _NOT_STATE: ClassVar[tuple[str, ...]] = ("optimizer", "budget", "clock", "on_resume")
    _STATE_RULES: ClassVar[dict[str, Rule]] = {
        "last_trained_factor": FACTOR,
        "last_trained_elapsed": (lambda v: v is None or ELAPSED[0](v), f"None or {ELAPSED[1]}"),
    }

    def __init__(
        self,
        optimizer: Optimizer,
        budget: TimeBudget,
        clock: TrainingClock,
        last_epoch: int = -1,
        on_resume: str = "refuse",
    ) -> None:
        self.budget = budget
        self.clock = clock
        self.on_resume = on_resume
        self.last_trained_factor = 0.0  # the multiplier of the last iteration stepped past
        self.last_trained_elapsed: float | None = None  # the training seconds at its start
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        check_group_count(self)
        self._elapsed = self.clock.elapsed
        self._factor = self.budget.multiplier(max(self.last_epoch, 0), self._elapsed)
        return [base_lr * self._factor for base_lr in self.base_lrs]

    def step(self, epoch: None = None) -> None:
        """Advance one iteration: read the agreed clock, set the next iteration's LR."""
        if epoch is not None:
            raise ValueError(f"BudgetTimeLR.step() takes no epoch (got {epoch!r})")
        if self.last_epoch >= 0:  # not the call from __init__
            self.last_trained_factor = self._factor
            self.last_trained_elapsed = self._elapsed
            self.clock.tick(self.last_epoch + 1)
        super().step()

    def done(self) -> bool:
        """Whether the time budget is spent (the next iteration should not start)."""
        return self.budget.done(self.clock.elapsed)

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}
        state["time_budget"] = self.budget.state()
        state["clock"] = self.clock.state()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume the budget and the clock (:meth:`budgeted.schedules.clock.TimeBudget.resume`):
        another budget is refused, or with ``on_resume="replan"`` another ``seconds`` re-planned.
        A state that breaks a rule of :mod:`budgeted.schedules.state` (a step count, base LR,
        key or clock no run writes; a clock missing) raises
        :class:`~budgeted.errors.BudgetResumeError`, changing nothing."""
        check_loaded_state(self, state_dict, self._STATE_RULES)
        state = {k: v for k, v in state_dict.items() if k not in self._NOT_STATE}
        state.pop("time_budget", None)
        elapsed, line = self.budget.resume_from(
            state_dict, self.on_resume, owner=type(self).__name__
        )
        if line is not None:
            logging.getLogger(self.LOGGER).warning(line)
        self.clock.restore(elapsed)
        self.__dict__.update(state)
        lrs = self.get_lr()
        set_lrs(self.optimizer, lrs)
        set_last_lr(self, lrs)

"""Plain-PyTorch adapter: :class:`BudgetLR`, stepped once per iteration, and :class:`BudgetTimeLR`,
over a wall-clock budget: torch LR schedulers over the one budget engine
(:class:`~budgeted.control.engine.BudgetEngine`)."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from torch import Tensor
from torch.optim import Optimizer

from .compat import CheckpointedLRScheduler, torch_bookkeeping
from .control.engine import (
    BaseLRWords,
    BudgetEngine,
    ResumeWords,
    check_loaded,
    group_count_error,
    write_lrs,
)
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
from .schedules.state import ELAPSED, FACTOR, STEPS, base_values
from .schedules.units import whole_number

__all__ = ["BudgetLR", "BudgetMismatchError", "BudgetReplanError", "BudgetTimeLR"]


class EngineLR(CheckpointedLRScheduler):
    """A torch LR scheduler over a :class:`~budgeted.control.engine.BudgetEngine`: ``lr =
    base_lr * m`` per param group, ``m`` the engine's multiplier of step ``last_epoch``.

    A subclass says what ``m`` is (:meth:`next_multiplier`) and, in class attributes, the words
    of its refusals and where its lines go; state, resume and torch's bookkeeping are here
    (through :func:`budgeted.compat.torch_bookkeeping`: a step sets the LRs, nothing else).
    """

    RESUME_NAMES: ClassVar[dict[str, str]] = {"total": "total_iters", "warmup": "warmup_iters"}
    """How the budget's state keys are named in this adapter's messages."""
    RESUME_FIX: ClassVar[str] = (
        "build the scheduler with the checkpoint's budget to resume, or start a new run to "
        "train with another budget"
    )
    LOGGER: ClassVar[str] = __name__
    """The logger of the re-plan line (adapters name one their framework's log files show)."""
    BASE_LR_KEY: ClassVar[str | None] = None
    """The config key of the base LR: a loaded state of other base LRs is refused naming it,
    before anything is loaded (None: not checked)."""
    RESUME_ERROR: ClassVar[type[ValueError] | None] = None
    """The class every refusal of a loaded state is raised as (None: as the core raises it)."""
    APPLY_ON_LOAD: ClassVar[bool] = False
    """Whether a load sets the next iteration's LR (always where the plan changed)."""
    _NOT_STATE: ClassVar[tuple[str, ...]] = (
        "optimizer", "engine", "budget", "clock", "time_budget", "on_resume", "first_epoch",
        "tensor_lrs",
    )  # fmt: skip
    _STATE_RULES: ClassVar[dict[str, Rule]] = {}

    engine: BudgetEngine

    def _begin(
        self, optimizer: Optimizer, engine: BudgetEngine, last_epoch: int, on_resume: str
    ) -> None:
        self.engine = engine
        self.on_resume = on_resume
        self.tensor_lrs = any(isinstance(g["lr"], Tensor) for g in optimizer.param_groups)
        super().__init__(optimizer, last_epoch)
        self.first_epoch = self.last_epoch  # torch counts the step of its construction
        torch_bookkeeping(self, 1, self.get_last_lr())

    def next_multiplier(self) -> float:
        """The multiplier of the next iteration (step ``last_epoch``)."""
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        """The LR of each param group at step ``last_epoch``."""
        check_group_count(self)
        factor = self.next_multiplier()
        return [base_lr * factor for base_lr in self.base_lrs]

    def resume_words(self) -> ResumeWords:
        """This scheduler's words for the engine's resume decision (its class attributes)."""
        key, fix = self.BASE_LR_KEY, self.RESUME_FIX
        base_lrs = None
        if key is not None:
            base_lrs = BaseLRWords("base_lrs", "cannot resume: the checkpoint",
                                   "the LR scheduler's base_lrs", key, fix)  # fmt: skip
        owner = type(self).__name__
        return ResumeWords(self.RESUME_NAMES, fix, owner, self.RESUME_ERROR, base_lrs=base_lrs)

    def state_dict(self) -> dict[str, Any]:
        """torch's scheduler state plus the engine's (:meth:`BudgetEngine.state`)."""
        torch_bookkeeping(self, self.last_epoch - self.first_epoch + 1, self.get_last_lr())
        state = {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}
        state.update(self.engine.state())
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume through the engine: a state no run writes (a step count, base LR, key or clock,
        :mod:`budgeted.schedules.state`; base LRs other than this scheduler's where
        :attr:`BASE_LR_KEY` is set) is refused first, then the budget decided
        (:meth:`BudgetEngine.resume`): each refusal one line, changing nothing."""
        words, cls = self.resume_words(), type(self)
        check_loaded(
            state_dict, words, bases=self.base_lrs,
            rules={"last_epoch": STEPS, "base_lrs": base_values(len(self.optimizer.param_groups))},
            optional={"_step_count": STEPS, **self._STATE_RULES},
            reserved={n for n in dir(cls) if n not in vars(self) and n not in self._NOT_STATE},
        )  # fmt: skip
        state = {k: v for k, v in state_dict.items() if k not in self._NOT_STATE}
        decided = self.engine.resume(
            state_dict.get("budget"), at=state.get("last_epoch", 0), words=words,
            on_resume=self.on_resume, state=state_dict,
        )  # fmt: skip
        for line in (decided.time_line, decided.line):
            if line is not None:
                logging.getLogger(self.LOGGER).warning(line)
        steps = state.get("_step_count", self.last_epoch - self.first_epoch + 1)
        self.engine.adopt(decided)
        self.__dict__.update(state)
        self.first_epoch = self.last_epoch - steps + 1
        self.tensor_lrs = any(isinstance(g["lr"], Tensor) for g in self.optimizer.param_groups)
        if self.APPLY_ON_LOAD or decided.line is not None:  # the next iteration's LR, now
            write_lrs(self.optimizer.param_groups, "lr", self.base_lrs, self.next_multiplier())


class BudgetLR(EngineLR):
    """``lr = base_lr * m(t)`` with ``m`` a :class:`~budgeted.schedules.BudgetSchedule`.

    A ``torch.optim.lr_scheduler.LRScheduler`` (through the class Detectron2's
    ``hooks.LRScheduler`` checkpoints: :data:`budgeted.compat.CheckpointedLRScheduler`).

    Call ``step()`` once per iteration, after ``optimizer.step()``. ``t`` is the number of
    ``step()`` calls so far (``last_epoch`` in torch's terms), so the first iteration trains at
    ``base_lr * warmup_factor`` and the budget ends after ``total_iters`` steps. A step is a
    look-up in the engine's table and one write per param group.

    ``total_iters`` and ``warmup_iters`` are whole numbers of steps (one-line
    :class:`~budgeted.errors.BudgetConfigError` otherwise).

    ``on_resume`` says what :meth:`load_state_dict` does with a checkpoint of another
    ``total_iters``: ``"refuse"`` (the default: a one-line :class:`BudgetMismatchError`) or
    ``"replan"``: the multiplier goes on from where the checkpoint left it and reaches the
    schedule's end at the new ``total_iters``
    (:meth:`budgeted.schedules.BudgetSchedule.replan`; one line is logged, and the re-plan is
    saved in :meth:`state_dict`, so a later resume is exact); ``"branch"``: the new budget as it
    is, where it agrees with the checkpoint's over every iteration trained. A re-plan that
    cannot be made raises :class:`BudgetReplanError`.

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
        self._begin(optimizer, BudgetEngine(budget), last_epoch, on_resume)

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

    @property
    def budget(self) -> BudgetSchedule:
        """The plan: a :class:`~budgeted.schedules.BudgetSchedule` (the resumed one after a
        resume, with any re-plan)."""
        return self.engine.plan  # type: ignore[return-value]

    def next_multiplier(self) -> float:
        return self.engine.lookup(self.last_epoch)

    def get_last_lr(self) -> list[Any]:
        """The LR of each param group now (set by the last step or resume)."""
        factor = self.engine.lookup(self.last_epoch)
        return [base_lr * factor for base_lr in self.base_lrs]

    def step(self, epoch: None = None) -> None:
        """Advance one iteration: the next multiplier off the engine's table, one write per
        param group (torch's ``step()``, without its deprecated epoch argument)."""
        if epoch is not None:
            raise ValueError(
                f"BudgetLR.step() takes no epoch (got {epoch!r}); it counts steps itself"
            )
        t = self.last_epoch = self.last_epoch + 1
        engine = self.engine
        factor = engine.table[t - engine.low] if engine.low <= t < engine.high else engine.fill(t)
        groups, bases = self.optimizer.param_groups, self.base_lrs
        if self.tensor_lrs or len(groups) != len(bases):
            write_lrs(groups, "lr", bases, factor)
            return
        for group, base in zip(groups, bases):
            group["lr"] = base * factor


def check_group_count(scheduler: Any) -> None:
    """The optimizer still has the param groups ``scheduler`` was built for (one line if not)."""
    groups, built_for = len(scheduler.optimizer.param_groups), len(scheduler.base_lrs)
    if groups != built_for:
        raise group_count_error(groups, built_for)


def whole_steps(scheduler: Any, key: str, value: Any, least: int = 0) -> int:
    """``value`` as an ``int`` if it is a whole number of steps ``>= least`` (a scheduler that
    counts steps has no budget of 1.5 of them), else a one-line
    :class:`~budgeted.errors.BudgetConfigError` naming ``key`` and the scheduler."""
    try:
        return whole_number(key, value, least=least)
    except BudgetConfigError as err:
        raise BudgetConfigError(f"{type(scheduler).__name__} counts steps: {err}") from None


class BudgetTimeLR(EngineLR):
    """``lr = base_lr * m(i, e)`` over a wall-clock budget
    (:class:`budgeted.schedules.clock.TimeBudget`).

    ``i`` is the number of ``step()`` calls so far and ``e`` the training seconds the
    :class:`~budgeted.schedules.clock.TrainingClock` reports after them (the same on every rank):
    the warmup runs over the first ``warmup_iters`` steps, the decay over the seconds left after it.
    Call ``step()`` once per iteration, after ``optimizer.step()``; :meth:`done` says when the
    budget is spent (the training loop stops there). The budget and the clock are in
    :meth:`state_dict`: a resumed run goes on with the same clock and refuses another budget
    (or, with ``on_resume="replan"``, re-plans another ``seconds``).

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

    APPLY_ON_LOAD = True
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
        self.last_trained_factor = 0.0  # the multiplier of the last iteration stepped past
        self.last_trained_elapsed: float | None = None  # the training seconds at its start
        self.budget, self.clock = budget, clock  # the engine's: resumed in place
        self._begin(optimizer, BudgetEngine(time=budget, clock=clock), last_epoch, on_resume)

    def next_multiplier(self) -> float:
        self._elapsed = self.clock.elapsed
        self._factor = self.engine.multiplier(max(self.last_epoch, 0), self._elapsed)
        return self._factor

    def get_last_lr(self) -> list[Any]:
        """The LR of each param group now (set by the last step or resume)."""
        return [base_lr * self._factor for base_lr in self.base_lrs]

    def step(self, epoch: None = None) -> None:
        """Advance one iteration: read the agreed clock, set the next iteration's LR."""
        if epoch is not None:
            raise ValueError(f"BudgetTimeLR.step() takes no epoch (got {epoch!r})")
        if self.last_epoch >= 0:  # not the call from __init__
            self.last_trained_factor = self._factor
            self.last_trained_elapsed = self._elapsed
            self.clock.tick(self.last_epoch + 1)
        self.last_epoch += 1
        write_lrs(self.optimizer.param_groups, "lr", self.base_lrs, self.next_multiplier())

    def done(self) -> bool:
        """Whether the time budget is spent (the next iteration should not start)."""
        return self.budget.done(self.clock.elapsed)

"""MMEngine parameter schedulers computed by :class:`budgeted.schedules.BudgetSchedule`.

One entry does warmup and decay: ``value = base_value * m(t)``, ``t`` the steps since ``begin``
(MMEngine's ``last_step``), over a budget of ``end - begin`` steps, in closed form from the
initial value (not to be chained with another scheduler of the same parameter). Every schedule
registered in the core becomes ``Budget<Label>LR`` here (``linear`` -> ``BudgetLinearLR``), in
``PARAM_SCHEDULERS`` and as an attribute of this module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, ClassVar

from mmengine.logging import print_log
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, OptimizerType
from mmengine.registry import PARAM_SCHEDULERS
from mmengine.runner.loops import EpochBasedTrainLoop

from ..control.engine import BaseLRWords, BudgetEngine, ResumeWords, check_loaded
from ..control.plan import adapter_names
from ..errors import BudgetConfigError
from ..schedules import (
    DEFAULTS,
    BudgetMismatchError,
    BudgetSchedule,
    ScheduleInfo,
    TimeBudget,
    TrainingClock,
    check_on_resume,
)
from .base_lrs import LR_KEY
from .compat import GLOBAL_STEP, ParamScheduler, set_last_value
from .scheduler_checks import (
    REPLAN_NAMES,
    RESUME_NAMES,
    check_at_first_step,
    check_epoch_arguments,
    check_loop_end,
    check_no_overlap,
    check_param_name,
    check_resumed,
    check_scheduler_arguments,
    resume_budget,
    resume_fix,
    resume_step,
)

__all__ = [
    "NAMED_SCHEDULERS", "RESUME_NAMES", "BudgetConfigError", "BudgetMismatchError",
    "BudgetParamScheduler", "BudgetScheduleLR", "check_loop_end", "resume_step", "scheduler_types"
]  # fmt: skip


@PARAM_SCHEDULERS.register_module()
class BudgetParamScheduler(ParamScheduler):
    """Budget-aware schedule of any optimizer parameter ``param_name`` (``lr``, ``momentum``...).

    The value at step ``begin + t`` is ``initial_value * m(t)`` with ``m`` the core's
    :class:`~budgeted.schedules.BudgetSchedule` over ``end - begin`` steps. Built by MMEngine's
    runner from a config, ``end`` must be the train loop's ``max_iters`` (leave it out and the
    runner fills it); a resumed checkpoint must hold the same budget (:meth:`check_resume`).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
        >>> sched = BudgetParamScheduler(
        ...     opt, "momentum", schedule="cosine", end=100, warmup_iters=0, by_epoch=False
        ... )
        >>> opt.param_groups[0]["momentum"]
        0.9
    """

    fixed_schedule: ClassVar[str | None] = None
    """The schedule of a ``Budget<Label>LR`` class; None where ``schedule=`` chooses."""

    def __init__(
        self,
        optimizer: OptimizerType,
        param_name: str,
        schedule: str | None = None,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        begin: int = 0,
        end: int = INF,
        last_step: int = -1,
        by_epoch: bool | None = None,
        verbose: bool = False,
        on_resume: str | None = None,
        **params: Any,
    ) -> None:
        name = type(self).__name__
        self.on_resume = self._checked_on_resume(on_resume or "refuse", "on_resume")
        self._on_resume_given = on_resume is not None
        schedule = self._resolved_schedule(schedule)
        check_scheduler_arguments(
            name, schedule, params, begin=begin, end=end, warmup_iters=warmup_iters,
            by_epoch=by_epoch, warmup_factor=warmup_factor, warmup_method=warmup_method,
        )  # fmt: skip
        check_param_name(name, optimizer, param_name)
        try:
            plan = BudgetSchedule(
                schedule, end - begin, warmup_iters, warmup_factor, warmup_method, params
            )
        except ValueError as err:
            raise BudgetConfigError(f"{name}: {err}") from None
        self.engine = BudgetEngine(plan)
        self._loaded = False  # load_state_dict was called (the runner resumed this scheduler)
        self._epochs: tuple[int, int] | None = None  # (end, epoch length) of an epoch entry
        self._checked = True  # MMEngine's __init__ steps once: no runner to check against yet
        super().__init__(
            optimizer,
            param_name=param_name,
            begin=begin,
            end=end,
            last_step=last_step,
            by_epoch=True if by_epoch is None else by_epoch,  # MMEngine's default
            verbose=verbose,
        )
        self._checked = False  # checked by a runner (bind), else at the first step

    def _checked_on_resume(self, policy: Any, key: str) -> str:
        """``policy``, checked (:func:`~budgeted.schedules.check_on_resume`)."""
        try:
            check_on_resume(policy, key)
        except BudgetConfigError as err:
            raise BudgetConfigError(f"{type(self).__name__}: {err}") from None
        return policy

    def _resolved_schedule(self, schedule: str | None) -> str:
        """A ``Budget<Label>LR`` class's own schedule, else ``schedule`` (default linear)."""
        if self.fixed_schedule is None:
            return "linear" if schedule is None else schedule
        if schedule not in (None, self.fixed_schedule):
            raise BudgetConfigError(
                f"{type(self).__name__} always uses the {self.fixed_schedule!r} schedule, got "
                f"schedule={schedule!r}; use BudgetScheduleLR(schedule={schedule!r}) instead"
            )
        return self.fixed_schedule

    def bind(self, loop: Any, budget_on_resume: Any = None) -> None:
        """Follow the runner that trains this scheduler, before it resumes or trains: its train
        loop (``runner.train_loop``) and the config's top-level ``budget_on_resume``.

        Called in ``before_run`` (:mod:`~budgeted.mmengine.scheduler_hook`). ``end`` must be the
        loop's ``max_iters``
        (:func:`~budgeted.mmengine.scheduler_checks.check_loop_end`); ``budget_on_resume`` is the
        policy where the entry gives no ``on_resume``; a ``TimeBudgetTrainLoop`` makes the decay
        run over its seconds, on its clock.

        Raises:
            BudgetConfigError: one line naming the value and what is allowed.

        Example:
            >>> import torch
            >>> from types import SimpleNamespace
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> sched = BudgetLinearLR(opt, end=900, warmup_iters=100, by_epoch=False)
            >>> sched.bind(SimpleNamespace(max_iters=900), budget_on_resume="replan")
            >>> sched.on_resume
            'replan'
        """
        name = type(self).__name__
        self._checked = True
        if budget_on_resume is not None and not self._on_resume_given:
            self.on_resume = self._checked_on_resume(budget_on_resume, "budget_on_resume")
        epoch_loop, loop_name = isinstance(loop, EpochBasedTrainLoop), type(loop).__name__
        check_loop_end(name, self.end, int(loop.max_iters), epoch_loop=epoch_loop,
                       epochs=self._epochs, loop_name=loop_name)  # fmt: skip
        if isinstance(getattr(loop, "clock", None), TrainingClock):  # a TimeBudgetTrainLoop
            if self.on_resume == "branch":
                raise BudgetConfigError(
                    f"{name}: on_resume='branch' is for iteration budgets; a time budget "
                    "allows: refuse, replan"
                )
            self.engine.over_seconds(loop.seconds, loop.clock)
            self._apply_value()

    def over_seconds(self, seconds: Any) -> TimeBudget:
        """This budget's schedule and warmup over ``seconds`` of training (a time budget)."""
        return self.engine.over_seconds(seconds)

    def check_in_runner(self, schedulers: Any, iteration: int) -> None:
        """Refuse what only the built runner shows (before the first iteration, after resuming):
        another scheduler of the same parameter and optimizer active in an overlapping range
        (:func:`~budgeted.mmengine.scheduler_checks.check_no_overlap`), and a resume that gave
        this scheduler no state (:func:`~budgeted.mmengine.scheduler_checks.check_resumed`).

        Raises:
            BudgetConfigError, BudgetMismatchError: one line.
        """
        if isinstance(schedulers, Mapping):
            schedulers = [s for group in schedulers.values() for s in group]
        check_no_overlap(self, schedulers or [])
        check_resumed(self, self._loaded, iteration)

    def step(self) -> None:
        """MMEngine's step. The first one, in a runner that did not bind this scheduler (MMEngine's
        own ``ParamSchedulerHook``), checks ``end`` and the resume
        (:func:`~budgeted.mmengine.scheduler_checks.check_at_first_step`)."""
        if not self._checked:
            self._checked = True
            check_at_first_step(self, self._epochs, self._loaded)
        super().step()

    def _apply_value(self) -> None:
        """Set the parameter to this scheduler's value for the next iteration (after its plan
        changed: a re-plan, a resumed clock, a time budget)."""
        for group, value in zip(self.optimizer.param_groups, self._get_value()):
            group[self.param_name] = value
        set_last_value(self, [group[self.param_name] for group in self.optimizer.param_groups])

    @property
    def budget(self) -> dict[str, Any]:
        """What defines this budget, saved in checkpoints: the plan's state after ``begin``."""
        return self.engine.state(begin=self.begin)["budget"]

    @property
    def schedule(self) -> str:
        """The schedule's registered name."""
        return self.engine.plan.schedule

    @property
    def params(self) -> dict[str, Any]:
        """The schedule's parameters (validated; milestones as a tuple)."""
        return dict(self.engine.plan.params)

    @property
    def warmup_iters(self) -> int:
        """The warmup length in iterations."""
        return int(self.engine.plan.warmup)

    @property
    def warmup_factor(self) -> float:
        """The multiplier at the first warmup iteration."""
        return self.engine.plan.warmup_factor

    @property
    def warmup_method(self) -> str:
        """``"linear"`` or ``"constant"``."""
        return self.engine.plan.warmup_method

    @property
    def time_budget(self) -> TimeBudget | None:
        """The wall-clock budget of a ``TimeBudgetTrainLoop`` the decay runs over, else None."""
        return self.engine.time

    @property
    def _clock(self) -> TrainingClock | None:
        """The clock of that time budget."""
        return self.engine.clock

    @classmethod
    def build_iter_from_epoch(
        cls,
        *args: Any,
        begin: int = 0,
        end: int = INF,
        by_epoch: bool = True,
        epoch_length: int | None = None,
        **kwargs: Any,
    ) -> BudgetParamScheduler:
        """Build from an epoch-based config: ``begin``/``end`` (epochs) become iterations.

        MMEngine calls it for ``convert_to_iter_based=True``; ``warmup_iters`` stays as given.

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> sched = BudgetScheduleLR.build_iter_from_epoch(
            ...     opt, begin=1, end=4, warmup_iters=5, epoch_length=10
            ... )
            >>> sched.begin, sched.end
            (10, 40)
        """
        check_epoch_arguments(cls.__name__, begin, end, by_epoch, epoch_length)
        end_iters = end if end >= INF else int(end * epoch_length)
        built = cls(*args, begin=int(begin * epoch_length), end=end_iters, by_epoch=False, **kwargs)
        built._epochs = (end, epoch_length)  # checked against the train loop by bind()
        return built

    def multiplier(self, step: int | None = None) -> float:
        """The multiplier of the initial value ``step`` steps after ``begin`` (default: now).

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> BudgetScheduleLR(opt, end=900, warmup_iters=100, by_epoch=False).multiplier(500)
            0.5
        """
        return self.engine.lookup(self.last_step if step is None else step)

    def _get_value(self) -> list[float]:
        factor = self.engine.multiplier(self.last_step)
        return [base * factor for base in self.base_values]

    def check_resume(
        self, saved: Mapping[str, Any] | None, at: int | None = None
    ) -> tuple[BudgetSchedule, str | None]:
        """The one resume route (:func:`~budgeted.mmengine.scheduler_checks.resume_budget`) of a
        saved ``budget``, ``at`` steps trained: the budget to go on with and the re-plan line.

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> sched = BudgetLinearLR(opt, end=900, warmup_iters=100, by_epoch=False)
            >>> sched.check_resume(dict(sched.budget))[1] is None  # the same budget: resumes
            True
        """
        state = None if saved is None else {"budget": saved, GLOBAL_STEP: at or 0}
        return resume_budget(self, state)[:2]

    _NOT_STATE: ClassVar[tuple[str, ...]] = (
        "optimizer", "engine", "on_resume", "_on_resume_given", "_loaded", "_epochs", "_checked",
    )  # fmt: skip

    def resume_words(self) -> ResumeWords:
        """MMEngine's words for the engine's resume decision: its keys, the checkpoint's end
        in the fix, the class name before a re-plan's refusal, ``base_values`` of an LR."""
        name = type(self).__name__
        base_lrs = None
        if self.param_name == "lr":
            base_lrs = BaseLRWords(
                "base_values", f"cannot resume: the checkpoint's {name}", "base_values", LR_KEY,
                "resume with the config that run was trained with, or start a new run from its "
                "weights (load_from=<checkpoint>, resume=False)",
            )  # fmt: skip
        return ResumeWords(RESUME_NAMES, resume_fix, name, replan_names=REPLAN_NAMES,
                           owner_first=True, base_lrs=base_lrs)  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """MMEngine's state (plain values only, safe for ``weights_only`` loading) and the
        engine's: ``budget`` (with ``begin``), a time budget's ``time_budget`` and ``clock``."""
        own = self.engine.state(begin=self.begin)
        state = {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}
        return {"budget": own.pop("budget"), **state, **own}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume through :func:`~budgeted.mmengine.scheduler_checks.resume_budget` (a checkpoint
        of another budget refused, or re-planned with ``on_resume="replan"``), after refusing
        one whose ``base_values`` are not the config's LR of each param group: one line each,
        nothing changed."""
        check_loaded(state_dict, self.resume_words(), bases=self.base_values)
        name = type(self).__name__
        decided = resume_budget(self, state_dict, self.engine.time)
        if decided.time_line is not None:
            print_log(f"{name}: {decided.time_line}", logger="current")
        self.engine.adopt(decided)
        keep = ("end",) if decided.line is not None else ()  # a re-plan keeps its end
        skip = (*self._NOT_STATE, *keep, "budget", "time_budget", "clock")
        self.__dict__.update({k: v for k, v in state_dict.items() if k not in skip})
        self._loaded = True
        if decided.line is not None:
            print_log(f"{name}: {decided.line}", logger="current")
        if decided.line is not None or decided.time_line is not None:
            self._apply_value()  # the next iteration's value from the new plan


@PARAM_SCHEDULERS.register_module()
class BudgetScheduleLR(LRSchedulerMixin, BudgetParamScheduler):
    """Budget-aware learning rate with any registered schedule, chosen by ``schedule=``.

    The same arguments as :class:`BudgetParamScheduler`, without ``param_name``.

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> sched = BudgetScheduleLR(
        ...     opt, schedule="poly", power=2.0, end=1000, warmup_iters=0, by_epoch=False
        ... )
        >>> sched.schedule, sched.params
        ('poly', {'power': 2.0})

    In a config: ``dict(type="BudgetScheduleLR", schedule="htd", lower=-4.0, by_epoch=False)``.
    """


NAMED_SCHEDULERS: dict[str, type[BudgetScheduleLR]] = {}
"""Schedule name -> its ``Budget<Label>LR`` class; grows as schedules are registered."""


def _named_scheduler_doc(info: ScheduleInfo) -> str:
    summary = (info.fn.__doc__ or "").strip().splitlines()
    params = ", ".join(f"{k}={v!r}" for k, v in info.defaults.items())
    return (
        f"Budget-aware learning rate with the core's {info.name!r} schedule"
        + (f": {summary[0].rstrip('.')}" if summary else "")
        + f".\n\nParameters (defaults): {params or 'none'}; the other arguments are "
        "BudgetParamScheduler's, without param_name.\n\nExample:\n"
        f'    ``param_scheduler = [dict(type="Budget{info.label}LR", warmup_iters=500, '
        "by_epoch=False)]``\n"
    )


def _add_named_scheduler(info: ScheduleInfo, name: str | None = None) -> None:
    """Create, register and expose ``name`` (``Budget<Label>LR``) for a core schedule."""
    name = name or f"Budget{info.label}LR"
    if name in PARAM_SCHEDULERS.module_dict:
        raise ValueError(
            f"schedule {info.name!r} would be MMEngine's {name}, which is already registered; "
            "allowed: register the schedule with another label"
        )
    cls = type(
        name,
        (BudgetScheduleLR,),
        {
            "fixed_schedule": info.name,
            "__doc__": _named_scheduler_doc(info),
            "__module__": __name__,
            "__qualname__": name,
        },
    )
    PARAM_SCHEDULERS.register_module(name=name, module=cls)
    setattr(sys.modules[__name__], name, cls)
    NAMED_SCHEDULERS[info.name] = cls


adapter_names("LR", _add_named_scheduler)


def scheduler_types() -> tuple[str, ...]:
    """Every type name this module has registered in ``PARAM_SCHEDULERS``, so far.

    Example:
        >>> scheduler_types()[:3]
        ('BudgetParamScheduler', 'BudgetScheduleLR', 'BudgetLinearLR')
    """
    return (
        "BudgetParamScheduler",
        "BudgetScheduleLR",
        *(cls.__name__ for cls in NAMED_SCHEDULERS.values()),
    )

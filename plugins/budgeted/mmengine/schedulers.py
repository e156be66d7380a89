"""MMEngine parameter schedulers computed by :class:`budgeted.schedules.core.BudgetSchedule`.

One entry does warmup and decay: ``value = base_value * m(t)`` with ``t`` the scheduler's step
count since ``begin`` (MMEngine's ``last_step``), a budget of ``end - begin`` steps, a warmup of
``warmup_iters`` steps and the decay over ``[begin + warmup_iters, end)``. The value is computed in
closed form from the initial value, so these schedulers are not meant to be chained with another
scheduler of the same parameter.

Every schedule registered in the core (:func:`budgeted.register_schedule`, built-in or later)
becomes ``Budget<Label>LR`` here, in MMEngine's ``PARAM_SCHEDULERS`` and as an attribute of this
module (``linear`` -> ``BudgetLinearLR``, ``htd`` -> ``BudgetHTDLR``, a later ``sqrt`` ->
``BudgetSqrtLR``), through :func:`budgeted.schedules.core.on_schedule_registered`.
"""

from __future__ import annotations

import difflib
import numbers
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from mmengine.logging import print_log
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, OptimizerType, _ParamScheduler
from mmengine.registry import PARAM_SCHEDULERS
from mmengine.runner.loops import EpochBasedTrainLoop

from ..errors import BudgetConfigError
from ..schedules.clock import TimeBudget, TrainingClock
from ..schedules.core import (
    BudgetMismatchError,
    BudgetReplanError,
    BudgetSchedule,
    ScheduleInfo,
    check_on_resume,
    on_schedule_registered,
    schedule_params,
)
from .time_budget import TimeBudgetTrainLoop

__all__ = [
    "NAMED_SCHEDULERS",
    "RESUME_NAMES",
    "BudgetConfigError",
    "BudgetMismatchError",
    "BudgetParamScheduler",
    "BudgetScheduleLR",
    "check_loop_end",
    "scheduler_types",
]


RESUME_NAMES = {"total": "train_cfg.max_iters (end - begin)", "warmup": "warmup_iters"}
"""How the core's budget keys read in a refused resume's message (MMEngine's names)."""

_STACK_DEPTH = 16
"""How many calling frames :func:`_building_loop_max_iters` looks through."""


def check_loop_end(name: str, end: int, max_iters: int | None, *, epoch_loop: bool = False) -> None:
    """Refuse a budget scheduler whose ``end`` is not the train loop's ``max_iters``.

    A budget that ends before the loop trains on at the last value; one that ends after it is
    cut short and never decays to its end. Either way the run would not train the budget the
    config states.

    Args:
        name (str): The scheduler's type name, for the message.
        end (int): The scheduler's ``end`` in iterations.
        max_iters (int, optional): The train loop's length in iterations; None skips the check.
        epoch_loop (bool): the loop is an ``EpochBasedTrainLoop`` (its length is
            ``train_cfg.max_epochs``, there is no ``max_iters`` key to set).

    Raises:
        BudgetConfigError: one line naming both values and the fix.

    Example:
        >>> check_loop_end("BudgetLinearLR", 8000, 8000)
        >>> check_loop_end("BudgetLinearLR", 8000, None)  # no train loop: nothing to compare
    """
    if max_iters is None or end == max_iters:
        return
    effect = "be cut short" if end > max_iters else "end before training does"
    fix = (
        "in an epoch-based loop give begin/end in epochs with by_epoch=True and "
        "convert_to_iter_based=True, and leave out end so that the runner fills it from "
        "train_cfg.max_epochs"
        if epoch_loop
        else f"remove end so that the runner fills it from train_cfg.max_iters, or set "
        f"train_cfg.max_iters={end}"
    )
    raise BudgetConfigError(
        f"{name}: end={end} differs from the train loop's max_iters={max_iters}: the budget "
        f"would {effect}; {fix}"
    )


def _is_scalar(value: Any) -> bool:
    """One number a scheduler can scale: a real number (not a bool) or a one-element tensor."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _building_runner_option(key: str) -> Any:
    """``cfg[key]`` of the runner building this scheduler (see :func:`_building_loop_max_iters`),
    else None: how a top-level config key such as ``budget_on_resume`` reaches the schedulers."""
    frame = sys._getframe(1)
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "_build_param_scheduler":
            cfg = getattr(frame.f_locals.get("self"), "cfg", None)  # an mmengine Config
            return cfg.get(key) if callable(getattr(cfg, "get", None)) else None
        frame = frame.f_back
    return None


def _building_train_loop() -> Any:
    """The train loop of the ``Runner`` building this scheduler (None elsewhere, and while the
    runner holds only the loop's config)."""
    base_loop = sys.modules.get("mmengine.runner.base_loop")
    frame = sys._getframe(1)
    for _ in range(_STACK_DEPTH):
        if frame is None or base_loop is None:
            return None
        if frame.f_code.co_name == "_build_param_scheduler":
            loop = getattr(frame.f_locals.get("self"), "_train_loop", None)
            return loop if isinstance(loop, base_loop.BaseLoop) else None
        frame = frame.f_back
    return None


def _building_loop_max_iters() -> int | None:
    """``max_iters`` of the train loop whose runner is building this scheduler, else None.

    MMEngine's ``Runner._build_param_scheduler`` (and the strategies of ``FlexibleRunner``) fill
    a missing ``end`` and build the scheduler, but never pass the runner or the loop to it; so
    the builder is found on the call stack. A scheduler built anywhere else (a script, a test,
    a scheduler object passed to the runner) has nothing to be compared with.
    """
    base_loop = sys.modules.get("mmengine.runner.base_loop")
    if base_loop is None:  # no runner was ever imported, so none is building
        return None
    frame = sys._getframe(1)
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "_build_param_scheduler":
            loop = getattr(frame.f_locals.get("self"), "_train_loop", None)
            if isinstance(loop, base_loop.BaseLoop):  # Runner, once train() built the loop
                return int(loop.max_iters)
            max_iters = frame.f_locals.get("max_iters")  # a FlexibleRunner strategy
            return max_iters if isinstance(max_iters, int) else None
        frame = frame.f_back
    return None


def resume_step(state: Mapping[str, Any]) -> int:
    """The steps a budget scheduler's saved ``state`` has trained since its ``begin``.

    MMEngine's ``_global_step`` (every ``step()``), less ``begin``: ``last_step`` stops one short
    at the end of the budget (it only counts steps inside ``[begin, end)``), so a finished run's
    ``last_step`` would read as one iteration still to train.

    Example:
        >>> resume_step({"_global_step": 12, "last_step": 11, "begin": 0})
        12
    """
    step = state.get("_global_step")
    if not isinstance(step, int):
        return int(state.get("last_step") or 0)
    return max(step - int(state.get("begin") or 0), 0)


SCHEDULER_ARGUMENTS = (
    "begin", "end", "by_epoch", "warmup_iters", "warmup_factor", "warmup_method", "on_resume",
)  # fmt: skip
"""The arguments every budget scheduler takes (besides ``optimizer`` and the schedule's own)."""


def _check_arguments(name: str, schedule: str, params: Mapping[str, Any]) -> None:
    """Refuse an argument that is neither a budget scheduler's nor the schedule's parameter,
    naming both lists and the closest match (a typo such as ``warmup_iter``)."""
    try:
        own = list(schedule_params(schedule))
    except ValueError as err:
        raise BudgetConfigError(f"{name}: {err}") from None
    for key in params:
        if key in own:
            continue
        close = difflib.get_close_matches(key, [*SCHEDULER_ARGUMENTS, *own], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        takes = f"its parameters {', '.join(own)}" if own else "no parameters of its own"
        raise BudgetConfigError(
            f"{name}: unknown argument {key!r}; {hint}allowed: "
            f"{', '.join(SCHEDULER_ARGUMENTS)}, and the {schedule} schedule takes {takes}"
        )


@PARAM_SCHEDULERS.register_module()
class BudgetParamScheduler(_ParamScheduler):
    """Budget-aware schedule of any optimizer parameter ``param_name`` (``lr``, ``momentum``...).

    The value at step ``begin + t`` is ``initial_value * m(t)`` with ``m`` the core's
    :class:`~budgeted.schedules.core.BudgetSchedule` over ``end - begin`` steps. Built by MMEngine's
    runner from a config, ``end`` must be the train loop's ``max_iters`` (leave it out and the
    runner fills it); a resumed checkpoint must hold the same budget (:meth:`check_resume`).

    Args:
        optimizer (OptimWrapper or Optimizer): the (wrapped) optimizer.
        param_name (str): the ``param_groups`` key to schedule.
        schedule (str, optional): a registered schedule name (fixed in the ``Budget<Label>LR``
            classes); default ``"linear"``.
        warmup_iters (int): warmup length in iterations (kept in iterations when converting from
            epochs). Defaults to 500.
        warmup_factor (float): the multiplier at the first iteration of the warmup, in (0, 1].
            Defaults to 0.001.
        warmup_method (str): ``"linear"`` or ``"constant"`` warmup. Defaults to ``"linear"``.
        begin (int): the first iteration of the budget. Defaults to 0.
        end (int): the iteration after the budget; the runner fills a missing ``end`` with
            ``train_cfg.max_iters``.
        last_step (int): as in MMEngine. Defaults to -1.
        by_epoch (bool): must be False, or True with ``convert_to_iter_based=True`` (the budget
            is planned in iterations). Defaults to True, as in MMEngine.
        verbose (bool): as in MMEngine. Defaults to False.
        on_resume (str, optional): what a resume does with a checkpoint of another
            ``train_cfg.max_iters``: ``"refuse"`` (one line) or ``"replan"``: the value goes on from
            where the checkpoint left it to the schedule's end at the new ``max_iters``
            (:meth:`budgeted.schedules.core.BudgetSchedule.replan`; one line logged, the re-plan
            saved in later checkpoints). Default: the config's top-level ``budget_on_resume``, else
            ``"refuse"``. **params: the schedule's parameters (``power``, ``eta``, ``milestones``,
            ``gamma``...).

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
        warmup_iters: int = 500,
        warmup_factor: float = 0.001,
        warmup_method: str = "linear",
        begin: int = 0,
        end: int = INF,
        last_step: int = -1,
        by_epoch: bool = True,
        verbose: bool = False,
        on_resume: str | None = None,
        **params: Any,
    ) -> None:
        name = type(self).__name__
        key = "on_resume"
        if on_resume is None:
            on_resume = _building_runner_option("budget_on_resume")
            key = "budget_on_resume"
        on_resume = "refuse" if on_resume is None else on_resume
        try:
            check_on_resume(on_resume, key)
        except BudgetConfigError as err:
            raise BudgetConfigError(f"{name}: {err}") from None
        self.on_resume = on_resume
        if self.fixed_schedule is not None:
            if schedule not in (None, self.fixed_schedule):
                raise BudgetConfigError(
                    f"{name} always uses the {self.fixed_schedule!r} schedule, got "
                    f"schedule={schedule!r}; use BudgetScheduleLR(schedule={schedule!r}) instead"
                )
            schedule = self.fixed_schedule
        elif schedule is None:
            schedule = "linear"
        _check_arguments(name, schedule, params)
        if by_epoch:
            raise BudgetConfigError(
                f"{name}: by_epoch=True without convert_to_iter_based=True; the budget is planned "
                "in iterations: set by_epoch=False in an iteration-based config "
                "(IterBasedTrainLoop) or convert_to_iter_based=True in an epoch-based one"
            )
        for key, value in (("begin", begin), ("end", end), ("warmup_iters", warmup_iters)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BudgetConfigError(
                    f"{name}: {key}={value!r} is invalid; allowed: an integer >= 0"
                    + (" (end defaults to train_cfg.max_iters)" if key == "end" else "")
                )
        if end >= INF:
            raise BudgetConfigError(
                f"{name}: end is not set; pass end=<last iteration + 1> or let the runner fill it "
                "from train_cfg.max_iters"
            )
        loop = _building_train_loop()
        check_loop_end(
            name, end, _building_loop_max_iters(), epoch_loop=isinstance(loop, EpochBasedTrainLoop)
        )
        groups = getattr(optimizer, "param_groups", None) or []
        missing = [i for i, group in enumerate(groups) if param_name not in group]
        numbers_at = sorted(
            {k for group in groups for k, v in group.items() if _is_scalar(v) and k != "params"}
        )
        if missing:
            raise BudgetConfigError(
                f"{name}: param_name={param_name!r} is not a key of the optimizer's param groups "
                f"(group {missing[0]}); allowed: one of {', '.join(numbers_at)}"
            )
        not_scalar = [i for i, group in enumerate(groups) if not _is_scalar(group[param_name])]
        if not_scalar:
            value = groups[not_scalar[0]][param_name]
            raise BudgetConfigError(
                f"{name}: param_name={param_name!r} holds {value!r} in group {not_scalar[0]}, not "
                f"one number to scale; allowed: one of {', '.join(numbers_at)}"
            )
        if end <= begin + warmup_iters:
            raise BudgetConfigError(
                f"{name}: end={end} <= begin + warmup_iters = {begin} + {warmup_iters}: the decay "
                "phase would be empty; allowed: end > begin + warmup_iters (end defaults to "
                "train_cfg.max_iters)"
            )
        try:
            plan = BudgetSchedule(
                schedule, end - begin, warmup_iters, warmup_factor, warmup_method, params
            )
        except ValueError as err:
            raise BudgetConfigError(f"{name}: {err}") from None
        self._plan = plan
        self._loop = loop  # the runner's loop, checked against at the first step in training
        self._loaded = False  # load_state_dict was called (the runner resumed this scheduler)
        self._runner_checked = loop is None
        self._time: TimeBudget | None = None
        self._clock: TrainingClock | None = None
        if isinstance(loop, TimeBudgetTrainLoop):  # a wall-clock budget: decay over seconds
            if self.on_resume == "branch":
                raise BudgetConfigError(
                    f"{name}: on_resume='branch' is for iteration budgets; a time budget "
                    "allows: refuse, replan"
                )
            self._time = TimeBudget(
                schedule, loop.seconds, warmup_iters, warmup_factor, warmup_method, params
            )
            self._clock = loop.clock
        # What defines this budget, saved in checkpoints: the core's state plus ``begin``.
        self.budget = {"begin": begin, **plan.state()}
        super().__init__(
            optimizer,
            param_name=param_name,
            begin=begin,
            end=end,
            last_step=last_step,
            by_epoch=by_epoch,
            verbose=verbose,
        )

    @property
    def schedule(self) -> str:
        """The schedule's registered name."""
        return self._plan.schedule

    @property
    def params(self) -> dict[str, Any]:
        """The schedule's parameters (validated; milestones as a tuple)."""
        return dict(self._plan.params)

    @property
    def warmup_iters(self) -> int:
        """The warmup length in iterations."""
        return int(self._plan.warmup)

    @property
    def warmup_factor(self) -> float:
        """The multiplier at the first warmup iteration."""
        return self._plan.warmup_factor

    @property
    def warmup_method(self) -> str:
        """``"linear"`` or ``"constant"``."""
        return self._plan.warmup_method

    @property
    def time_budget(self) -> TimeBudget | None:
        """The wall-clock budget the decay runs over (built by the runner of a
        ``TimeBudgetTrainLoop``), else None."""
        return self._time

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

        Args:
            *args: the positional arguments of the class.
            begin (int): first epoch of the budget. Defaults to 0.
            end (int): the epoch after the budget (the runner fills ``train_cfg.max_epochs``).
            by_epoch (bool): must be True (an epoch-based entry).
            epoch_length (int): iterations per epoch (the runner passes the dataloader's length).
            **kwargs: the other arguments of the class.

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> sched = BudgetScheduleLR.build_iter_from_epoch(
            ...     opt, begin=1, end=4, warmup_iters=5, epoch_length=10
            ... )
            >>> sched.begin, sched.end
            (10, 40)
        """
        if not by_epoch:
            raise BudgetConfigError(
                f"{cls.__name__}: convert_to_iter_based=True needs by_epoch=True"
            )
        if not isinstance(epoch_length, int) or epoch_length <= 0:
            raise BudgetConfigError(
                f"{cls.__name__}: epoch_length={epoch_length!r} is invalid; allowed: an int > 0"
            )
        for key, value in (("begin", begin), ("end", end)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BudgetConfigError(
                    f"{cls.__name__}: {key}={value!r} is invalid; allowed: a whole number of "
                    "epochs >= 0"
                    + (" (end defaults to train_cfg.max_epochs)" if key == "end" else "")
                )
        end_iters = end if end >= INF else int(end * epoch_length)
        loop, max_iters = _building_train_loop(), _building_loop_max_iters()
        if loop is not None and max_iters is not None and end_iters != max_iters:
            head = (
                f"{cls.__name__}: end={end} epochs x {epoch_length} iterations = {end_iters} "
                f"differs from the train loop's max_iters={max_iters}"
            )
            if isinstance(loop, EpochBasedTrainLoop):
                effect = "be cut short" if end_iters > max_iters else "end before training does"
                raise BudgetConfigError(
                    f"{head}: the budget would {effect}; "
                    "leave out end so that the runner fills it from train_cfg.max_epochs, or "
                    f"set train_cfg.max_epochs={end}"
                )
            raise BudgetConfigError(
                f"{head} (by_epoch=True with convert_to_iter_based=True in an iteration-based "
                f"loop, {type(loop).__name__}); allowed there: by_epoch=False without "
                "convert_to_iter_based (end then defaults to train_cfg.max_iters)"
            )
        return cls(*args, begin=int(begin * epoch_length), end=end_iters, by_epoch=False, **kwargs)

    def step(self) -> None:
        """MMEngine's step, after checking once, at the first step in training, that the runner
        trains this scheduler as planned (:meth:`check_in_runner`)."""
        if not self._runner_checked and self._global_step >= 0:
            self._runner_checked = True
            self.check_in_runner()
        super().step()

    def check_in_runner(self) -> None:
        """Refuse what the runner's build and resume cannot tell this scheduler:

        - another scheduler of the same parameter and optimizer active in an overlapping range
          (this one computes its value from the initial one: the other would be overwritten,
          or compound with it);
        - a resume that gave this scheduler no state (MMEngine pairs the config's schedulers
          with the checkpoint's by position: the list changed since the checkpoint), so that it
          would start its budget again at the runner's iteration.

        Raises:
            BudgetConfigError: an overlapping scheduler (one line).
            budgeted.schedules.core.BudgetMismatchError: a resume that skipped this scheduler (one
            line).
        """
        name = type(self).__name__
        loop = self._loop
        schedulers = getattr(getattr(loop, "runner", None), "param_schedulers", None) or []
        if isinstance(schedulers, Mapping):
            schedulers = [s for group in schedulers.values() for s in group]
        for other in schedulers:
            if (
                other is not self
                and getattr(other, "optimizer", None) is self.optimizer
                and getattr(other, "param_name", None) == self.param_name
                and other.begin < self.end
                and self.begin < other.end
            ):
                raise BudgetConfigError(
                    f"{name} [{self.begin}, {self.end}) and {type(other).__name__} "
                    f"[{other.begin}, {other.end}) both schedule {self.param_name}: {name} sets "
                    "it from its initial value, so the other would be overwritten or compound "
                    f"with it; allowed: {name} alone (its warmup_iters is the warmup), or a "
                    f"stock warmup before it that ends where {name} begins"
                )
        if not self._loaded and loop is not None and self._global_step != loop.iter:
            raise BudgetMismatchError(
                f"cannot resume: {name} got no state from the checkpoint (the runner resumed at "
                f"iteration {loop.iter}, this scheduler would start its budget there): MMEngine "
                "pairs param_scheduler entries with the checkpoint's by position, and the list "
                "has changed since the checkpoint; to resume, keep the checkpoint's "
                "param_scheduler list; to train another schedule, start a new run from its "
                "weights with load_from=<checkpoint> and resume=False"
            )

    def multiplier(self, step: int | None = None) -> float:
        """The multiplier of the initial value ``step`` steps after ``begin`` (default: now).

        Args:
            step (int, optional): steps since ``begin``; default the scheduler's ``last_step``.

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> BudgetScheduleLR(opt, end=900, warmup_iters=100, by_epoch=False).multiplier(500)
            0.5
        """
        return self._plan(self.last_step if step is None else step)

    def _get_value(self) -> list[float]:
        if self._time is not None and self._clock is not None:
            factor = self._time.multiplier(self.last_step, self._clock.elapsed)
            return [base * factor for base in self.base_values]
        factor = self._plan(self.last_step)
        return [base * factor for base in self.base_values]

    def check_resume(
        self, saved: Mapping[str, Any] | None, at: int | None = None
    ) -> tuple[BudgetSchedule, str | None]:
        """Refuse to resume from a checkpoint whose budget differs from this scheduler's
        (unless ``on_resume="replan"`` and only the length differs); return the budget to go on
        with and the re-plan line to log (None: not re-planned).

        Args:
            saved (dict, optional): the ``budget`` of the checkpoint's scheduler state; None for a
                scheduler that is not budget-aware.
            at (int, optional): the checkpoint's ``last_step`` (where a re-plan starts).

        Raises:
            budgeted.schedules.core.BudgetMismatchError: one line naming what differs and what to
            do. budgeted.schedules.core.BudgetReplanError: a re-plan that cannot be made (one line).

        Example:
            >>> import torch
            >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
            >>> sched = BudgetLinearLR(opt, end=900, warmup_iters=100, by_epoch=False)
            >>> sched.check_resume(dict(sched.budget))[1] is None  # the same budget: resumes
            True
        """
        if saved is not None and not isinstance(saved, Mapping):
            saved = None
        old_end = None
        if saved is not None and isinstance(saved.get("total"), (int, float)):
            old_end = int(saved.get("begin", 0) + saved["total"])
        fix = (
            "to resume, keep the checkpoint's budget"
            + (f" (train_cfg.max_iters={old_end})" if old_end is not None else "")
            + "; to train another budget, start a new run from its weights with "
            "load_from=<checkpoint> and resume=False"
        )
        if saved is not None and saved.get("begin") != self.begin:
            raise BudgetMismatchError(
                f"cannot resume: the checkpoint's budget has begin={saved.get('begin')!r}, the "
                f"config's begin={self.begin!r}; {fix}"
            )
        state = None if saved is None else {k: v for k, v in saved.items() if k != "begin"}
        try:
            return self._plan.resume(
                state,
                at=at or 0,
                on_resume=self.on_resume,
                names={"total": "train_cfg.max_iters", "warmup": "warmup_iters"}
                if self.on_resume == "replan"
                else RESUME_NAMES,
                fix=fix,
            )
        except BudgetReplanError as err:
            raise BudgetReplanError(f"{type(self).__name__}: {err}") from None

    _NOT_STATE: ClassVar[tuple[str, ...]] = (
        "optimizer", "_plan", "on_resume", "_time", "_clock", "_loop", "_loaded", "_runner_checked",
    )  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """MMEngine's state (plain values only, safe for ``weights_only`` loading)."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._NOT_STATE}
        if self._time is not None and self._clock is not None:
            state["time_budget"] = self._time.state()
            state["clock"] = self._clock.state()
        return state

    def _resume_time(self, state_dict: Mapping[str, Any]) -> str | None:
        """Go on with a checkpoint's clock (:meth:`budgeted.schedules.clock.TimeBudget.resume`)."""
        assert self._time is not None and self._clock is not None
        elapsed = float((state_dict.get("clock") or {}).get("elapsed", 0.0))
        try:
            line = self._time.resume(state_dict.get("time_budget"), elapsed, self.on_resume)
        except BudgetReplanError as err:
            raise BudgetReplanError(f"{type(self).__name__}: {err}") from None
        if line is not None:
            print_log(f"{type(self).__name__}: {line}", logger="current")
        self._clock.restore(elapsed)
        return line

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume; refuse (:meth:`check_resume`) a checkpoint with another budget, or re-plan
        it (``on_resume="replan"``)."""
        timed = self._resume_time(state_dict) if self._time is not None else None
        plan, line = self.check_resume(state_dict.get("budget"), at=resume_step(state_dict))
        keep = ("end", "budget") if line is not None else ()  # a re-plan keeps the new end
        skip = (*self._NOT_STATE, *keep, "time_budget", "clock")
        self.__dict__.update({k: v for k, v in state_dict.items() if k not in skip})
        self._plan = plan
        self._loaded = True
        self.budget = {"begin": self.begin, **plan.state()}
        if line is not None:
            print_log(f"{type(self).__name__}: {line}", logger="current")
        if line is not None or timed is not None:
            # the next iteration's value from the new plan (the optimizer holds the old one)
            for group, value in zip(self.optimizer.param_groups, self._get_value()):
                group[self.param_name] = value
            self._last_value = [group[self.param_name] for group in self.optimizer.param_groups]


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


def _add_named_scheduler(info: ScheduleInfo) -> None:
    """Create, register and expose ``Budget<Label>LR`` for a core schedule."""
    name = f"Budget{info.label}LR"
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


on_schedule_registered(_add_named_scheduler)


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

"""The budget scheduler engine: one plan over iterations or, bound to a clock, seconds; its
multiplier table, its state and its one resume decision.

Every budget scheduler is a thin wrapper around a :class:`BudgetEngine`: ``budgeted.BudgetLR``
and ``BudgetTimeLR`` (torch), Detectron2's ``BudgetLRScheduler`` family and MMEngine's
``BudgetParamScheduler``. A wrapper says where its framework keeps the step count and the base
LRs, and in which words it refuses (:class:`ResumeWords`); the engine decides.

- **The plan** is a :class:`~budgeted.schedules.BudgetSchedule` over iterations, or a
  :class:`~budgeted.schedules.TimeBudget` once bound to a clock (:meth:`BudgetEngine.over_seconds`).
- **The table** holds ``plan(t)`` for the steps a run has asked for, filled lazily in chunks of
  :data:`CHUNK` from the first step asked (a resume at 80k builds nothing before 80k) and emptied
  whenever the plan changes: a step is one look-up (:meth:`BudgetEngine.lookup`), every value the
  plan's own, bit for bit.
- **The resume decision** (:meth:`BudgetEngine.resume`): the same budget goes on, another length
  is re-planned or branched where the policy asks, anything else is one line in the wrapper's
  words; :func:`check_loaded` first refuses a saved state no run writes, changing nothing.

Example:
    >>> from budgeted.schedules import BudgetSchedule
    >>> engine = BudgetEngine(BudgetSchedule("linear", 1000, warmup=0))
    >>> engine.lookup(500), engine.low, engine.high  # the table starts at the first step asked
    (0.5, 500, 1000)
    >>> words = ResumeWords({"total": "max_iters"}, "keep it", owner="MyScheduler")
    >>> engine.resume(BudgetSchedule("linear", 90, warmup=0).state(), at=5, words=words)
    Traceback (most recent call last):
    budgeted.errors.BudgetMismatchError: cannot resume: the checkpoint's budget has max_iters=90, \
the config's max_iters=1000; keep it
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from torch import Tensor

from ..errors import BudgetMismatchError, BudgetReplanError
from ..schedules import BudgetSchedule, TimeBudget, TrainingClock
from ..schedules.base_lrs import check_base_lrs
from ..schedules.budget import mismatch
from ..schedules.registry import Rule
from ..schedules.state import check_state

__all__ = [
    "CHUNK", "BaseLRWords", "BudgetEngine", "ResumeWords", "Resumed", "check_loaded",
    "group_count_error", "write_lrs"
]  # fmt: skip

CHUNK = 4096
"""How many steps of the table one fill computes (8 bytes each)."""


class BaseLRWords(NamedTuple):
    """How a wrapper refuses a saved state whose base LRs are not its own
    (:func:`~budgeted.schedules.base_lrs.check_base_lrs`): the state's ``key`` holding them, the
    line's ``subject``, ``where`` they are in its words, the config's ``config_key`` and the
    ``fix``."""

    key: str
    subject: str
    where: str
    config_key: str
    fix: str


@dataclass(frozen=True)
class ResumeWords:
    """A wrapper's words for the resume decision.

    Args:
        names: the budget's keys as its refusals name them (``{"total": "SOLVER.MAX_ITER"}``).
        fix: what to do instead, or a function of the saved budget that says it.
        owner: the scheduler, as a state's refusal names it (its class name).
        error: the class every refusal is raised as (None: as the core raises it).
        replan_names: ``names`` where the policy is ``"replan"`` (None: ``names``).
        owner_first: a re-plan that cannot be made starts with ``<owner>: ``.
        base_lrs: the refusal of other base LRs (None: not checked on load).
    """

    names: Mapping[str, str]
    fix: str | Callable[[Mapping[str, Any] | None], str]
    owner: str
    error: type[ValueError] | None = None
    replan_names: Mapping[str, str] | None = None
    owner_first: bool = False
    base_lrs: BaseLRWords | None = None

    def raise_refusal(self, err: ValueError) -> NoReturn:
        """Raise ``err`` (the core's one line) as this wrapper refuses."""
        if self.error is not None:
            raise self.error(str(err)) from None
        if self.owner_first and isinstance(err, BudgetReplanError):
            raise BudgetReplanError(f"{self.owner}: {err}") from None
        raise err


class Resumed(NamedTuple):
    """The resume decision on a saved state (:meth:`BudgetEngine.resume`)."""

    plan: BudgetSchedule | None
    """The iteration plan to go on with (None: the engine has none)."""
    line: str | None
    """The re-plan (or branch) line to log (None: the same budget)."""
    elapsed: float | None = None
    """A time budget's training seconds to restore the clock to (None: no time budget)."""
    time_line: str | None = None
    """A time budget's re-plan line to log."""


class BudgetEngine:
    """One budget plan over iterations (``plan``) or, bound to a clock, seconds (``time``).

    Args:
        plan: the iteration plan (None: a time budget alone).
        time: the time budget the decay runs over, read on ``clock``.
        clock: the training clock every rank agrees on.

    Example:
        >>> from budgeted.schedules import TimeBudget
        >>> engine = BudgetEngine(time=TimeBudget("linear", 100, warmup_iters=0))
        >>> engine.multiplier(0, elapsed=0.0), engine.multiplier(9, elapsed=50.0)
        (1.0, 0.5)
    """

    __slots__ = ("clock", "high", "low", "plan", "table", "time")

    def __init__(
        self,
        plan: BudgetSchedule | None = None,
        *,
        time: TimeBudget | None = None,
        clock: TrainingClock | None = None,
    ) -> None:
        self.plan, self.time, self.clock = plan, time, clock
        self.table, self.low, self.high = array("d"), 0, 0  # plan(t) for low <= t < high

    def replace(self, plan: BudgetSchedule) -> None:
        """Go on with ``plan``: the table is emptied."""
        self.plan, self.table, self.low, self.high = plan, array("d"), 0, 0

    def lookup(self, step: int) -> float:
        """The iteration plan's multiplier at ``step``, off the table."""
        if type(step) is int and self.low <= step < self.high:
            return self.table[step - self.low]
        return self.fill(step)

    def fill(self, step: int) -> float:
        """:meth:`lookup` past the table's ends: the table grows over ``step`` by up to
        :data:`CHUNK` steps where ``step`` is within that of an end (never past the plan's total,
        after which the multiplier no longer changes), else starts again at ``step``; any other
        step (a float, beyond the total) is the plan's own value."""
        plan: Any = self.plan
        end = math.ceil(plan.total)
        if type(step) is not int or not 0 <= step < end:
            return plan(step)
        if not self.low - CHUNK <= step < self.high + CHUNK or self.high == self.low:
            self.table, self.low, self.high = array("d"), step, step
        if step < self.low:
            start = max(self.low - CHUNK, 0)
            self.table = array("d", map(plan, range(start, self.low))) + self.table
            self.low = start
        elif step >= self.high:
            stop = min(self.high + CHUNK, end)
            self.table.extend(map(plan, range(self.high, stop)))
            self.high = stop
        return self.table[step - self.low]

    def multiplier(self, step: int, elapsed: float | None = None) -> float:
        """The multiplier of (0-based) step ``step``: over seconds where the engine runs on a
        time budget (``elapsed``: the training seconds at its start, default its clock's), else
        the iteration plan's (:meth:`lookup`)."""
        if self.time is None:
            return self.lookup(step)
        clock: Any = self.clock
        return self.time.multiplier(step, clock.elapsed if elapsed is None else elapsed)

    def over_seconds(self, seconds: Any, clock: TrainingClock | None = None) -> TimeBudget:
        """The iteration plan's schedule and warmup over ``seconds`` of training; with ``clock``,
        the engine runs on it from now (the decay over the seconds, read on that clock)."""
        plan: Any = self.plan
        time = TimeBudget(
            plan.schedule, seconds, plan.warmup, plan.warmup_factor, plan.warmup_method,
            dict(plan.params),
        )  # fmt: skip
        if clock is not None:
            self.time, self.clock = time, clock
        return time

    def state(self, **fixed: Any) -> dict[str, Any]:
        """What a checkpoint keeps of the plan: ``budget`` (its state, after the ``fixed`` keys
        a wrapper adds, such as MMEngine's ``begin``), and a time budget's ``time_budget`` and
        ``clock``."""
        state: dict[str, Any] = {}
        if self.plan is not None:
            state["budget"] = {**fixed, **self.plan.state()}
        if self.time is not None:
            state["time_budget"] = self.time.state()
            if self.clock is not None:
                state["clock"] = self.clock.state()
        return state

    def resume(
        self,
        saved: Mapping[str, Any] | None,
        *,
        at: float,
        words: ResumeWords,
        on_resume: str = "refuse",
        fixed: Mapping[str, Any] | None = None,
        state: Mapping[str, Any] | None = None,
        time: TimeBudget | None = None,
    ) -> Resumed:
        """The one resume decision: same budget, re-plan, branch, or one line. Nothing changes
        here but a time budget taking over the measured warmup end and re-plans of the one it
        resumes (:meth:`adopt` takes the decision over).

        Args:
            saved: the checkpoint's budget state (None: it saved none).
            at: the steps it has trained.
            words: the wrapper's words.
            on_resume: the policy (:data:`~budgeted.schedules.RESUME_POLICIES`).
            fixed: keys of ``saved`` the wrapper adds to the plan's state, and the values they
                must have (MMEngine's ``{"begin": 0}``): another is refused in the same words.
            state: the whole saved state, for a time budget's clock.
            time: the time budget to resume (default: the engine's own).

        Raises:
            BudgetMismatchError, BudgetReplanError: one line, raised as ``words`` says.
        """
        fix = words.fix(saved) if callable(words.fix) else words.fix
        time = time if time is not None else self.time
        try:
            plan = line = None
            if saved is not None:
                for key, own in (fixed or {}).items():
                    if saved.get(key) != own:
                        raise mismatch({key: (saved.get(key), own)}, fix)
                saved = {k: v for k, v in saved.items() if k not in (fixed or {})}
            if self.plan is not None:
                replan = on_resume == "replan" and words.replan_names is not None
                names = words.replan_names if replan else words.names
                plan, line = self.plan.resume(
                    saved, at=at, on_resume=on_resume, names=names, fix=fix
                )
            if time is None:
                return Resumed(plan, line)
            elapsed, time_line = time.resume_from(state or {}, on_resume, owner=words.owner)
        except (BudgetMismatchError, BudgetReplanError) as err:
            words.raise_refusal(err)
        return Resumed(plan, line, elapsed, time_line)

    def adopt(self, decided: Resumed) -> None:
        """Go on as ``decided``: its plan (the table emptied), the clock at its seconds."""
        if decided.plan is not None:
            self.replace(decided.plan)
        if decided.elapsed is not None and self.clock is not None:
            self.clock.restore(decided.elapsed)


def check_loaded(
    state: Any,
    words: ResumeWords,
    *,
    bases: Collection[Any] | None = None,
    rules: Mapping[str, Rule] | None = None,
    optional: Mapping[str, Rule] | None = None,
    reserved: Collection[str] = (),
) -> None:
    """Refuse a saved scheduler ``state`` no run writes, before anything changes: base LRs other
    than the wrapper's own ``bases`` (where ``words.base_lrs`` names them), then a key that
    breaks one of the ``rules`` (:func:`~budgeted.schedules.state.check_state`: required,
    ``optional``, and ``reserved`` names a key may not replace).

    Raises:
        BudgetMismatchError, BudgetResumeError: one line, raised as ``words`` says.

    Example:
        >>> from budgeted.schedules.state import STEPS
        >>> words = ResumeWords({}, "start anew", owner="MyScheduler")
        >>> check_loaded({"last_epoch": -1}, words, rules={"last_epoch": STEPS})
        Traceback (most recent call last):
        budgeted.errors.BudgetResumeError: cannot resume: the checkpoint's MyScheduler state has \
last_epoch=-1; allowed: an integer >= 0 (the steps taken); resume from another checkpoint, or \
start a new run from its weights
    """
    said = words.base_lrs
    if said is not None and bases is not None:
        saved = state.get(said.key) if isinstance(state, Mapping) else None
        try:
            check_base_lrs(
                saved, [float(v) for v in bases], subject=said.subject, saved_key=said.where,
                config_key=said.config_key, fix=said.fix,
            )  # fmt: skip
        except BudgetMismatchError as err:
            words.raise_refusal(err)
    if rules is not None:
        check_state(state, rules, owner=words.owner, optional=optional, reserved=reserved)


def group_count_error(groups: int, built_for: int) -> ValueError:
    """The one line of an optimizer whose param groups changed after its scheduler was built."""
    return ValueError(
        f"the optimizer has {groups} param groups, the scheduler was built for {built_for}; "
        "allowed: build the scheduler after the last add_param_group()"
    )


def write_lrs(groups: list[dict[str, Any]], key: str, bases: list[Any], factor: float) -> None:
    """``group[key] = base * factor`` for each param group and its base value: one write per
    group, in place where the value is a tensor (as torch's schedulers do, never aliasing).

    Raises:
        ValueError: the groups are not the ones the bases were taken from (one line).

    Example:
        >>> groups = [{"lr": 0.0}, {"lr": 0.0}]
        >>> write_lrs(groups, "lr", [0.1, 0.02], 0.5); groups
        [{'lr': 0.05}, {'lr': 0.01}]
    """
    if len(groups) != len(bases):
        raise group_count_error(len(groups), len(bases))
    for group, base in zip(groups, bases):
        if isinstance(group[key], Tensor):
            group[key].fill_(float(base * factor))
        else:
            group[key] = base * factor

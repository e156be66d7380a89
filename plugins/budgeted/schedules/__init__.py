"""The schedule math: what a budget is, the schedules, budget units and time budgets (no torch, no
framework). Import every public name from here: ``from budgeted.schedules import BudgetSchedule``.

- :mod:`~budgeted.schedules.registry`: a schedule is a function ``m(p)`` of the progress ``p`` in
  [0, 1], registered with :func:`register_schedule` and its parameters' rules;
- :mod:`~budgeted.schedules.builtin`: the built-in schedules (linear, cosine, poly, htd, step,
  exp, constant, wsd with its cooldown shapes, rex, sgdr);
- :mod:`~budgeted.schedules.budget`: :class:`BudgetSchedule`, a warmup then a schedule over a
  budget ``T`` (``p = (e - W) / (T - W)``), its state and its resume rules (refuse, re-plan,
  branch);
- :mod:`~budgeted.schedules.units`: a budget stated in fractions, epochs or images, as iterations
  (and the rule of every count: :func:`whole_number`);
- :mod:`~budgeted.schedules.clock`: a budget of training seconds, on a clock every rank agrees on;
- :mod:`~budgeted.schedules.state`: the rules a scheduler state read from a checkpoint must keep
  (:func:`check_state`).

>>> BudgetSchedule("linear", total=1000, warmup=0)(250)
0.75
>>> budget_iters(fraction=0.25, full_iters=90000)
22500
"""

from .budget import (
    RESUME_POLICIES,
    TIME_RESUME_POLICIES,
    WARMUP_METHODS,
    BudgetMismatchError,
    BudgetReplanError,
    BudgetSchedule,
    check_on_resume,
    lr_multiplier,
    name_keys,
)
from .builtin import WSD_DECAYS, constant, cosine, exp, htd, linear, poly, rex, sgdr, step, wsd
from .clock import DECAYED_PROGRESS, TimeBudget, TimeBudgetReached, TrainingClock, parse_duration
from .contract import DEFAULTS, FIELDS, BudgetFieldError
from .registry import (
    PARAM_RULES,
    Rule,
    ScheduleFn,
    ScheduleInfo,
    arm_text,
    check_params,
    full_params,
    get_schedule,
    on_schedule_registered,
    parse_arm,
    register_schedule,
    same_params,
    schedule_info,
    schedule_names,
    schedule_params,
)
from .state import check_state
from .units import BUDGET_FRACTIONS, budget_iters, whole_number

__all__ = [
    "BUDGET_FRACTIONS", "DECAYED_PROGRESS", "DEFAULTS", "FIELDS", "PARAM_RULES",
    "RESUME_POLICIES", "TIME_RESUME_POLICIES", "WARMUP_METHODS", "WSD_DECAYS",
    "BudgetFieldError", "BudgetMismatchError", "BudgetReplanError", "BudgetSchedule", "Rule",
    "ScheduleFn", "ScheduleInfo", "TimeBudget", "TimeBudgetReached", "TrainingClock",
    "arm_text", "budget_iters", "check_on_resume", "check_params", "check_state", "constant",
    "cosine", "exp", "full_params", "get_schedule", "htd", "linear", "lr_multiplier",
    "name_keys", "on_schedule_registered", "parse_arm", "parse_duration", "poly",
    "register_schedule", "rex", "same_params", "schedule_info", "schedule_names",
    "schedule_params", "sgdr", "step", "whole_number", "wsd"
]  # fmt: skip

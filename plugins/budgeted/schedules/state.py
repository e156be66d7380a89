"""The rules a scheduler state read from a checkpoint must keep before a resume takes it over.

A scheduler's ``load_state_dict`` copies a checkpoint's values into the scheduler as they are; an
edited or damaged state would then train on silently: a step count of ``nan`` or ``5.5`` (the LR
of no step), a negative base LR, a key ``step`` that replaces the method, a clock's training
seconds set back (the time budget granted again) or missing (the whole budget granted again).
The adapters check a loaded state with :func:`check_state` and these rules (one copy of each,
:data:`~budgeted.schedules.registry.Rule` s like a schedule parameter's), before anything is
changed: a state that breaks one is refused with one :class:`~budgeted.errors.BudgetResumeError`
line naming the key.

>>> rules = {"last_epoch": STEPS}
>>> check_state({"last_epoch": 3}, rules, owner="BudgetLR")
>>> check_state({"last_epoch": 5.5}, rules, owner="BudgetLR")
Traceback (most recent call last):
budgeted.errors.BudgetResumeError: cannot resume: the checkpoint's BudgetLR state has \
last_epoch=5.5; allowed: an integer >= 0 (the steps taken); resume from another checkpoint, or \
start a new run from its weights
"""

from __future__ import annotations

import numbers
from collections.abc import Collection, Mapping
from typing import Any

from ..errors import BudgetResumeError
from .registry import Rule, is_finite_number

__all__ = [
    "ELAPSED", "FACTOR", "STATE_FIX", "STEPS", "base_values", "check_state", "plain_value"
]  # fmt: skip

STATE_FIX = "resume from another checkpoint, or start a new run from its weights"
"""What to do about a state that breaks a rule (the checkpoint was edited or damaged)."""


def plain_value(value: Any) -> Any:
    """A one-element array or tensor as the Python number it holds (``.item()``); anything else
    as it is. A tensor LR's base LRs are 0-d tensors."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (numbers.Number, str, bytes, Mapping)):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            return value
    return value


def _steps(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0


def _at_least_zero(value: Any) -> bool:
    value = plain_value(value)
    return is_finite_number(value) and value >= 0


STEPS: Rule = (_steps, "an integer >= 0 (the steps taken)")
"""A step count (``last_epoch``, ``_step_count``, MMEngine's ``last_step``)."""
ELAPSED: Rule = (_at_least_zero, "a finite number >= 0 (the training seconds spent)")
"""A time budget's clock: the training seconds a checkpoint has spent."""
FACTOR: Rule = (_at_least_zero, "a finite number >= 0 (a multiplier)")
"""A learning-rate multiplier."""


def base_values(groups: int) -> Rule:
    """The rule of a scheduler's base LRs: one finite number >= 0 per param group of its
    optimizer (``groups``), as a list (torch's ``base_lrs``, MMEngine's ``base_values``).

    >>> test, allowed = base_values(2)
    >>> test([0.1, 0.0]), test([0.1]), test([0.1, float("nan")]), allowed
    (True, False, False, 'a list of 2 finite numbers >= 0 (a base LR per param group)')
    """

    def test(value: Any) -> bool:
        return (
            isinstance(value, (list, tuple))
            and len(value) == groups
            and all(_at_least_zero(v) for v in value)
        )

    noun = "finite number" if groups == 1 else "finite numbers"
    return test, f"a list of {groups} {noun} >= 0 (a base LR per param group)"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MISSING = object()


def _lookup(state: Mapping[str, Any], key: str) -> Any:
    """``state[key]``, a dotted key (``clock.elapsed``) looked up level by level; ``_MISSING``
    where a level is absent or not a mapping."""
    value: Any = state
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def check_state(
    state: Any,
    rules: Mapping[str, Rule],
    *,
    owner: str,
    optional: Mapping[str, Rule] | None = None,
    reserved: Collection[str] = (),
    fix: str = STATE_FIX,
) -> None:
    """Refuse a checkpoint's scheduler ``state`` that breaks a rule, in one line naming the key.

    Args:
        state: the state read from the checkpoint.
        rules: ``{key: rule}`` for the keys the state must have (a dotted key such as
            ``clock.elapsed`` looks inside a nested mapping).
        owner (str): the scheduler's class name, for the message.
        optional: rules for keys checked where the state has them.
        reserved: names the state may not hold (the scheduler's methods and class attributes,
            which a loaded key would replace).
        fix (str): what to do instead.

    Raises:
        BudgetResumeError: ``cannot resume: the checkpoint's <owner> state has <key>=<value>;
        allowed: <what>; <fix>`` (or ``has no <key>``, or ``has a key 'step', which would replace
        <owner>.step``).
    """
    said = f"cannot resume: the checkpoint's {owner} state"
    if not isinstance(state, Mapping):
        raise BudgetResumeError(
            f"{said} is a {type(state).__name__}; allowed: the dict {owner}.state_dict() "
            f"writes; {fix}"
        )
    for key in state:
        if not isinstance(key, str) or key in reserved or key.startswith("__"):
            what = f"which would replace {owner}.{key}" if isinstance(key, str) else "not a name"
            raise BudgetResumeError(
                f"{said} has a key {key!r}, {what}; allowed: the keys {owner}.state_dict() "
                f"writes; {fix}"
            )
    checks = [(key, rule, True) for key, rule in rules.items()]
    checks += [(key, rule, False) for key, rule in (optional or {}).items()]
    for key, (test, allowed), required in checks:
        value = _lookup(state, key)
        if value is _MISSING:
            if required:
                raise BudgetResumeError(f"{said} has no {key}; allowed: {allowed}; {fix}")
            continue
        if not test(value):
            raise BudgetResumeError(f"{said} has {key}={_short(value)}; allowed: {allowed}; {fix}")

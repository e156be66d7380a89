"""The schedule registry: every schedule is one function of the progress ``p`` in [0, 1].

A schedule maps the progress ``p`` through the decay phase of a budget to a learning-rate
multiplier ``m = schedule(p, **params)`` (``m(0) = 1`` for the built-ins; the warmup in front of
it is :class:`budgeted.schedules.BudgetSchedule`'s). A new schedule is that function (keyword
parameters with defaults) plus one ``@register_schedule(name, rules=...)`` line: the rules say what
values a parameter may take (:data:`PARAM_RULES` holds those of the parameter names the built-ins
share), and every adapter that listens (:func:`on_schedule_registered`) adds it under its own
names. This module also answers what a registered schedule takes (:func:`schedule_info`,
:func:`check_params`) and whether two budgets' parameters are the same (:func:`same_params`).

>>> schedule_info("cosine").defaults
{'eta': 0.0}
>>> check_params("poly", {"power": 2})
{'power': 2}
>>> check_params("poly", {"power": -1})
Traceback (most recent call last):
ValueError: poly schedule: power=-1 is invalid; allowed: a number > 0
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PARAM_RULES",
    "Rule",
    "ScheduleFn",
    "ScheduleInfo",
    "check_params",
    "full_params",
    "get_schedule",
    "is_finite_number",
    "on_schedule_registered",
    "parse_arm",
    "plain_number",
    "register_schedule",
    "same_params",
    "schedule_info",
    "schedule_names",
    "schedule_params",
]

ScheduleFn = Callable[..., float]
"""A schedule: ``fn(p, **params) -> multiplier``."""
Rule = tuple[Callable[[Any], bool], str]
"""A parameter rule: (test of a value, description of what is allowed)."""


def is_finite_number(value: Any) -> bool:
    """A finite real number, Python's or NumPy's (not a bool)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def plain_number(value: Any) -> Any:
    """A real number as Python's ``int`` or ``float`` (NumPy scalars too), so that a budget's
    state stays plain; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _fraction_list(value: Any) -> bool:
    """An increasing list of fractions in (0, 1) (step milestones)."""
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        return False
    return all(0.0 < v < 1.0 for v in values) and values == sorted(values)


PARAM_RULES: dict[str, Rule] = {
    "eta": (lambda v: is_finite_number(v) and 0.0 <= v < 1.0, "a number in [0, 1)"),
    "power": (lambda v: is_finite_number(v) and v > 0.0, "a number > 0"),
    "lower": (is_finite_number, "a finite number below upper"),
    "upper": (is_finite_number, "a finite number above lower"),
    "milestones": (_fraction_list, "an increasing list of fractions in (0, 1)"),
    "gamma": (lambda v: is_finite_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
    "end_factor": (lambda v: is_finite_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
}
"""What each parameter shared by the built-in schedules may be: (test, what is allowed)."""


@dataclass(frozen=True)
class ScheduleInfo:
    """A registered schedule: its function, parameters with defaults, and their rules.

    ``label`` is the schedule's name in adapter class names (``"HTD"`` -> ``BudgetHTD``,
    ``BudgetHTDLR``); by default the name capitalized (``"sqrt"`` -> ``"Sqrt"``).
    """

    name: str
    fn: ScheduleFn
    label: str
    defaults: dict[str, Any]
    rules: dict[str, Rule]


_REGISTRY: dict[str, ScheduleInfo] = {}
_LISTENERS: list[Callable[[ScheduleInfo], None]] = []


def register_schedule(
    name: str, *, rules: dict[str, Rule] | None = None, label: str | None = None
) -> Callable[[ScheduleFn], ScheduleFn]:
    """Register ``fn(p, **params) -> multiplier`` under ``name``; every adapter picks it up.

    Each keyword parameter of ``fn`` needs a default and a rule: from ``rules``
    (``{"k": (test, "what is allowed")}``) or, for the parameter names the built-in schedules
    share (``eta``, ``power``, ``gamma``, ...), from :data:`PARAM_RULES`.

    Example::

        @register_schedule("sqrt", rules={"floor": (lambda v: 0 <= v < 1, "a number in [0, 1)")})
        def sqrt_decay(p: float, floor: float = 0.0) -> float:
            return floor + (1 - floor) * (1 - p) ** 0.5

    Detectron2 then knows ``BudgetSqrt`` (``SOLVER.BUDGET.SQRT_FLOOR``) and MMEngine
    ``BudgetSqrtLR`` (``floor=...``), with no further edit.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"schedule name {name!r} is invalid; allowed: lower-case [a-z0-9_]")

    def register(fn: ScheduleFn) -> ScheduleFn:
        if name in _REGISTRY:
            raise ValueError(f"schedule {name!r} is already registered")
        params = list(inspect.signature(fn).parameters.values())[1:]
        defaults = {}
        own = dict(rules or {})
        for param in params:
            if param.default is inspect.Parameter.empty:
                raise ValueError(
                    f"schedule {name!r}: parameter {param.name!r} has no default; allowed: "
                    "keyword parameters with defaults after the progress p"
                )
            if param.name not in own and param.name not in PARAM_RULES:
                raise ValueError(
                    f"schedule {name!r}: parameter {param.name!r} has no rule; pass "
                    f"rules={{{param.name!r}: (test, 'what is allowed')}}"
                )
            defaults[param.name] = param.default
        unknown = sorted(set(own) - set(defaults))
        if unknown:
            raise ValueError(f"schedule {name!r}: rules for unknown parameters {unknown}")
        info = ScheduleInfo(
            name=name,
            fn=fn,
            label=label or name.capitalize(),
            defaults=defaults,
            rules={k: own.get(k) or PARAM_RULES[k] for k in defaults},
        )
        _REGISTRY[name] = info
        for listener in list(_LISTENERS):
            listener(info)
        return fn

    return register


def on_schedule_registered(listener: Callable[[ScheduleInfo], None]) -> None:
    """Call ``listener(info)`` for every registered schedule: those already registered now, the
    later ones as they register. This is how the adapters add ``Budget<Label>`` names."""
    _LISTENERS.append(listener)
    for info in list(_REGISTRY.values()):
        listener(info)


def schedule_names() -> tuple[str, ...]:
    """The registered schedule names, in registration order."""
    return tuple(_REGISTRY)


def schedule_info(name: str) -> ScheduleInfo:
    """The registration of schedule ``name`` (one-line ``ValueError`` for an unknown name)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown schedule {name!r}; valid schedules: {', '.join(_REGISTRY)}"
        ) from None


def schedule_params(name: str) -> dict[str, Any]:
    """The parameters of schedule ``name`` with their defaults."""
    return dict(schedule_info(name).defaults)


def full_params(name: Any, params: Any) -> Any:
    """``params`` with every default of schedule ``name`` filled in and sequences as lists: the
    form in which two budgets' parameters are compared (``eta=0.0`` written out is the default
    left out). An unknown schedule or params that are not a mapping come back as they are.

    >>> full_params("step", {"gamma": 0.1})
    {'milestones': [0.6666666666666666, 0.8888888888888888], 'gamma': 0.1}
    """
    if not isinstance(params, Mapping):
        return params
    defaults = _REGISTRY[name].defaults if isinstance(name, str) and name in _REGISTRY else {}
    return {
        k: list(v) if isinstance(v, (tuple, list)) else v for k, v in {**defaults, **params}.items()
    }


def get_schedule(name: str) -> ScheduleFn:
    """The function of progress registered as ``name``."""
    return schedule_info(name).fn


def check_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``params`` for schedule ``name``; return them with milestones as a tuple."""
    info = schedule_info(name)
    allowed = info.defaults
    checked = dict(params)
    for key, value in params.items():
        if key not in allowed:
            takes = ", ".join(allowed) or "no parameters"
            raise ValueError(f"schedule {name!r} has no parameter {key!r}; it takes: {takes}")
        test, what = info.rules[key]
        if not test(value):
            raise ValueError(f"{name} schedule: {key}={value!r} is invalid; allowed: {what}")
        if key == "milestones":
            checked[key] = tuple(float(v) for v in value)
        else:
            checked[key] = plain_number(value)
    merged = {**allowed, **checked}
    if "lower" in merged and not merged["lower"] < merged["upper"]:
        raise ValueError(
            f"{name} schedule: lower={merged['lower']!r} must be below upper={merged['upper']!r}"
        )
    return checked


def same_params(saved_schedule: Any, saved_params: Any, schedule: str, params: Any) -> bool:
    """Whether a saved budget's ``saved_params`` (of ``saved_schedule``) are ``params`` of
    ``schedule``: the same schedule and the same values once its defaults are filled in
    (:func:`full_params`), so a default written out is no change.

    >>> same_params("cosine", {}, "cosine", {"eta": 0.0}), same_params("linear", {}, "cosine", {})
    (True, False)
    """
    return saved_schedule == schedule and full_params(schedule, saved_params) == full_params(
        schedule, params
    )


def _arm_value(text: str) -> Any:
    """A parameter value of an arm's text: an ``int``, else a ``float``, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_arm(text: str) -> tuple[str, dict[str, Any]]:
    """A schedule with parameters as one word, ``NAME[:KEY=VALUE[,KEY=VALUE...]]``: (the
    registered name, its checked parameters). This is how a sweep's ``--schedules`` and a
    script's ``--schedule`` name a schedule's variant (``BudgetSchedule`` takes it too).

    >>> parse_arm("wsd:decay=sqrt,cooldown=0.1"), parse_arm("sgdr:restarts=2"), parse_arm("rex")
    (('wsd', {'decay': 'sqrt', 'cooldown': 0.1}), ('sgdr', {'restarts': 2}), ('rex', {}))
    >>> parse_arm("wsd:decay")
    Traceback (most recent call last):
    ValueError: schedule 'wsd:decay' is invalid; allowed: NAME[:KEY=VALUE[,KEY=VALUE...]], e.g. wsd:decay=sqrt
    """  # noqa: E501
    name, _, rest = str(text).partition(":")
    pairs = [item.partition("=") for item in rest.split(",")] if rest else []
    if any(not key or not sep for key, sep, _ in pairs):
        raise ValueError(
            f"schedule {text!r} is invalid; allowed: NAME[:KEY=VALUE[,KEY=VALUE...]], e.g. "
            "wsd:decay=sqrt"
        )
    return name, check_params(name, {key: _arm_value(value) for key, _, value in pairs})

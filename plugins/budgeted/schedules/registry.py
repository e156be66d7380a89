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
from dataclasses import dataclass, field
from typing import Any

from ..runs.records import shown

__all__ = [
    "PARAM_RULES", "Rule", "ScheduleFn", "ScheduleInfo", "StepRule", "arm_text", "check_params",
    "full_params", "get_schedule", "is_finite_number", "on_schedule_registered", "parse_arm",
    "plain_number", "register_schedule", "same_params", "schedule_info", "schedule_names",
    "schedule_params"
]  # fmt: skip

ScheduleFn = Callable[..., float]
"""A schedule: ``fn(p, **params) -> multiplier``."""
Rule = tuple[Callable[[Any], bool], str]
"""A parameter rule: (test of a value, description of what is allowed)."""
StepRule = tuple[Callable[[Any, float], bool], str]
"""A parameter's rule where the decay's length in steps (iterations) is known: (test of a value
and that length, what is allowed; ``{steps}`` in it stands for the length)."""
PROGRESS_POINTS = tuple(k / 64 for k in range(65))
"""Where :func:`check_params` evaluates a schedule's multiplier: 65 points of the progress."""


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
    step_rules: dict[str, StepRule] = field(default_factory=dict)
    """Rules of parameters given the decay's length in steps (:func:`check_params`'s
    ``steps``): a phase shorter than one step trains nothing of it."""


_REGISTRY: dict[str, ScheduleInfo] = {}
_LISTENERS: list[Callable[[ScheduleInfo], None]] = []


def register_schedule(
    name: str,
    *,
    rules: dict[str, Rule] | None = None,
    label: str | None = None,
    step_rules: dict[str, StepRule] | None = None,
) -> Callable[[ScheduleFn], ScheduleFn]:
    """Register ``fn(p, **params) -> multiplier`` under ``name``; every adapter picks it up.

    Each keyword parameter of ``fn`` needs a default and a rule: from ``rules``
    (``{"k": (test, "what is allowed")}``) or, for the parameter names the built-in schedules
    share (``eta``, ``power``, ``gamma``, ...), from :data:`PARAM_RULES`. ``step_rules``
    (``{"k": (test(value, steps), "what is allowed")}``) say what a parameter may be where the
    decay's length in steps is known (wsd's cooldown spans more than one step).

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
        unknown = sorted((set(own) | set(step_rules or {})) - set(defaults))
        if unknown:
            raise ValueError(f"schedule {name!r}: rules for unknown parameters {unknown}")
        info = ScheduleInfo(
            name=name,
            fn=fn,
            label=label or name.capitalize(),
            defaults=defaults,
            rules={k: own.get(k) or PARAM_RULES[k] for k in defaults},
            step_rules=dict(step_rules or {}),
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


def check_params(name: str, params: dict[str, Any], steps: float | None = None) -> dict[str, Any]:
    """Validate ``params`` for schedule ``name``; return them with milestones as a tuple.

    Each value must pass its rule, and together with the defaults they must give a finite
    multiplier >= 0 over the progress (checked at :data:`PROGRESS_POINTS`). ``steps``: the
    decay's length in steps (iterations), where it is known: the schedule's ``step_rules``
    apply too, to its defaults as well (``wsd``'s default cooldown of a 3-step decay).

    Raises:
        ValueError: one line naming the parameter and what is allowed.

    >>> check_params("htd", {"lower": -1e308, "upper": 1e308})
    Traceback (most recent call last):
    ValueError: htd schedule: lower=-1e+308, upper=1e+308 give the multiplier nan at progress 0; \
allowed: parameters whose multiplier is a finite number >= 0
    >>> check_params("wsd", {"cooldown": 0.05}, steps=10)
    Traceback (most recent call last):
    ValueError: wsd schedule: cooldown=0.05 is invalid for a decay of 10 steps; allowed: a \
cooldown of more than one step, cooldown > 1/10
    """
    info = schedule_info(name)
    allowed = info.defaults
    checked = dict(params)
    for key, value in params.items():
        if key not in allowed:
            takes = ", ".join(allowed) or "no parameters"
            raise ValueError(f"schedule {name!r} has no parameter {key!r}; it takes: {takes}")
        test, what = info.rules[key]
        if not test(value):
            raise ValueError(f"{name} schedule: {key}={shown(value)} is invalid; allowed: {what}")
        if key == "milestones":
            checked[key] = tuple(float(v) for v in value)
        else:
            checked[key] = plain_number(value)
    merged = {**allowed, **checked}
    if "lower" in merged and not merged["lower"] < merged["upper"]:
        raise ValueError(
            f"{name} schedule: lower={merged['lower']!r} must be below upper={merged['upper']!r}"
        )
    _check_multiplier(info, merged, checked)
    for key, (test, what) in info.step_rules.items() if steps is not None else ():
        if not test(merged[key], steps):
            raise ValueError(
                f"{name} schedule: {key}={shown(merged[key])} is invalid for a decay of {steps:g} "
                f"steps; allowed: {what.format(steps=f'{steps:g}')}"
            )
    return checked


def _check_multiplier(info: ScheduleInfo, merged: dict[str, Any], given: dict[str, Any]) -> None:
    """Refuse (``ValueError``) parameters that make the multiplier of schedule ``info`` anything
    but a finite number >= 0 at one of :data:`PROGRESS_POINTS` (``htd`` with ``upper - lower``
    beyond the largest float: NaN at 0)."""
    for p in PROGRESS_POINTS:
        try:
            value: Any = info.fn(p, **merged)
            ok = is_finite_number(value) and value >= 0
        except (ArithmeticError, ValueError, TypeError) as err:
            value, ok = f"an {type(err).__name__}", False
        if not ok:
            named = ", ".join(f"{k}={shown(v)}" for k, v in given.items()) or "the defaults"
            raise ValueError(
                f"{info.name} schedule: {named} give the multiplier {value} at progress {p:g}; "
                "allowed: parameters whose multiplier is a finite number >= 0"
            )


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
    keys = [key for key, _, _ in pairs]
    twice = next((key for key in keys if keys.count(key) > 1), None)
    if twice is not None:
        raise ValueError(
            f"schedule {text!r} gives {twice} {keys.count(twice)} times; allowed: each "
            "parameter once"
        )
    return name, check_params(name, {key: _arm_value(value) for key, _, value in pairs})


def arm_text(name: str, params: Mapping[str, Any]) -> str:
    """The one text of a schedule with parameters (its arm's name): ``name``, then each
    parameter that is not its default, in the order the schedule takes them, so that one
    schedule has one text (``wsd``, ``wsd:decay=linear`` and ``wsd:cooldown=0.2`` are ``wsd``).
    Numbers are written as Python reads them back, of the default's kind (``0.1``; ``1`` of a
    parameter whose default is a float as ``1.0``).

    >>> arm_text("wsd", {"decay": "sqrt", "cooldown": 0.10}), arm_text("wsd", {"cooldown": 0.2})
    ('wsd:cooldown=0.1,decay=sqrt', 'wsd')
    >>> arm_text("wsd", {"cooldown": 1}), arm_text("sgdr", {"restarts": 2})
    ('wsd:cooldown=1.0', 'sgdr:restarts=2')
    """
    defaults, given = full_params(name, schedule_params(name)), full_params(name, params)
    changed = [f"{k}={_value_text(v, defaults[k])}" for k, v in given.items() if v != defaults[k]]
    return f"{name}:{','.join(changed)}" if changed else name


def _value_text(value: Any, default: Any) -> str:
    """A parameter's value as an arm's text writes it: a whole number of a parameter whose
    default is a float as that float."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    return repr(value) if isinstance(value, float) else str(value)

"""Budget-aware learning-rate multipliers: the schedule math, with no framework imports.

Li, Yumer, Ramanan, "Budgeted Training: Rethinking Deep Neural Network Training Under Resource
Constraints", ICLR 2020. A schedule is a function of the progress ``p`` in [0, 1] through the
decay phase of a budget; :class:`BudgetSchedule` adds the fixed-length warmup in front of it:

- ``elapsed < warmup``: linear warmup ``f (1 - e/W) + e/W`` from ``f = warmup_factor`` to 1
  (``warmup_method="constant"``: ``f``);
- otherwise ``p = (elapsed - W) / (T - W)``, clipped to 1, and the multiplier is ``schedule(p)``.

``elapsed``, ``W`` and ``T`` share one unit: iterations for the framework adapters, but nothing
here counts iterations, so seconds of wall-clock time or images seen work the same way.

A new schedule is one function of ``p`` (keyword parameters with defaults) plus one
``@register_schedule`` line; :data:`PARAM_RULES` says what values a parameter may take.
"""

from __future__ import annotations

import bisect
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

ScheduleFn = Callable[..., float]

_REGISTRY: dict[str, ScheduleFn] = {}


def register_schedule(name: str) -> Callable[[ScheduleFn], ScheduleFn]:
    """Register ``fn(p, **params) -> multiplier`` under ``name``."""

    def register(fn: ScheduleFn) -> ScheduleFn:
        if name in _REGISTRY:
            raise ValueError(f"schedule {name!r} is already registered")
        _REGISTRY[name] = fn
        return fn

    return register


@register_schedule("linear")
def linear(p: float) -> float:
    """``1 - p``: the paper's recommendation, parameter-free."""
    return 1.0 - p


@register_schedule("cosine")
def cosine(p: float, eta: float = 0.0) -> float:
    """``eta + (1 - eta) (1 + cos(pi p)) / 2``."""
    return eta + (1.0 - eta) * (1.0 + math.cos(math.pi * p)) / 2.0


@register_schedule("poly")
def poly(p: float, power: float = 0.9) -> float:
    """``(1 - p) ** power``."""
    return (1.0 - p) ** power


@register_schedule("htd")
def htd(p: float, lower: float = -6.0, upper: float = 3.0, eta: float = 0.0) -> float:
    """Hyperbolic-tangent decay ``eta + (1 - eta) (1 - tanh(lower + (upper - lower) p)) / 2``."""
    return eta + (1.0 - eta) * (1.0 - math.tanh(lower + (upper - lower) * p)) / 2.0


@register_schedule("step")
def step(p: float, milestones: Sequence[float] = (2 / 3, 8 / 9), gamma: float = 0.1) -> float:
    """Budget-aware step decay ``gamma ** (number of milestones <= p)``, milestones as fractions."""
    return gamma ** bisect.bisect_right(milestones, p)


@register_schedule("exp")
def exp(p: float, end_factor: float = 0.01) -> float:
    """Budget-aware exponential decay ``end_factor ** p`` (``gamma ** (p T0)`` rescaled)."""
    return end_factor**p


@register_schedule("constant")
def constant(p: float) -> float:
    """``1``: no decay (the warmup still applies)."""
    return 1.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fraction_list(value: Any) -> bool:
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        return False
    return all(0.0 < v < 1.0 for v in values) and values == sorted(values)


# What each schedule parameter may be: (test, description of what is allowed).
PARAM_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "eta": (lambda v: _is_number(v) and 0.0 <= v < 1.0, "a number in [0, 1)"),
    "power": (lambda v: _is_number(v) and v > 0.0, "a number > 0"),
    "lower": (_is_number, "a finite number below upper"),
    "upper": (_is_number, "a finite number above lower"),
    "milestones": (_fraction_list, "an increasing list of fractions in (0, 1)"),
    "gamma": (lambda v: _is_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
    "end_factor": (lambda v: _is_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]"),
}

WARMUP_METHODS = ("linear", "constant")


def schedule_names() -> tuple[str, ...]:
    """The registered schedule names, in registration order."""
    return tuple(_REGISTRY)


def schedule_params(name: str) -> dict[str, Any]:
    """The parameters of schedule ``name`` with their defaults."""
    fn = get_schedule(name)
    params = list(inspect.signature(fn).parameters.values())[1:]
    return {p.name: p.default for p in params}


def get_schedule(name: str) -> ScheduleFn:
    """The function of progress registered as ``name``."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown schedule {name!r}; valid schedules: {', '.join(_REGISTRY)}"
        ) from None


def check_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Validate ``params`` for schedule ``name``; return them with milestones as a tuple."""
    allowed = schedule_params(name)
    checked = dict(params)
    for key, value in params.items():
        if key not in allowed:
            takes = ", ".join(allowed) or "no parameters"
            raise ValueError(f"schedule {name!r} has no parameter {key!r}; it takes: {takes}")
        test, what = PARAM_RULES[key]
        if not test(value):
            raise ValueError(f"{name} schedule: {key}={value!r} is invalid; allowed: {what}")
        if key == "milestones":
            checked[key] = tuple(float(v) for v in value)
    merged = {**allowed, **checked}
    if "lower" in merged and not merged["lower"] < merged["upper"]:
        raise ValueError(
            f"{name} schedule: lower={merged['lower']!r} must be below upper={merged['upper']!r}"
        )
    return checked


@dataclass(frozen=True)
class BudgetSchedule:
    """A warmup of fixed length ``warmup``, then ``schedule`` over the rest of the budget ``total``.

    Call it with the elapsed amount of the budget (iterations, images, seconds: the unit of
    ``total`` and ``warmup``) to get the learning-rate multiplier.
    """

    schedule: str
    total: float
    warmup: float = 500
    warmup_factor: float = 0.001
    warmup_method: str = "linear"
    params: dict[str, Any] = field(default_factory=dict)
    _decay: Callable[[float], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = get_schedule(self.schedule)
        if not _is_number(self.total) or self.total <= 0:
            raise ValueError(f"budget total={self.total!r} is invalid; allowed: a number > 0")
        if not _is_number(self.warmup) or self.warmup < 0:
            raise ValueError(f"warmup={self.warmup!r} is invalid; allowed: a number >= 0")
        if self.warmup >= self.total:
            raise ValueError(
                f"warmup={self.warmup!r} is not shorter than the budget total={self.total!r}: "
                "the decay phase would be empty; allowed: 0 <= warmup < total"
            )
        if not _is_number(self.warmup_factor) or not 0.0 < self.warmup_factor <= 1.0:
            raise ValueError(
                f"warmup_factor={self.warmup_factor!r} is invalid; allowed: a number in (0, 1]"
            )
        if self.warmup_method not in WARMUP_METHODS:
            raise ValueError(
                f"unknown warmup_method {self.warmup_method!r}; valid: {', '.join(WARMUP_METHODS)}"
            )
        params = check_params(self.schedule, self.params)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "_decay", partial(fn, **params) if params else fn)

    @property
    def decay_length(self) -> float:
        """``T - W``: the length of the decay phase."""
        return self.total - self.warmup

    def progress(self, elapsed: float) -> float:
        """Progress ``p`` in [0, 1] through the decay phase (0 during warmup)."""
        if elapsed <= self.warmup:
            return 0.0
        return min((elapsed - self.warmup) / (self.total - self.warmup), 1.0)

    def __call__(self, elapsed: float) -> float:
        if elapsed < self.warmup:
            if elapsed < 0:
                raise ValueError(f"elapsed={elapsed!r} is invalid; allowed: a number >= 0")
            if self.warmup_method == "constant":
                return self.warmup_factor
            alpha = elapsed / self.warmup
            return self.warmup_factor * (1.0 - alpha) + alpha
        p = (elapsed - self.warmup) / (self.total - self.warmup)
        return self._decay(p if p < 1.0 else 1.0)


def lr_multiplier(
    schedule: str,
    iteration: float,
    total_iters: float,
    *,
    warmup_iters: float = 500,
    warmup_factor: float = 0.001,
    warmup_method: str = "linear",
    **params: Any,
) -> float:
    """The base-LR multiplier at 0-based ``iteration`` of a budget of ``total_iters``."""
    return BudgetSchedule(
        schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
    )(iteration)

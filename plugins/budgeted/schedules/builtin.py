"""The built-in schedules (the multiplier ``m(p)`` over the progress ``p`` in [0, 1] of the decay):

- ``linear``: ``1 - p`` (the paper's recommendation);
- ``cosine``: ``eta + (1 - eta) (1 + cos(pi p)) / 2`` (``eta=0``);
- ``poly``: ``(1 - p) ** power`` (``power=0.9``);
- ``htd``: ``eta + (1 - eta) (1 - tanh(lower + (upper - lower) p)) / 2`` (``lower=-6``,
  ``upper=3``, ``eta=0``);
- ``step``: ``gamma ** (number of milestones <= p)`` (``milestones=(2/3, 8/9)``, ``gamma=0.1``);
- ``exp``: ``end_factor ** p`` (``end_factor=0.01``);
- ``constant``: ``1``, no decay;
- ``wsd``: ``1`` while ``p <= 1 - c``, then the cooldown ``d(q)`` over its progress
  ``q = (p - 1 + c) / c`` (``cooldown=c=0.2``; ``decay``: ``linear`` ``1 - q``, ``sqrt``
  ``1 - sqrt(q)``, ``cosine`` ``(1 + cos(pi q)) / 2``);
- ``rex``: ``(1 - p) / (1 - p / 2)``;
- ``sgdr``: ``(1 + cos(pi frac((n + 1) p))) / 2``, ``n + 1`` equal cosine periods
  (``restarts=n=1``), 0 at ``p = 1``.

Each is registered (:func:`budgeted.schedules.register_schedule`) in this order when
:mod:`budgeted.schedules` is imported, so every adapter knows it by name.

>>> fns = (linear, cosine, poly, htd, step, exp, constant, wsd, rex, sgdr)
>>> [round(f(0.5), 4) for f in fns]
[0.5, 0.5, 0.5359, 0.9526, 1.0, 0.1, 1.0, 1.0, 0.6667, 1.0]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

from .registry import is_finite_number, register_schedule

__all__ = [
    "FINEST", "WSD_DECAYS", "constant", "cosine", "exp", "htd", "linear", "poly", "rex", "sgdr",
    "step", "wsd",
]  # fmt: skip


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


@register_schedule("htd", label="HTD")
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


FINEST = 1e-6
"""The shortest phase a parameter may give without knowing the budget, as a fraction of the
decay: one step of a million (``wsd``'s cooldown at least this, ``sgdr``'s periods at most its
inverse). Where the decay's length is known, each such phase spans more than one step
(:func:`~budgeted.schedules.check_params`'s ``steps``)."""

WSD_DECAYS: dict[str, Callable[[float], float]] = {
    "linear": lambda q: 1.0 - q,
    "sqrt": lambda q: 1.0 - math.sqrt(q),
    "cosine": lambda q: (1.0 + math.cos(math.pi * q)) / 2.0,
}
"""``wsd``'s cooldown shapes ``d(q)``, from 1 at ``q = 0`` to 0 at ``q = 1``."""


@register_schedule(
    "wsd",
    label="WSD",
    rules={
        "cooldown": (
            lambda v: is_finite_number(v) and FINEST <= v <= 1.0,
            f"a number in [{FINEST:g}, 1] (a fraction of the decay)",
        ),
        "decay": (lambda v: isinstance(v, str) and v in WSD_DECAYS, ", ".join(WSD_DECAYS)),
    },
    step_rules={
        "cooldown": (
            lambda v, steps: v * steps > 1.0,
            "a cooldown of more than one step, cooldown > 1/{steps}",
        )
    },
)
def wsd(p: float, cooldown: float = 0.2, decay: str = "linear") -> float:
    """Warmup-stable-decay: ``1`` while ``p <= 1 - c``, then ``d(q)`` down to 0 over the
    cooldown's progress ``q = (p - 1 + c) / c``: ``linear`` ``1 - q`` (HF ``get_wsd_schedule``'s
    default), ``sqrt`` ``1 - sqrt(q)`` (timm's ``WSDLRScheduler`` default; better than linear in
    Hägele et al. 2024), ``cosine`` ``(1 + cos(pi q)) / 2``.

    The cooldown is the last fraction ``c`` of the decay phase (the budget after the warmup), so
    the stable phase is the same for every budget: one stable run can be branched into a
    cooldown per budget (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond
    Fixed Training Durations").

    >>> wsd(0.5), round(wsd(0.9), 9), round(wsd(0.9, decay="sqrt"), 4), wsd(1.0, decay="cosine")
    (1.0, 0.5, 0.2929, 0.0)
    """
    if p <= 1.0 - cooldown:
        return 1.0
    return WSD_DECAYS[decay](min(1.0, (p - 1.0 + cooldown) / cooldown))


@register_schedule("rex")
def rex(p: float) -> float:
    """REX: ``(1 - p) / (1 - p / 2)``, parameter-free (Chen, Wolfe, Kyrillidis, "REX: Revisiting
    Budgeted Training with an Improved Schedule", MLSys 2022): above linear's ``1 - p`` over the
    whole decay, by the factor ``1 / (1 - p / 2)``, then down to 0 at twice linear's slope.

    >>> rex(0.0), rex(0.5), rex(1.0)
    (1.0, 0.6666666666666666, 0.0)
    """
    return (1.0 - p) / (1.0 - p / 2.0)


@register_schedule(
    "sgdr",
    label="SGDR",
    rules={
        "restarts": (
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 / FINEST,
            f"a whole number >= 0 and below {1 / FINEST:.0f}",
        )
    },
    step_rules={
        "restarts": (
            lambda v, steps: v + 1 < steps,
            "periods of more than one step each, restarts + 1 < {steps}",
        )
    },
)
def sgdr(p: float, restarts: int = 1) -> float:
    """Budget-aware SGDR ("SGDR-rN" of the paper's appendix): ``n + 1`` cosine periods of equal
    length over the decay (``restarts=n``), each from 1 to 0: ``(1 + cos(pi frac((n + 1) p))) / 2``,
    and 0 at ``p = 1`` (Loshchilov and Hutter, ICLR 2017, restarted at even intervals of the
    budget).

    >>> [round(sgdr(p), 4) for p in (0.0, 0.25, 0.4999, 0.5, 1.0)]
    [1.0, 0.5, 0.0, 1.0, 0.0]
    """
    if p >= 1.0:
        return 0.0
    return (1.0 + math.cos(math.pi * ((restarts + 1) * p % 1.0))) / 2.0

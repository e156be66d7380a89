"""The built-in schedules (the multiplier ``m(p)`` over the progress ``p`` in [0, 1] of the decay):

- ``linear``: ``1 - p`` (the paper's recommendation);
- ``cosine``: ``eta + (1 - eta) (1 + cos(pi p)) / 2`` (``eta=0``);
- ``poly``: ``(1 - p) ** power`` (``power=0.9``);
- ``htd``: ``eta + (1 - eta) (1 - tanh(lower + (upper - lower) p)) / 2`` (``lower=-6``,
  ``upper=3``, ``eta=0``);
- ``step``: ``gamma ** (number of milestones <= p)`` (``milestones=(2/3, 8/9)``, ``gamma=0.1``);
- ``exp``: ``end_factor ** p`` (``end_factor=0.01``);
- ``constant``: ``1``, no decay;
- ``wsd``: ``1`` while ``p <= 1 - c``, then ``(1 - p) / c`` (``cooldown=c=0.2``);
- ``rex``: ``(1 - p) / (1 - p / 2)``.

Each is registered (:func:`budgeted.schedules.register_schedule`) in this order when
:mod:`budgeted.schedules` is imported, so every adapter knows it by name.

>>> [round(f(0.5), 4) for f in (linear, cosine, poly, htd, step, exp, constant, wsd, rex)]
[0.5, 0.5, 0.5359, 0.9526, 1.0, 0.1, 1.0, 1.0, 0.6667]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from .registry import is_finite_number, register_schedule

__all__ = ["constant", "cosine", "exp", "htd", "linear", "poly", "rex", "step", "wsd"]


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


@register_schedule(
    "wsd",
    label="WSD",
    rules={"cooldown": (lambda v: is_finite_number(v) and 0.0 < v <= 1.0, "a number in (0, 1]")},
)
def wsd(p: float, cooldown: float = 0.2) -> float:
    """Warmup-stable-decay: ``1`` while ``p <= 1 - c``, then ``(1 - p) / c`` down to 0.

    The cooldown is the last fraction ``c`` of the decay phase (the budget after the warmup), so
    the stable phase is the same for every budget: one stable run can be branched into a
    cooldown per budget (Hägele et al. 2024; HF ``get_wsd_schedule`` with a linear decay).

    >>> wsd(0.5), round(wsd(0.9), 9), wsd(1.0)
    (1.0, 0.5, 0.0)
    """
    return 1.0 if p <= 1.0 - cooldown else (1.0 - p) / cooldown


@register_schedule("rex")
def rex(p: float) -> float:
    """REX: ``(1 - p) / (1 - p / 2)``, parameter-free (Chen, Wolfe, Kyrillidis, "REX: Revisiting
    Budgeted Training with an Improved Schedule", MLSys 2022): above linear's ``1 - p`` over the
    whole decay, by the factor ``1 / (1 - p / 2)``, then down to 0 at twice linear's slope.

    >>> rex(0.0), rex(0.5), rex(1.0)
    (1.0, 0.6666666666666666, 0.0)
    """
    return (1.0 - p) / (1.0 - p / 2.0)

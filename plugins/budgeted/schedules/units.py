"""Turn a training budget, however it is stated, into a number of iterations.

>>> budget_iters(fraction=0.1, full_iters=90000)   # 10 % of Mask R-CNN's 1x schedule
9000
>>> budget_iters(epochs=2, dataset_size=1000, batch_size=16)
125
>>> budget_iters(images=1600, batch_size=16)
100
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from ..errors import BudgetConfigError

BUDGET_FRACTIONS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
"""The paper's budgets, as fractions of a full schedule."""


def whole_number(name: str, value: Any, *, least: int = 1) -> int:
    """``value`` as a plain ``int`` if it is a whole number (Python's or NumPy's, ``100.0``
    too) ``>= least``: the rule of every count of iterations, images or steps (fractions, epochs
    and seconds may be fractional; a count may not).

    Raises:
        BudgetConfigError: ``<name>=<value> is invalid; allowed: a whole number > 0`` (``>= 0``
        with ``least=0``).

    >>> whole_number("total_iters", 100.0), whole_number("warmup_iters", 0, least=0)
    (100, 0)
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < least or value != int(value):
        bound = "> 0" if least == 1 else f">= {least}"
        raise BudgetConfigError(f"{name}={value!r} is invalid; allowed: a whole number {bound}")
    return int(value)


def _positive(name: str, value: float | None, *, integer: bool = False) -> float:
    """``value`` (Python's or NumPy's) as a plain ``int`` / ``float``; one-line ValueError."""
    if integer:
        return whole_number(f"budget {name}", value)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value <= 0:
        raise ValueError(f"budget {name}={value!r} is invalid; allowed: a number > 0")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


_USES = {
    "iters": (),
    "fraction": ("full_iters",),
    "epochs": ("dataset_size", "batch_size"),
    "images": ("batch_size",),
}
"""The other arguments each form of :func:`budget_iters` reads."""


def budget_iters(
    *,
    iters: int | None = None,
    fraction: float | None = None,
    full_iters: int | None = None,
    epochs: float | None = None,
    dataset_size: int | None = None,
    images: int | None = None,
    batch_size: int | None = None,
) -> int:
    """Iterations of a budget given as exactly one of:

    - ``iters``: a number of iterations;
    - ``fraction`` of a full schedule of ``full_iters`` iterations:
      ``round(fraction * full_iters)``;
    - ``epochs`` over ``dataset_size`` images at ``batch_size``:
      ``ceil(epochs * dataset_size / batch_size)``;
    - ``images`` seen at ``batch_size`` (the total batch over all GPUs):
      ``ceil(images / batch_size)``.
    """
    given = [
        k
        for k, v in (
            ("iters", iters),
            ("fraction", fraction),
            ("epochs", epochs),
            ("images", images),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise ValueError(
            f"a budget needs exactly one of iters, fraction, epochs, images; got {given or 'none'}"
        )
    uses = _USES[given[0]]
    extra = [
        name
        for name, value in (
            ("full_iters", full_iters),
            ("dataset_size", dataset_size),
            ("batch_size", batch_size),
        )
        if value is not None and name not in uses
    ]
    if extra:
        raise ValueError(
            f"a budget of {given[0]} does not use {', '.join(extra)}; allowed with it: "
            f"{', '.join(uses) or 'nothing else'}"
        )
    if iters is not None:
        total = _positive("iters", iters, integer=True)
    elif fraction is not None:
        total = _positive("fraction", fraction) * _positive("full_iters", full_iters, integer=True)
        total = round(total)
    elif epochs is not None:
        images_seen = _positive("epochs", epochs) * _positive(
            "dataset_size", dataset_size, integer=True
        )
        # round() first: 1.1 * 50000 is 55000.000000000007 in floating point, not 55001 iterations
        total = math.ceil(round(images_seen / _positive("batch_size", batch_size, integer=True), 9))
    else:
        total = math.ceil(
            _positive("images", images, integer=True)
            / _positive("batch_size", batch_size, integer=True)
        )
    if total < 1:
        raise ValueError(
            f"the budget {given[0]}={locals()[given[0]]!r} is less than one iteration; allowed: "
            "a budget of at least one iteration"
        )
    return int(total)

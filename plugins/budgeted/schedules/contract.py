"""The budget contract, declared once: each field of a budget, its rule and what is allowed.

:class:`~budgeted.schedules.BudgetSchedule` checks its fields against :data:`FIELDS` (one route,
:func:`check_fields`); a value a rule refuses raises :class:`BudgetFieldError`, which carries the
field, the value and what is allowed, and which each adapter renders with its own key names
(:meth:`BudgetFieldError.render`): ``SOLVER.WARMUP_ITERS`` in Detectron2,
``lr_multiplier.warmup_iters`` in a LazyConfig, ``warmup_iters`` in MMEngine. No message is
rewritten after the fact.

>>> try:
...     check_fields(total=1000, warmup=1000, warmup_factor=0.1, warmup_method="linear")
... except BudgetFieldError as err:
...     print(err.render({"total": "SOLVER.MAX_ITER", "warmup": "SOLVER.WARMUP_ITERS"}))
SOLVER.WARMUP_ITERS=1000 is not shorter than the budget SOLVER.MAX_ITER=1000: the decay phase \
would be empty; allowed: 0 <= SOLVER.WARMUP_ITERS < SOLVER.MAX_ITER
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BudgetConfigError
from .registry import is_finite_number

__all__ = ["DEFAULTS", "FIELDS", "WARMUP_METHODS", "BudgetFieldError", "Field", "check_fields"]

WARMUP_METHODS = ("linear", "constant")
"""How the warmup rises: linearly from ``warmup_factor`` to 1, or constant at ``warmup_factor``."""


@dataclass(frozen=True)
class Field:
    """One field of a budget: its rule (a test of the value, given the other fields) and what
    is allowed, as the message says it (``{total}`` stands for the name of another field)."""

    name: str
    test: Callable[[Any, Mapping[str, Any]], bool]
    allowed: str
    problem: str = "is invalid"
    subject: str = ""
    """What the core's message says before the field's own name (an adapter's key stands
    alone)."""
    type: type = float
    default: Any = None
    """The value a budget has where none is given (None: it must be given)."""


FIELDS: tuple[Field, ...] = (
    Field("total", lambda v, _: is_finite_number(v) and v > 0, "a number > 0", subject="budget "),
    Field("warmup", lambda v, _: is_finite_number(v) and v >= 0, "a number >= 0", default=500),
    Field(
        "warmup",
        lambda v, f: v < f["total"],
        "0 <= {warmup} < {total}",
        "is not shorter than the budget {total}={total!r}: the decay phase would be empty",
    ),
    Field(
        "warmup_factor",
        lambda v, _: is_finite_number(v) and 0 < v <= 1,
        "a number in (0, 1]",
        default=0.001,
    ),
    Field(
        "warmup_method",
        lambda v, _: v in WARMUP_METHODS,
        ", ".join(WARMUP_METHODS),
        type=str,
        default="linear",
    ),
)
"""The rules of a budget's fields, checked in this order (``total`` before the warmup that
must be shorter than it), with each field's type and default (on its first rule)."""

DEFAULTS: dict[str, Any] = {f.name: f.default for f in FIELDS if f.default is not None}
"""Each budget field's default, the one every adapter's signature and config key takes: the
paper's fixed warmup of 500 iterations rising linearly from 0.001.

>>> DEFAULTS
{'warmup': 500, 'warmup_factor': 0.001, 'warmup_method': 'linear'}
"""


class BudgetFieldError(BudgetConfigError):
    """A budget field whose value breaks its rule: ``field``, ``value``, ``allowed``, and the
    other fields' values (``fields``) the message may name.

    Example:
        >>> err = BudgetFieldError(FIELDS[3], 0, {})
        >>> str(err), err.render({"warmup_factor": "SOLVER.WARMUP_FACTOR"})[:24]
        ('warmup_factor=0 is invalid; allowed: a number in (0, 1]', 'SOLVER.WARMUP_FACTOR=0 i')
    """

    def __init__(self, rule: Field, value: Any, fields: Mapping[str, Any]) -> None:
        self.rule, self.field, self.value, self.fields = rule, rule.name, value, dict(fields)
        super().__init__(self.render())

    def render(self, names: Mapping[str, str] | None = None) -> str:
        """The one line, each field named by ``names`` (the core's names where it has none)."""
        named = {f.name: (names or {}).get(f.name, f.name) for f in FIELDS}

        def fill(text: str) -> str:
            for key, value in self.fields.items():
                text = text.replace(f"{{{key}!r}}", repr(value))
            return text.format(**named)

        prefix = "" if self.field in (names or {}) else self.rule.subject
        subject = f"{prefix}{named[self.field]}={self.value!r}"
        return f"{subject} {fill(self.rule.problem)}; allowed: {fill(self.rule.allowed)}"


def check_fields(**fields: Any) -> None:
    """Check a budget's ``fields`` (by the core's names) against :data:`FIELDS`.

    Raises:
        BudgetFieldError: the first rule broken.
    """
    for rule in FIELDS:
        value = fields[rule.name]
        try:
            ok = bool(rule.test(value, fields))
        except TypeError:
            ok = False
        if not ok:
            raise BudgetFieldError(rule, value, fields)

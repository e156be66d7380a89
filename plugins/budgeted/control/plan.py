"""The budget's plan before training, decided once for every framework: the ``Budget<Label>``
names of every core schedule (:func:`adapter_names`), a budget as the training loop's length
(:func:`planned_iters`, :func:`length_agrees`), a user's own schedule put under a budget
(:class:`OwnSchedule`, :func:`step_params`) and one budget at a time (:func:`check_one_budget`).

The adapters word every refusal their own way (they pass their words and error type) and read
their configs themselves; nothing here imports a framework.

Example:
    >>> planned_iters(0.1, 90000), planned_iters(0.1, 90000, batch=16, loop_batch=32)
    (9000.0, 4500.0)
    >>> length_agrees(4500, 4500.0), length_agrees(4501, 4500.0), length_agrees(7, 6.5)
    (True, False, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schedules import (
    ScheduleInfo,
    budget_iters,
    on_schedule_registered,
    parse_arm,
    schedule_info,
    schedule_names,
)
from ..schedules import builtin as _builtin

__all__ = [
    "OwnSchedule", "adapter_names", "built_in_names", "check_one_budget", "length_agrees",
    "planned_iters", "step_params"
]  # fmt: skip


def built_in_names(suffix: str = "") -> tuple[str, ...]:
    """``Budget<Label><suffix>`` of each built-in schedule (``("BudgetLinear", ...)``)."""
    infos = (schedule_info(n) for n in schedule_names())
    return tuple(f"Budget{i.label}{suffix}" for i in infos if i.fn.__module__ == _builtin.__name__)


def adapter_names(
    suffix: str,
    add: Callable[[ScheduleInfo, str], None],
    warn: Callable[[ScheduleInfo, ValueError], None] | None = None,
) -> None:
    """Name every core schedule, registered now or later, ``Budget<Label><suffix>`` in an
    adapter: ``add(info, name)``; its one-line ``ValueError`` (a taken name) is raised, or handed
    to ``warn(info, err)`` where given."""

    def listener(info: ScheduleInfo) -> None:
        try:
            add(info, f"Budget{info.label}{suffix}")
        except ValueError as err:
            if warn is None:
                raise
            warn(info, err)

    on_schedule_registered(listener)


def planned_iters(
    fraction: float, full: int, batch: int | None = None, loop_batch: int | None = None
) -> float:
    """The loop's length that trains ``fraction`` of a full schedule of ``full`` iterations
    counted at ``batch`` (none or ``loop_batch``: the loop's own), unrounded where the batches
    differ: ``fraction * full * batch / loop_batch``; else ``budget_iters`` (which validates).
    """
    iters = budget_iters(fraction=fraction, full_iters=full)
    if not batch or batch == loop_batch or loop_batch is None:
        return float(iters)
    return fraction * full * batch / loop_batch


def length_agrees(length: int, planned: float | None) -> bool:
    """Whether a loop of ``length`` trains the ``planned`` one (:func:`planned_iters`; None:
    always): equal to it rounded, or one of the two whole numbers around a fractional one (a
    framework's own batch scaling rounds once more)."""
    return planned is None or length == round(planned) or abs(length - planned) < 1


def check_one_budget(
    fraction: Any, head: str, hint: str, error: type[Exception] = ValueError
) -> None:
    """A time budget with a ``fraction`` of the schedule (not None or 1) is two budgets: refused
    in one line, ``error``: the adapter's ``head`` (what was given), the rule, its ``hint``.

    Example:
        >>> check_one_budget(1.0, "--budget-time 6h with 1.0", "no fraction")
        >>> check_one_budget(0.1, "--budget-time 6h with 0.1", "no fraction")
        Traceback (most recent call last):
        ValueError: --budget-time 6h with 0.1: a time budget and a fraction of the schedule are \
two budgets; allowed: one of them (no fraction)
    """
    if fraction is not None and fraction != 1:
        raise error(
            f"{head}: a time budget and a fraction of the schedule are two budgets; allowed: one "
            f"of them ({hint})"
        )


def step_params(milestones: Iterable[float], length: float, gamma: float) -> dict[str, Any]:
    """A config's own step schedule (``milestones`` in a run of ``length``, each a factor of
    ``gamma``) as the budget ``step``'s parameters: milestones as fractions of the length (those
    outside it dropped); ``{}`` where none is left (the core's defaults then).

    Example:
        >>> step_params([80000, 60000, 95000], 90000, 0.1)
        {'milestones': (0.6666666666666666, 0.8888888888888888), 'gamma': 0.1}
    """
    fractions = tuple(m / length for m in sorted(milestones or ()) if 0 < m < length)
    return {"milestones": fractions, "gamma": gamma} if fractions else {}


@dataclass
class OwnSchedule:
    """A user's own schedule as the budget schedule that replaces it: its warmup (iterations,
    start factor, method) kept, its own step milestones or poly power as the budget schedule's
    parameters (:meth:`of`).

    Example:
        >>> own = OwnSchedule.of("step", 40, own={"step": lambda: step_params([300], 400, 0.1)})
        >>> own.schedule, own.params
        ('step', {'milestones': (0.75,), 'gamma': 0.1})
    """

    schedule: str
    warmup: int = 0
    factor: float = 1.0
    method: str = "linear"
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        text: str,
        warmup: int = 0,
        factor: float = 1.0,
        method: str = "linear",
        own: Mapping[str, Callable[[], dict[str, Any]]] | None = None,
    ) -> OwnSchedule:
        """The schedule ``text`` names (``NAME[:KEY=VALUE,...]``, ``parse_arm``) with the config's
        own parameters of that schedule (``own[NAME]()``, e.g. its step milestones) under those
        ``text`` gives. Raises ``ValueError`` (one line) for a bad text."""
        schedule, given = parse_arm(text)
        params = own[schedule]() if own and schedule in own else {}
        return cls(schedule, warmup, factor, method, {**params, **given})

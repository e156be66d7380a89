"""What a budget is: a warmup, then a registered schedule over the rest; its state and resume rules.

Li, Yumer, Ramanan, "Budgeted Training: Rethinking Deep Neural Network Training Under Resource
Constraints", ICLR 2020. :class:`BudgetSchedule` puts a fixed-length warmup ``W`` in front of a
schedule (:mod:`budgeted.schedules.registry`) over a budget ``T``; at ``e`` elapsed:

- ``e < W``: linear warmup ``f (1 - e/W) + e/W`` from ``f = warmup_factor`` to 1
  (``warmup_method="constant"``: ``f``);
- otherwise ``p = (e - W) / (T - W)``, clipped to 1, and the multiplier is ``schedule(p)``.

``e``, ``W`` and ``T`` share one unit: iterations for the framework adapters, but nothing here
counts iterations, so seconds of wall-clock time or images seen work the same way.

A budget is also what a checkpoint records and a resume checks: :meth:`BudgetSchedule.state`
(plain values, checkpointed by every adapter), :meth:`BudgetSchedule.from_state`,
:meth:`BudgetSchedule.differences`, and the resume rules: :meth:`BudgetSchedule.check_resume`
raises the one :class:`BudgetMismatchError` all adapters use (they only rename keys for their
messages, :func:`name_keys`); :meth:`BudgetSchedule.resume` applies an on-resume policy
(:data:`RESUME_POLICIES`, checked by :func:`check_on_resume`), re-planning
(:meth:`BudgetSchedule.replan`) or branching where asked.

>>> budget = BudgetSchedule("linear", total=1000, warmup=100, warmup_factor=0.1)
>>> budget(0), budget(50), budget(100), budget(550), budget(1000)
(0.1, 0.55, 1.0, 0.5, 0.0)
>>> lr_multiplier("cosine", 550, 1000, warmup_iters=100)
0.5
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from ..errors import BudgetConfigError, BudgetMismatchError, BudgetReplanError
from .contract import DEFAULTS, WARMUP_METHODS, check_fields
from .registry import (
    check_params,
    full_params,
    get_schedule,
    is_finite_number,
    parse_arm,
    plain_number,
    same_params,
)

__all__ = [
    "RESUME_POLICIES", "TIME_RESUME_POLICIES", "WARMUP_METHODS", "BudgetMismatchError",
    "BudgetReplanError", "BudgetSchedule", "check_on_resume", "lr_multiplier", "mismatch",
    "name_keys"
]  # fmt: skip

RESUME_POLICIES = ("refuse", "replan", "branch")
"""What a resume does when the checkpoint's budget differs from the configured one
(:meth:`BudgetSchedule.resume`): refuse (the default), re-plan the rest, or branch off."""
TIME_RESUME_POLICIES = RESUME_POLICIES[:2]
"""A time budget can refuse or re-plan; a branch is for iteration budgets."""


def check_on_resume(
    value: Any, key: str = "on_resume", allowed: tuple[str, ...] = RESUME_POLICIES
) -> str:
    """``value`` if it is one of the ``allowed`` on-resume policies: the one check every adapter
    makes (a scheduler's argument, ``SOLVER.BUDGET.ON_RESUME``, ``budget_on_resume``).

    Raises:
        BudgetConfigError: ``<key>=<value> is invalid; allowed: refuse, replan, branch``.

    Example:
        >>> check_on_resume("replan")
        'replan'
        >>> check_on_resume("branch", "SOLVER.BUDGET.ON_RESUME", TIME_RESUME_POLICIES)
        Traceback (most recent call last):
        budgeted.errors.BudgetConfigError: SOLVER.BUDGET.ON_RESUME='branch' is invalid; allowed: \
refuse, replan
    """
    if value not in allowed:
        raise BudgetConfigError(f"{key}={value!r} is invalid; allowed: {', '.join(allowed)}")
    return value


def name_keys(message: str, names: Mapping[str, str]) -> str:
    """``message`` (a budget's one-line error) with each of its keys ``k`` written as
    ``names[k]``, the config key an adapter's user wrote (``"budget "`` before ``total`` goes).

    >>> name_keys("warmup=40 is not shorter than the budget total=40", {
    ...     "warmup": "SOLVER.WARMUP_ITERS", "total": "SOLVER.MAX_ITER"})
    'SOLVER.WARMUP_ITERS=40 is not shorter than the SOLVER.MAX_ITER=40'
    """
    for key, name in names.items():
        message = re.sub(rf"(?<![\w.])(?:budget )?{re.escape(key)}(?=[=\s]|$)", name, message)
    return message


def mismatch(
    diff: Mapping[str, tuple[Any, Any]],
    fix: str,
    names: Mapping[str, str] | None = None,
    *,
    missing: bool = False,
) -> BudgetMismatchError:
    """The one-line refusal of a checkpoint whose budget differs from the config's in ``diff``
    (``{key: (checkpoint's value, config's value)}``), keys written as ``names`` says; ``missing``:
    the checkpoint saved no budget at all.

    >>> print(mismatch({"total": (90, 900)}, "keep it", {"total": "max_iters"}))
    cannot resume: the checkpoint's budget has max_iters=90, the config's max_iters=900; keep it
    """
    names = names or {}
    old = (
        "is missing (its scheduler was not budget-aware)"
        if missing
        else "has " + ", ".join(f"{names.get(k, k)}={v[0]!r}" for k, v in diff.items())
    )
    new = ", ".join(f"{names.get(k, k)}={v[1]!r}" for k, v in diff.items())
    return BudgetMismatchError(
        f"cannot resume: the checkpoint's budget {old}, the config's {new}; {fix}"
    )


@dataclass(frozen=True)
class BudgetSchedule:
    """A warmup of fixed length ``warmup``, then ``schedule`` over the rest of the budget ``total``.

    Call it with the elapsed amount of the budget (iterations, images, seconds: the unit of
    ``total`` and ``warmup``) to get the learning-rate multiplier.

    A budget changed during training (:meth:`replan`) carries where: ``replanned_at`` (the
    elapsed amount then) and ``replanned_from`` (the progress ``p0`` reached then). From there
    the progress runs on linearly to 1 at the new ``total``:
    ``p = p0 + (1 - p0) (e - a) / (T - a)`` with ``a = max(replanned_at, W)``. Before it, the
    progress the run had: linear from 0 at ``W`` to ``p0`` at ``a``, through the
    ``(elapsed, progress)`` of any ``earlier_replans`` (a budget re-planned more than once).

    ``schedule`` may carry parameters (:func:`~budgeted.schedules.parse_arm`): ``"wsd:decay=sqrt"``
    is ``schedule="wsd"`` with ``params={"decay": "sqrt"}`` (``params`` win over it).
    """

    schedule: str
    total: float
    warmup: float = DEFAULTS["warmup"]
    warmup_factor: float = DEFAULTS["warmup_factor"]
    warmup_method: str = DEFAULTS["warmup_method"]
    params: dict[str, Any] = field(default_factory=dict)
    replanned_at: float | None = None
    replanned_from: float = 0.0
    earlier_replans: tuple[tuple[float, float], ...] = ()
    _decay: Callable[[float], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.schedule, str) and ":" in self.schedule:
            name, params = parse_arm(self.schedule)
            object.__setattr__(self, "schedule", name)
            object.__setattr__(self, "params", {**params, **self.params})
        fn = get_schedule(self.schedule)
        check_fields(
            total=self.total, warmup=self.warmup, warmup_factor=self.warmup_factor,
            warmup_method=self.warmup_method,
        )  # fmt: skip
        if self.replanned_at is not None and not (
            is_finite_number(self.replanned_at)
            and 0 <= self.replanned_at < self.total
            and is_finite_number(self.replanned_from)
            and 0.0 <= self.replanned_from < 1.0
        ):
            raise ValueError(
                f"replanned_at={self.replanned_at!r}, replanned_from={self.replanned_from!r} are "
                f"invalid; allowed: 0 <= replanned_at < total={self.total!r} and "
                "0 <= replanned_from < 1"
            )
        earlier = self._checked_earlier_replans()
        object.__setattr__(self, "earlier_replans", earlier)
        for key in ("total", "warmup", "warmup_factor", "replanned_at", "replanned_from"):
            object.__setattr__(self, key, plain_number(getattr(self, key)))
        params = check_params(self.schedule, self.params)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "_decay", partial(fn, **params) if params else fn)

    def _checked_earlier_replans(self) -> tuple[tuple[float, float], ...]:
        """``earlier_replans`` as plain numbers, checked: ``(elapsed, progress)`` pairs that
        rise strictly from ``(W, 0)`` to ``(replanned_at, replanned_from)``."""
        try:
            earlier = tuple((plain_number(a), plain_number(p)) for a, p in self.earlier_replans)
            points = [(self.warmup, 0.0), *earlier, (self.replanned_at, self.replanned_from)]
            ok = not earlier or (
                self.replanned_at is not None
                and all(is_finite_number(a) and is_finite_number(p) for a, p in earlier)
                and all(a0 < a1 and p0 < p1 for (a0, p0), (a1, p1) in zip(points, points[1:]))
            )
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(
                f"earlier_replans={self.earlier_replans!r} is invalid; allowed: (elapsed, "
                f"progress) pairs rising from warmup={self.warmup!r}, 0 to replanned_at="
                f"{self.replanned_at!r}, replanned_from={self.replanned_from!r}"
            )
        return earlier

    STATE_KEYS: ClassVar[tuple[str, ...]] = (
        "schedule",
        "total",
        "warmup",
        "warmup_factor",
        "warmup_method",
        "params",
    )

    def state(self) -> dict[str, Any]:
        """What defines this budget, as plain values (safe for ``torch.load(weights_only=True)``).

        >>> BudgetSchedule("step", 900, 50).state()["params"]
        {}
        """
        state = {key: getattr(self, key) for key in self.STATE_KEYS}
        state["params"] = {
            k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()
        }
        if self.replanned_at is not None:  # absent otherwise: older checkpoints stay equal
            state["replan"] = {"at": self.replanned_at, "from_progress": self.replanned_from}
            if self.earlier_replans:  # re-planned more than once
                state["replan"]["earlier"] = [list(point) for point in self.earlier_replans]
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> BudgetSchedule:
        """The budget a :meth:`state` describes (validated like any other)."""
        missing = [key for key in cls.STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"budget state lacks {', '.join(missing)}; it has {sorted(state)}")
        replan = state.get("replan") or {}
        return cls(
            **{key: state[key] for key in cls.STATE_KEYS},
            replanned_at=replan.get("at"),
            replanned_from=replan.get("from_progress", 0.0),
            earlier_replans=tuple(map(tuple, replan.get("earlier", ()))),
        )

    def replan(self, total: float, at: float) -> BudgetSchedule:
        """This budget changed to ``total`` once ``at`` of it has elapsed.

        The multiplier goes on from the value it had reached at ``at`` (no jump) and reaches the
        schedule's end at the new ``total``: the progress ``p0`` reached at ``at`` runs on
        linearly to 1 over the new remaining budget (see the class). For ``linear`` that is a
        straight line from the current multiplier to 0; ``step`` keeps the drops it has taken
        and places the remaining ones at their fractions of what remains of ``p``. A replan
        during the warmup leaves the warmup as it is and decays over ``total - warmup``.

        Raises :class:`BudgetReplanError` (one line) when the budget has already run out at
        ``at`` (``p = 1``, nothing left to re-plan: re-plan from an earlier checkpoint) or when
        ``total`` is not beyond ``at`` and the warmup.

        >>> s = BudgetSchedule("linear", 1000, warmup=0).replan(2000, at=500)
        >>> s(500), s(1250), s(2000)
        (0.5, 0.25, 0.0)
        """
        if not is_finite_number(at) or at < 0:
            raise BudgetReplanError(f"replan at={at!r} is invalid; allowed: a number >= 0")
        reached = self.progress(at)
        if reached >= 1.0:
            raise BudgetReplanError(
                f"cannot change the budget at {at:g}: the budget of {self.total:g} has run out "
                f"there (multiplier {self(at):g}); re-plan from a checkpoint saved before "
                f"{self.total:g}"
            )
        floor = max(at, self.warmup)
        if not is_finite_number(total) or total <= floor:
            raise BudgetReplanError(
                f"cannot change the budget to {total!r}: {at:g} of it has already elapsed"
                + (f" and the warmup is {self.warmup:g}" if self.warmup > at else "")
                + f"; allowed: a budget > {floor:g}"
            )
        past = ((self.replanned_at, self.replanned_from),) if self.replanned_at is not None else ()
        return BudgetSchedule(
            self.schedule,
            total,
            self.warmup,
            self.warmup_factor,
            self.warmup_method,
            dict(self.params),
            replanned_at=at if at > self.warmup else None,
            replanned_from=reached if at > self.warmup else 0.0,
            earlier_replans=tuple(
                (a, p) for a, p in (*self.earlier_replans, *past) if a < at and at > self.warmup
            ),
        )

    def differences(self, other: BudgetSchedule | Mapping[str, Any] | None) -> dict[str, Any]:
        """``{key: (other's value, this budget's value)}`` for every key of :meth:`state` that
        differs; ``other=None`` (no budget saved) differs in every key. The parameters of one
        schedule are compared with their defaults filled in (:func:`full_params`): a default
        written out is no change.

        >>> BudgetSchedule("linear", 900, 50).differences(BudgetSchedule("linear", 90, 50))
        {'total': (90, 900)}
        >>> BudgetSchedule("cosine", 900, 50, params={"eta": 0.0}).differences(
        ...     BudgetSchedule("cosine", 900, 50).state()
        ... )
        {}
        """
        mine = self.state()
        if other is None:
            return {key: (None, value) for key, value in mine.items()}
        theirs = other.state() if isinstance(other, BudgetSchedule) else dict(other)
        if isinstance(theirs.get("params"), Mapping):
            theirs["params"] = full_params(None, theirs["params"])  # tuples as lists

        def same(key: str, value: Any) -> bool:
            if key == "params" and theirs.get("schedule") == self.schedule:
                return same_params(theirs["schedule"], theirs.get("params"), self.schedule, value)
            return theirs.get(key) == value

        return {key: (theirs.get(key), v) for key, v in mine.items() if not same(key, v)}

    def check_resume(
        self,
        saved: BudgetSchedule | Mapping[str, Any] | None,
        *,
        names: Mapping[str, str] | None = None,
        fix: str = "keep the checkpoint's budget to resume, or start a new run from its weights",
    ) -> None:
        """Raise :class:`BudgetMismatchError` (one line) unless ``saved`` is this budget.

        ``names`` renames state keys for the message (``{"total": "SOLVER.MAX_ITER"}``);
        ``fix`` says what to do.

        >>> try:
        ...     BudgetSchedule("linear", 900, 50).check_resume(
        ...         BudgetSchedule("linear", 90, 50).state(), names={"total": "max_iters"}
        ...     )
        ... except BudgetMismatchError as err:
        ...     print(str(err)[:75])
        cannot resume: the checkpoint's budget has max_iters=90, the config's max_i
        """
        diff = self.differences(saved)
        if diff:
            raise mismatch(diff, fix, names, missing=saved is None)

    RESUME_POLICIES: ClassVar[tuple[str, ...]] = RESUME_POLICIES
    """What a resume does with a checkpoint of another budget length: refuse it (the default);
    :meth:`replan` the checkpoint's budget to this one; or ``branch``: go on with this budget as
    it is, allowed only where it gives every iteration already trained the multiplier the
    checkpoint's gave (``wsd`` budgets before their cooldown: one stable run, one cooldown per
    budget)."""

    def resume(
        self,
        saved: Mapping[str, Any] | None,
        *,
        at: float,
        on_resume: str = "refuse",
        names: Mapping[str, str] | None = None,
        fix: str = "keep the checkpoint's budget to resume, or start a new run from its weights",
    ) -> tuple[BudgetSchedule, str | None]:
        """The budget to go on with when resuming a checkpoint whose budget state is ``saved``,
        ``at`` of it elapsed; and a line to log when it was re-planned (else ``None``).

        - The same budget: the checkpoint's (with any re-plan it records, so a resume of a
          re-planned run is exact).
        - Another budget length (``total``) and ``on_resume="replan"``: the checkpoint's budget
          re-planned to this one's ``total`` at ``at`` (:meth:`replan`).
        - Another budget length and ``on_resume="branch"``: this budget, if it agrees with the
          checkpoint's at every iteration before ``at`` (else :class:`BudgetReplanError`).
        - Anything else: :meth:`check_resume`'s one-line :class:`BudgetMismatchError`; a replan
          that cannot be made: :class:`BudgetReplanError`.

        >>> config = BudgetSchedule("linear", 2000, warmup=0)
        >>> old = BudgetSchedule("linear", 1000, warmup=0).state()
        >>> budget, line = config.resume(old, at=500, on_resume="replan")
        >>> budget(1250)
        0.25
        >>> print(line)  # doctest: +NORMALIZE_WHITESPACE
        budget re-planned at 500: total 1000 -> 2000; the multiplier goes on from 0.5 to 0
        over the remaining 1500
        """
        check_on_resume(on_resume)
        diff = self.differences(saved)
        if not diff:
            return BudgetSchedule.from_state(saved), None  # type: ignore[arg-type]
        if on_resume == "refuse" or saved is None or set(diff) != {"total"}:
            self.check_resume(saved, names=names, fix=fix)
        old = BudgetSchedule.from_state(saved)  # type: ignore[arg-type]
        names = names or {}
        key = names.get("total", "total")
        if on_resume == "branch":
            for t in range(math.ceil(at)):
                if not math.isclose(old(t), self(t), rel_tol=1e-12, abs_tol=1e-15):
                    raise BudgetReplanError(
                        f"cannot branch at {at:g}: the checkpoint's budget ({key} {old.total:g}) "
                        f"and the config's ({key} {self.total:g}) differ from iteration {t} on "
                        f"(multiplier {old(t):.4g} vs {self(t):.4g}); branch from a checkpoint "
                        f"saved before {t}, or re-plan (on_resume replan)"
                    )
            return self, (
                f"budget branched at {at:g}: {key} {old.total:g} -> {self.total:g}, the same "
                "multipliers so far"
            )
        try:
            new = old.replan(self.total, at)
        except BudgetReplanError as err:
            key = names.get("total", "total")
            raise BudgetReplanError(f"{key}: {err}") from None
        line = (
            f"budget re-planned at {at:g}: {names.get('total', 'total')} {old.total:g} -> "
            f"{self.total:g}; the multiplier goes on from {old(at):.4g} to 0 over the "
            f"remaining {self.total - max(at, self.warmup):g}"
        )
        return new, line

    def check_steps(self) -> None:
        """Refuse a parameter whose phase is shorter than one step of this budget, where it is
        counted in steps (iterations; not a time budget's seconds): ``wsd``'s cooldown and each
        of ``sgdr``'s periods must span more than one step of the decay ``T - W``, or the run
        trains none of it (the schedule's ``step_rules``).

        Raises:
            ValueError: one line naming the parameter, the decay's length and what is allowed.

        >>> BudgetSchedule("wsd:cooldown=0.01", total=120, warmup=20).check_steps()
        Traceback (most recent call last):
        ValueError: wsd schedule: cooldown=0.01 is invalid for a decay of 100 steps; allowed: a \
cooldown of more than one step, cooldown > 1/100
        """
        check_params(self.schedule, self.params, steps=self.decay_length)

    @property
    def decay_length(self) -> float:
        """``T - W``: the length of the decay phase."""
        return self.total - self.warmup

    def progress(self, elapsed: float) -> float:
        """Progress ``p`` in [0, 1] through the decay phase (0 during warmup).

        ``(e - W) / (T - W)``; after a :meth:`replan`, ``p0 + (1 - p0) (e - a) / (T - a)``.
        """
        if elapsed <= self.warmup:
            return 0.0
        if self.replanned_at is None:
            return min((elapsed - self.warmup) / (self.total - self.warmup), 1.0)
        start, reached = self.replanned_at, self.replanned_from
        if elapsed <= start:  # the past: the progress the run had, rising to p0 at the re-plan
            points = [(self.warmup, 0.0), *self.earlier_replans, (start, reached)]
            k = bisect.bisect_left([a for a, _ in points], elapsed)
            (a0, p0), (a1, p1) = points[k - 1], points[k]
            return p0 + (p1 - p0) * (elapsed - a0) / (a1 - a0)
        return min(reached + (1.0 - reached) * (elapsed - start) / (self.total - start), 1.0)

    def __call__(self, elapsed: float) -> float:
        # an iteration count (int, the common case) is checked cheaply, anything else in full
        if not (
            elapsed >= 0 if type(elapsed) is int else is_finite_number(elapsed) and elapsed >= 0
        ):
            raise ValueError(f"elapsed={elapsed!r} is invalid; allowed: a finite number >= 0")
        if elapsed < self.warmup:
            if self.warmup_method == "constant":
                return self.warmup_factor
            alpha = elapsed / self.warmup
            return self.warmup_factor * (1.0 - alpha) + alpha
        return self._decay(self.progress(elapsed))


def lr_multiplier(
    schedule: str,
    iteration: float,
    total_iters: float,
    *,
    warmup_iters: float = DEFAULTS["warmup"],
    warmup_factor: float = DEFAULTS["warmup_factor"],
    warmup_method: str = DEFAULTS["warmup_method"],
    **params: Any,
) -> float:
    """The base-LR multiplier at 0-based ``iteration`` of a budget of ``total_iters``."""
    return BudgetSchedule(
        schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
    )(iteration)

"""Wall-clock budgets: a training clock every rank agrees on, and the schedule over it.

A time budget of ``T`` seconds counts *training* time: from the start of the first training
iteration, paused between :meth:`TrainingClock.pause` and :meth:`TrainingClock.resume` (the
adapters pause it around evaluation and checkpoint writing; start-up, data-loader creation and the
final evaluation are outside it). The warmup stays in iterations; the decay runs over the time
left after it:

- iteration ``i < W``: the warmup multiplier of :class:`~budgeted.schedules.BudgetSchedule`;
- otherwise ``p = (e - e_W) / (T - e_W)`` with ``e`` the agreed training seconds and ``e_W`` those
  at the end of the warmup, and the multiplier is ``schedule(p)``: the core's
  ``BudgetSchedule(schedule, total=T, warmup=e_W)`` evaluated at ``e`` (:meth:`TimeBudget.plan`).

**One clock for all ranks.** Each rank measures its own time, but the LR of an iteration must be
the same on every rank. Every ``sync_period`` iterations rank 0's reading (and its seconds per
iteration over the last period) is shared (``share``: the adapters pass a broadcast from rank 0);
in between, every rank extrapolates the same way from the shared values, so the agreed seconds at
each iteration, and the stopping iteration, are identical everywhere. With one process the
clock reads itself at every sync.

**Paused processes.** The clock reads wall time (``time.perf_counter``, a monotonic clock that
keeps running while the process is stopped). Time the process spends stopped (SIGSTOP to
SIGCONT, a Slurm suspend, a debugger) *inside an iteration* therefore counts as training time:
the budget is a reservation of wall time, and a stopped job still holds it. Time stopped between
iterations, while the clock is paused for evaluation or checkpoint writing, does not count.
The decay then simply reaches its end earlier in iterations; a budget spent this way before the
schedule decayed ends undecayed (:meth:`TimeBudget.shortfall`).

Nothing here imports a framework; the adapters count iterations and checkpoint
:meth:`TrainingClock.state`.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .budget import (
    TIME_RESUME_POLICIES,
    BudgetMismatchError,
    BudgetReplanError,
    BudgetSchedule,
    check_on_resume,
    mismatch,
)
from .contract import DEFAULTS
from .registry import same_params
from .state import ELAPSED, check_state, plain_value
from .units import whole_number

__all__ = [
    "DECAYED_PROGRESS", "TimeBudget", "TimeBudgetReached", "TrainingClock", "parse_duration"
]  # fmt: skip

DECAYED_PROGRESS = 0.9
"""A time-budget run whose last iteration trained at less progress through the decay than this
ended undecayed (:meth:`TimeBudget.shortfall`): its LR was still well above the schedule's end."""

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
DURATION_FORMS = "seconds (5400), or hours/minutes/seconds such as 6h, 90m, 2h30m, 45s"


def parse_duration(text: str | float) -> float:
    """Seconds of a duration: ``5400``, ``"6h"``, ``"90m"``, ``"2h30m"``, ``"1h2m3s"``, ``"45s"``.

    Raises ``ValueError`` (one line naming the value and the forms allowed) for anything else,
    including 0 and negative durations.

    >>> parse_duration("2h30m"), parse_duration("90m"), parse_duration(45)
    (9000.0, 5400.0, 45.0)
    """
    bad = ValueError(f"time budget {text!r} is invalid; allowed: a duration > 0: {DURATION_FORMS}")
    if isinstance(text, bool):
        raise bad
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        value = str(text).strip().lower()
        try:
            seconds = float(value)
        except ValueError:
            match = _DURATION.fullmatch(value)
            if not value or match is None or not any(match.groups()):
                raise bad from None
            hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
            seconds = 3600 * hours + 60 * minutes + secs
    if not math.isfinite(seconds) or seconds <= 0:
        raise bad
    return seconds


Share = Callable[[list[float]], list[float]]
"""``values -> rank 0's values``: a broadcast from rank 0 (identity with one process)."""


class TrainingClock:
    """Training seconds elapsed, the same on every rank at every iteration.

    Call :meth:`tick` once per iteration, with the number of iterations trained so far in this
    budget, where the adapter sets the next iteration's LR; :meth:`pause`/:meth:`resume` around
    what is not training. :attr:`elapsed` is then the agreed seconds (see the module).

    Args:
        sync_period (int): share rank 0's reading every this many ticks (1: every iteration).
        share (callable, optional): the broadcast from rank 0; None with one process.
        now (callable): the clock read (``time.perf_counter``; tests pass a fake one).
        elapsed (float): training seconds already spent (a resumed run's, from :meth:`state`).

    Example:
        >>> t = iter([0.0, 2.0, 3.0, 5.0, 6.0])
        >>> clock = TrainingClock(now=lambda: next(t))
        >>> clock.start()                  # 0.0: the first iteration starts
        >>> clock.tick(1)                  # 2.0: one iteration done
        2.0
        >>> clock.pause(); clock.resume()  # 3.0 to 5.0: an evaluation, not counted
        >>> clock.tick(2)                  # 6.0: 3 s before the evaluation, 1 s after
        4.0
    """

    def __init__(
        self,
        *,
        sync_period: int = 1,
        share: Share | None = None,
        now: Callable[[], float] = time.perf_counter,
        elapsed: float = 0.0,
    ) -> None:
        if not isinstance(sync_period, int) or isinstance(sync_period, bool) or sync_period < 1:
            raise ValueError(f"sync_period={sync_period!r} is invalid; allowed: an integer >= 1")
        self.sync_period = sync_period
        self._share = share
        self._now = now
        self._local = float(elapsed)  # this rank's training seconds, up to _since
        self._since: float | None = None  # running since (None: paused or not started)
        self.elapsed = float(elapsed)  # the agreed seconds at the last tick
        # the last sync: (tick, agreed seconds, rank 0's seconds per tick or None, its reading)
        self._anchor: tuple[int, float, float | None, float] | None = None
        self.syncs = 0
        self.sync_seconds = 0.0

    def local_elapsed(self) -> float:
        """This rank's own training seconds, now."""
        running = 0.0 if self._since is None else self._now() - self._since
        return self._local + running

    def start(self) -> None:
        """Start (or go on) counting: the first training iteration begins."""
        if self._since is None:
            self._since = self._now()

    resume = start

    def pause(self) -> None:
        """Stop counting (evaluation, checkpoint writing) until :meth:`resume`."""
        if self._since is not None:
            self._local += self._now() - self._since
            self._since = None

    def tick(self, trained: int) -> float:
        """The agreed training seconds after ``trained`` iterations of this run (every rank
        calls it at the same iterations); also kept in :attr:`elapsed`.

        At a sync (every ``sync_period`` ticks, and every tick until rank 0 has measured its
        seconds per iteration) rank 0's reading and rate are shared; in between, the seconds
        are extrapolated from them. The agreed seconds never go back: a reading below the
        extrapolation keeps the extrapolated value, so the LR never rises during the decay.
        """
        anchor = self._anchor
        due = anchor is None or anchor[2] is None or trained - anchor[0] >= self.sync_period
        if not due:
            assert anchor is not None and anchor[2] is not None
            self.elapsed = max(self.elapsed, anchor[1] + (trained - anchor[0]) * anchor[2])
            return self.elapsed
        local = self.local_elapsed()
        rate = math.nan  # unknown until two readings
        if anchor is not None and trained > anchor[0]:
            rate = (local - anchor[3]) / (trained - anchor[0])
        values = [local, rate]
        if self._share is not None:
            start = time.perf_counter()
            values = [float(v) for v in self._share(values)]
            self.syncs += 1
            self.sync_seconds += time.perf_counter() - start
        reading, shared_rate = values
        self.elapsed = max(self.elapsed, reading)
        self._anchor = (
            trained,
            self.elapsed,
            None if math.isnan(shared_rate) else shared_rate,
            reading,
        )
        return self.elapsed

    def restore(self, elapsed: float) -> None:
        """Go on from ``elapsed`` training seconds (a checkpoint's), paused."""
        self.elapsed = self._local = float(elapsed)
        self._since = None
        self._anchor = None

    def state(self) -> dict[str, float]:
        """What a checkpoint keeps: the agreed training seconds so far."""
        return {"elapsed": self.elapsed}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None, **kwargs: Any) -> TrainingClock:
        """A clock going on from a checkpoint's :meth:`state` (none: from 0)."""
        elapsed = float((state or {}).get("elapsed", 0.0))
        return cls(elapsed=elapsed, **kwargs)


@dataclass
class TimeBudget:
    """A schedule over ``seconds`` of training, its warmup ``warmup_iters`` iterations long.

    ``warmup_seconds`` (the training seconds at the end of the warmup) is measured by
    :meth:`multiplier` when the warmup ends and checkpointed in :meth:`state`.

    Example:
        >>> budget = TimeBudget("linear", seconds=100, warmup_iters=2)
        >>> budget.multiplier(0, 0.0), budget.multiplier(2, 10.0), budget.multiplier(9, 55.0)
        (0.001, 1.0, 0.5)
        >>> budget.done(99.0), budget.done(100.0)
        (False, True)
    """

    schedule: str
    seconds: float
    warmup_iters: int = DEFAULTS["warmup"]
    warmup_factor: float = DEFAULTS["warmup_factor"]
    warmup_method: str = DEFAULTS["warmup_method"]
    params: dict[str, Any] = field(default_factory=dict)
    warmup_seconds: float | None = None
    replan: dict[str, float] | None = None  # {"at": seconds, "from_progress": p0}: see resume

    def __post_init__(self) -> None:
        self.seconds = parse_duration(self.seconds)
        self.warmup_iters = whole_number("warmup_iters", self.warmup_iters, least=0)
        # the warmup, in iterations (validates schedule, warmup and parameters too)
        self._warmup = BudgetSchedule(
            self.schedule,
            self.warmup_iters + 1,
            self.warmup_iters,
            self.warmup_factor,
            self.warmup_method,
            self.params,
        )
        self._plan: BudgetSchedule | None = None

    def plan(self) -> BudgetSchedule:
        """The decay as the core's schedule in seconds: ``total=seconds, warmup=warmup_seconds``."""
        if self.warmup_seconds is None:
            raise ValueError("the warmup has not ended yet: no decay to plan")
        if self._plan is None:
            warmup = min(self.warmup_seconds, math.nextafter(self.seconds, 0.0))
            replan = self.replan or {}
            self._plan = BudgetSchedule(
                self.schedule,
                self.seconds,
                warmup,
                self.warmup_factor,
                self.warmup_method,
                self.params,
                replanned_at=replan.get("at"),
                replanned_from=replan.get("from_progress", 0.0),
                earlier_replans=tuple(map(tuple, replan.get("earlier", ()))),
            )
        return self._plan

    def multiplier(self, iteration: int, elapsed: float) -> float:
        """The multiplier of (0-based) ``iteration`` starting at ``elapsed`` training seconds."""
        if iteration < self.warmup_iters:
            return self._warmup(iteration)
        if self.warmup_seconds is None:
            self.warmup_seconds = float(elapsed)
        return self.plan()(max(elapsed, self.warmup_seconds))

    def done(self, elapsed: float) -> bool:
        """Whether the budget is spent at ``elapsed`` training seconds."""
        return elapsed >= self.seconds

    def shortfall(self, iteration: int, elapsed: float) -> str | None:
        """Why a run ended before its schedule decayed, or None when it decayed.

        ``iteration`` is the (0-based) last iteration trained and ``elapsed`` the training
        seconds at its start (where its LR was set). Undecayed: it trained inside the warmup, or
        at progress ``p < DECAYED_PROGRESS`` through the decay (a deadline reached in few, long
        iterations; an iteration cap reached before the deadline).

        Example:
            >>> budget = TimeBudget("linear", seconds=30, warmup_iters=0)
            >>> budget.multiplier(0, 0.0)
            1.0
            >>> print(budget.shortfall(3, 25.5))
            its last iteration (4) trained at 85 % of the decay, LR multiplier 0.15
            >>> budget.shortfall(29, 29.0) is None
            True
            >>> print(TimeBudget("linear", 30, warmup_iters=10).shortfall(4, 26.0))
            its last iteration (5) trained inside the warmup of 10 iterations, LR multiplier 0.4006
        """
        factor = self.multiplier(iteration, elapsed)
        if iteration < self.warmup_iters:
            return (
                f"its last iteration ({iteration + 1}) trained inside the warmup of "
                f"{self.warmup_iters} iterations, LR multiplier {factor:.4g}"
            )
        progress = self.plan().progress(max(elapsed, self.plan().warmup))
        if progress >= DECAYED_PROGRESS:
            return None
        return (
            f"its last iteration ({iteration + 1}) trained at {100 * progress:.0f} % of the decay, "
            f"LR multiplier {factor:.4g}"
        )

    def state(self) -> dict[str, Any]:
        """Plain values a checkpoint keeps (compared on resume like an iteration budget's)."""
        return {
            "schedule": self.schedule,
            "seconds": self.seconds,
            "warmup_iters": self.warmup_iters,
            "warmup_factor": self.warmup_factor,
            "warmup_method": self.warmup_method,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()},
            "warmup_seconds": self.warmup_seconds,
            "replan": self.replan,
        }

    MEASURED = ("warmup_seconds", "replan")
    """State keys measured or recorded during training, not stated by a config."""

    def resume_from(
        self, state: Mapping[str, Any], on_resume: str = "refuse", *, owner: str
    ) -> tuple[float, str | None]:
        """Go on from a time-budget scheduler's checkpointed ``state`` (its ``time_budget`` and
        ``clock``): the training seconds to restore the clock to, and the line to log
        (:meth:`resume`). A time budget's state whose clock is missing (the whole budget granted
        again) or not a number of seconds >= 0 (time granted again) is refused in one line
        (:data:`budgeted.schedules.state.ELAPSED`; ``owner`` names the scheduler).

        >>> budget = TimeBudget("linear", 100, warmup_iters=0)
        >>> saved = {"time_budget": budget.state(), "clock": {"elapsed": -5.0}}
        >>> budget.resume_from(saved, owner="BudgetTimeLR")
        Traceback (most recent call last):
        budgeted.errors.BudgetResumeError: cannot resume: the checkpoint's BudgetTimeLR state has \
clock.elapsed=-5.0; allowed: a finite number >= 0 (the training seconds spent); resume from \
another checkpoint, or start a new run from its weights
        """
        saved = state.get("time_budget")
        elapsed = 0.0  # not a time budget's state: resume() refuses it, naming what it is
        if isinstance(saved, Mapping) and "seconds" in saved:
            check_state(state, {"clock.elapsed": ELAPSED}, owner=owner)
            elapsed = float(plain_value(state["clock"]["elapsed"]))
        return elapsed, self.resume(saved, elapsed, on_resume)

    def resume(
        self, saved: Mapping[str, Any] | None, elapsed: float, on_resume: str = "refuse"
    ) -> str | None:
        """Go on from a checkpoint's :meth:`state` (``saved``) at ``elapsed`` training seconds.

        The same budget: its measured warmup end and any re-plan are taken over. Another ``seconds``
        with ``on_resume="replan"``: the decay goes on from the progress reached at ``elapsed`` to
        the schedule's end at the new ``seconds``
        (:meth:`budgeted.schedules.BudgetSchedule.replan`, in seconds); the line to log is
        returned. Anything else raises a one-line ``BudgetMismatchError`` (or
        ``BudgetReplanError``).

        >>> old = TimeBudget("linear", 100, warmup_iters=0)
        >>> _ = old.multiplier(0, 0.0)  # the warmup ended at 0 s
        >>> longer = TimeBudget("linear", 300, warmup_iters=0)
        >>> print(longer.resume(old.state(), elapsed=50.0, on_resume="replan"))
        ... # doctest: +NORMALIZE_WHITESPACE
        time budget re-planned at 50 s: 100 s -> 300 s; the multiplier goes on from 0.5 to 0
        over the remaining 250 s
        >>> longer.multiplier(10, 175.0)
        0.25
        """
        check_on_resume(on_resume, "on_resume (a time budget)", TIME_RESUME_POLICIES)
        fix = "resume with the checkpoint's time budget, or start a new run from its weights"
        if saved is None or "seconds" not in saved:
            raise BudgetMismatchError(
                f"cannot resume: the checkpoint's budget is not a time budget (its scheduler "
                f"counts iterations), the config's is {self.seconds:g} s; {fix}"
            )
        mine = {k: v for k, v in self.state().items() if k not in self.MEASURED}
        theirs = {k: v for k, v in saved.items() if k not in self.MEASURED}
        kept = same_params(theirs.get("schedule"), theirs.get("params"), self.schedule, self.params)
        diff = [k for k in mine if theirs.get(k) != mine[k] and not (k == "params" and kept)]
        if diff and (on_resume == "refuse" or diff != ["seconds"]):
            also = "" if on_resume == "replan" or diff != ["seconds"] else " (or re-plan it)"
            raise mismatch({k: (theirs.get(k), mine[k]) for k in diff}, fix + also)
        old = TimeBudget(**saved)
        self.warmup_seconds, self.replan = old.warmup_seconds, old.replan
        self._plan = None
        if not diff:
            return None
        if old.warmup_seconds is None:  # still warming up: the decay is planned at its end
            return f"time budget changed during the warmup: {old.seconds:g} s -> {self.seconds:g} s"
        try:
            plan = old.plan().replan(self.seconds, at=elapsed)
        except BudgetReplanError as err:
            raise BudgetReplanError(f"time budget: {err}") from None
        if plan.replanned_at is not None:
            self.replan = plan.state()["replan"]
        self._plan = None
        return (
            f"time budget re-planned at {elapsed:g} s: {old.seconds:g} s -> {self.seconds:g} s; "
            f"the multiplier goes on from {old.plan()(elapsed):.4g} to 0 over the remaining "
            f"{self.seconds - elapsed:g} s"
        )


class TimeBudgetReached(SystemExit):
    """Raised to end training at a time budget's deadline, once the final checkpoint is saved.

    A ``SystemExit`` with code 0 (so ``except Exception`` blocks, Detectron2's training loop
    among them, let it through, and the trainer's ``after_train`` hooks, the final evaluation
    among them, still run): uncaught, the process ends with status 0, as a finished run does.
    """

    def __init__(self, message: str) -> None:
        super().__init__(0)
        self.message = message

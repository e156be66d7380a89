"""Wall-clock budgets in MMEngine: ``TimeBudgetTrainLoop`` (registered in ``LOOPS``).

::

    train_cfg = dict(type="TimeBudgetTrainLoop", seconds="6h", max_iters=80000, val_interval=80000)
    param_scheduler = [dict(type="BudgetLinearLR", warmup_iters=500, by_epoch=False)]

An ``IterBasedTrainLoop`` whose ``max_iters`` only caps the iterations; the budget is ``seconds``
of training time (each iteration's ``train_step``), kept by :class:`TimeBudgetClockHook` and
agreed across ranks. The budget schedulers warm up over ``warmup_iters`` iterations and decay over
the seconds left; when the budget is spent that iteration is the last. A run that ended before its
schedule decayed exits 4 (:class:`TimeBudgetEndHook`, :class:`Undecayed`).
"""

from __future__ import annotations

import sys
from typing import Any

from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS, LOOPS
from mmengine.runner.loops import IterBasedTrainLoop

from ..control.stops import Deadline
from ..errors import UNDECAYED_EXIT_CODE, Undecayed
from ..safety.ranks import broadcast_from_rank0
from ..schedules.clock import TimeBudget, TrainingClock, parse_duration
from .compat import end_loop_at
from .scheduler_hook import (
    bind_budget_schedulers,
    budget_schedulers,
    check_budget_schedulers_in_runner,
)

__all__ = [
    "TimeBudgetClockHook", "TimeBudgetEndHook", "TimeBudgetTrainLoop", "Undecayed",
    "broadcast_from_rank0"
]  # fmt: skip


@LOOPS.register_module()
class TimeBudgetTrainLoop(IterBasedTrainLoop):
    """``IterBasedTrainLoop`` over a wall-clock budget (see the module)."""

    def __init__(
        self,
        runner: Any,
        dataloader: Any,
        seconds: float | str,
        max_iters: int,
        clock_sync_period: int = 1,
        prog: str = "TimeBudgetTrainLoop",
        **kwargs: Any,
    ) -> None:
        self.seconds = self.check_arguments(seconds, clock_sync_period)
        super().__init__(runner, dataloader, max_iters=max_iters, **kwargs)
        self.clock = TrainingClock(sync_period=clock_sync_period, share=broadcast_from_rank0)
        self.stopped_at: int | None = None
        self.last_start: tuple[int, float] | None = None  # (iteration, seconds at its start)
        runner.register_hook(TimeBudgetClockHook(self), priority="HIGHEST")
        runner.register_hook(TimeBudgetEndHook(self, prog), priority="LOWEST")

    @staticmethod
    def check_arguments(seconds: Any, clock_sync_period: Any = 1) -> float:
        """The budget in seconds, after checking the loop's own arguments (no runner needed).

        Raises:
            ValueError: one line naming the argument, its value and what is allowed.

        Example:
            >>> TimeBudgetTrainLoop.check_arguments("2h30m")
            9000.0
        """
        try:
            seconds = parse_duration(seconds)
        except ValueError as err:
            raise ValueError(f"TimeBudgetTrainLoop: {err}") from None
        period = clock_sync_period
        if isinstance(period, bool) or not isinstance(period, int) or period < 1:
            raise ValueError(
                f"TimeBudgetTrainLoop: clock_sync_period={period!r} is invalid; allowed: an "
                "integer >= 1 (iterations between syncs of rank 0's clock)"
            )
        return seconds


@HOOKS.register_module()
class TimeBudgetClockHook(Hook):
    """The clock of a :class:`TimeBudgetTrainLoop` (registered by the loop itself), which also
    binds the runner's budget schedulers to the loop before the runner resumes them and checks
    them before the first iteration, whatever the config's ``ParamSchedulerHook``
    (:mod:`budgeted.mmengine.scheduler_hook`, point 2)."""

    priority = "HIGHEST"

    def __init__(self, loop: TimeBudgetTrainLoop) -> None:
        self.loop = loop

    def before_run(self, runner: Any) -> None:
        bind_budget_schedulers(runner)

    def before_train(self, runner: Any) -> None:
        check_budget_schedulers_in_runner(runner)

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        self.loop.clock.resume()

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        loop = self.loop
        loop.clock.pause()
        loop.last_start = (runner.iter, loop.clock.elapsed)  # where this iteration's LR was set
        trained = runner.iter + 1  # the loop counts this iteration after the hooks
        elapsed = loop.clock.tick(trained)
        if elapsed < loop.seconds or trained >= loop.max_iters:
            return
        loop.stopped_at = trained
        end_loop_at(loop, trained)  # the last iteration: last checkpoint, final validation
        line = Deadline(loop.seconds, loop.clock).reached_line(
            trained, elapsed, "", "last checkpoint and final validation follow"
        )
        if is_main_process():
            print_log(line, logger="current")


def _time_budgets(runner: Any) -> list[tuple[int, TimeBudget]]:
    """``(begin, TimeBudget)`` of each budget scheduler the runner trains over the clock."""
    schedulers = budget_schedulers(getattr(runner, "param_schedulers", None))
    return [(int(s.begin), s.time_budget) for s in schedulers if s.time_budget is not None]


UNDECAYED_WORDS = {
    "capped": "train_cfg.max_iters={trained} was reached after {elapsed:.1f} s of training; raise "
    "the iteration cap (full_schedule_iters, train_cfg.max_iters) or give a shorter time budget",
    "warmup": "the deadline came after {iterations}, inside the warmup; give a longer time "
    "budget or fewer warmup_iters",
    "few": "the deadline came after {iterations} of {average:.3g} s on average, too few for the "
    "decay; give a longer time budget (or faster iterations)",
    "tail": "the checkpoint and validation of iteration {trained} are written (exit status "
    f"{UNDECAYED_EXIT_CODE})",
}
"""The causes of an end before the schedule decayed (:meth:`Deadline.undecayed`)."""


def undecayed_line(loop: TimeBudgetTrainLoop, runner: Any) -> str | None:
    """Why the run ended before its schedule decayed, with the cause and what to change; None
    when it decayed (or nothing was trained, or no budget scheduler follows the clock).

    The last iteration trained is judged as :meth:`budgeted.schedules.clock.TimeBudget.shortfall`
    judges it (the LR it was trained at: inside the warmup, or short of
    :data:`budgeted.schedules.clock.DECAYED_PROGRESS` of the decay).
    """
    if loop.last_start is None:
        return None
    iteration, started = loop.last_start
    shortfalls = [
        budget.shortfall(iteration - begin, started)
        for begin, budget in _time_budgets(runner)
        if iteration >= begin
    ]
    shortfall = next((s for s in shortfalls if s is not None), None)
    return Deadline(loop.seconds, loop.clock).undecayed(
        shortfall,
        iteration + 1,
        UNDECAYED_WORDS,
        capped=loop.stopped_at is None,  # the iteration cap came first
        warmup=shortfall is not None and "warmup" in shortfall,
    )


@HOOKS.register_module()
class TimeBudgetEndHook(Hook):
    """Exit status 4 for a time budget that ended undecayed (registered by the loop itself).

    After training (the last checkpoint and the final validation are done) it judges the last
    iteration (:func:`undecayed_line`); at the end of the run (priority ``LOWEST``: every other
    hook's ``after_run`` has run) rank 0 prints the line and every rank raises
    :class:`Undecayed`. A preempted or diverged run never gets here.
    """

    priority = "LOWEST"

    def __init__(self, loop: TimeBudgetTrainLoop, prog: str = "TimeBudgetTrainLoop") -> None:
        self.loop = loop
        self.prog = prog
        self.line: str | None = None

    def after_train(self, runner: Any) -> None:
        self.line = undecayed_line(self.loop, runner)

    def after_run(self, runner: Any) -> None:
        line, self.line = self.line, None
        if line is None:
            return
        if is_main_process():
            runner.logger.warning(line)
            print(f"{self.prog}: {line}", file=sys.stderr, flush=True)
        raise Undecayed(line)

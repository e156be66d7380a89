"""Wall-clock budgets in MMEngine: ``TimeBudgetTrainLoop`` (registered in ``LOOPS``).

::

    train_cfg = dict(type="TimeBudgetTrainLoop", seconds="6h", max_iters=80000, val_interval=80000)
    param_scheduler = [dict(type="BudgetLinearLR", warmup_iters=500, by_epoch=False)]

(``tools/train_seg.py --budget-time 6h`` makes the loop so.) An ``IterBasedTrainLoop`` whose
``max_iters`` only caps the iterations; the budget is ``seconds`` of training time
(:mod:`budgeted.clock`), counted from the first training iteration: each iteration's
``train_step`` (its data loading included), not the hooks around it, validation, checkpoint
writing, start-up or the final validation. The loop registers :class:`TimeBudgetClockHook`
(priority ``HIGHEST``): it starts the clock before ``train_step`` and, after it, pauses it,
agrees the seconds across ranks and publishes them before the ``ParamSchedulerHook`` steps. The
budget schedulers built by the same runner then run their warmup over ``warmup_iters``
iterations and their decay over the seconds left. When the budget is spent the hook makes that
iteration the last (``max_iters`` becomes it): the ``CheckpointHook`` saves the last checkpoint
and the loop runs the final validation, as at the end of any budget. Resuming goes on with the
checkpoint's clock (in the schedulers' state).
"""

from __future__ import annotations

from typing import Any

import torch
from mmengine.dist import broadcast, get_world_size, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS, LOOPS
from mmengine.runner.loops import IterBasedTrainLoop

from ..clock import TrainingClock, parse_duration

__all__ = ["TimeBudgetClockHook", "TimeBudgetTrainLoop", "broadcast_from_rank0"]


def broadcast_from_rank0(values: list[float]) -> list[float]:
    """Rank 0's ``values`` on every rank (itself with one process)."""
    if get_world_size() == 1:
        return values
    device = "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    broadcast(tensor, src=0)
    return tensor.tolist()


@LOOPS.register_module()
class TimeBudgetTrainLoop(IterBasedTrainLoop):
    """``IterBasedTrainLoop`` over a wall-clock budget (see the module).

    Args:
        runner: the runner.
        dataloader: the train dataloader (or its config).
        seconds (float or str): the budget: seconds, or ``"6h"``, ``"90m"``, ``"2h30m"``.
        max_iters (int): the most iterations (the time budget usually ends training first).
        clock_sync_period (int): share rank 0's clock every this many iterations.
        **kwargs: the rest of ``IterBasedTrainLoop``'s arguments (``val_interval``, ...).
    """

    def __init__(
        self,
        runner: Any,
        dataloader: Any,
        seconds: float | str,
        max_iters: int,
        clock_sync_period: int = 1,
        **kwargs: Any,
    ) -> None:
        self.seconds = self.check_arguments(seconds, clock_sync_period)
        super().__init__(runner, dataloader, max_iters=max_iters, **kwargs)
        self.clock = TrainingClock(sync_period=clock_sync_period, share=broadcast_from_rank0)
        self.stopped_at: int | None = None
        runner.register_hook(TimeBudgetClockHook(self), priority="HIGHEST")

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
    """The clock of a :class:`TimeBudgetTrainLoop` (registered by the loop itself)."""

    priority = "HIGHEST"

    def __init__(self, loop: TimeBudgetTrainLoop) -> None:
        self.loop = loop

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        self.loop.clock.resume()

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        loop = self.loop
        loop.clock.pause()
        trained = runner.iter + 1  # the loop counts this iteration after the hooks
        elapsed = loop.clock.tick(trained)
        if elapsed < loop.seconds or trained >= loop.max_iters:
            return
        loop.stopped_at = trained
        loop._max_iters = trained  # the last iteration: last checkpoint, final validation
        line = (
            f"time budget of {loop.seconds:g} s reached after {trained} iterations "
            f"({elapsed:.1f} s of training); last checkpoint and final validation follow"
        )
        if loop.clock.syncs:
            line += (
                f"; clock shared {loop.clock.syncs} times, "
                f"{1e6 * loop.clock.sync_seconds / loop.clock.syncs:.0f} us each"
            )
        if is_main_process():
            print_log(line, logger="current")

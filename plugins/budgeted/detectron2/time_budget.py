"""Wall-clock budgets in Detectron2: ``SOLVER.BUDGET.SECONDS`` and :class:`TimeBudgetHook`.

With ``SOLVER.BUDGET.SECONDS > 0`` (``--budget-time 6h``) the scheduler is a
:class:`budgeted.BudgetTimeLR` and ``BudgetTrainer`` registers :class:`TimeBudgetHook` first
(your own trainer: ``[bd2.TimeBudgetHook(), *super().build_hooks()]``): the clock runs during
``run_step`` only, and at the deadline ``model_final.pth`` is saved and training ends with one
line (exit status 0; 4 where the schedule had not decayed, :func:`undecayed_stop`).
See docs/detectron2.md, "Wall-clock budgets".
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.engine import HookBase
from detectron2.utils import comm

from ..control.plan import check_one_budget
from ..control.stops import Deadline
from ..errors import BudgetConfigError, BudgetResumeError
from ..pytorch import BudgetTimeLR
from ..safety.ranks import broadcast_from_rank0
from ..schedules import (
    TIME_RESUME_POLICIES,
    TimeBudget,
    TimeBudgetReached,
    TrainingClock,
    check_on_resume,
    parse_duration,
)
from .config import on_resume
from .stops import Undecayed

__all__ = [
    "TimeBudgetHook", "TimeBudgetLRScheduler", "broadcast_from_rank0", "time_budget_from_cfg",
    "time_budget_seconds", "undecayed_stop"
]  # fmt: skip

logger = logging.getLogger("detectron2.budgeted")


def time_budget_seconds(cfg: CfgNode) -> float:
    """``SOLVER.BUDGET.SECONDS`` (0: no time budget); bad values raise one line."""
    b = cfg.SOLVER.get("BUDGET", CfgNode())
    value = b.get("SECONDS", 0)
    if value in (0, 0.0, "", None):
        return 0.0
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        raise BudgetConfigError(f"SOLVER.BUDGET.SECONDS: {err}") from None
    fraction = b.get("FRACTION", 1.0) if b.get("FULL_ITERS", 0) else None
    head = f"SOLVER.BUDGET.SECONDS={value!r} with SOLVER.BUDGET.FRACTION={fraction}"
    hint = "FRACTION 1.0 with SECONDS, SOLVER.MAX_ITER then only caps the iterations"
    check_one_budget(fraction, head, hint, BudgetConfigError)
    return seconds


def time_budget_from_cfg(
    cfg: CfgNode, optimizer: torch.optim.Optimizer, schedule: str, params: dict[str, Any]
) -> BudgetTimeLR:
    """The time-budget scheduler ``cfg`` states (``SOLVER.BUDGET.SECONDS > 0``)."""
    s = cfg.SOLVER
    budget = TimeBudget(
        schedule,
        time_budget_seconds(cfg),
        s.WARMUP_ITERS,
        s.WARMUP_FACTOR,
        s.WARMUP_METHOD,
        params,
    )
    period = s.BUDGET.get("CLOCK_SYNC_PERIOD", 1)
    clock = TrainingClock(sync_period=period, share=broadcast_from_rank0)
    policy = check_on_resume(on_resume(cfg), "SOLVER.BUDGET.ON_RESUME", TIME_RESUME_POLICIES)
    return TimeBudgetLRScheduler(optimizer, budget, clock, on_resume=policy)


class TimeBudgetLRScheduler(BudgetTimeLR):
    """:class:`budgeted.BudgetTimeLR` logging into Detectron2's log and raising its error types:
    a refused resume (another time budget, other base LRs) is a ``BudgetResumeError`` (one
    line)."""

    LOGGER = "detectron2.budgeted"
    RESUME_FIX = (
        "resume with the checkpoint's time budget and base LR, or start a new run from its "
        "weights: MODEL.WEIGHTS <checkpoint>, no --resume, another OUTPUT_DIR"
    )
    BASE_LR_KEY = "SOLVER.BASE_LR"
    RESUME_ERROR = BudgetResumeError


class TimeBudgetHook(HookBase):
    """Run the time budget's clock and stop training at its deadline (see the module).

    Attributes:
        stopped_at (int or None): the iterations trained when the deadline stopped training.
    """

    def __init__(self, scheduler: BudgetTimeLR | None = None, prog: str = "train_net") -> None:
        self._scheduler = scheduler
        self.prog = prog
        self.stopped_at: int | None = None

    @property
    def scheduler(self) -> BudgetTimeLR:
        scheduler = self._scheduler or getattr(self.trainer, "scheduler", None)
        if not isinstance(scheduler, BudgetTimeLR):
            raise TypeError(
                f"TimeBudgetHook needs a time-budget scheduler (SOLVER.BUDGET.SECONDS > 0); the "
                f"trainer's is {type(scheduler).__name__}"
            )
        return scheduler

    def before_train(self) -> None:
        self.scheduler  # noqa: B018  (fail before training with the wrong scheduler)

    def before_step(self) -> None:
        sched = self.scheduler
        if sched.done():
            self._stop(sched)
        self.trainer.storage.put_scalar("time_budget/elapsed", sched.clock.elapsed, False)
        sched.clock.resume()

    def after_step(self) -> None:
        self.scheduler.clock.pause()  # first hook: nothing after run_step is training time

    def _stop(self, sched: BudgetTimeLR) -> None:
        trainer = self.trainer
        trained = trainer.iter  # iterations 0 .. iter - 1 are done
        self.stopped_at = trained
        # iter == max_iter: what a finished loop leaves, so after_train hooks treat the run as
        # finished (EvalHook evaluates, its results are written at this iteration)
        trainer.max_iter = trained
        checkpointer = getattr(trainer, "checkpointer", None)
        if checkpointer is not None and trained > trainer.start_iter:
            if comm.is_main_process():
                trainer.iter = trained - 1  # the last iteration trained, as every checkpoint has
                try:
                    checkpointer.save("model_final", iteration=trained - 1)
                finally:
                    trainer.iter = trained
            comm.synchronize()
        message = f"{self.prog}: " + Deadline(sched.budget.seconds, sched.clock).reached_line(
            trained,
            sched.clock.elapsed,
            f", last LR multiplier {sched.last_trained_factor:.4g}",
            "final evaluation follows",
        )
        if comm.is_main_process():
            logger.info(message)
            print(message, file=sys.stderr, flush=True)
        raise TimeBudgetReached(message)


UNDECAYED_WORDS = {
    "capped": "SOLVER.MAX_ITER={max_iter} ended training before the deadline ({elapsed:.1f} of "
    "{seconds:g} s trained): raise SOLVER.MAX_ITER, which only caps a time budget",
    "warmup": "the deadline came inside the warmup: shorten SOLVER.WARMUP_ITERS ({warmup_iters}) "
    "or raise the budget",
    "few": "the deadline came after {trained} iterations of {average:.3g} s on average, too few "
    "for the schedule to decay: raise the budget or shorten the iterations",
    "tail": "the model was saved and evaluated as usual",
}
"""The causes of an end before the schedule decayed (:meth:`Deadline.undecayed`)."""


def undecayed_stop(scheduler: Any, max_iter: int) -> Undecayed | None:
    """The one-line stop of a time-budget run that ended before its schedule decayed, with the
    cause and what to change; None when it decayed (or the scheduler is not a time budget's)."""
    if not isinstance(scheduler, BudgetTimeLR) or scheduler.last_trained_elapsed is None:
        return None
    last = scheduler.last_epoch - 1  # the last iteration trained
    budget = scheduler.budget
    shortfall = budget.shortfall(last, scheduler.last_trained_elapsed) if last >= 0 else None
    line = Deadline(budget.seconds, scheduler.clock).undecayed(
        shortfall,
        last + 1,
        UNDECAYED_WORDS,
        capped=not scheduler.done(),
        warmup=last < budget.warmup_iters,
        max_iter=max_iter,
        warmup_iters=budget.warmup_iters,
    )
    return None if line is None else Undecayed(line)

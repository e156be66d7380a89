"""``BudgetCallback``: a budget schedule as a LightningModule's LR schedule (Lightning 2.6).

The schedulers are the plain-PyTorch ones (:class:`budgeted.pytorch.BudgetLR`, or
:class:`budgeted.pytorch.BudgetTimeLR` over a time budget), built over ``trainer.optimizers`` at
``on_train_start`` (after Lightning restored a checkpoint), stepped until their count is
``trainer.global_step`` (optimizer steps: gradient accumulation counts once) after each batch, and
saved in the callback's state in every checkpoint Lightning writes. Only public Lightning names.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.callbacks import Timer

from ..control.engine import write_lrs
from ..errors import DIVERGED_EXIT_CODE, BudgetConfigError, Diverged
from ..pytorch import BudgetLR, BudgetTimeLR
from ..safety.preemption import (
    PREEMPTED_EXIT_CODE,
    PREEMPTION_SIGNALS,
    Preempted,
    PreemptionGuard,
    PreemptionPolicy,
    active_guard,
    signal_name,
)
from ..schedules import TrainingClock
from ..schedules.contract import DEFAULTS
from ..trainer_budget import TrainerBudget

__all__ = ["BudgetCallback", "Diverged"]

PROG = "BudgetCallback"
LIMITS = "max_steps, max_epochs x optimizer steps per epoch, or max_time"
"""The trainer's settings of its length, as the refusals name them."""


class BudgetCallback(Callback):
    """Train every optimizer of the LightningModule at ``lr = base_lr * m(t)``, ``m`` the budget
    schedule ``schedule`` (any registered name, or ``NAME:KEY=VALUE,...``) and ``t`` the optimizer
    steps so far (``trainer.global_step``); the base LR is the optimizer's own.

    The budget, first found of: ``time`` (seconds, or ``"90m"``: a time budget); ``total_iters``;
    ``fraction`` of ``full_iters`` (``budgeted.budget_iters``; the callback stops the trainer
    there); the trainer's ``max_steps`` / ``max_epochs`` x steps per epoch
    (``trainer.estimated_stepping_batches``); the trainer's ``max_time``, which this callback then
    keeps instead of Lightning's ``Timer`` (that one counts from ``on_train_start`` and through
    validation, and would stop before the LR reached 0).

    A time budget warms up over ``warmup_iters`` steps and decays over the training seconds left
    (counted from the first step, validation excluded, carried across resumes); the step at which
    the deadline is reached is the last (``trainer.should_stop``) and the LR is 0 after it.

    Args:
        schedule: the schedule, by the name ``BudgetLR`` takes (default ``"linear"``).
        warmup_iters, warmup_factor, warmup_method: the warmup, as ``BudgetLR`` takes it (default
            the 500-iteration convention, ``budgeted.schedules.DEFAULTS``).
        params: the schedule's parameters (``{"milestones": [0.5, 0.75]}``), beside any in
            ``schedule``.
        on_resume: a checkpoint of another budget: ``"refuse"`` (one line, before any step),
            ``"replan"`` (the decay goes on from where it was to the new end) or ``"branch"``.
        preemption: SIGTERM / SIGUSR1 (under Slurm SIGTERM only: SIGUSR1 stays Lightning's
            requeue) save ``checkpoint`` after the current step and end the run, exit status 75.
        checkpoint: the preemption checkpoint (default ``<ModelCheckpoint dirpath>/last.ckpt``,
            which ``ckpt_path="last"`` finds, else ``<default_root_dir>/checkpoints/last.ckpt``).
        divergence: a non-finite training loss ends the run in one line, exit status 3.
    """

    def __init__(
        self,
        schedule: str = "linear",
        *,
        total_iters: int | None = None,
        fraction: float | None = None,
        full_iters: int | None = None,
        time: float | str | None = None,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        params: dict[str, Any] | None = None,
        on_resume: str = "refuse",
        preemption: bool = True,
        checkpoint: str | None = None,
        divergence: bool = True,
    ) -> None:
        self.budget = TrainerBudget(
            PROG, schedule, total_iters=total_iters, fraction=fraction, full_iters=full_iters,
            time=time, warmup_iters=warmup_iters, warmup_factor=warmup_factor,
            warmup_method=warmup_method, params=params, on_resume=on_resume,
        )  # fmt: skip
        self.seconds = self.time = self.budget.seconds
        self.checkpoint, self.preemption, self.divergence = checkpoint, preemption, divergence
        self.schedulers: list[BudgetLR | BudgetTimeLR] = []
        self.clock: TrainingClock | None = None
        self.total: int | None = None  # the iteration budget in use (None: a time budget)
        self._loaded: Mapping[str, Any] | None = None
        self._policy: PreemptionPolicy | None = None
        self._guard: PreemptionGuard | None = None
        self._stepped = 0

    # --- the budget and the schedulers ----------------------------------------------------

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        self.seconds = self.time  # the stated time budget (None: an iteration budget)
        b = self.budget
        stated = not (b.seconds is None and b.total_iters is None and b.full_iters is None)
        unbounded = trainer.max_steps == -1 and trainer.max_epochs in (None, -1)
        if timer is not None and timer.time_remaining() is not None and not stated and unbounded:
            self.seconds = timer.time_remaining()  # max_time: this callback's deadline now
            trainer.callbacks = [c for c in trainer.callbacks if c is not timer]

    def _take_signals(self) -> None:
        """From now on a preemption signal is a flag (installed after Lightning's own handlers,
        which Lightning puts back when the run ends, however it ends)."""
        guard = active_guard()
        if guard is None:
            slurm = SLURMEnvironment.detect()  # SIGUSR1 stays Lightning's requeue under Slurm
            signals = [s for s in PREEMPTION_SIGNALS if not slurm or s.name == "SIGTERM"]
            guard = self._guard = PreemptionGuard(signals).__enter__()
        self._policy = PreemptionPolicy(guard)

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.lr_scheduler_configs:
            raise BudgetConfigError(
                f"{PROG}: {type(pl_module).__name__}.configure_optimizers returns an LR scheduler "
                "too; allowed: optimizers only, BudgetCallback is the LR schedule (remove one)"
            )

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.optimizers:
            raise BudgetConfigError(f"{PROG}: the LightningModule has no optimizer to schedule")
        self.clock, self.total = None, None
        if self.seconds is None:
            self.total = self.budget.steps(trainer.estimated_stepping_batches, LIMITS)
        else:
            self.clock = self.budget.clock()
        self.schedulers = [
            self.budget.scheduler(o, self.total, seconds=self.seconds, clock=self.clock)
            for o in trainer.optimizers
        ]
        self._resume(trainer)
        self._stepped = trainer.global_step
        self._catch_up(trainer.global_step)
        if self.preemption:
            self._take_signals()
            signum = self._policy.begin()
            if signum:  # a signal while the run was being built or restored
                raise self._preempted(trainer, signum, None)

    def _resume(self, trainer: Trainer) -> None:
        loaded, self._loaded = self._loaded, None
        if loaded is None:
            return
        states = loaded.get("schedulers")
        if not isinstance(states, list) or len(states) != len(self.schedulers):
            count = len(states) if isinstance(states, list) else "no"
            raise BudgetConfigError(
                f"{PROG}: cannot resume: the checkpoint holds {count} scheduler states, the "
                f"trainer has {len(self.schedulers)} optimizers; allowed: the checkpoint's "
                "optimizers"
            )
        for scheduler, state in zip(self.schedulers, states):
            scheduler.load_state_dict(state)  # the resume decision: refused in one line
            if isinstance(scheduler, BudgetLR):  # the next step's LR (the load sets none)
                groups = scheduler.optimizer.param_groups
                write_lrs(groups, "lr", scheduler.base_lrs, scheduler.next_multiplier())

    def _catch_up(self, steps: int) -> None:
        for scheduler in self.schedulers:
            while scheduler.last_epoch < steps:
                scheduler.step()

    # --- each step --------------------------------------------------------------------------

    def on_train_batch_start(self, trainer: Trainer, *args: Any) -> None:
        if self.clock is not None:
            self.clock.resume()  # from the first step on; paused by validation

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.clock is not None:
            self.clock.pause()

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        step = trainer.global_step
        stepped, self._stepped = step > self._stepped, step
        if self.divergence:
            self._check_loss(trainer, outputs, step if stepped else step + 1)
        if not stepped or not self.schedulers:
            return
        self._catch_up(step)
        done = self._done(trainer, step)
        if self._policy is not None:
            signum = self._policy.stop_after(step, step if done else step + 1)
            if signum:
                raise self._preempted(trainer, signum, step)

    def _done(self, trainer: Trainer, step: int) -> bool:
        """Whether the budget ends with step ``step`` (the trainer is then told to stop)."""
        if self.clock is None:
            done = self.total is not None and step >= self.total
        else:
            line = self.budget.deadline_line(
                self.schedulers[0], step, f"the LR is {self.lr():.3g}; training stops"
            )
            done = line is not None
            if done and not trainer.should_stop:
                self._say(trainer, line)
        trainer.should_stop = trainer.should_stop or done
        return done

    def lr(self) -> float:
        """The LR of the first param group of the first optimizer now (the next step's)."""
        if not self.schedulers:
            return math.nan
        return float(self.schedulers[0].optimizer.param_groups[0]["lr"])

    def _check_loss(self, trainer: Trainer, outputs: Any, iteration: int) -> None:
        first = self.schedulers[0] if self.schedulers else None
        stop = self.budget.diverged(
            outputs, iteration, trainer.optimizers[0], first,
            "lower the base LR or lengthen warmup_iters; stopped before any checkpoint of it, the "
            f"run is not a result (exit status {DIVERGED_EXIT_CODE})",
        )  # fmt: skip
        if stop is not None:
            self._say(trainer, stop.message)
            raise stop

    # --- preemption -------------------------------------------------------------------------

    def checkpoint_path(self, trainer: Trainer) -> str:
        """Where a preemption saves: ``checkpoint``, else ``last.ckpt`` beside the
        ``ModelCheckpoint``'s files (``<default_root_dir>/checkpoints`` without one)."""
        if self.checkpoint:
            return os.fspath(self.checkpoint)
        saver = trainer.checkpoint_callback
        folder = getattr(saver, "dirpath", None) or os.path.join(
            trainer.default_root_dir, "checkpoints"
        )
        return os.path.join(folder, "last.ckpt")

    def _preempted(self, trainer: Trainer, signum: int, step: int | None) -> Preempted:
        name = signal_name(signum)
        if step is None:
            self._say(trainer, f"preempted by {name} before the first step: nothing new to save; "
                               f"exit status {PREEMPTED_EXIT_CODE}")  # fmt: skip
            return Preempted(f"preempted by {name}", signum)
        if self.clock is not None:
            self.clock.pause()
        path = self.checkpoint_path(trainer)
        trainer.save_checkpoint(path)
        self._say(
            trainer,
            f"preempted by {name} at step {step}: saved {path}; exit status "
            f"{PREEMPTED_EXIT_CODE}, resume with trainer.fit(..., ckpt_path={path!r})",
        )
        return Preempted(f"preempted by {name} at step {step}", signum)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        first = self.schedulers[0] if self.schedulers else None
        line = self.budget.undecayed_line(first, "raise max_steps / max_epochs or the time budget")
        if line is not None:
            self._say(trainer, line)

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._release()

    def on_exception(self, trainer: Trainer, module: LightningModule, err: BaseException) -> None:
        self._release()  # Lightning calls no teardown hook after an exception

    def _release(self) -> None:
        """Give the signals back (the guard this callback installed)."""
        if self._policy is not None:
            self._policy.end()
            self._policy = None
        if self._guard is not None:
            self._guard.__exit__(None, None, None)
            self._guard = None

    # --- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        if not self.schedulers and self._loaded is not None:
            return dict(self._loaded)  # saved before training started: as it was loaded
        return {"schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded = state_dict  # decided at on_train_start, over the restored optimizers

    @staticmethod
    def _say(trainer: Trainer, text: str) -> None:
        if trainer.is_global_zero:
            print(f"{PROG}: {text}", file=sys.stderr, flush=True)

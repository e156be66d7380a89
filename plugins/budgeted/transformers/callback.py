"""The budget in a Hugging Face ``Trainer``: :class:`BudgetCallback` says what to train (the
schedule, the budget, the warmup) and keeps the time budget, preemption and the budget's stop;
:class:`BudgetTrainerMixin` builds its scheduler in ``create_scheduler`` and stops a diverged
run in ``training_step`` (both public extension points of ``Trainer``)."""

from __future__ import annotations

import logging
from typing import Any

from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import SaveStrategy

from ..errors import BudgetConfigError
from ..pytorch import BudgetLR, BudgetTimeLR
from ..safety.preemption import PREEMPTED_EXIT_CODE, Preempted, PreemptionPolicy, signal_name
from ..schedules import TrainingClock
from ..schedules.contract import DEFAULTS
from ..trainer_budget import TrainerBudget
from .compat import (
    callbacks_of,
    checkpoint_folder,
    mark_scheduler_created,
    shadowing_datasets_folder,
)

__all__ = ["LOGGER", "BudgetCallback", "BudgetTrainer", "BudgetTrainerMixin"]

LIMITS = "TrainingArguments.max_steps, or num_train_epochs x steps per epoch"
"""The trainer's settings of its length, as the refusals name them."""
LOGGER = logging.getLogger("budgeted.transformers")
"""Where the lines go: a deadline reached, a preemption, a divergence, a re-plan."""


class BudgetCallback(TrainerCallback):
    """A budget-aware LR schedule for a ``Trainer`` built with :class:`BudgetTrainerMixin`.

    The budget, in optimizer steps: ``total_iters``, else ``fraction`` of ``full_iters`` (of the
    trainer's own length where ``full_iters`` is not given), else the trainer's length
    (``TrainingArguments.max_steps``, or ``num_train_epochs`` x steps per epoch); a budget
    shorter than the trainer's ends the run there. ``time`` (``"90s"``, ``"6h"``, seconds) is a
    wall-clock budget instead: the decay reaches 0 at the deadline, counted from the first step,
    across resumes, paused while the trainer saves or evaluates; the trainer's length is a cap.

    ``schedule`` is any registered schedule (``params`` its parameters), with the warmup of
    :class:`budgeted.pytorch.BudgetLR` (``warmup_iters`` steps, 500 by default). A resume from a
    checkpoint of another budget is refused in one line (``on_resume="replan"`` re-plans it).
    SIGTERM / SIGUSR1 (``preemption=True``) save a checkpoint after the current step and end
    the run with :class:`~budgeted.safety.preemption.Preempted` (exit status 75).

    Example:
        >>> BudgetCallback("cosine", warmup_iters=0, fraction=0.25).describe(1000)
        'cosine over 250 of 1000 steps, warmup 0'
    """

    def __init__(
        self,
        schedule: str = "linear",
        *,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        total_iters: int | None = None,
        fraction: float | None = None,
        full_iters: int | None = None,
        time: float | str | None = None,
        on_resume: str = "refuse",
        preemption: bool = True,
        **params: Any,
    ) -> None:
        self.budget = TrainerBudget(
            "BudgetCallback", schedule, total_iters=total_iters, fraction=fraction,
            full_iters=full_iters, time=time, warmup_iters=warmup_iters,
            warmup_factor=warmup_factor, warmup_method=warmup_method, params=params,
            on_resume=on_resume,
        )  # fmt: skip
        self.seconds = self.budget.seconds
        self.preemption = preemption
        self.lr_scheduler: BudgetLR | BudgetTimeLR | None = None
        self.clock: TrainingClock | None = None
        self.budget_steps = 0
        self._policy: PreemptionPolicy | None = None
        self._preempted: tuple[int, int] | None = None  # (signal, step)

    def steps(self, trainer_steps: int) -> int:
        """The budget in steps, for a trainer of ``trainer_steps`` (one line if it is longer)."""
        return self.budget.steps(trainer_steps, LIMITS)

    def describe(self, trainer_steps: int) -> str:
        """The budget in words."""
        if self.seconds is not None:
            budget = f"{self.seconds:g} s (at most {trainer_steps} steps)"
        else:
            budget = f"{self.steps(trainer_steps)} of {trainer_steps} steps"
        return f"{self.budget.name} over {budget}, warmup {self.budget.warmup['warmup_iters']}"

    def scheduler(self, optimizer: Any, trainer_steps: int, args: Any = None) -> Any:
        """The LR scheduler of the budget (:class:`~budgeted.pytorch.BudgetLR`, or
        :class:`~budgeted.pytorch.BudgetTimeLR` for ``time``), for ``optimizer`` in a trainer of
        ``trainer_steps`` steps: what ``create_scheduler`` returns, or ``optimizers=`` takes."""
        if args is not None and args.get_warmup_steps(trainer_steps) > 0:
            raise BudgetConfigError(
                f"BudgetCallback: TrainingArguments.warmup_steps={args.warmup_steps!r} is not "
                "used under a budget; allowed: 0 there, and warmup_iters= to BudgetCallback"
            )
        steps = trainer_steps if self.seconds is not None else self.steps(trainer_steps)
        self.budget_steps = steps
        self.lr_scheduler = self.budget.scheduler(optimizer, steps)
        if isinstance(self.lr_scheduler, BudgetTimeLR):
            self.clock = self.lr_scheduler.clock
        if self.preemption and self._policy is None:  # from here on (the checkpoint's loading
            self._policy = PreemptionPolicy()  # too) a signal is a flag
            self._policy.take_guard()
        return self.lr_scheduler

    def release(self) -> None:
        """Give the preemption signals their handlers back."""
        if self._policy is not None:
            self._policy.end()
            self._policy = None

    # --- the trainer's events ----------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        scheduler = kwargs.get("lr_scheduler")
        if self.lr_scheduler is None or scheduler is not self.lr_scheduler:
            self.release()
            raise BudgetConfigError(
                f"BudgetCallback: the trainer's LR scheduler is a {type(scheduler).__name__}, not "
                "the budget's; allowed: a Trainer with BudgetTrainerMixin (BudgetTrainer), or "
                "optimizers=(optimizer, callback.scheduler(optimizer, max_steps))"
            )
        self._preempted = None
        if self.preemption and self._policy is None:
            self._policy = PreemptionPolicy()
        signum = self._policy.begin() if self._policy is not None else 0
        if signum:
            self.release()
            line = (
                f"preempted by {signal_name(signum)} before step {state.global_step + 1}: "
                f"nothing new to save; exit status {PREEMPTED_EXIT_CODE}"
            )
            LOGGER.warning(line)
            raise Preempted(line, signum)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.clock is not None:
            self.clock.resume()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step, scheduler = state.global_step, self.lr_scheduler
        if isinstance(scheduler, BudgetTimeLR) and scheduler.done():
            tail = "training ends" + ", with a checkpoint" * self._end(args, control)
            LOGGER.warning(self.budget.deadline_line(scheduler, step, tail))
        elif isinstance(scheduler, BudgetLR) and step >= self.budget_steps:
            self._end(args, control)
        if self._policy is not None and self._preempted is None:
            total = step if control.should_training_stop else state.max_steps
            signum = self._policy.stop_after(step, total)
            if signum:
                self._preempted = (signum, step)
                control.should_save = control.should_training_stop = True
        if self.clock is not None and (control.should_save or control.should_evaluate):
            self.clock.pause()

    @staticmethod
    def _end(args: Any, control: Any) -> bool:
        """Stop after this step, saving it as the trainer saves its last step; whether saved."""
        control.should_training_stop = True
        control.should_save |= args.save_strategy == SaveStrategy.STEPS
        return control.should_save

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._preempted is not None and self._preempted[1] == state.global_step:
            LOGGER.warning(
                f"preempted by {signal_name(self._preempted[0])} at step {state.global_step} "
                f"of {self.budget_steps}: saved "
                f"{checkpoint_folder(args.output_dir, state.global_step)}"
                f"; exit status {PREEMPTED_EXIT_CODE}, continue with resume_from_checkpoint=True"
            )

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.release()
        scheduler = self.lr_scheduler
        if self._preempted is not None:
            signum, step = self._preempted
            raise Preempted(f"preempted by {signal_name(signum)} at step {step}", signum)
        line = self.budget.undecayed_line(scheduler, "raise max_steps or the time budget")
        if line is not None:
            LOGGER.warning(line)


class BudgetTrainerMixin:
    """A ``Trainer`` whose scheduler is its :class:`BudgetCallback`'s (without one: the
    trainer's own, ``lr_scheduler_type``) and whose non-finite loss ends the run in one line
    (:class:`~budgeted.errors.Diverged`, exit status 3). Put it first:
    ``class MyTrainer(BudgetTrainerMixin, Seq2SeqTrainer)``."""

    def budget_callback(self) -> BudgetCallback | None:
        """The trainer's :class:`BudgetCallback`, if it has one."""
        return next((c for c in callbacks_of(self) if isinstance(c, BudgetCallback)), None)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.train``; the preemption signals get their handlers back however it ends (a
        refused resume included)."""
        folder = shadowing_datasets_folder()
        if folder is not None:
            raise BudgetConfigError(
                f"the folder {folder} stands in for the datasets library (transformers imports "
                "any folder of that name on sys.path, and its Trainer then fails); allowed: a "
                "script in a folder without a datasets/ folder, or datasets installed"
            )
        try:
            return super().train(*args, **kwargs)  # type: ignore[misc]
        finally:
            callback = self.budget_callback()
            if callback is not None:
                callback.release()

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        callback = self.budget_callback()
        if callback is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)  # type: ignore[misc]
        optimizer = self.optimizer if optimizer is None else optimizer
        self.lr_scheduler = callback.scheduler(optimizer, num_training_steps, self.args)
        mark_scheduler_created(self)
        return self.lr_scheduler

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        loss = super().training_step(model, inputs, num_items_in_batch)  # type: ignore[misc]
        stop = TrainerBudget.diverged(
            loss, self.state.global_step + 1, self.optimizer, self.lr_scheduler,
            "lower the base LR (TrainingArguments.learning_rate) or clip the gradients "
            "(max_grad_norm); stopped before its optimizer step, nothing saved (exit status 3)",
        )  # fmt: skip
        if stop is None:
            return loss
        LOGGER.error(stop.message)
        callback = self.budget_callback()
        if callback is not None:
            callback.release()
        raise stop


class BudgetTrainer(BudgetTrainerMixin, Trainer):
    """``transformers.Trainer`` with :class:`BudgetTrainerMixin`."""

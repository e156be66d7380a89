"""Runs that end with one line and an exit status of their own, never a traceback: **diverged**
(3: a non-finite loss; no final checkpoint or evaluation, :class:`StopsInOneLine`),
**undecayed** (4: a time budget ended before its schedule decayed, after saving and evaluating),
**disk full** (1: :func:`disk_full` names the file system, the file and the last intact
checkpoint), **finished** (0: ``--resume`` of a run with nothing left to do,
:func:`check_finished`). Each is a :class:`RunStopped`, a ``SystemExit`` carrying the line: the
training loop lets it through, the tool (with several workers the launcher) prints it once and
exits with its status. The check of a resumed checkpoint's position is here too (its base LRs:
:meth:`budgeted.control.resume.ResumeCheck.base_lrs`).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import torch
from detectron2.engine import hooks

from ..control import stops
from ..control.stops import is_disk_full
from ..errors import DiskFull, Diverged, RunStopped, Undecayed
from ..runs.detectron2 import final_metrics, saved_schedulers
from .compat import trainer_hooks

__all__ = [
    "DiskFull", "Diverged", "Finished", "RunStopped", "StopsInOneLine", "Undecayed", "as_stop",
    "check_finished", "check_position", "disk_full", "is_disk_full", "non_finite_kind", "stop_line"
]  # fmt: skip

logger = logging.getLogger("detectron2.budgeted")

CHECKPOINTS = "model_*.pth"


class Finished(RunStopped):
    """``--resume`` of a finished run: nothing to do (exit status 0)."""

    CODE = 0


NOT_A_RESULT = (Diverged, DiskFull)
"""Stops after which no final checkpoint or final evaluation may be made."""

RESULT_HOOKS = (hooks.PeriodicCheckpointer, hooks.EvalHook)
"""The hooks whose ``after_train`` makes a result (``model_final.pth``, the final evaluation)."""


def non_finite_kind(err: BaseException, model: torch.nn.Module) -> str:
    """``"nan"`` or ``"inf"``: what a diverged run's weights (else its logged losses) hold
    (:func:`budgeted.control.stops.non_finite_kind`).

    Example:
        >>> non_finite_kind(FloatingPointError("loss_dict = {'loss_cls': inf}"),
        ...                 torch.nn.Linear(1, 1))
        'inf'
    """
    return stops.non_finite_kind(model.parameters(), str(err))


def base_lr(optimizer: torch.optim.Optimizer, scheduler: Any = None) -> float:
    """The base LR in use (:func:`budgeted.control.stops.base_lr_of`), else the first group's."""
    found = stops.base_lr_of(getattr(scheduler, "base_lrs", None), optimizer.param_groups)
    return float(optimizer.param_groups[0]["lr"]) if found is None else found


def _scheduler_of(trainer: Any) -> Any:
    """The LR scheduler a trainer steps: ``DefaultTrainer.scheduler``, else its LRScheduler
    hook's (a ``SimpleTrainer`` of a LazyConfig loop); None without one."""
    scheduler = getattr(trainer, "scheduler", None)
    if scheduler is not None:
        return scheduler
    for hook in trainer_hooks(trainer):
        if isinstance(hook, hooks.LRScheduler):
            return getattr(hook, "scheduler", None)
    return None


class StopsInOneLine:
    """Mixin for a Detectron2 trainer (``DefaultTrainer``, ``SimpleTrainer``, ...): a diverged
    iteration ends the run with one line (:class:`Diverged`); after any :class:`RunStopped` that
    is not a result (diverged, disk full) the ``after_train`` hooks that would write a final
    checkpoint or run the final evaluation are skipped; the others (writers, timers, the
    preemption hook) run as usual.

    Example::

        class Trainer(StopsInOneLine, DefaultTrainer):
            DIVERGED_ADVICE = "lower SOLVER.BASE_LR"
    """

    DIVERGED_ADVICE: ClassVar[str] = (
        "lower SOLVER.BASE_LR, lengthen the warmup (SOLVER.WARMUP_ITERS) or clip gradients "
        "(SOLVER.CLIP_GRADIENTS.ENABLED True)"
    )
    stopped: RunStopped | None = None

    def run_step(self) -> None:
        try:
            super().run_step()  # type: ignore[misc]
        except FloatingPointError as err:
            self.stopped = stops.diverged(
                non_finite_kind(err, self.model),  # type: ignore[attr-defined]
                self.iter + 1,  # type: ignore[attr-defined]
                base_lr(self.optimizer, _scheduler_of(self)),  # type: ignore[attr-defined]
                "the weights are not a result: no final checkpoint or evaluation was made; "
                f"{self.DIVERGED_ADVICE}",
            )
            logger.error(self.stopped.message)
            raise self.stopped from None

    def after_step(self) -> None:
        try:
            super().after_step()  # type: ignore[misc]
        except RunStopped as stop:
            self.stopped = stop
            raise

    def after_train(self) -> None:
        if not isinstance(self.stopped, NOT_A_RESULT):
            super().after_train()  # type: ignore[misc]
            return
        self.storage.iter = self.iter  # type: ignore[attr-defined]
        for hook in trainer_hooks(self):
            if not isinstance(hook, RESULT_HOOKS):
                hook.after_train()


# --- a full disk ----------------------------------------------------------------------------


def disk_full(path: str, folder: str, *, resume: str = "--resume") -> DiskFull:
    """The one line for a write of ``path`` that found no space left, with the newest intact
    checkpoint of run ``folder`` named (:func:`budgeted.control.stops.disk_full`)."""
    return stops.disk_full(path, folder, CHECKPOINTS, resume=resume)


def stop_line(prog: str, stop: RunStopped) -> str:
    """``<prog>: <line>``."""
    return f"{prog}: {stop.message}"


def as_stop(err: BaseException, folder: str | None) -> RunStopped | None:
    """``err`` as a one-line stop (:func:`budgeted.control.stops.as_stop`), else None."""
    return stops.as_stop(err, folder, CHECKPOINTS)


def check_position(checkpoint: Any, path: str, *, what: str, weights_hint: str) -> None:
    """Refuse (one-line ``ValueError``) to resume a checkpoint that is not a resumable state of
    our trainers: weights only, or an LR scheduler whose step count disagrees with the iteration.

    A checkpoint saved after (0-based) iteration ``i`` holds ``iteration == i`` (top level and
    ``trainer``) and an LR scheduler stepped ``i + 1`` times (``last_epoch``). A time budget's
    ``model_final.pth`` of an earlier version held ``trainer.iteration == i + 1``; it is
    accepted.
    """
    trainer = checkpoint.get("trainer") if isinstance(checkpoint, dict) else None
    new_run = f"a weights file starts a new run: {weights_hint.format(path=path)}"
    if not isinstance(trainer, dict) or not isinstance(trainer.get("iteration"), int):
        raise ValueError(
            f"{what} {path!r} holds weights only (no iteration, LR scheduler or optimizer "
            f"state, as tools/extract_weights.py writes), so it cannot be resumed; {new_run} "
            "(with no --resume or --resume-from)"
        )
    iteration = trainer["iteration"]
    top = checkpoint.get("iteration", iteration)
    scheduler = _scheduler_state(checkpoint)
    steps = scheduler.get("last_epoch")
    if _legacy_deadline_final(scheduler, iteration, top):
        return
    if top != iteration or (isinstance(steps, int) and steps != iteration + 1):
        raise ValueError(
            f"{what} {path!r} is inconsistent: its iteration is {top!r}, its trainer's "
            f"{iteration} and its LR scheduler has stepped {steps!r} times (last_epoch), where a "
            "checkpoint saved after iteration i holds i, i and i + 1: the file was edited or "
            "assembled from two checkpoints, and resuming it would train at the wrong LRs; "
            "resume from another checkpoint, or start a new run from its weights: "
            f"{weights_hint.format(path=path)}"
        )


def _scheduler_state(checkpoint: Any) -> dict[str, Any]:
    """The LR scheduler's state in a (untrusted) checkpoint; {} where there is none."""
    return saved_schedulers(checkpoint).get("LRScheduler", {})


def _elapsed(scheduler: dict[str, Any]) -> float:
    """The training seconds of a time budget's scheduler state (0.0 without a clock)."""
    clock = scheduler.get("clock")
    elapsed = clock.get("elapsed") if isinstance(clock, dict) else None
    return float(elapsed) if isinstance(elapsed, (int, float)) else 0.0


def _legacy_deadline_final(scheduler: dict[str, Any], iteration: int, top: Any) -> bool:
    """A time budget's deadline ``model_final.pth`` written before the trainer's iteration was
    saved as the last trained one: ``trainer.iteration == last_epoch == iteration + 1``."""
    budget = scheduler.get("time_budget")
    if not isinstance(budget, dict) or not isinstance(budget.get("seconds"), (int, float)):
        return False
    spent = _elapsed(scheduler) >= budget["seconds"]
    return spent and isinstance(top, int) and top + 1 == iteration == scheduler.get("last_epoch")


def check_finished(
    checkpoint: Any,
    *,
    max_iter: int,
    seconds: float,
    folder: str,
    evaluates: bool,
    longer: str = "resume with a longer budget and SOLVER.BUDGET.ON_RESUME replan",
) -> None:
    """Raise :class:`Finished` (exit status 0, nothing written) when ``--resume`` would resume a
    finished run: its checkpoint trained the last of ``max_iter`` iterations, or spent the time
    budget of ``seconds`` (0: none), and its final evaluation is logged where ``evaluates``
    (without it, resuming runs that evaluation).
    """
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("iteration"), int):
        return
    trained = checkpoint["iteration"] + 1
    spent = bool(seconds) and _elapsed(_scheduler_state(checkpoint)) >= seconds
    if not spent and trained < max_iter:
        return
    if evaluates and final_metrics(folder) is None:
        return
    how = (
        f"its time budget of {seconds:g} s was spent after {trained} iterations"
        if spent
        else f"all {max_iter} iterations were trained"
    )
    raise Finished(
        f"the run in {folder} has finished ({how}) and nothing is left to do: nothing was "
        f"written; to train it longer, {longer}; to evaluate it again, use --eval-only"
    )

"""``PreemptionHook``: SIGTERM / SIGUSR1 end a Detectron2 run after the current iteration, with a
checkpoint, and exit status :data:`~budgeted.safety.preemption.PREEMPTED_EXIT_CODE` (75).

``BudgetTrainer`` registers it last; your own trainer adds it in one line, last (after the LR
scheduler and the writers)::

    trainer.register_hooks([bd2.PreemptionHook(trainer.checkpointer)])

The workers agree on the iteration to stop after (an all-reduce of the flag); the main worker
writes ``model_{iter:07d}.pth`` atomically, one line is printed, every worker raises
:class:`~budgeted.safety.preemption.Preempted`; ``--resume`` continues at exactly the LR an
uninterrupted run would have.
"""

from __future__ import annotations

import logging
import os
import sys

from detectron2.engine import HookBase, hooks
from detectron2.utils import comm
from detectron2.utils.events import CommonMetricPrinter

from ..control.stops import preempted_after
from ..safety.preemption import Preempted, PreemptionGuard, PreemptionPolicy, signal_name
from .compat import forget_last_write, trainer_hooks, writers_of

__all__ = ["PreemptionHook"]

logger = logging.getLogger("detectron2.budgeted")  # into log.txt, with Detectron2's own lines


class PreemptionHook(HookBase):
    """Stop training at the end of the iteration in which a preemption signal arrived."""

    def __init__(
        self,
        checkpointer: object,
        guard: PreemptionGuard | None = None,
        prog: str = "train_net",
        resume_hint: str = "resume with --resume",
    ) -> None:
        self.checkpointer = checkpointer
        self.guard = guard
        self.prog = prog
        self.resume_hint = resume_hint
        self._policy: PreemptionPolicy | None = None

    # the policy (agreement over the workers, when to stop): PreemptionPolicy, as MMEngine's hook

    def before_train(self) -> None:
        self._policy = PreemptionPolicy(self.guard)
        signum = self._policy.begin()
        if signum:
            start, total = self.trainer.start_iter, self.trainer.max_iter
            self._raise(
                f"{self.prog}: preempted by {signal_name(signum)} before iteration "
                f"{start + 1}/{total}: nothing new to save; {self.resume_hint}",
                signum,
            )

    def after_step(self) -> None:
        it, total = self.trainer.iter, self.trainer.max_iter
        stop = preempted_after(self._policy, it + 1, total, self._save, comm.synchronize)
        if stop is not None:
            self._raise(
                f"{self.prog}: preempted by {signal_name(stop[0])} at iteration {it + 1}/{total}: "
                f"checkpoint {stop[1]}; {self.resume_hint}",
                stop[0],
            )

    def _save(self, trained: int) -> str:
        """``model_{iteration:07d}.pth`` of the last iteration trained, by the main worker."""
        name = f"model_{trained - 1:07d}"
        if comm.is_main_process():
            self.checkpointer.save(name, iteration=trained - 1)
        return os.path.join(self.checkpointer.save_dir, f"{name}.pth")

    def after_train(self) -> None:
        cost = self._policy.end() if self._policy is not None else None
        self._policy = None
        if cost:
            logger.info(cost)

    def _raise(self, message: str, signum: int) -> None:
        self._settle_printers()
        if comm.is_main_process():
            print(message, file=sys.stderr, flush=True)
        raise Preempted(message, signum)

    def _settle_printers(self) -> None:
        """Let the writers' final write (``PeriodicWriter.after_train``) pass.

        Detectron2 v0.6's ``CommonMetricPrinter`` estimates the ETA from its previous write when
        no iteration time is recorded yet (the first 3 iterations of a run) and divides by the
        iterations since: zero when training stops right after a write, as here. Forgetting the
        previous write makes it skip the estimate instead.
        """
        for hook in trainer_hooks(self.trainer):
            if isinstance(hook, hooks.PeriodicWriter):
                for writer in writers_of(hook):
                    if isinstance(writer, CommonMetricPrinter):
                        forget_last_write(writer)

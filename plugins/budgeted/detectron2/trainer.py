"""``BudgetTrainer``: Detectron2's ``DefaultTrainer`` with the scheduler registry and CPU DDP."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.data import MetadataCatalog
from detectron2.engine import DefaultTrainer, hooks
from detectron2.evaluation import COCOEvaluator, DatasetEvaluator
from detectron2.utils import comm

from ..pytorch import BudgetTimeLR
from .checkpoint import CheckpointAtHook, use_safe_checkpointer
from .compat import ddp_without_device_ids, has_compiled_ops, inner_trainer, writers_of
from .preemption import PreemptionHook
from .solver import acting_on_trainer_keys, build_lr_scheduler, check_budget
from .stops import StopsInOneLine
from .time_budget import TimeBudgetHook

__all__ = ["BudgetTrainer", "check_budget", "ddp_on_cpu", "has_compiled_ops"]


def ddp_on_cpu(cfg: CfgNode) -> contextlib.AbstractContextManager[None]:
    """While ``DefaultTrainer.__init__`` runs: DDP without ``device_ids`` for a CPU model on
    several workers (Detectron2 v0.6 passes ``device_ids=[local rank]``, which DDP refuses for a
    CPU module: :func:`~budgeted.detectron2.compat.ddp_without_device_ids`); elsewhere nothing
    changes."""
    if comm.get_world_size() == 1 or torch.device(cfg.MODEL.DEVICE).type != "cpu":
        return contextlib.nullcontext()
    return ddp_without_device_ids()


class BudgetTrainer(StopsInOneLine, DefaultTrainer):
    """``DefaultTrainer`` with :func:`build_lr_scheduler`, COCO evaluation (the fast C++
    evaluator only where ``detectron2._C`` exists), metrics every ``SOLVER.BUDGET.WRITER_PERIOD``
    iterations, DDP on CPU, :class:`~budgeted.detectron2.SafeCheckpointer`, a
    :class:`~budgeted.detectron2.PreemptionHook`, one-line stops
    (:class:`~budgeted.detectron2.stops.StopsInOneLine`) and the ``SOLVER.BUDGET`` hooks
    (``GRAD_NORM_PERIOD``, ``SAVE_AT``, ``SECONDS``). See docs/detectron2.md.
    """

    def __init__(self, cfg: CfgNode) -> None:
        check_budget(cfg, comm.get_world_size())  # one line, before the model is built
        with ddp_on_cpu(cfg), acting_on_trainer_keys():  # its build_hooks acts on them
            super().__init__(cfg)
        # DefaultTrainer has no build_checkpointer: its checkpointer replaced everywhere
        # (trainer.checkpointer and the hooks build_hooks gave it to) by the safe one
        use_safe_checkpointer(self, preemption=False)  # build_hooks registered PreemptionHook

    def resume_from(self, path: str) -> None:
        """Resume exactly from checkpoint ``path`` (model, optimizer, scheduler, iteration),
        whatever ``last_checkpoint`` names: training continues at its next iteration.

        Raises:
            UnsafeCheckpointError, DamagedCheckpointError: the file cannot be loaded (one line).
            BudgetResumeError: the checkpoint's budget differs from the config's (one line).
        """
        self.checkpointer.load(path)
        self.start_iter = self.iter + 1

    def state_dict(self) -> dict[str, Any]:
        """Also the inner trainer's state (the optimizer's momentum), which v0.6 leaves out."""
        ret = super().state_dict()
        ret["_trainer"] = inner_trainer(self).state_dict()
        return ret

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        if "_trainer" in state_dict:
            inner_trainer(self).load_state_dict(state_dict["_trainer"])

    @classmethod
    def build_lr_scheduler(
        cls, cfg: CfgNode, optimizer: torch.optim.Optimizer
    ) -> torch.optim.lr_scheduler.LRScheduler:
        return build_lr_scheduler(cfg, optimizer)

    @classmethod
    def build_evaluator(
        cls, cfg: CfgNode, dataset_name: str, output_folder: str | None = None
    ) -> DatasetEvaluator:
        evaluator_type = MetadataCatalog.get(dataset_name).get("evaluator_type", None)
        if evaluator_type != "coco":
            raise NotImplementedError(
                f"BudgetTrainer evaluates COCO-style datasets; {dataset_name!r} has evaluator_type "
                f"{evaluator_type!r}: override build_evaluator for it"
            )
        output_folder = output_folder or os.path.join(cfg.OUTPUT_DIR, "inference")
        return COCOEvaluator(
            dataset_name, output_dir=output_folder, use_fast_impl=has_compiled_ops()
        )

    def build_hooks(self) -> list[Any]:
        ret = super().build_hooks()
        period = self.cfg.SOLVER.BUDGET.WRITER_PERIOD
        writer_at = len(ret)  # the writer is main-process only: elsewhere, the end
        for i, hook in enumerate(ret):
            if isinstance(hook, hooks.PeriodicWriter):
                # the stock hook's own writers: building them again would open a second
                # TensorBoard event file (and JSON/console writers) that nothing closes
                ret[i] = hooks.PeriodicWriter(writers_of(hook), period=period)
                writer_at = i
        if self.cfg.SOLVER.BUDGET.get("GRAD_NORM_PERIOD", 0):  # a diagnostic, loaded when asked
            from .grad_norm import grad_norm_hook_from_cfg

            # before the writers: its value is written at its iteration
            ret.insert(writer_at, grad_norm_hook_from_cfg(self.cfg))
        save_at = self.cfg.SOLVER.BUDGET.get("SAVE_AT", ())  # checked by build_lr_scheduler
        if save_at:  # after the LR scheduler's step: the checkpoint holds the next LR
            ret.append(CheckpointAtHook(save_at))
        ret.append(PreemptionHook(self.checkpointer))  # last: after the writers
        if isinstance(self.scheduler, BudgetTimeLR):  # first: its clock pauses after run_step
            ret.insert(0, TimeBudgetHook(self.scheduler))
        return ret


def __getattr__(name: str) -> Any:
    """``check_resume``, now part of the one pre-flight (:mod:`.preflight`), still importable
    from here, loaded on first use (importing the adapter loads no pre-flight)."""
    if name == "check_resume":
        from .preflight import check_resume

        return check_resume
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

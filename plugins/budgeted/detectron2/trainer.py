"""``BudgetTrainer``: Detectron2's ``DefaultTrainer`` with the scheduler registry and CPU DDP."""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.data import MetadataCatalog
from detectron2.engine import AMPTrainer, DefaultTrainer, SimpleTrainer, hooks
from detectron2.engine.defaults import create_ddp_model
from detectron2.engine.train_loop import TrainerBase
from detectron2.evaluation import COCOEvaluator, DatasetEvaluator
from detectron2.utils import comm
from detectron2.utils.logger import setup_logger

from ..pytorch import BudgetTimeLR
from ..safety.checkpoints import load_checkpoint
from .checkpoint import CheckpointAtHook, SafeCheckpointer, last_checkpoint_file
from .grad_norm import grad_norm_hook_from_cfg
from .preemption import PreemptionHook
from .solver import BudgetConfigError, build_lr_scheduler, stand_in_optimizer
from .stops import StopsInOneLine
from .time_budget import TimeBudgetHook

__all__ = ["BudgetTrainer", "check_budget", "check_resume", "has_compiled_ops"]


def has_compiled_ops() -> bool:
    """Whether the real ``detectron2._C`` is installed (not our lite stand-in).

    Example:
        >>> isinstance(has_compiled_ops(), bool)
        True
    """
    try:
        from detectron2 import _C
    except ImportError:
        return False
    return not getattr(_C, "__budgeted_lite__", False)


def check_budget(cfg: CfgNode, world_size: int | None = None) -> CfgNode:
    """Validate the LR schedule as it will be trained on ``world_size`` workers.

    Applies Detectron2's ``REFERENCE_WORLD_SIZE`` scaling (``MAX_ITER`` and ``WARMUP_ITERS``
    divided by ``world_size / REFERENCE_WORLD_SIZE``) to a copy of ``cfg``, then builds its
    scheduler on a dummy optimizer, so every bad value fails here, before any training.

    Args:
        cfg (CfgNode): the config as loaded (before scaling).
        world_size (int, optional): the number of workers; default: the current world size.

    Returns:
        CfgNode: the scaled copy.

    Raises:
        BudgetConfigError: one line naming the bad key (also a ``MAX_ITER`` that is not the
            budget ``SOLVER.BUDGET`` states).

    Example:
        >>> from budgeted.detectron2 import load_config
        >>> cfg = load_config("mask_rcnn_budget10.yaml", ["SOLVER.REFERENCE_WORLD_SIZE", "8"])
        >>> check_budget(cfg, world_size=16).SOLVER.MAX_ITER
        4500
    """
    world_size = comm.get_world_size() if world_size is None else world_size
    rws = cfg.SOLVER.REFERENCE_WORLD_SIZE
    if rws and world_size != rws and (cfg.SOLVER.IMS_PER_BATCH % rws) != 0:
        raise BudgetConfigError(
            f"SOLVER.IMS_PER_BATCH={cfg.SOLVER.IMS_PER_BATCH} is not divisible by "
            f"SOLVER.REFERENCE_WORLD_SIZE={rws}; allowed: a multiple of it"
        )
    scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)
    param = torch.nn.Parameter(torch.zeros(1))
    build_lr_scheduler(scaled, torch.optim.SGD([param], lr=scaled.SOLVER.BASE_LR))
    return scaled


class BudgetTrainer(StopsInOneLine, DefaultTrainer):
    """``DefaultTrainer`` that builds its LR scheduler with :func:`build_lr_scheduler` (the
    ``LR_SCHEDULER_REGISTRY``: ``BudgetLinear``, ... plus Detectron2's own names), evaluates COCO
    with pycocotools (the fast C++ evaluator only where the real ``detectron2._C`` exists), writes
    metrics every ``SOLVER.BUDGET.WRITER_PERIOD`` iterations, and trains with DDP on CPU too.

    Files: every checkpoint it loads (``MODEL.WEIGHTS``, ``--resume``) goes through
    :class:`~budgeted.detectron2.SafeCheckpointer` (no code from the file runs; one-line
    refusals), and every checkpoint it writes is written atomically. Preemption: SIGTERM or
    SIGUSR1 end the run after the current iteration with a checkpoint and exit status 75
    (:class:`~budgeted.detectron2.PreemptionHook`, registered last). A diverged iteration ends
    the run with one line and exit status 3, no final checkpoint or evaluation
    (:class:`~budgeted.detectron2.stops.StopsInOneLine`). Diagnostics:
    ``SOLVER.BUDGET.GRAD_NORM_PERIOD > 0`` registers
    :class:`~budgeted.detectron2.grad_norm.FullGradNormHook` before the writers
    (``full_grad_norm`` in metrics.json).
    """

    def __init__(self, cfg: CfgNode) -> None:
        # DefaultTrainer.__init__, except for the budget check and DDP's device_ids on CPU.
        TrainerBase.__init__(self)
        logger = logging.getLogger("detectron2")
        if not logger.isEnabledFor(logging.INFO):
            setup_logger()
        cfg = DefaultTrainer.auto_scale_workers(cfg, comm.get_world_size())
        check_budget(cfg, comm.get_world_size())
        model = self.build_model(cfg)
        optimizer = self.build_optimizer(cfg, model)
        data_loader = self.build_train_loader(cfg)
        on_cpu = next(model.parameters()).device.type == "cpu"
        model = create_ddp_model(
            model, broadcast_buffers=False, **({"device_ids": None} if on_cpu else {})
        )
        self._trainer = (AMPTrainer if cfg.SOLVER.AMP.ENABLED else SimpleTrainer)(
            model, data_loader, optimizer
        )
        self.scheduler = self.build_lr_scheduler(cfg, optimizer)
        self.checkpointer = SafeCheckpointer(model, cfg.OUTPUT_DIR, trainer=weakref.proxy(self))
        self.start_iter = 0
        self.max_iter = cfg.SOLVER.MAX_ITER
        self.cfg = cfg
        self.register_hooks(self.build_hooks())

    def resume_from(self, path: str) -> None:
        """Resume exactly from checkpoint ``path`` (model, optimizer, scheduler, iteration),
        whatever ``last_checkpoint`` names: training continues at its next iteration.

        Args:
            path (str): a checkpoint written by this trainer.

        Raises:
            UnsafeCheckpointError, DamagedCheckpointError: the file cannot be loaded (one line).
            BudgetResumeError: the checkpoint's budget differs from the config's (one line).
        """
        self.checkpointer.load(path)
        self.start_iter = self.iter + 1

    def state_dict(self) -> dict[str, Any]:
        """Also the inner trainer's state (the optimizer's momentum), which v0.6 leaves out."""
        ret = super().state_dict()
        ret["_trainer"] = self._trainer.state_dict()
        return ret

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        if "_trainer" in state_dict:
            self._trainer.load_state_dict(state_dict["_trainer"])

    @classmethod
    def build_lr_scheduler(
        cls, cfg: CfgNode, optimizer: torch.optim.Optimizer
    ) -> torch.optim.lr_scheduler._LRScheduler:
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
                ret[i] = hooks.PeriodicWriter(hook._writers, period=period)
                writer_at = i
        grad_norm = grad_norm_hook_from_cfg(self.cfg)
        if grad_norm is not None:  # before the writers: its value is written at its iteration
            ret.insert(writer_at, grad_norm)
        save_at = self.cfg.SOLVER.BUDGET.get("SAVE_AT", ())  # checked by build_lr_scheduler
        if save_at:  # after the LR scheduler's step: the checkpoint holds the next LR
            ret.append(CheckpointAtHook(save_at))
        ret.append(PreemptionHook(self.checkpointer))  # last: after the writers
        if isinstance(self.scheduler, BudgetTimeLR):  # first: its clock pauses after run_step
            ret.insert(0, TimeBudgetHook(self.scheduler))
        return ret


def check_resume(
    cfg: CfgNode, world_size: int | None = None, *, checkpoint: Any = None, path: str | None = None
) -> None:
    """Refuse to resume a checkpoint whose budget differs from the one ``cfg`` trains on
    ``world_size`` workers.

    The checkpoint is ``checkpoint`` (already loaded), else the file ``path``, else the one
    ``cfg.OUTPUT_DIR/last_checkpoint`` names (none: nothing to check); files are loaded with
    :func:`budgeted.safety.checkpoints.load_checkpoint`.

    Args:
        cfg (CfgNode): the config to resume with.
        world_size (int, optional): the number of workers; default: the current world size.
        checkpoint (dict, optional): the loaded checkpoint.
        path (str, optional): the checkpoint file.

    Raises:
        BudgetResumeError: one line naming both budgets and the fix.
        UnsafeCheckpointError, DamagedCheckpointError: the file cannot be loaded (one line).
    """
    if checkpoint is None:
        path = path or last_checkpoint_file(cfg.OUTPUT_DIR)
        if path is None:
            return
        checkpoint = load_checkpoint(path)
    trainer_state = checkpoint.get("trainer", {}) if isinstance(checkpoint, dict) else {}
    saved = (trainer_state.get("hooks") or {}).get("LRScheduler")
    scaled = DefaultTrainer.auto_scale_workers(
        cfg.clone(), comm.get_world_size() if world_size is None else world_size
    )
    scheduler = build_lr_scheduler(scaled, stand_in_optimizer(saved, scaled.SOLVER.BASE_LR))
    if saved is not None and isinstance(scheduler, torch.optim.lr_scheduler._LRScheduler):
        scheduler.load_state_dict(saved)

"""Everything a Detectron2 run checks before it writes anything, in the order it is checked.

``tools/train_net.py`` (:func:`budgeted.detectron2.cli.run`) calls :func:`preflight` once, in
the launching process, before any folder is locked, any file written or any worker started;
every refusal is one line (a ``ValueError``, ``FileNotFoundError`` or ``SystemExit``), and the
tool exits with it, nothing written:

1. the config (:func:`setup`): the file (a path, or a shipped config's bare name), the
   overrides, ``--budget-time``, the budget keys (:func:`~budgeted.detectron2.load_config`);
2. the workers: ``--num-gpus`` and ``--num-machines`` at least 1;
3. the datasets: registered, their files there (``DATASETS.TEST``, and ``DATASETS.TRAIN`` when
   training);
4. the output folder: writable;
5. when training: the budget as the workers will train it (after ``REFERENCE_WORLD_SIZE``
   scaling; the time-budget keys too), a new run never over an existing one, the folder not in
   use by another run, a training set that is not empty;
6. the file the workers will load (:func:`check_checkpoint_files`): with ``--resume``, one of
   the run in the output folder (not another run's, not an MMEngine run folder's:
   :func:`~budgeted.detectron2.checkpoint.resumed_checkpoint_file`); loaded safely and intact;
   a resumed checkpoint must be a resumable state whose LR scheduler agrees with its iteration,
   whose base LRs are the ones the config gives each param group (the model and optimizer built
   without weights, :func:`configured_base_lrs`) and whose budget is
   the config's (:func:`check_resume`), and the checkpoints after a
   ``--resume-from`` are kept;
7. ``--resume`` of a finished run: nothing to do (exit status 0, nothing written).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.engine import DefaultTrainer
from detectron2.utils import comm

from ..config_files import find_config
from ..runs.detectron2 import check_new_run_folder
from ..safety import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    check_later_checkpoints_kept,
    load_checkpoint,
)
from ..schedules.base_lrs import ConfiguredLRs, build_without_weights
from ..schedules.clock import parse_duration
from .checkpoint import (
    CHECKPOINT_PATTERN,
    last_checkpoint_file,
    load_weights_file,
    offer_intact,
    resumed_checkpoint_file,
)
from .config import load_config, split_overrides
from .data import check_config_datasets, check_config_train_set, register_toy_coco
from .output_dir import OutputDirLock, check_writable
from .solver import acting_on_trainer_keys, build_lr_scheduler, check_budget, stand_in_optimizer
from .stops import check_finished, check_position, check_resumed_base_lrs
from .time_budget import time_budget_seconds

__all__ = [
    "check_checkpoint_files",
    "check_resume",
    "check_workers",
    "configured_base_lrs",
    "preflight",
    "setup",
]


def preflight(args: argparse.Namespace) -> CfgNode:
    """All checks of a ``tools/train_net.py`` run, in the launching process (see the module);
    raises one-line ``ValueError``s. Nothing is written before these pass.

    Args:
        args (argparse.Namespace): from :func:`budgeted.detectron2.cli.parse_args`.

    Returns:
        CfgNode: the config, as :func:`setup` gives it.
    """
    cfg = setup(args)
    world_size = check_workers(args)
    training = not args.eval_only
    check_config_datasets(cfg, train=training)
    check_writable(cfg.OUTPUT_DIR)
    if training:
        check_budget(cfg, world_size)
        check_new_run_folder(cfg.OUTPUT_DIR, args.resume or bool(args.resume_from))
        OutputDirLock(cfg.OUTPUT_DIR).check()
        check_config_train_set(cfg)
    checkpoint = check_checkpoint_files(
        args,
        cfg.OUTPUT_DIR,
        cfg.MODEL.WEIGHTS,
        check_resumed=lambda checkpoint: check_resume(cfg, world_size, checkpoint=checkpoint),
        base_lrs=lambda: configured_base_lrs(cfg, world_size),
    )
    if args.resume and not args.resume_from and training:
        scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)
        check_finished(checkpoint, max_iter=scaled.SOLVER.MAX_ITER,
                       seconds=time_budget_seconds(cfg), folder=cfg.OUTPUT_DIR,
                       evaluates=bool(cfg.DATASETS.TEST))  # fmt: skip
    args.output_dir, args.output_key = cfg.OUTPUT_DIR, "OUTPUT_DIR"
    return cfg


def setup(args: argparse.Namespace) -> CfgNode:
    """The frozen config of ``args``: the toy datasets registered, the config file found, budget
    keys, bases and overrides resolved; the CPU picked when CUDA is absent. Every worker reads
    its config with it too.

    Args:
        args (argparse.Namespace): from :func:`budgeted.detectron2.cli.parse_args`.

    Returns:
        CfgNode: the frozen config.

    Raises:
        ValueError, FileNotFoundError: one line naming the bad name, file, key or value.
    """
    register_toy_coco()  # in every worker: spawned processes start with empty catalogs
    _resolve_config(args)
    cfg = load_config(args.config_file, args.opts)
    if cfg.MODEL.DEVICE.startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger("detectron2").warning("CUDA is not available: training on the CPU")
        cfg.MODEL.DEVICE = "cpu"
    cfg.freeze()
    return cfg


def _resolve_config(args: argparse.Namespace) -> None:
    """``args.config_file`` as a path (a bare name looked up), ``args.opts`` as KEY VALUE pairs,
    ``--budget-time`` as ``SOLVER.BUDGET.SECONDS``."""
    if not args.config_file:
        raise ValueError(
            "--config-file is required (e.g. --config mask_rcnn_budget10.yaml, or a path)"
        )
    path = os.fspath(find_config(args.config_file, "detectron2", kinds=(".yaml",)))
    if path.endswith(".py"):
        raise ValueError(
            f"config {path!r} is a LazyConfig (python) file; allowed here: a yaml config "
            "(train LazyConfigs with tools/lazyconfig_train_net.py)"
        )
    args.config_file = path
    args.opts = split_overrides(args.opts or [])
    args.resume_from = getattr(args, "resume_from", None)
    if getattr(args, "budget_time", None) is not None:
        seconds = parse_duration(args.budget_time)  # one-line ValueError for a bad value
        args.opts += ["SOLVER.BUDGET.SECONDS", repr(seconds)]
        args.budget_time = None  # applied once (preflight and the workers both resolve)


def check_workers(args: argparse.Namespace) -> int:
    """The number of workers, ``--num-gpus`` x ``--num-machines``; each must be at least 1."""
    if args.num_gpus < 1 or args.num_machines < 1:
        raise ValueError(
            f"--num-gpus={args.num_gpus} --num-machines={args.num_machines}: allowed: >= 1"
        )
    return args.num_gpus * args.num_machines


def check_checkpoint_files(
    args: argparse.Namespace,
    output_dir: str,
    weights: str,
    *,
    weights_key: str = "MODEL.WEIGHTS",
    check_resumed: Callable[[Any], None] | None = None,
    base_lrs: Callable[[], ConfiguredLRs | None] | None = None,
) -> Any:
    """Load the file the workers will load, the way they will (safely), and check its budget.

    That file is ``--resume-from``'s, else (with ``--resume``) the one ``last_checkpoint``
    names, else the weights (``MODEL.WEIGHTS``). A resumed checkpoint is handed to
    ``check_resumed`` (the budget check), except with ``--eval-only``.

    Args:
        args (argparse.Namespace): the command line (``resume``, ``resume_from``, ``eval_only``).
        output_dir (str): the run folder.
        weights (str): the weights file (``MODEL.WEIGHTS``), maybe empty.
        weights_key (str): the config key of the weights, for messages.
        check_resumed (callable, optional): ``checkpoint -> None``, raising a one-line
            ``ValueError`` for a checkpoint that cannot be resumed.
        base_lrs (callable, optional): ``() -> ConfiguredLRs`` (or None where it cannot be
            built here): the LR the config gives each param group, which a resumed
            checkpoint's base LRs must be
            (:func:`~budgeted.detectron2.stops.check_resumed_base_lrs`).

    Returns:
        the resumed checkpoint, or None.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line naming the file (a damaged
            resume with the newest intact checkpoint of the folder offered).
        ValueError: one line for a resumed file that holds weights only, whose LR scheduler
            disagrees with its iteration (:func:`~budgeted.detectron2.stops.check_position`), or
            whose base LRs are not the config's.
    """
    args.resume_from = getattr(args, "resume_from", None)
    checkpoint, path, what = _load_resumed(args, output_dir, weights, weights_key)
    resuming = checkpoint is not None and not args.eval_only
    if resuming:
        hint = (
            f"{weights_key} {{path}}"
            if weights_key == "MODEL.WEIGHTS"
            else f"{weights_key}={{path}}"
        )
        check_position(checkpoint, path, what=what, weights_hint=hint)
        planned = base_lrs() if base_lrs is not None else None
        if planned is not None:
            check_resumed_base_lrs(checkpoint, path, what=what, weights_hint=hint,
                                   configured=planned.lrs, key=planned.key,
                                   value=planned.value)  # fmt: skip
    if resuming and check_resumed is not None:
        check_resumed(checkpoint)
    if args.resume_from and not args.eval_only and isinstance(checkpoint, dict):
        check_later_checkpoints_kept(
            args.resume_from,
            checkpoint.get("iteration", -1),
            Path(output_dir).glob(CHECKPOINT_PATTERN),
            folder_key="OUTPUT_DIR" if weights_key == "MODEL.WEIGHTS" else "train.output_dir",
        )
    return checkpoint


def _load_resumed(
    args: argparse.Namespace, output_dir: str, weights: str, weights_key: str
) -> tuple[Any, str, str]:
    """The checkpoint a run resumes (None: none, the weights checked only), its file, and how
    the command line named it."""
    if args.resume_from:
        path = args.resume_from = os.path.abspath(args.resume_from)
        return load_weights_file(path, what="--resume-from"), path, "--resume-from"
    if args.resume and last_checkpoint_file(output_dir) is not None:
        yacs = weights_key == "MODEL.WEIGHTS"
        path = resumed_checkpoint_file(
            output_dir,
            folder_key="OUTPUT_DIR" if yacs else "train.output_dir",
            weights_hint=f"{weights_key} {{path}}" if yacs else f"{weights_key}={{path}}",
        ) or ""  # fmt: skip
        try:
            checkpoint = load_checkpoint(path)
        except (DamagedCheckpointError, UnsafeCheckpointError) as err:
            refused = type(err)(f"cannot resume: {err}")
            raise offer_intact(refused, output_dir, path) from None
        return checkpoint, path, "cannot resume: checkpoint"
    if weights:
        load_weights_file(weights, what=weights_key)
    return None, "", "--resume-from"


def check_resume(
    cfg: CfgNode, world_size: int | None = None, *, checkpoint: Any = None, path: str | None = None
) -> None:
    """Refuse to resume a checkpoint whose budget differs from the one ``cfg`` trains on
    ``world_size`` workers: its saved LR scheduler state is loaded into the scheduler the
    config builds (on a stand-in optimizer), as the trainer will load it.

    The checkpoint is ``checkpoint`` (already loaded), else the file ``path``, else the one
    ``cfg.OUTPUT_DIR/last_checkpoint`` names (none: nothing to check); files are loaded with
    :func:`budgeted.safety.load_checkpoint`.

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
        path = path or resumed_checkpoint_file(cfg.OUTPUT_DIR)
        if path is None:
            return
        checkpoint = load_checkpoint(path)
    trainer_state = checkpoint.get("trainer", {}) if isinstance(checkpoint, dict) else {}
    saved = (trainer_state.get("hooks") or {}).get("LRScheduler")
    scaled = DefaultTrainer.auto_scale_workers(
        cfg.clone(), comm.get_world_size() if world_size is None else world_size
    )
    with acting_on_trainer_keys():  # the budget only
        scheduler = build_lr_scheduler(scaled, stand_in_optimizer(saved, scaled.SOLVER.BASE_LR))
    if saved is not None and isinstance(scheduler, torch.optim.lr_scheduler._LRScheduler):
        scheduler.load_state_dict(saved)


def configured_base_lrs(cfg: CfgNode, world_size: int) -> ConfiguredLRs | None:
    """The LR ``cfg`` gives each param group on ``world_size`` workers (``SOLVER.BASE_LR`` after
    ``REFERENCE_WORLD_SIZE`` scaling, times ``BIAS_LR_FACTOR`` for biases, ...), in the order of
    the optimizer ``DefaultTrainer`` builds: the model and optimizer built without weights
    (:func:`~budgeted.schedules.base_lrs.build_without_weights`); None where they cannot be
    built here.

    Example:
        >>> from budgeted.detectron2 import load_config
        >>> cfg = load_config("mask_rcnn_toy_budget10.yaml", ["SOLVER.BIAS_LR_FACTOR", "2.0"])
        >>> sorted(set(configured_base_lrs(cfg, 1).lrs))
        [0.01, 0.02]
    """
    from detectron2.modeling import META_ARCH_REGISTRY

    scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)

    def build() -> torch.optim.Optimizer:
        model = META_ARCH_REGISTRY.get(scaled.MODEL.META_ARCHITECTURE)(scaled)
        return DefaultTrainer.build_optimizer(scaled, model)

    optimizer = build_without_weights(build)
    if optimizer is None:
        return None
    lrs = [float(group["lr"]) for group in optimizer.param_groups]
    return ConfiguredLRs(lrs, "SOLVER.BASE_LR", float(cfg.SOLVER.BASE_LR))

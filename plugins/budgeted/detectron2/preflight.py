"""The one pre-flight and the one evaluation of both Detectron2 tools, and their output folder.

``tools/train_net.py`` (yaml) and ``tools/lazyconfig_train_net.py`` (LazyConfig) differ only in
how they read their config (:class:`ToolConfig`, :class:`~budgeted.detectron2.lazy_cli.LazyConfig
Tool`). :func:`preflight` runs once, in the launching process, before any folder is locked, any
file written or any worker started: the config, the workers, the datasets, the output folder
(writable, not another run's, not in use), the budget and the file the workers will load
(:func:`check_checkpoint_files`); every refusal is one line, nothing written (docs/detectron2.md).
The launching process then locks the output folder (:func:`claim`).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.engine import DefaultTrainer, default_setup
from detectron2.utils import comm

from ..config_files import find_config
from ..control.folder import OutputFolder
from ..control.preflight import Tool
from ..control.preflight import preflight as run_checks
from ..control.resume import ResumeCheck, configured_lrs
from ..errors import BudgetResumeError
from ..runs import detectron2 as accessor
from ..runs.detectron2 import LOCK_NAME, run_config_kept, saved_schedulers, write_evaluation
from ..safety import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    check_later_checkpoints_kept,
    load_checkpoint,
)
from ..safety.locks import FolderLock
from ..schedules.base_lrs import ConfiguredLRs
from ..schedules.clock import parse_duration
from .checkpoint import (
    CHECKPOINT_PATTERN,
    SafeCheckpointer,
    last_checkpoint_file,
    load_weights_file,
    offer_intact,
    resumed_checkpoint_file,
)
from .config import load_config, split_overrides
from .data import check_datasets, check_not_empty, detection_train_set, register_toy_coco
from .solver import acting_on_trainer_keys, build_lr_scheduler, check_budget
from .stops import check_finished, check_position
from .time_budget import time_budget_seconds

__all__ = [
    "LOCK_NAME", "OutputDirLock", "ToolConfig", "check_checkpoint_files", "check_resume",
    "check_saved_scheduler", "check_workers", "check_writable", "claim", "configured_base_lrs",
    "evaluate", "log_removed", "output_folder", "preflight", "setup", "stand_in_optimizer",
    "start_worker"
]  # fmt: skip

logger = logging.getLogger("detectron2")


class ToolConfig(Tool):
    """How ``tools/train_net.py`` reads its (yaml) config: all that :func:`preflight`,
    :func:`start_worker` and :func:`evaluate` ask of a tool's config; ``trainer`` builds and tests
    the model (``--eval-only``). Its checks, in :attr:`ORDER`: the workers and datasets, the
    output folder writable, then when training the budget, no other run there, none in use and a
    non-empty training set; the file to load and, resumed, not finished."""

    ORDER = ("inputs", "writable", "budget", "new_run", "in_use", "train_set", "file")
    output_key = "OUTPUT_DIR"
    weights_key = "MODEL.WEIGHTS"

    def __init__(self, trainer: type = DefaultTrainer) -> None:
        self.trainer = trainer

    def read(self, args: argparse.Namespace) -> tuple[Any, list[str]]:
        """The config of ``args``, and lines for the log of what the options changed."""
        return setup(args), []

    def load(self, args: argparse.Namespace) -> Any:
        return self.read(args)[0]

    def folder(self, cfg: Any) -> OutputFolder:
        return output_folder(self.output_dir(cfg), self.output_key)

    def inputs(self, cfg: Any, args: argparse.Namespace) -> None:
        check_workers(args)
        train_sets = self.datasets(cfg, train=True) if self.training(args) else []
        check_datasets(train_sets + self.datasets(cfg, train=False))

    def budget(self, cfg: Any, args: argparse.Namespace) -> None:
        if self.training(args):
            self.check_budget(cfg, check_workers(args))

    def train_set(self, cfg: Any, args: argparse.Namespace) -> None:
        if self.training(args):
            check_not_empty(self.datasets(cfg, train=True), lambda: self.load_train_set(cfg))

    def file(self, cfg: Any, args: argparse.Namespace) -> None:
        world_size, folder = check_workers(args), self.output_dir(cfg)
        checkpoint = check_checkpoint_files(
            args,
            folder,
            self.weights(cfg),
            weights_key=self.weights_key,
            check_resumed=lambda checkpoint: self.check_resume(cfg, world_size, checkpoint),
            base_lrs=lambda: self.base_lrs(cfg, world_size),
        )
        if args.resume and not args.resume_from and self.training(args):
            check_finished(checkpoint, folder=folder, **self.finished(cfg, world_size))
        args.output_dir, args.output_key = folder, self.output_key

    def output_dir(self, cfg: Any) -> str:
        return cfg.OUTPUT_DIR

    def weights(self, cfg: Any) -> str:
        return cfg.MODEL.WEIGHTS

    def datasets(self, cfg: Any, *, train: bool) -> list[str]:
        """The test sets' names, or the training sets' (``train``)."""
        return list(cfg.DATASETS.TRAIN if train else cfg.DATASETS.TEST)

    def load_train_set(self, cfg: Any) -> Any:
        """The training set, loaded as the trainer will load it."""
        return detection_train_set(cfg)

    def check_budget(self, cfg: Any, world_size: int) -> None:
        check_budget(cfg, world_size)

    def check_resume(self, cfg: Any, world_size: int, checkpoint: Any) -> None:
        check_resume(cfg, world_size, checkpoint=checkpoint)

    def base_lrs(self, cfg: Any, world_size: int) -> ConfiguredLRs | None:
        return configured_base_lrs(cfg, world_size)

    def finished(self, cfg: Any, world_size: int) -> dict[str, Any]:
        """:func:`~budgeted.detectron2.stops.check_finished`'s arguments but the checkpoint and
        the folder."""
        scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)
        return {"max_iter": scaled.SOLVER.MAX_ITER, "seconds": time_budget_seconds(cfg),
                "evaluates": bool(cfg.DATASETS.TEST)}  # fmt: skip

    def eval_model(self, cfg: Any) -> torch.nn.Module:
        return self.trainer.build_model(cfg)

    def test(self, cfg: Any, model: torch.nn.Module) -> Any:
        from detectron2.evaluation import verify_results

        res = self.trainer.test(cfg, model)
        if comm.is_main_process():
            verify_results(cfg, res)
        return res


def preflight(args: argparse.Namespace, tool: ToolConfig | None = None) -> Any:
    """All checks of a run of ``tool`` (default: ``tools/train_net.py``'s yaml), in the launching
    process (:func:`budgeted.control.preflight.preflight`, in :attr:`ToolConfig.ORDER`); raises
    one-line ``ValueError``s. Nothing is written before these pass. Returns the config."""
    return run_checks(tool or ToolConfig(), args)


def start_worker(args: argparse.Namespace, tool: ToolConfig) -> Any:
    """One worker's start: the config of ``args``, Detectron2's ``default_setup`` (logs, the
    config kept, an ``--eval-only`` keeping a training run's config), the temporaries
    :func:`claim` removed and the options' lines logged. Returns the config."""
    cfg, lines = tool.read(args)
    folder = tool.output_dir(cfg)
    with run_config_kept(folder, args.eval_only and comm.is_main_process()):
        default_setup(cfg, args)
    log_removed(folder, getattr(args, "removed_temporaries", ()))
    if comm.is_main_process():
        for line in lines:
            logger.info(line)
    args.resume_from = getattr(args, "resume_from", None)
    return cfg


def evaluate(cfg: Any, args: argparse.Namespace, tool: ToolConfig | None = None) -> Any:
    """``--eval-only``: load the weights (or the resumed checkpoint's) safely, evaluate, and
    append the results to ``<output dir>/metrics.json`` unless it is a training run's log
    (:func:`~budgeted.runs.detectron2.write_evaluation`). Returns the results."""
    tool = tool or ToolConfig()
    folder = tool.output_dir(cfg)
    model = tool.eval_model(cfg)
    checkpointer = SafeCheckpointer(model, save_dir=folder)
    if getattr(args, "resume_from", None):
        loaded = checkpointer.load(args.resume_from, checkpointables=[])
    else:
        loaded = checkpointer.resume_or_load(tool.weights(cfg), resume=args.resume)
    res = tool.test(cfg, model)
    iteration = (loaded or {}).get("iteration")
    if comm.is_main_process() and write_evaluation(folder, res or {}, iteration) is None:
        logger.info(
            "--eval-only: results not added to %s (a training run's log, or none)",
            os.path.join(folder, "metrics.json"),
        )
    return res


def setup(args: argparse.Namespace) -> CfgNode:
    """The frozen yaml config of ``args``: the toy datasets registered, the config file found,
    budget keys, bases and overrides resolved; the CPU picked when CUDA is absent. Every worker
    reads its config with it too.

    Raises:
        ValueError, FileNotFoundError: one line naming the bad name, file, key or value.
    """
    register_toy_coco()  # in every worker: spawned processes start with empty catalogs
    if not args.config_file:
        raise ValueError(
            "--config-file is required (e.g. --config mask_rcnn_budget10.yaml, or a path)"
        )
    args.config_file = os.fspath(find_config(args.config_file, "detectron2", kinds=(".yaml",)))
    args.opts = split_overrides(args.opts or [])
    args.resume_from = getattr(args, "resume_from", None)
    if getattr(args, "budget_time", None) is not None:
        seconds = parse_duration(args.budget_time)  # one-line ValueError for a bad value
        args.opts += ["SOLVER.BUDGET.SECONDS", repr(seconds)]
        args.budget_time = None  # applied once (preflight and the workers both resolve)
    cfg = load_config(args.config_file, args.opts)  # refuses a LazyConfig in one line
    if cfg.MODEL.DEVICE.startswith("cuda") and not torch.cuda.is_available():
        logger.warning("CUDA is not available: training on the CPU")
        cfg.MODEL.DEVICE = "cpu"
    cfg.freeze()
    return cfg


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
    """Load the file the workers will load (``--resume-from``'s, else with ``--resume`` the one
    ``last_checkpoint`` names, else the weights), safely; a resumed checkpoint (except with
    ``--eval-only``) must be a resumable state whose base LRs are ``base_lrs()``'s, and is handed
    to ``check_resumed`` (the budget check). Returns the resumed checkpoint, or None.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line naming the file (a damaged
            resume with the newest intact checkpoint of the folder offered).
        ValueError: one line for a resumed file that cannot be resumed.
    """
    args.resume_from = getattr(args, "resume_from", None)
    yacs = weights_key == "MODEL.WEIGHTS"
    hint = f"{weights_key} {{path}}" if yacs else f"{weights_key}={{path}}"
    folder_key = "OUTPUT_DIR" if yacs else "train.output_dir"
    checkpoint, path, what = _load_resumed(args, output_dir, weights, weights_key, hint)
    if checkpoint is not None and not args.eval_only:
        check_position(checkpoint, path, what=what, weights_hint=hint)
        planned = base_lrs() if base_lrs is not None else None
        if planned is not None:
            fix = f"start a new run from its weights: {hint.format(path=path)}"
            ResumeCheck(path, f"{what} {path!r}", fix).base_lrs(
                accessor.saved_base_lrs(checkpoint), lambda _: planned, BudgetResumeError
            )
        if check_resumed is not None:
            check_resumed(checkpoint)
    if args.resume_from and not args.eval_only and isinstance(checkpoint, dict):
        check_later_checkpoints_kept(args.resume_from, checkpoint.get("iteration", -1),
                                     Path(output_dir).glob(CHECKPOINT_PATTERN),
                                     folder_key=folder_key)  # fmt: skip
    return checkpoint


def _load_resumed(
    args: argparse.Namespace, output_dir: str, weights: str, weights_key: str, hint: str
) -> tuple[Any, str, str]:
    """The checkpoint a run resumes (None: none, the weights checked only), its file, and how
    the command line named it."""
    if args.resume_from:
        path = args.resume_from = os.path.abspath(args.resume_from)
        return load_weights_file(path, what="--resume-from"), path, "--resume-from"
    if args.resume and last_checkpoint_file(output_dir) is not None:
        folder_key = "OUTPUT_DIR" if weights_key == "MODEL.WEIGHTS" else "train.output_dir"
        path = resumed_checkpoint_file(output_dir, folder_key=folder_key, weights_hint=hint) or ""
        try:
            checkpoint = load_checkpoint(path)
        except (DamagedCheckpointError, UnsafeCheckpointError) as err:
            refused = type(err)(f"cannot resume: {err}")
            raise offer_intact(refused, output_dir, path) from None
        return checkpoint, path, "cannot resume: checkpoint"
    if weights:
        load_weights_file(weights, what=weights_key)
    return None, "", "--resume-from"


def stand_in_optimizer(saved: Any, lr: float) -> torch.optim.SGD:
    """An SGD over stand-in parameters, one param group per base LR of the saved scheduler state
    ``saved`` (``lr`` where there is none, or it is not a number >= 0): what a resume check of the
    budget loads that state into, before the model exists.

    Example:
        >>> [g["lr"] for g in stand_in_optimizer({"base_lrs": [0.02, 0.04]}, lr=0.02).param_groups]
        [0.02, 0.04]
    """
    base_lrs = saved.get("base_lrs") if isinstance(saved, Mapping) else None
    if not isinstance(base_lrs, (list, tuple)) or not base_lrs:
        base_lrs = [lr]
    groups = [
        {
            "params": [torch.nn.Parameter(torch.zeros(1))],
            "lr": float(v) if isinstance(v, (int, float)) and 0 <= v < float("inf") else lr,
        }
        for v in base_lrs
    ]
    return torch.optim.SGD(groups, lr=lr)


def check_saved_scheduler(
    checkpoint: Any, build: Callable[[torch.optim.Optimizer], Any], lr: float
) -> None:
    """The one resume check of a checkpoint's budget, for either tool: its saved LR scheduler
    state (:func:`~budgeted.runs.detectron2.saved_schedulers`) is loaded into the scheduler
    ``build(optimizer)`` makes on a :func:`stand_in_optimizer`, as the trainer will load it; a
    refusal is the scheduler's one-line :class:`~budgeted.detectron2.BudgetResumeError`."""
    saved = saved_schedulers(checkpoint).get("LRScheduler")
    scheduler = build(stand_in_optimizer(saved, lr))
    if saved is not None and isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler):
        scheduler.load_state_dict(saved)


def check_resume(
    cfg: CfgNode, world_size: int | None = None, *, checkpoint: Any = None, path: str | None = None
) -> None:
    """Refuse to resume a checkpoint whose budget differs from the one ``cfg`` trains on
    ``world_size`` workers (default: the current world size) (:func:`check_saved_scheduler`):
    ``checkpoint``, else the file ``path``, else the one ``--resume`` loads (none: no check).

    Raises:
        BudgetResumeError: one line naming both budgets and the fix.
        UnsafeCheckpointError, DamagedCheckpointError: the file cannot be loaded (one line).
    """
    if checkpoint is None:
        path = path or resumed_checkpoint_file(cfg.OUTPUT_DIR)
        if path is None:
            return
        checkpoint = load_checkpoint(path)
    world_size = comm.get_world_size() if world_size is None else world_size
    scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)
    with acting_on_trainer_keys():  # the budget only
        check_saved_scheduler(
            checkpoint, lambda opt: build_lr_scheduler(scaled, opt), scaled.SOLVER.BASE_LR
        )


def configured_base_lrs(cfg: CfgNode, world_size: int) -> ConfiguredLRs | None:
    """The LR ``cfg`` gives each param group on ``world_size`` workers, in the order of the
    optimizer ``DefaultTrainer`` builds (built without weights); None where it cannot be built.

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

    return configured_lrs(build, "SOLVER.BASE_LR", float(cfg.SOLVER.BASE_LR))


# --- the output folder: budgeted.control.folder, in the words of budgeted.runs.detectron2 ------


def output_folder(folder: str, key: str = "OUTPUT_DIR") -> OutputFolder:
    """The Detectron2 tools' output folder ``folder``, named by config key ``key``.

    Example:
        >>> import tempfile
        >>> output_folder(tempfile.mkdtemp() + "/new/run").check_writable()  # a writable parent
    """
    return OutputFolder(folder, accessor, key)


def check_writable(folder: str, *, key: str = "OUTPUT_DIR") -> None:
    """Refuse in one line an output folder in which nothing can be created."""
    output_folder(folder, key).check_writable()


class OutputDirLock(FolderLock):
    """The lock (``<folder>/.train_net.lock``) of :func:`output_folder`, as a class of its own.

    Example:
        >>> import tempfile
        >>> lock = OutputDirLock(tempfile.mkdtemp())
        >>> lock.check(); lock.acquire(); lock.release()
    """

    def __init__(self, folder: str | os.PathLike[str], key: str = "OUTPUT_DIR") -> None:
        super().__init__(folder, LOCK_NAME, output_folder(os.fspath(folder), key).lock.busy)


def claim(folder: str, key: str = "OUTPUT_DIR") -> tuple[FolderLock, list[str]]:
    """:meth:`~budgeted.control.folder.OutputFolder.claim` ``folder``: the held lock and the
    names of the temporaries removed.

    Raises:
        FolderBusyError: another live process trains there (one line).
    """
    claimed = output_folder(folder, key)
    return claimed.lock, claimed.claim()


def log_removed(folder: str, removed: Sequence[str]) -> None:
    """Log (in the run's log.txt) the temporary files :func:`claim` removed, if any."""
    line = output_folder(folder).removed_line(list(removed))
    if line is not None:
        logging.getLogger("detectron2.budgeted").warning(line)

"""``tools/lazyconfig_train_net.py``: Detectron2's LazyConfig training script, budget-aware.

Same CLI and config layout as Detectron2's (plus ``--config`` and bare names of shipped
configs, as ``tools/train_net.py``). Differences: ``lr_multiplier`` of type
:class:`~budgeted.detectron2.lazy.BudgetLRMultiplier` is trained as a checkpointed
:class:`~budgeted.detectron2.BudgetLRScheduler` (a resume with another budget is refused);
``--num-gpus N`` without CUDA runs N CPU processes (gloo); the datasets, the output folder and the
checkpoint to load (``train.init_checkpoint``, ``--resume``, ``--resume-from``: loaded safely,
see :class:`~budgeted.detectron2.SafeCheckpointer`) are checked before anything is written or
any worker starts; checkpoints are written atomically; SIGTERM / SIGUSR1 stop training after the
current iteration with a checkpoint and exit status 75; ``--eval-only`` appends its results to
``train.output_dir/metrics.json`` (not to a training run's), as ``tools/train_net.py`` does.

A user's own LazyConfig (a stock ``lr_multiplier``, which ``key=value`` overrides cannot
replace) trains under a budget-aware schedule with ``--budget FRACTION --schedule NAME
--full-iters N``, applied after the overrides (:func:`~budgeted.detectron2.lazy.apply_budget`);
a bad value, or a config they cannot be applied to, is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from detectron2.config import LazyConfig, instantiate
from detectron2.engine import (
    AMPTrainer,
    SimpleTrainer,
    default_setup,
    default_writers,
    hooks,
)
from detectron2.engine.defaults import create_ddp_model
from detectron2.evaluation import inference_on_dataset, print_csv_format
from detectron2.utils import comm

from ..config_files import find_config
from ..runs.detectron2 import check_new_run_folder, run_config_kept, write_evaluation
from ..schedules import schedule_names
from ..schedules.base_lrs import ConfiguredLRs, build_without_weights
from .checkpoint import SafeCheckpointer
from .cli import argument_parser, launch_checked
from .data import check_datasets, check_not_empty, register_toy_coco
from .lazy import BudgetOptionError, apply_budget, build_lazy_lr_scheduler, lazy_warmup
from .output_dir import OutputDirLock, check_writable, log_removed
from .preemption import PreemptionHook
from .preflight import check_checkpoint_files
from .solver import stand_in_optimizer
from .stops import StopsInOneLine, as_stop, check_finished

__all__ = [
    "apply_budget",
    "check_lazy_resume",
    "do_test",
    "do_train",
    "lazy_argument_parser",
    "lazy_base_lrs",
    "lazy_warmup",
    "load",
    "main",
    "preflight",
    "run",
]

logger = logging.getLogger("detectron2")

LAZY_KEYS = ("model", "dataloader", "optimizer", "lr_multiplier", "train")
"""The top-level names of a Detectron2 LazyConfig that this tool trains from."""

PKG_RESOURCES_DEPRECATION = "pkg_resources is deprecated as an API"
"""The UserWarning setuptools prints when a LazyConfig imports Detectron2's model zoo (which
imports ``pkg_resources``): nothing a user can act on, silenced while a config loads."""

LAZY_DIVERGED_ADVICE = "lower optimizer.lr or lengthen the warmup (lr_multiplier.warmup_iters)"


class LazyTrainer(StopsInOneLine, SimpleTrainer):
    """``SimpleTrainer`` that ends a diverged run with one line (exit status 3)."""

    DIVERGED_ADVICE = LAZY_DIVERGED_ADVICE


class LazyAMPTrainer(StopsInOneLine, AMPTrainer):
    """``AMPTrainer`` that ends a diverged run with one line (exit status 3)."""

    DIVERGED_ADVICE = LAZY_DIVERGED_ADVICE


LAZY_EPILOG = """
Examples:
  lazyconfig_train_net.py --config mask_rcnn_R_50_FPN_budget10.py --num-gpus 8
  lazyconfig_train_net.py --config mask_rcnn_toy_budget10.py train.max_iter=80 \\
      lr_multiplier.schedule=cosine
  lazyconfig_train_net.py --config-file my_lazy_config.py --budget 0.1 --schedule cosine \\
      --full-iters 90000 train.output_dir=./output/my_cosine10

Overrides: LazyConfig's key=value; --budget, --schedule and --full-iters apply after them.
Without CUDA, --num-gpus N runs N CPU processes (gloo).
"""


def lazy_argument_parser() -> argparse.ArgumentParser:
    """:func:`~budgeted.detectron2.cli.argument_parser` plus ``--budget``, ``--schedule`` and
    ``--full-iters`` (checked by :func:`load`, through
    :func:`~budgeted.detectron2.lazy.apply_budget`).

    Example:
        >>> lazy_argument_parser().parse_args(["--budget", "0.1", "--schedule", "cosine"]).budget
        '0.1'
    """
    parser = argument_parser(LAZY_EPILOG)
    group = parser.add_argument_group(
        "budget",
        "applied after the key=value overrides (see budgeted.detectron2.lazy.apply_budget)",
    )
    group.add_argument(
        "--budget",
        metavar="FRACTION",
        help="train this fraction (0, 1] of --full-iters: train.max_iter = "
        "round(FRACTION x FULL); without --schedule the config's lr_multiplier must follow "
        'train.max_iter (a BudgetLRMultiplier with total_iters="${train.max_iter}")',
    )
    group.add_argument(
        "--schedule",
        metavar="NAME",
        help=f"replace lr_multiplier by a BudgetLRMultiplier of this registered schedule "
        f"({', '.join(schedule_names())}) over train.max_iter, the config's warmup kept in "
        "iterations (a WarmupParamScheduler's warmup_length x FULL, a BudgetLRMultiplier's "
        "warmup_iters; none from any other lr_multiplier)",
    )
    group.add_argument(
        "--full-iters",
        metavar="N",
        help="the full schedule in iterations (a whole number >= 1), of which --budget is a "
        "fraction and a WarmupParamScheduler's warmup_length too; default: train.max_iter",
    )
    return parser


def _option(text: Any, kind: type) -> Any:
    """``text`` (a command line's string) as a ``kind`` number, or as it is if it is none (then
    refused by :func:`~budgeted.detectron2.lazy.apply_budget` in one line, as it was given)."""
    if not isinstance(text, str):
        return text
    for parse in (kind, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def load(args: argparse.Namespace) -> Any:
    """The LazyConfig of ``args`` with its ``key=value`` overrides, then its ``--budget``,
    ``--schedule`` and ``--full-iters`` (:func:`~budgeted.detectron2.lazy.apply_budget`: a bad
    one raises :class:`~budgeted.detectron2.lazy.BudgetOptionError`); the toy datasets
    registered.

    ``args.config_file`` is a path or a shipped config's bare name
    (``mask_rcnn_toy_budget10.py``; without the extension, the LazyConfig of that stem, a yaml
    config of the same stem aside).
    """
    return _load(args)[0]


def _load(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """:func:`load`, and what ``--budget`` / ``--schedule`` changed (lines for the log)."""
    register_toy_coco()  # in every worker: spawned processes start with empty catalogs
    if not args.config_file:
        raise ValueError("--config-file is required (e.g. --config mask_rcnn_R_50_FPN_budget10.py)")
    path = os.fspath(find_config(args.config_file, "detectron2", kinds=(".py",)))
    if not path.endswith(".py"):
        raise ValueError(
            f"config {path!r} is not a LazyConfig (python) file; train yaml configs with "
            "tools/train_net.py"
        )
    args.config_file = path
    try:
        with warnings.catch_warnings():  # Detectron2's model zoo imports pkg_resources
            warnings.filterwarnings("ignore", PKG_RESOURCES_DEPRECATION, UserWarning)
            cfg = LazyConfig.load(path)
    except SyntaxError as err:
        cause = err.__cause__ if isinstance(err.__cause__, SyntaxError) else err
        where = f" (line {cause.lineno})" if cause.lineno else ""
        raise ValueError(f"config {path!r} is not valid python{where}: {cause.msg}") from None
    missing = [key for key in LAZY_KEYS if key not in cfg]
    if missing:
        mmengine = any(key in cfg for key in ("_base_", "train_cfg", "param_scheduler"))
        raise ValueError(
            f"config {path!r} is not a Detectron2 LazyConfig: it defines no "
            f"{', '.join(missing)}; allowed: a LazyConfig defining {', '.join(LAZY_KEYS)}"
            + ("; this is an MMEngine config: train it with tools/train_seg.py" if mmengine else "")
        )
    try:
        cfg = LazyConfig.apply_overrides(cfg, args.opts or [])
    except Exception as err:  # hydra's parser errors are no ValueError; any is the user's input
        reason = " ".join(str(err).split("See https://")[0].split()) or type(err).__name__
        raise ValueError(
            f"bad override in {args.opts}: {reason}; allowed: LazyConfig's key=value"
        ) from None
    lines = apply_budget(
        cfg,
        _option(getattr(args, "budget", None), float),
        getattr(args, "schedule", None),
        _option(getattr(args, "full_iters", None), int),
    )
    return cfg, lines


def do_test(cfg: Any, model: Any) -> Any:
    """Evaluate ``model`` on ``cfg.dataloader.test`` with ``cfg.dataloader.evaluator`` (None
    without an evaluator), as Detectron2's ``lazyconfig_train_net.py`` does.

    Args:
        cfg: the LazyConfig.
        model (torch.nn.Module): the model to evaluate.
    """
    if "evaluator" in cfg.dataloader:
        ret = inference_on_dataset(
            model, instantiate(cfg.dataloader.test), instantiate(cfg.dataloader.evaluator)
        )
        print_csv_format(ret)
        return ret
    return None


def _ddp(model: Any, cfg: Any) -> Any:
    kwargs = dict(cfg.train.ddp)
    if str(cfg.train.device).startswith("cpu"):
        kwargs["device_ids"] = None
    return create_ddp_model(model, **kwargs)


def do_train(args: argparse.Namespace, cfg: Any) -> None:
    """Train ``cfg`` as Detectron2's ``lazyconfig_train_net.py`` does, with the budget scheduler
    of :func:`~budgeted.detectron2.lazy.build_lazy_lr_scheduler` (checkpointed, resume-checked).

    Args:
        args (argparse.Namespace): the command line (``--resume``).
        cfg: the LazyConfig.
    """
    model = instantiate(cfg.model)
    model.to(cfg.train.device)
    cfg.optimizer.params.model = model
    optim = instantiate(cfg.optimizer)
    train_loader = instantiate(cfg.dataloader.train)
    model = _ddp(model, cfg)
    trainer = (LazyAMPTrainer if cfg.train.amp.enabled else LazyTrainer)(model, train_loader, optim)
    checkpointer = SafeCheckpointer(model, cfg.train.output_dir, optimizer=optim, trainer=trainer)
    scheduler = build_lazy_lr_scheduler(optim, instantiate(cfg.lr_multiplier), cfg.train.max_iter)
    trainer.register_hooks(
        [
            hooks.IterationTimer(),
            hooks.LRScheduler(optimizer=optim, scheduler=scheduler),
            hooks.PeriodicCheckpointer(checkpointer, **cfg.train.checkpointer)
            if comm.is_main_process()
            else None,
            hooks.EvalHook(cfg.train.eval_period, lambda: do_test(cfg, model)),
            hooks.PeriodicWriter(
                default_writers(cfg.train.output_dir, cfg.train.max_iter),
                period=cfg.train.log_period,
            )
            if comm.is_main_process()
            else None,
            PreemptionHook(checkpointer, prog="lazyconfig_train_net"),  # last
        ]
    )
    resume_from = getattr(args, "resume_from", None)
    if resume_from:
        checkpointer.load(resume_from)
        start_iter = trainer.iter + 1
    else:
        checkpointer.resume_or_load(cfg.train.init_checkpoint, resume=args.resume)
        start_iter = trainer.iter + 1 if args.resume and checkpointer.has_checkpoint() else 0
    trainer.train(start_iter, cfg.train.max_iter)


def main(args: argparse.Namespace) -> Any:
    """One worker: train (or with ``--eval-only`` evaluate) the LazyConfig of ``args``."""
    cfg, budget_lines = _load(args)
    with run_config_kept(cfg.train.output_dir, args.eval_only and comm.is_main_process()):
        default_setup(cfg, args)
    log_removed(cfg.train.output_dir, getattr(args, "removed_temporaries", ()))
    if comm.is_main_process():
        for line in budget_lines:
            logger.info(line)
    if args.eval_only:
        model = instantiate(cfg.model)
        model.to(cfg.train.device)
        model = _ddp(model, cfg)
        checkpointer = SafeCheckpointer(model, cfg.train.output_dir)
        resume_from = getattr(args, "resume_from", None)
        if resume_from:
            loaded = checkpointer.load(resume_from, checkpointables=[])
        else:
            loaded = checkpointer.resume_or_load(cfg.train.init_checkpoint, resume=args.resume)
        results = do_test(cfg, model)
        if comm.is_main_process():
            iteration = (loaded or {}).get("iteration")
            if write_evaluation(cfg.train.output_dir, results or {}, iteration) is None:
                logging.getLogger("detectron2").info(
                    "--eval-only: results not added to %s (a training run's log, or none)",
                    os.path.join(cfg.train.output_dir, "metrics.json"),
                )
        return results
    try:
        do_train(args, cfg)
    except Exception as err:  # a full disk outside the checkpoints: one line too
        stop = as_stop(err, cfg.train.output_dir)
        if stop is None:
            raise
        raise stop from None
    return None


def _names(dataset: Any) -> list[str]:
    names = dataset.get("names", []) if hasattr(dataset, "get") else []
    return [names] if isinstance(names, str) else list(names)


def preflight(args: argparse.Namespace) -> None:
    """All checks, in the launching process (datasets, schedule values, output folder, the
    checkpoint to load); raises one-line ``ValueError``s."""
    cfg = load(args)
    names = _names(cfg.dataloader.test.dataset) if "test" in cfg.dataloader else []
    if not args.eval_only:
        names = _names(cfg.dataloader.train.dataset) + names
    check_datasets(names)
    folder = cfg.train.output_dir
    check_writable(folder, key="train.output_dir")
    if not args.eval_only:
        # bad schedule values, and a total_iters other than train.max_iter, fail here in one line
        build_lazy_lr_scheduler(
            stand_in_optimizer(None, lr=1.0), instantiate(cfg.lr_multiplier), cfg.train.max_iter
        )
        resuming = args.resume or bool(getattr(args, "resume_from", None))
        check_new_run_folder(folder, resuming, key="train.output_dir")
        OutputDirLock(folder, "train.output_dir").check()
        check_not_empty(_names(cfg.dataloader.train.dataset),
                        lambda: instantiate(cfg.dataloader.train.dataset))  # fmt: skip
    checkpoint = check_checkpoint_files(
        args,
        folder,
        cfg.train.init_checkpoint,
        weights_key="train.init_checkpoint",
        check_resumed=lambda checkpoint: check_lazy_resume(cfg, checkpoint),
        base_lrs=lambda: lazy_base_lrs(cfg),
    )
    if args.resume and not args.resume_from and not args.eval_only:
        longer = "start a new run from its weights: train.init_checkpoint=" + os.path.join(
            folder, "model_final.pth"
        )
        check_finished(checkpoint, max_iter=cfg.train.max_iter, seconds=0.0, folder=folder,
                       evaluates="evaluator" in cfg.dataloader, longer=longer)  # fmt: skip
    args.output_dir, args.output_key = folder, "train.output_dir"


def lazy_base_lrs(cfg: Any) -> ConfiguredLRs | None:
    """The LR LazyConfig ``cfg`` gives each param group (``optimizer.lr`` times what its
    ``optimizer.params`` say of each group), its model and optimizer instantiated without
    weights; None where they cannot be built here."""

    def build() -> torch.optim.Optimizer:
        optimizer = copy.deepcopy(cfg.optimizer)
        optimizer.params.model = instantiate(copy.deepcopy(cfg.model))
        return instantiate(optimizer)

    built = build_without_weights(build)
    if built is None:
        return None
    value = cfg.optimizer.get("lr")
    return ConfiguredLRs(
        [float(group["lr"]) for group in built.param_groups],
        "optimizer.lr",
        float(value) if isinstance(value, (int, float)) else None,
    )


def check_lazy_resume(cfg: Any, checkpoint: Any) -> None:
    """Refuse to resume ``checkpoint`` with another budget than LazyConfig ``cfg``'s (one line,
    :class:`~budgeted.detectron2.BudgetResumeError`), before anything is written."""
    trainer_state = checkpoint.get("trainer", {}) if isinstance(checkpoint, dict) else {}
    saved = (trainer_state.get("hooks") or {}).get("LRScheduler")
    scheduler = build_lazy_lr_scheduler(
        stand_in_optimizer(saved, lr=1.0), instantiate(cfg.lr_multiplier), cfg.train.max_iter
    )
    if saved is not None and isinstance(scheduler, torch.optim.lr_scheduler._LRScheduler):
        scheduler.load_state_dict(saved)


def run(argv: Sequence[str] | None = None) -> int:
    """The command line: parse ``argv``, check everything, then launch :func:`main` on every
    worker. Returns the exit status (0); bad input exits with one line.

    Args:
        argv (Sequence[str], optional): the arguments; default ``sys.argv[1:]``.

    Example:
        >>> run(["--config", "mask_rcnn_toy_budget10.py", "train.max_iter=4"])  # doctest: +SKIP
        0
    """
    launch_checked("lazyconfig_train_net", lazy_argument_parser().parse_args(argv),
                   _checked_options, main)  # fmt: skip
    return 0


def _checked_options(args: argparse.Namespace) -> None:
    """:func:`preflight`; a bad ``--budget`` / ``--schedule`` / ``--full-iters`` (or a config
    they cannot be applied to) is one line and exit status 2, before anything is written."""
    try:
        preflight(args)
    except BudgetOptionError as err:
        print(f"lazyconfig_train_net: {err}", file=sys.stderr, flush=True)
        raise SystemExit(err.exit_status) from None

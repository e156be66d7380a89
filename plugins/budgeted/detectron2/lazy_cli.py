"""``tools/lazyconfig_train_net.py`` (``budgeted-lazy-train-net``): Detectron2's LazyConfig
training script, budget-aware.

Same CLI as Detectron2's (plus what ``tools/train_net.py`` adds, and ``--budget --schedule
--full-iters``: :func:`~budgeted.detectron2.lazy.apply_budget`); the one pre-flight and evaluation
of :mod:`budgeted.detectron2.preflight`, the config read by :class:`LazyConfigTool`.
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
from detectron2.engine import AMPTrainer, SimpleTrainer, default_writers, hooks
from detectron2.engine.defaults import create_ddp_model
from detectron2.evaluation import inference_on_dataset, print_csv_format
from detectron2.utils import comm

from ..config_files import find_config
from ..control.resume import configured_lrs
from ..schedules import schedule_names
from ..schedules.base_lrs import ConfiguredLRs
from .checkpoint import SafeCheckpointer
from .cli import argument_parser, launch_checked
from .data import register_toy_coco
from .lazy import BudgetOptionError, apply_budget, build_lazy_lr_scheduler, lazy_warmup
from .preemption import PreemptionHook
from .preflight import (
    ToolConfig,
    check_saved_scheduler,
    evaluate,
    stand_in_optimizer,
    start_worker,
)
from .preflight import preflight as run_preflight
from .stops import StopsInOneLine, as_stop

__all__ = [
    "LAZY", "LazyConfigTool", "apply_budget", "check_lazy_resume", "do_test", "do_train",
    "lazy_argument_parser", "lazy_base_lrs", "lazy_warmup", "load", "main", "preflight", "run"
]  # fmt: skip

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
    """The LazyConfig of ``args`` (a path or a shipped config's bare name) with its ``key=value``
    overrides, then its ``--budget``, ``--schedule`` and ``--full-iters``
    (:func:`~budgeted.detectron2.lazy.apply_budget`); the toy datasets registered."""
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
    """Evaluate ``model`` as Detectron2's ``lazyconfig_train_net.py`` does (None without an
    evaluator)."""
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
    of :func:`~budgeted.detectron2.lazy.build_lazy_lr_scheduler`."""
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
    cfg = start_worker(args, LAZY)
    if args.eval_only:
        return evaluate(cfg, args, LAZY)
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


class LazyConfigTool(ToolConfig):
    """How ``tools/lazyconfig_train_net.py`` reads its LazyConfig: the answers to the one
    pre-flight's and evaluation's questions (:class:`~budgeted.detectron2.preflight.ToolConfig`)."""

    output_key = "train.output_dir"
    weights_key = "train.init_checkpoint"

    def read(self, args: argparse.Namespace) -> tuple[Any, list[str]]:
        return _load(args)

    def output_dir(self, cfg: Any) -> str:
        return cfg.train.output_dir

    def weights(self, cfg: Any) -> str:
        return cfg.train.init_checkpoint

    def datasets(self, cfg: Any, *, train: bool) -> list[str]:
        if train:
            return _names(cfg.dataloader.train.dataset)
        return _names(cfg.dataloader.test.dataset) if "test" in cfg.dataloader else []

    def load_train_set(self, cfg: Any) -> Any:
        return instantiate(cfg.dataloader.train.dataset)

    def check_budget(self, cfg: Any, world_size: int) -> None:
        # bad schedule values, and a total_iters other than train.max_iter, fail here in one line
        build_lazy_lr_scheduler(
            stand_in_optimizer(None, lr=1.0), instantiate(cfg.lr_multiplier), cfg.train.max_iter
        )

    def check_resume(self, cfg: Any, world_size: int, checkpoint: Any) -> None:
        check_lazy_resume(cfg, checkpoint)

    def base_lrs(self, cfg: Any, world_size: int) -> ConfiguredLRs | None:
        return lazy_base_lrs(cfg)

    def finished(self, cfg: Any, world_size: int) -> dict[str, Any]:
        weights = os.path.join(cfg.train.output_dir, "model_final.pth")
        longer = f"start a new run from its weights: train.init_checkpoint={weights}"
        return {"max_iter": cfg.train.max_iter, "seconds": 0.0,
                "evaluates": "evaluator" in cfg.dataloader, "longer": longer}  # fmt: skip

    def eval_model(self, cfg: Any) -> torch.nn.Module:
        model = instantiate(cfg.model)
        model.to(cfg.train.device)
        return _ddp(model, cfg)

    def test(self, cfg: Any, model: torch.nn.Module) -> Any:
        return do_test(cfg, model)


LAZY = LazyConfigTool()
"""``tools/lazyconfig_train_net.py``'s way of reading its config."""


def preflight(args: argparse.Namespace) -> None:
    """All checks, in the launching process (datasets, schedule values, output folder, the
    checkpoint to load: :func:`~budgeted.detectron2.preflight.preflight`); raises one-line
    ``ValueError``s."""
    run_preflight(args, LAZY)


def lazy_base_lrs(cfg: Any) -> ConfiguredLRs | None:
    """The LR LazyConfig ``cfg`` gives each param group, its model and optimizer instantiated
    without weights; None where they cannot be built here."""

    def build() -> torch.optim.Optimizer:
        optimizer = copy.deepcopy(cfg.optimizer)
        optimizer.params.model = instantiate(copy.deepcopy(cfg.model))
        return instantiate(optimizer)

    return configured_lrs(build, "optimizer.lr", cfg.optimizer.get("lr"))


def check_lazy_resume(cfg: Any, checkpoint: Any) -> None:
    """Refuse to resume ``checkpoint`` with another budget than LazyConfig ``cfg``'s
    (:func:`~budgeted.detectron2.preflight.check_saved_scheduler`)."""
    multiplier, max_iter = instantiate(cfg.lr_multiplier), cfg.train.max_iter
    check_saved_scheduler(
        checkpoint, lambda opt: build_lazy_lr_scheduler(opt, multiplier, max_iter), 1.0
    )


def run(argv: Sequence[str] | None = None) -> int:
    """The command line: parse ``argv``, check everything, then launch :func:`main` on every
    worker. Returns the exit status (0); bad input exits with one line.

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

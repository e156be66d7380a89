"""``tools/lazyconfig_train_net.py``: Detectron2's LazyConfig training script, budget-aware.

Same CLI and config layout as Detectron2's. Differences: ``lr_multiplier`` of type
:class:`~budgeted.detectron2.lazy.BudgetParamScheduler` is trained as a checkpointed
:class:`~budgeted.detectron2.BudgetLRScheduler` (a resume with another budget is refused);
``--num-gpus N`` without CUDA runs N CPU processes (gloo); the datasets and the output folder are
checked before any worker starts.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import Any

from detectron2.checkpoint import DetectionCheckpointer
from detectron2.config import LazyConfig, instantiate
from detectron2.engine import (
    AMPTrainer,
    SimpleTrainer,
    default_argument_parser,
    default_setup,
    default_writers,
    hooks,
)
from detectron2.engine.defaults import create_ddp_model
from detectron2.evaluation import inference_on_dataset, print_csv_format
from detectron2.utils import comm

from .cli import RUN_FILES, launch_checked
from .data import check_datasets
from .lazy import build_lazy_lr_scheduler

__all__ = ["do_test", "do_train", "main", "run"]

logger = logging.getLogger("detectron2")


def load(args: argparse.Namespace) -> Any:
    if not args.config_file:
        raise ValueError("--config-file is required")
    cfg = LazyConfig.load(args.config_file)
    return LazyConfig.apply_overrides(cfg, args.opts)


def do_test(cfg: Any, model: Any) -> Any:
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
    model = instantiate(cfg.model)
    model.to(cfg.train.device)
    cfg.optimizer.params.model = model
    optim = instantiate(cfg.optimizer)
    train_loader = instantiate(cfg.dataloader.train)
    model = _ddp(model, cfg)
    trainer = (AMPTrainer if cfg.train.amp.enabled else SimpleTrainer)(model, train_loader, optim)
    checkpointer = DetectionCheckpointer(
        model, cfg.train.output_dir, optimizer=optim, trainer=trainer
    )
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
        ]
    )
    checkpointer.resume_or_load(cfg.train.init_checkpoint, resume=args.resume)
    start_iter = trainer.iter + 1 if args.resume and checkpointer.has_checkpoint() else 0
    trainer.train(start_iter, cfg.train.max_iter)


def main(args: argparse.Namespace) -> Any:
    cfg = load(args)
    default_setup(cfg, args)
    if args.eval_only:
        model = instantiate(cfg.model)
        model.to(cfg.train.device)
        model = _ddp(model, cfg)
        DetectionCheckpointer(model).load(cfg.train.init_checkpoint)
        return do_test(cfg, model)
    do_train(args, cfg)
    return None


def _names(dataset: Any) -> list[str]:
    names = dataset.get("names", []) if hasattr(dataset, "get") else []
    return [names] if isinstance(names, str) else list(names)


def preflight(args: argparse.Namespace) -> None:
    cfg = load(args)
    names = _names(cfg.dataloader.test.dataset) if "test" in cfg.dataloader else []
    if not args.eval_only:
        names = _names(cfg.dataloader.train.dataset) + names
    check_datasets(names)
    if args.eval_only:
        return
    instantiate(cfg.lr_multiplier)  # bad schedule values fail here, in one line
    out = cfg.train.output_dir
    if not args.resume and out and any(os.path.exists(os.path.join(out, f)) for f in RUN_FILES):
        raise ValueError(
            f"train.output_dir {out!r} already holds a run; pass --resume to continue it, or set "
            "another train.output_dir to start a new one"
        )


def run(argv: Sequence[str] | None = None) -> Any:
    """Parse ``argv``, check everything, then launch :func:`main` on every worker."""
    return launch_checked("lazyconfig_train_net", default_argument_parser().parse_args(argv),
                          preflight, main)  # fmt: skip

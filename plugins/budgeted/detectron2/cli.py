"""``tools/train_net.py``: Detectron2's train_net CLI with :class:`BudgetTrainer`.

Same arguments as Detectron2's (``--config-file``, ``--num-gpus``, ``--num-machines``,
``--machine-rank``, ``--dist-url``, ``--resume``, ``--eval-only``, trailing ``KEY VALUE``
overrides). Everything that can be wrong with the config, the datasets, the output folder or a
resumed budget is checked once, in the launching process, before any worker starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.config import CfgNode
from detectron2.engine import default_argument_parser, default_setup
from detectron2.evaluation import verify_results
from detectron2.utils import comm

from .config import load_config
from .data import check_config_datasets
from .launch import launch
from .solver import BudgetConfigError
from .trainer import BudgetTrainer, check_budget, check_resume

__all__ = ["main", "parse_args", "preflight", "run", "setup"]

RUN_FILES = ("last_checkpoint", "metrics.json", "model_final.pth")
"""Files that mark an output folder as holding a run."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return default_argument_parser().parse_args(argv)


def setup(args: argparse.Namespace) -> CfgNode:
    """Load the config (budget keys, base and overrides resolved); pick the CPU without CUDA."""
    if not args.config_file:
        raise ValueError(
            "--config-file is required (e.g. configs/detectron2/mask_rcnn_budget10.yaml)"
        )
    cfg = load_config(args.config_file, args.opts)
    if cfg.MODEL.DEVICE.startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger("detectron2").warning("CUDA is not available: training on the CPU")
        cfg.MODEL.DEVICE = "cpu"
    cfg.freeze()
    return cfg


def preflight(args: argparse.Namespace) -> CfgNode:
    """All checks, in the launching process; raises one-line ``ValueError``s."""
    cfg = setup(args)
    world_size = args.num_gpus * args.num_machines
    if args.num_gpus < 1 or args.num_machines < 1:
        raise ValueError(
            f"--num-gpus={args.num_gpus} --num-machines={args.num_machines}: allowed: >= 1"
        )
    check_config_datasets(cfg, train=not args.eval_only)
    if args.eval_only:
        return cfg
    check_budget(cfg, world_size)
    out = cfg.OUTPUT_DIR
    has_run = out and any(os.path.exists(os.path.join(out, f)) for f in RUN_FILES)
    if args.resume:
        check_resume(cfg, world_size)
    elif has_run:
        raise ValueError(
            f"OUTPUT_DIR {out!r} already holds a run; pass --resume to continue it, or set "
            "another OUTPUT_DIR (e.g. OUTPUT_DIR ./output/new_run) to start a new one"
        )
    return cfg


def main(args: argparse.Namespace) -> Any:
    """One worker: train (or evaluate) and return the evaluation results."""
    cfg = setup(args)
    default_setup(cfg, args)
    if args.eval_only:
        model = BudgetTrainer.build_model(cfg)
        DetectionCheckpointer(model, save_dir=cfg.OUTPUT_DIR).resume_or_load(
            cfg.MODEL.WEIGHTS, resume=args.resume
        )
        res = BudgetTrainer.test(cfg, model)
        if comm.is_main_process():
            verify_results(cfg, res)
        return res
    trainer = BudgetTrainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    res = trainer.train()
    if comm.is_main_process():
        logging.getLogger("detectron2").info(
            "metrics: %s; TensorBoard events: %s (tensorboard --logdir %s)",
            os.path.join(cfg.OUTPUT_DIR, "metrics.json"),
            cfg.OUTPUT_DIR,
            cfg.OUTPUT_DIR,
        )
    return res


def run(argv: Sequence[str] | None = None) -> Any:
    """Parse ``argv``, check everything, then :func:`launch` :func:`main` on every worker."""
    return launch_checked("train_net", parse_args(argv), preflight, main)


def launch_checked(
    prog: str,
    args: argparse.Namespace,
    preflight: Callable[[argparse.Namespace], None],
    main: Callable[[argparse.Namespace], Any],
) -> Any:
    """Run ``preflight(args)`` here, then ``main(args)`` in this process (one worker) or on every
    worker; a bad config, dataset or budget exits with one line ``prog: <what is wrong>``."""
    try:
        preflight(args)
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"{prog}: {err}")
    if args.num_gpus * args.num_machines == 1:
        try:
            return main(args)
        except BudgetConfigError as err:
            sys.exit(f"{prog}: {err}")
    launch(
        main,
        args.num_gpus,
        num_machines=args.num_machines,
        machine_rank=args.machine_rank,
        dist_url=args.dist_url,
        args=(args,),
    )
    return None

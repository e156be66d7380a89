"""``tools/train_net.py`` (``budgeted-train-net``): Detectron2's train_net CLI with
:class:`BudgetTrainer`.

Same arguments as Detectron2's ``default_argument_parser`` (``--config-file``, ``--num-gpus``,
``--num-machines``, ``--machine-rank``, ``--dist-url``, ``--resume``, ``--eval-only``, trailing
overrides), plus: ``--config`` beside ``--config-file``; a shipped config by its bare name
(``mask_rcnn_budget10.yaml``, looked up under ``configs/detectron2`` and its ``toy/`` and
``lazy/`` folders); overrides as ``KEY VALUE`` pairs or ``KEY=VALUE``, mixed. Everything that can
be wrong with the config, the datasets, the output folder or a resumed budget is checked once, in
the launching process, before any worker starts, and reported in one line.
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

from ..config_files import find_config
from .config import load_config, split_overrides
from .data import check_config_datasets, register_toy_coco
from .launch import launch
from .runs import check_new_run_folder
from .solver import BudgetConfigError
from .trainer import BudgetTrainer, check_budget, check_resume

__all__ = ["argument_parser", "launch_checked", "main", "parse_args", "preflight", "run", "setup"]

EPILOG = """
Examples:
  train_net.py --config mask_rcnn_budget10.yaml --num-gpus 8
  train_net.py --config-file configs/detectron2/toy/mask_rcnn_toy_budget10.yaml \\
      SOLVER.LR_SCHEDULER_NAME=BudgetCosine OUTPUT_DIR ./output/toy_cosine

Overrides: KEY VALUE pairs (Detectron2's form) or KEY=VALUE, mixed; a value may hold '='.
Without CUDA, --num-gpus N runs N CPU processes (gloo). See docs/detectron2.md.
"""


def argument_parser(epilog: str | None = EPILOG) -> argparse.ArgumentParser:
    """Detectron2's ``default_argument_parser`` plus ``--config`` (same as ``--config-file``).

    Args:
        epilog (str, optional): the help text's epilog.

    Example:
        >>> argument_parser().parse_args(["--config", "mask_rcnn_budget10.yaml"]).config_file
        'mask_rcnn_budget10.yaml'
    """
    parser = default_argument_parser(epilog=epilog)
    parser.add_argument(
        "--config",
        dest="config_file",
        metavar="FILE_OR_NAME",
        help="same as --config-file: a path, or a shipped config's bare name "
        "(mask_rcnn_budget10.yaml)",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``argv``; default ``sys.argv[1:]``).

    Example:
        >>> parse_args(["--config", "x.yaml", "SEED=1", "OUTPUT_DIR", "o"]).opts
        ['SEED=1', 'OUTPUT_DIR', 'o']
    """
    return argument_parser().parse_args(argv)


def _resolve_config(args: argparse.Namespace) -> None:
    """``args.config_file`` as a path (a bare name looked up), ``args.opts`` as KEY VALUE pairs."""
    if not args.config_file:
        raise ValueError(
            "--config-file is required (e.g. --config mask_rcnn_budget10.yaml, or a path)"
        )
    path = os.fspath(find_config(args.config_file, "detectron2"))
    if path.endswith(".py"):
        raise ValueError(
            f"config {path!r} is a LazyConfig (python) file; allowed here: a yaml config "
            "(train LazyConfigs with tools/lazyconfig_train_net.py)"
        )
    args.config_file = path
    args.opts = split_overrides(args.opts or [])


def setup(args: argparse.Namespace) -> CfgNode:
    """The frozen config of ``args``: the toy datasets registered, the config file found, budget
    keys, bases and overrides resolved; the CPU picked when CUDA is absent.

    Args:
        args (argparse.Namespace): from :func:`parse_args`.

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


def preflight(args: argparse.Namespace) -> CfgNode:
    """All checks, in the launching process; raises one-line ``ValueError``s.

    The config and overrides, ``--num-gpus``/``--num-machines``, the datasets' files, the budget
    as the workers will train it (after ``REFERENCE_WORLD_SIZE`` scaling), and the output folder:
    a resume of another budget, or a new run over an existing one, is refused.

    Args:
        args (argparse.Namespace): from :func:`parse_args`.

    Returns:
        CfgNode: the config, as :func:`setup` gives it.
    """
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
    if args.resume:
        check_resume(cfg, world_size)
    check_new_run_folder(cfg.OUTPUT_DIR, args.resume)
    return cfg


def main(args: argparse.Namespace) -> Any:
    """One worker: train (or evaluate) and return the evaluation results.

    Args:
        args (argparse.Namespace): from :func:`parse_args` (after :func:`preflight`).
    """
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


def run(argv: Sequence[str] | None = None) -> int:
    """The command line: parse ``argv``, check everything, then :func:`launch` :func:`main` on
    every worker. Returns the exit status (0); bad input exits with one line.

    Args:
        argv (Sequence[str], optional): the arguments; default ``sys.argv[1:]``.

    Example:
        >>> run(["--config", "mask_rcnn_toy_budget1.yaml", "OUTPUT_DIR=./output/toy1"])
        ... # doctest: +SKIP
        0
    """
    launch_checked("train_net", parse_args(argv), preflight, main)
    return 0


def launch_checked(
    prog: str,
    args: argparse.Namespace,
    preflight: Callable[[argparse.Namespace], Any],
    main: Callable[[argparse.Namespace], Any],
) -> Any:
    """Run ``preflight(args)`` here, then ``main(args)`` in this process (one worker) or on every
    worker; a bad config, dataset or budget exits with one line ``prog: <what is wrong>``.

    Args:
        prog (str): the tool's name, for messages.
        args (argparse.Namespace): the parsed command line.
        preflight (callable): the checks, run once here.
        main (callable): one worker's work.

    Returns:
        ``main(args)`` with one worker, else None.
    """
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

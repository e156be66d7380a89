"""``tools/train_net.py`` (``budgeted-train-net``): Detectron2's train_net CLI with
:class:`BudgetTrainer`.

Same arguments as Detectron2's ``default_argument_parser`` (``--config-file``, ``--num-gpus``,
``--num-machines``, ``--machine-rank``, ``--dist-url``, ``--resume``, ``--eval-only``, trailing
overrides), plus: ``--config`` beside ``--config-file``; a shipped config by its bare name
(``mask_rcnn_budget10.yaml``, looked up under ``configs/detectron2`` and its ``toy/`` and
``lazy/`` folders); overrides as ``KEY VALUE`` pairs or ``KEY=VALUE``, mixed; ``--resume-from
PATH`` (resume exactly from that checkpoint). Everything that can be wrong with the config, the
datasets, the output folder, the checkpoint or weights file to load (unsafe, damaged) or a
resumed budget is checked once, in the launching process, before anything is written or any
worker starts, and reported in one line.

SIGTERM or SIGUSR1 (a cluster's preemption) end training after the current iteration with a
checkpoint, one line and exit status 75 (:data:`~budgeted.safety.preemption.PREEMPTED_EXIT_CODE`);
``--resume`` continues it.

``--eval-only`` also appends its results to ``OUTPUT_DIR/metrics.json`` as one line at the
iteration the weights were saved at, as training logs an evaluation, unless that file is a
training run's log, which stays as it was
(:func:`~budgeted.runs.detectron2.write_evaluation`): a sweep of evaluations reads like one of
runs (``budgeted-sweep --evaluate-from``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.engine import default_argument_parser, default_setup
from detectron2.evaluation import verify_results
from detectron2.utils import comm

from ..config_files import find_config
from ..runs.detectron2 import check_new_run_folder, run_config_kept, write_evaluation
from ..safety.checkpoints import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    check_later_checkpoints_kept,
    load_checkpoint,
)
from ..safety.preemption import Preempted, PreemptionGuard, active_guard
from ..schedules.clock import TimeBudgetReached, parse_duration
from .checkpoint import (
    CHECKPOINT_PATTERN,
    SafeCheckpointer,
    last_checkpoint_file,
    load_weights_file,
    offer_intact,
)
from .config import load_config, split_overrides
from .data import check_config_datasets, check_config_train_set, register_toy_coco
from .launch import launch
from .output_dir import OutputDirLock, check_writable, claim, log_removed
from .solver import BudgetConfigError
from .stops import RunStopped, as_stop, check_finished, check_position, stop_line
from .time_budget import time_budget_seconds, undecayed_stop
from .trainer import BudgetTrainer, check_budget, check_resume

__all__ = [
    "argument_parser",
    "check_checkpoint_files",
    "launch_checked",
    "main",
    "parse_args",
    "preflight",
    "run",
    "setup",
]

EPILOG = """
Examples:
  train_net.py --config mask_rcnn_budget10.yaml --num-gpus 8
  train_net.py --config-file configs/detectron2/toy/mask_rcnn_toy_budget10.yaml \\
      SOLVER.LR_SCHEDULER_NAME=BudgetCosine OUTPUT_DIR ./output/toy_cosine

Overrides: KEY VALUE pairs (Detectron2's form) or KEY=VALUE, mixed; a value may hold '='.
Without CUDA, --num-gpus N runs N CPU processes (gloo). SIGTERM or SIGUSR1 stop training after
the current iteration with a checkpoint; the exit status is then 75 (resume with --resume).
See docs/detectron2.md.
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
    parser.add_argument(
        "--budget-time",
        metavar="DURATION",
        help="a wall-clock budget of training time: 6h, 90m, 2h30m, or seconds (sets "
        "SOLVER.BUDGET.SECONDS; SOLVER.MAX_ITER then only caps the iterations)",
    )
    parser.add_argument(
        "--resume-from",
        metavar="CHECKPOINT",
        help="resume exactly from this checkpoint (model, optimizer, schedule, iteration) "
        "rather than the one last_checkpoint names; the budget is checked as with --resume",
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
    if getattr(args, "budget_time", None) is not None:
        seconds = parse_duration(args.budget_time)  # one-line ValueError for a bad value
        args.opts += ["SOLVER.BUDGET.SECONDS", repr(seconds)]
        args.budget_time = None  # applied once (preflight and the workers both resolve)


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
    as the workers will train it (after ``REFERENCE_WORLD_SIZE`` scaling), the output folder (a
    new run over an existing one is refused), and the file the workers will load
    (:func:`check_checkpoint_files`: an unsafe or damaged file, or a resume of another budget,
    is refused). Nothing is written before these pass.

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
    check_writable(cfg.OUTPUT_DIR)
    if not args.eval_only:
        check_budget(cfg, world_size)
        check_new_run_folder(
            cfg.OUTPUT_DIR, args.resume or bool(getattr(args, "resume_from", None))
        )
        OutputDirLock(cfg.OUTPUT_DIR).check()
        check_config_train_set(cfg)
    checkpoint = check_checkpoint_files(
        args,
        cfg.OUTPUT_DIR,
        cfg.MODEL.WEIGHTS,
        check_resumed=lambda checkpoint: check_resume(cfg, world_size, checkpoint=checkpoint),
    )
    if args.resume and not args.resume_from and not args.eval_only:
        scaled = BudgetTrainer.auto_scale_workers(cfg.clone(), world_size)
        check_finished(checkpoint, max_iter=scaled.SOLVER.MAX_ITER,
                       seconds=time_budget_seconds(cfg), folder=cfg.OUTPUT_DIR,
                       evaluates=bool(cfg.DATASETS.TEST))  # fmt: skip
    args.output_dir, args.output_key = cfg.OUTPUT_DIR, "OUTPUT_DIR"
    return cfg


def check_checkpoint_files(
    args: argparse.Namespace,
    output_dir: str,
    weights: str,
    *,
    weights_key: str = "MODEL.WEIGHTS",
    check_resumed: Callable[[Any], None] | None = None,
) -> None:
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

    Returns:
        the resumed checkpoint, or None.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line naming the file (a damaged
            resume with the newest intact checkpoint of the folder offered).
        ValueError: one line for a resumed file that holds weights only, or whose LR scheduler
            disagrees with its iteration (:func:`~budgeted.detectron2.stops.check_position`).
    """
    checkpoint, path, what = None, "", "--resume-from"
    args.resume_from = getattr(args, "resume_from", None)
    if args.resume_from:
        path = args.resume_from = os.path.abspath(args.resume_from)
        checkpoint = load_weights_file(args.resume_from, what="--resume-from")
    elif args.resume and last_checkpoint_file(output_dir) is not None:
        path, what = last_checkpoint_file(output_dir) or "", "cannot resume: checkpoint"
        try:
            checkpoint = load_checkpoint(path)
        except (DamagedCheckpointError, UnsafeCheckpointError) as err:
            refused = type(err)(f"cannot resume: {err}")
            raise offer_intact(refused, output_dir, path) from None
    elif weights:
        load_weights_file(weights, what=weights_key)
    if checkpoint is not None and not args.eval_only:
        hint = (
            f"{weights_key} {{path}}"
            if weights_key == "MODEL.WEIGHTS"
            else f"{weights_key}={{path}}"
        )
        check_position(checkpoint, path, what=what, weights_hint=hint)
    if checkpoint is not None and check_resumed is not None and not args.eval_only:
        check_resumed(checkpoint)
    if args.resume_from and not args.eval_only and isinstance(checkpoint, dict):
        check_later_checkpoints_kept(
            args.resume_from,
            checkpoint.get("iteration", -1),
            Path(output_dir).glob(CHECKPOINT_PATTERN),
            folder_key="OUTPUT_DIR" if weights_key == "MODEL.WEIGHTS" else "train.output_dir",
        )
    return checkpoint


def main(args: argparse.Namespace) -> Any:
    """One worker: train (or evaluate) and return the evaluation results.

    Args:
        args (argparse.Namespace): from :func:`parse_args` (after :func:`preflight`).
    """
    cfg = setup(args)
    with run_config_kept(cfg.OUTPUT_DIR, args.eval_only and comm.is_main_process()):
        default_setup(cfg, args)
    log_removed(cfg.OUTPUT_DIR, getattr(args, "removed_temporaries", ()))
    args.resume_from = getattr(args, "resume_from", None)
    if args.eval_only:
        model = BudgetTrainer.build_model(cfg)
        checkpointer = SafeCheckpointer(model, save_dir=cfg.OUTPUT_DIR)
        if args.resume_from:
            loaded = checkpointer.load(args.resume_from, checkpointables=[])
        else:
            loaded = checkpointer.resume_or_load(cfg.MODEL.WEIGHTS, resume=args.resume)
        res = BudgetTrainer.test(cfg, model)
        if comm.is_main_process():
            verify_results(cfg, res)
            if write_evaluation(cfg.OUTPUT_DIR, res, (loaded or {}).get("iteration")) is None:
                logging.getLogger("detectron2").info(
                    "--eval-only: results not added to %s (a training run's log, or none)",
                    os.path.join(cfg.OUTPUT_DIR, "metrics.json"),
                )
        return res
    trainer = BudgetTrainer(cfg)
    if args.resume_from:
        trainer.resume_from(args.resume_from)
    else:
        trainer.resume_or_load(resume=args.resume)
    try:
        res = trainer.train()
    except TimeBudgetReached:  # the deadline: saved and evaluated, a finished run
        res = getattr(trainer, "_last_eval_results", None)
    except Exception as err:  # a full disk outside the checkpoints: one line too
        stop = as_stop(err, cfg.OUTPUT_DIR)
        if stop is None:
            raise
        raise stop from None
    if comm.is_main_process():
        logging.getLogger("detectron2").info(
            "metrics: %s; TensorBoard events: %s (tensorboard --logdir %s)",
            os.path.join(cfg.OUTPUT_DIR, "metrics.json"),
            cfg.OUTPUT_DIR,
            cfg.OUTPUT_DIR,
        )
    undecayed = undecayed_stop(trainer.scheduler, trainer.cfg.SOLVER.MAX_ITER)
    if undecayed is not None:  # saved and evaluated, then the line and exit status 4
        raise undecayed
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
    with contextlib.ExitStack() as stack:
        # from here on SIGTERM / SIGUSR1 only set a flag: a preemption before training stops
        # the run cleanly (exit status 75), during training after the current iteration
        guard = active_guard() or stack.enter_context(PreemptionGuard())
        try:
            preflight(args)
            if not guard.requested:
                _claim_output_dir(args, stack)
        except RunStopped as stop:  # finished: nothing to do
            print(stop_line(prog, stop), file=sys.stderr, flush=True)
            raise
        except (ValueError, FileNotFoundError) as err:
            sys.exit(f"{prog}: {err}")
        if guard.requested:
            message = (
                f"{prog}: preempted by {guard.signal_name} before training started: nothing to "
                "save; run the same command again"
            )
            print(message, file=sys.stderr, flush=True)
            raise Preempted(message, guard.signum)
        if args.num_gpus * args.num_machines == 1:
            try:
                return main(args)
            except (BudgetConfigError, UnsafeCheckpointError, DamagedCheckpointError) as err:
                sys.exit(f"{prog}: {err}")
            except RunStopped as stop:  # diverged, undecayed, a full disk: the line, the status
                print(stop_line(prog, stop), file=sys.stderr, flush=True)
                raise
        launch(
            main,
            args.num_gpus,
            num_machines=args.num_machines,
            machine_rank=args.machine_rank,
            dist_url=args.dist_url,
            args=(args,),
            prog=prog,
        )
    return None


def _claim_output_dir(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    """A training run's launching process (of machine 0) locks the output folder for the run
    and removes what killed checkpoint writes left there; the workers log it."""
    folder = getattr(args, "output_dir", "")
    if args.eval_only or args.machine_rank != 0 or not folder or "://" in folder:
        return
    lock, args.removed_temporaries = claim(folder, getattr(args, "output_key", "OUTPUT_DIR"))
    stack.callback(lock.release)

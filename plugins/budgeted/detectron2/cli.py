"""``tools/train_net.py`` (``budgeted-train-net``): Detectron2's train_net CLI with
:class:`BudgetTrainer`.

:func:`run` parses; :func:`launch_checked` runs the one pre-flight
(:func:`budgeted.detectron2.preflight.preflight`), locks the output folder, then :func:`main` on
each worker, which trains (:func:`train`) or evaluates (``--eval-only``). See docs/detectron2.md.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from detectron2.config import CfgNode
from detectron2.engine import default_argument_parser
from detectron2.utils import comm

from ..control.tool import ToolRun, ToolWords
from ..safety import DamagedCheckpointError, UnsafeCheckpointError
from ..schedules.clock import TimeBudgetReached
from .compat import last_eval_results
from .launcher import launch
from .preflight import ToolConfig, check_checkpoint_files, claim, preflight, setup, start_worker
from .preflight import evaluate as evaluate_with
from .solver import BudgetConfigError
from .stops import as_stop
from .time_budget import undecayed_stop
from .trainer import BudgetTrainer

__all__ = [
    "argument_parser", "check_checkpoint_files", "evaluate", "launch_checked", "main",
    "parse_args", "preflight", "run", "setup", "train"
]  # fmt: skip

REFUSED_IN_TRAINING = (BudgetConfigError, UnsafeCheckpointError, DamagedCheckpointError)
"""What a worker refuses in one line once training began (one worker: this process)."""

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


def run(argv: Sequence[str] | None = None) -> int:
    """The command line: parse ``argv``, check everything, then :func:`launch` :func:`main` on
    every worker. Returns the exit status (0); bad input exits with one line.

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
    worker (:class:`~budgeted.control.tool.ToolRun`); a bad config, dataset or budget exits with
    one line ``prog: <what is wrong>``.
    """

    def train(_: Any) -> Any:
        if args.num_gpus * args.num_machines == 1:
            return main(args)
        launch(main, args.num_gpus, num_machines=args.num_machines, machine_rank=args.machine_rank,
               dist_url=args.dist_url, args=(args,), prog=prog)  # fmt: skip
        return None

    return ToolRun(ToolWords(prog), failed=REFUSED_IN_TRAINING).run(
        lambda: preflight(args), lambda _, stack: _claim_output_dir(args, stack), train
    )


def _claim_output_dir(args: argparse.Namespace, stack: contextlib.ExitStack) -> None:
    """A training run's launching process (of machine 0) locks the output folder for the run
    and removes what killed checkpoint writes left there; the workers log it."""
    folder = getattr(args, "output_dir", "")
    if args.eval_only or args.machine_rank != 0:
        return
    lock, args.removed_temporaries = claim(folder, getattr(args, "output_key", "OUTPUT_DIR"))
    stack.callback(lock.release)


TRAIN_NET = ToolConfig(BudgetTrainer)
"""``tools/train_net.py``'s way of reading its config (and :class:`BudgetTrainer`'s evaluation)."""


def main(args: argparse.Namespace) -> Any:
    """One worker: train (or evaluate) and return the evaluation results."""
    cfg = start_worker(args, TRAIN_NET)
    return evaluate(cfg, args) if args.eval_only else train(cfg, args)


def train(cfg: CfgNode, args: argparse.Namespace) -> Any:
    """Build :class:`BudgetTrainer`, resume (``--resume``, ``--resume-from``) or load the
    weights, and train; a stop (diverged, undecayed time budget, full disk) raises its one line.
    Returns the last evaluation's results."""
    trainer = BudgetTrainer(cfg)
    if args.resume_from:
        trainer.resume_from(args.resume_from)
    else:
        trainer.resume_or_load(resume=args.resume)
    try:
        res = trainer.train()
    except TimeBudgetReached:  # the deadline: saved and evaluated, a finished run
        res = last_eval_results(trainer)
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


def evaluate(cfg: CfgNode, args: argparse.Namespace) -> Any:
    """``--eval-only`` (:func:`~budgeted.detectron2.preflight.evaluate`)."""
    return evaluate_with(cfg, args, TRAIN_NET)

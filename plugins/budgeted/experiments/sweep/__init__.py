"""Run the paper's comparison: one training run per (schedule, budget, base LR, seed).

    budgeted-sweep mmseg --toy --schedules linear poly step --budgets 0.05 0.1 \
        --lrs 0.03 0.1 0.3 --seeds 0 1 2 --out output/sweep/mmseg_toy
    budgeted-sweep detectron2 --toy --schedules linear step --budgets 0.1 0.25 \
        --out output/sweep/d2_toy -- SOLVER.IMS_PER_BATCH 4
    budgeted-report output/sweep/mmseg_toy --plot output/sweep/mmseg_toy.png

Each cell trains the shipped config of its schedule and budget (the config families of
:mod:`budgeted.experiments.families`; ``--toy``: the toy ones) with the real training tool
(``budgeted-train-net``, ``budgeted-train-seg``) in a subprocess, into
``<out>/<schedule>_budget<tag>[_lr<LR>][_seed<SEED>]/``, and prints one line: command, wall
time, final metric. ``--lrs`` sets the framework's base LR key, ``--seeds`` its seed key.
Arguments after ``--`` go to the training tool. A finished cell is skipped, never retrained; an
unfinished one is resumed with the tool's ``--resume``. The first failing run stops the sweep
(exit 1) unless ``--keep-going``. One sweep at a time per ``--out`` (a lock); SIGINT, SIGTERM
and SIGUSR1 are forwarded to the running training process, which saves and exits 75, and the
sweep stops (exit 130 after Ctrl-C, else 75). ``--evaluate-from SWEEP...`` trains nothing: each
cell's final weights in those sweep folders are evaluated (Detectron2's ``--eval-only``) on
``--data``'s test set, into ``--out``, a sweep folder the report reads as any other (a larger
held-out set, say). See docs/sweeps.md.

The parts, in the order a sweep uses them:

- :mod:`.records`: a sweep folder read as data (``sweep.json``, ``sweep_cell.json``, each cell's
  final metrics and status); the report reads sweeps through it too;
- :mod:`.commands`: the training tools' command lines;
- :mod:`.plan`: the cells, their folders and commands, what is new, resumed or skipped;
- :mod:`.execute`: running the cells (signals, the lock, every try recorded);
- :mod:`.slurm`: ``--executor slurm``, each cell a Slurm job through submitit (requeued on
  preemption, resumed; ``--detach``);
- :mod:`.status`: ``--status``, and cell records changed under a lock (several writers);
- :mod:`.cli`: the command line (:func:`main`).

This package imports no framework: a framework's run-folder reader is imported only to read its
runs.
"""

from __future__ import annotations

from ...errors import SweepError
from ..families import FRAMEWORKS
from .cli import main, parse_args
from .commands import (
    LR_KEYS,
    MMENGINE_FRAMEWORKS,
    RESERVED,
    SEED_KEYS,
    TRAIN_TOOLS,
    axis_overrides,
    build_command,
    check_extra,
    short,
    show,
    split_mmseg_extra,
    tool_command,
)
from .cost import PRIOR_COST, cost_model, estimate
from .execute import (
    ENDED,
    Interrupted,
    SignalForwarder,
    check_writable,
    ended_status,
    run_cell,
    save_sweep,
    skip_text,
    sweep_lock,
    try_status,
)
from .local import run_cells
from .plan import (
    EVALUATED_WEIGHTS,
    Plan,
    check_grid,
    committed_configs,
    describe,
    make_toy_data,
    parse_budget,
    parse_lr,
    parse_seed,
    plan_cell,
    plan_cells,
    plan_evaluations,
    toy_data,
    toy_environment,
)
from .records import SWEEP_LOCK

__all__ = [
    "ENDED",
    "EVALUATED_WEIGHTS",
    "FRAMEWORKS",
    "LR_KEYS",
    "MMENGINE_FRAMEWORKS",
    "PRIOR_COST",
    "RESERVED",
    "SEED_KEYS",
    "SWEEP_LOCK",
    "TRAIN_TOOLS",
    "Interrupted",
    "Plan",
    "SignalForwarder",
    "SweepError",
    "axis_overrides",
    "build_command",
    "check_extra",
    "check_grid",
    "check_writable",
    "committed_configs",
    "cost_model",
    "describe",
    "ended_status",
    "estimate",
    "main",
    "make_toy_data",
    "parse_args",
    "parse_budget",
    "parse_lr",
    "parse_seed",
    "plan_cell",
    "plan_cells",
    "plan_evaluations",
    "run_cell",
    "run_cells",
    "save_sweep",
    "short",
    "show",
    "skip_text",
    "split_mmseg_extra",
    "sweep_lock",
    "tool_command",
    "toy_data",
    "toy_environment",
    "try_status",
]

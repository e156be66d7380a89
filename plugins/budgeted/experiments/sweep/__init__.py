"""Run the paper's comparison: one training run per (schedule, budget, base LR, seed).

    budgeted-sweep mmseg --toy --schedules linear poly step --budgets 0.05 0.1 \
        --lrs 0.03 0.1 0.3 --seeds 0 1 2 --out output/sweep/mmseg_toy
    budgeted-report output/sweep/mmseg_toy --plot output/sweep/mmseg_toy.png

Each cell trains its family's config (:mod:`budgeted.experiments.families`) with the real
training tool in a subprocess, into ``<out>/<schedule>_budget<tag>[_lr<LR>][_seed<SEED>]/``; a
finished cell is skipped, an unfinished one resumed (docs/sweeps.md). The parts, in the order a
sweep uses them: :mod:`.records` (a sweep folder read as data; the report reads it too),
:mod:`.commands` (the tools' command lines), :mod:`.plan` (the cells, what is new, resumed or
skipped), :mod:`.execute` and :mod:`.local` (running them), :mod:`.slurm` (``--executor
slurm``), :mod:`.status` (``--status``; cell records changed under a lock), :mod:`.cli`.

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

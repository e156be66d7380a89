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
from .commands import RESERVED, TRAIN_TOOLS, build_command
from .execute import sweep_lock
from .plan import Plan, committed_configs, make_toy_data, parse_budget
from .records import SWEEP_LOCK

__all__ = [
    "FRAMEWORKS", "RESERVED", "SWEEP_LOCK", "TRAIN_TOOLS", "Plan", "SweepError", "build_command",
    "committed_configs", "main", "make_toy_data", "parse_args", "parse_budget", "sweep_lock",
]  # fmt: skip

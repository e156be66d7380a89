"""Budget-aware learning-rate schedules (Li, Yumer, Ramanan, ICLR 2020).

The package, layer by layer:

- :mod:`budgeted.schedules`: the schedule math, torch-free and framework-free: what a budget is
  (``BudgetSchedule``), the registered schedules, budget units, time budgets;
- the adapters: :mod:`budgeted.pytorch` (``BudgetLR``), :mod:`budgeted.detectron2`,
  :mod:`budgeted.mmengine`;
- :mod:`budgeted.safety`: untrusted files loaded safely, atomic writes, preemption, folder
  locks, what ranks agree on;
- :mod:`budgeted.runs`: what each tool's run folder holds, read as data;
- :mod:`budgeted.experiments`: config families, sweeps, reports, statistics;
- :mod:`budgeted.toys`: toy and small real datasets in the frameworks' formats;
- :mod:`budgeted.entry_points`: the console scripts.

Old module paths (``budgeted.core``, ``budgeted.clock``, ``budgeted.sweep``, ...) still import:
:mod:`budgeted._legacy`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ._legacy import install as _install_legacy_paths
from .schedules import (
    BUDGET_FRACTIONS,
    BudgetMismatchError,
    BudgetSchedule,
    budget_iters,
    lr_multiplier,
    on_schedule_registered,
    register_schedule,
    schedule_info,
    schedule_names,
)
from .version import __version__

_install_legacy_paths()

SCHEDULES: tuple[str, ...] = schedule_names()
"""The built-in schedule names: linear, cosine, poly, htd, step, exp, constant, wsd, rex, sgdr."""

__all__ = [
    "BUDGET_FRACTIONS", "SCHEDULES", "BudgetMismatchError", "BudgetSchedule", "__version__",
    "budget_iters", "lr_multiplier", "on_schedule_registered", "register_schedule",
    "schedule_info", "schedule_names"
]  # fmt: skip
_TORCH_NAMES = ("BudgetLR", "BudgetTimeLR")
if importlib.util.find_spec("torch") is not None:  # ``from budgeted import *`` works without it
    __all__ += _TORCH_NAMES


def __getattr__(name: str) -> Any:
    # BudgetLR needs torch; importing it lazily keeps ``budgeted.lr_multiplier`` torch-free.
    if name in _TORCH_NAMES:
        from ._require import require

        require(f"budgeted.{name}", "torch")
        from . import pytorch

        return getattr(pytorch, name)
    raise AttributeError(f"module 'budgeted' has no attribute {name!r}")

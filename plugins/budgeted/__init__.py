"""Budget-aware learning-rate schedules (Li, Yumer, Ramanan, ICLR 2020).

The schedule math lives in :mod:`budgeted.core` and imports no framework. Adapters:
:class:`budgeted.BudgetLR` (plain PyTorch), :mod:`budgeted.detectron2`, :mod:`budgeted.mmengine`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from .budget import BUDGET_FRACTIONS, budget_iters
from .core import (
    BudgetMismatchError,
    BudgetSchedule,
    lr_multiplier,
    on_schedule_registered,
    register_schedule,
    schedule_info,
    schedule_names,
)
from .version import __version__

SCHEDULES: tuple[str, ...] = schedule_names()
"""The built-in schedule names: linear, cosine, poly, htd, step, exp, constant."""

__all__ = [
    "BUDGET_FRACTIONS",
    "SCHEDULES",
    "BudgetMismatchError",
    "BudgetSchedule",
    "__version__",
    "budget_iters",
    "lr_multiplier",
    "on_schedule_registered",
    "register_schedule",
    "schedule_info",
    "schedule_names",
]
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

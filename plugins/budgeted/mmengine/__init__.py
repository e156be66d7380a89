"""MMEngine integration: ``import budgeted.mmengine`` registers the budget schedulers
(:mod:`.schedulers`), hooks (:mod:`.hooks`, :mod:`.grad_norm`, :mod:`.scheduler_hook`), the
time-budget loop (:mod:`.time_budget`), schedulefree's optimizers and ``ScheduleFreeHook``
(:mod:`.schedule_free`) and the random-subset dataset (:mod:`.subset`); the same package serves
MMSegmentation, MMDetection, MMPretrain and MMAction2 configs (docs/mmseg.md). Importing it
changes none of MMEngine's hooks and does not apply the checkpoint allow-list
(:func:`allow_mmengine_checkpoints`).

In a config::

    custom_imports = dict(
        imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
        allow_failed_imports=False,
    )
"""

from __future__ import annotations

from .._require import require

require("budgeted.mmengine", "mmengine", "numpy")

from typing import Any  # noqa: E402

from ..schedules import BudgetMismatchError  # noqa: E402
from .checkpoint import (  # noqa: E402
    MMENGINE_CHECKPOINT_GLOBALS,
    DamagedCheckpointError,
    UnsafeCheckpointError,
    allow_mmengine_checkpoints,
    check_checkpoint,
    load_mmengine_checkpoint,
)
from .grad_norm import FullGradNormHook  # noqa: E402
from .hooks import AtomicCheckpointHook, DivergenceHook, PreemptionHook  # noqa: E402
from .schedule_free import ScheduleFreeHook  # noqa: E402
from .scheduler_hook import BudgetParamSchedulerHook  # noqa: E402
from .schedulers import (  # noqa: E402
    NAMED_SCHEDULERS,
    BudgetConfigError,
    BudgetParamScheduler,
    BudgetScheduleLR,
    scheduler_types,
)
from .subset import RandomSubsetDataset  # noqa: E402
from .time_budget import TimeBudgetClockHook, TimeBudgetTrainLoop  # noqa: E402

__all__ = [
    "MMENGINE_CHECKPOINT_GLOBALS",
    "NAMED_SCHEDULERS",
    "AtomicCheckpointHook",
    "BudgetConfigError",
    "BudgetMismatchError",
    "BudgetParamScheduler",
    "BudgetParamSchedulerHook",
    "BudgetScheduleLR",
    "DamagedCheckpointError",
    "DivergenceHook",
    "FullGradNormHook",
    "PreemptionHook",
    "RandomSubsetDataset",
    "ScheduleFreeHook",
    "TimeBudgetClockHook",
    "TimeBudgetTrainLoop",
    "UnsafeCheckpointError",
    "allow_mmengine_checkpoints",
    "check_checkpoint",
    "load_mmengine_checkpoint",
    "scheduler_types",
    # and Budget<Label>LR of every registered schedule (BudgetLinearLR, ...), see __getattr__
    *(cls.__name__ for cls in NAMED_SCHEDULERS.values()),
]


def __getattr__(name: str) -> Any:
    """``Budget<Label>LR`` of any schedule registered in the core, also those registered later."""
    found = next((c for c in NAMED_SCHEDULERS.values() if c.__name__ == name), None)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found


def __dir__() -> list[str]:
    return sorted(set(globals()) | {c.__name__ for c in NAMED_SCHEDULERS.values()})

"""MMEngine / MMSegmentation integration: ``import budgeted.mmengine`` registers everything.

- :mod:`.schedulers`: ``BudgetLinearLR``, ``BudgetCosineLR``, ``BudgetPolyLR``, ``BudgetHTDLR``,
  ``BudgetStepLR``, ``BudgetExpLR``, ``BudgetConstantLR``, the generic ``BudgetLR`` and
  ``BudgetParamScheduler`` in MMEngine's ``PARAM_SCHEDULERS``;
- :mod:`.checkpoint`: allow-lists exactly the globals MMEngine checkpoints carry, so that
  ``torch.load(weights_only=True)`` (torch >= 2.6's default) resumes them; anything else is refused;
- :mod:`.launch`: CPU-distributed (gloo) helpers and config checks for ``tools/train_seg.py``.

In a config: ``custom_imports = dict(imports=["budgeted.mmengine"], allow_failed_imports=False)``.
"""

from __future__ import annotations

from .checkpoint import (
    MMENGINE_CHECKPOINT_GLOBALS,
    UnsafeCheckpointError,
    allow_mmengine_checkpoints,
    check_checkpoint,
)
from .schedulers import (
    NAMED_SCHEDULERS,
    SCHEDULER_TYPES,
    BudgetConstantLR,
    BudgetCosineLR,
    BudgetExpLR,
    BudgetHTDLR,
    BudgetLinearLR,
    BudgetLR,
    BudgetMismatchError,
    BudgetParamScheduler,
    BudgetPolyLR,
    BudgetStepLR,
)

allow_mmengine_checkpoints()

__all__ = [
    "MMENGINE_CHECKPOINT_GLOBALS",
    "NAMED_SCHEDULERS",
    "SCHEDULER_TYPES",
    "BudgetConstantLR",
    "BudgetCosineLR",
    "BudgetExpLR",
    "BudgetHTDLR",
    "BudgetLR",
    "BudgetLinearLR",
    "BudgetMismatchError",
    "BudgetParamScheduler",
    "BudgetPolyLR",
    "BudgetStepLR",
    "UnsafeCheckpointError",
    "allow_mmengine_checkpoints",
    "check_checkpoint",
]

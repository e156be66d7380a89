"""MMEngine integration: ``import budgeted.mmengine`` registers the schedulers.

The same package serves MMSegmentation, MMDetection, MMPretrain and MMAction2 configs.

- :mod:`.schedulers`: ``Budget<Label>LR`` for every schedule registered in the core
  (``BudgetLinearLR``, ``BudgetCosineLR``, ``BudgetPolyLR``, ``BudgetHTDLR``, ``BudgetStepLR``,
  ``BudgetExpLR``, ``BudgetConstantLR``, and any registered later), the generic
  ``BudgetScheduleLR(schedule=...)`` and ``BudgetParamScheduler`` (any optimizer parameter), in
  MMEngine's ``PARAM_SCHEDULERS``;
- :mod:`.checkpoint`: the allow-list of exactly the globals MMEngine checkpoints carry, for
  ``torch.load(weights_only=True)`` (torch >= 2.6's default), and :func:`load_mmengine_checkpoint`
  for untrusted files. Importing this package does not apply the allow-list: our tools call
  :func:`allow_mmengine_checkpoints`, a config imports :mod:`budgeted.mmengine.safe_checkpoints`;
- :mod:`.hooks`: ``AtomicCheckpointHook`` (checkpoints and ``last_checkpoint`` written atomically),
  ``PreemptionHook`` (SIGTERM / SIGUSR1: checkpoint after the current iteration, exit 75) and
  ``DivergenceHook`` (a NaN or infinite loss: stop there, exit 3), in MMEngine's ``HOOKS``;
- :mod:`.scheduler_hook`: ``BudgetParamSchedulerHook``, MMEngine's ``ParamSchedulerHook`` that
  binds each budget scheduler to the runner's train loop and ``budget_on_resume`` and checks it
  before training (named in a config; importing this package changes none of MMEngine's hooks);
- :mod:`.compat`: the few MMEngine internals the adapter uses (MMEngine 0.10.7);
- :mod:`.grad_norm`: ``FullGradNormHook`` (the full-gradient norm over a fixed subset of
  training batches every ``interval`` iterations, beside ``lr`` in scalars.json), in ``HOOKS``;
- :mod:`.resume`: what a run will load, checked before anything is written; :mod:`.preflight`:
  the config, data, work dir and model files, checked before anything is written;
- :mod:`.cli` (``tools/train_seg.py``, any MMEngine codebase's config), :mod:`.runs` (what a work
  dir holds), :mod:`.launch` (CPU launchers), :mod:`.dist_run` (``tools/dist_train.sh``'s
  torchrun), :mod:`.cityscapes` (label conversion);
- toy data in the real formats: :mod:`.toy` (Cityscapes), :mod:`.toy_mmdet` (COCO for MMDetection),
  :mod:`.toy_mmpretrain` (CIFAR-10 pickles, an ImageNet folder), :mod:`.toy_mmaction`
  (Kinetics-400 raw frames); :mod:`.mmaction_compat` (mmaction2 1.2.0's wheel lacks a module its
  models import).

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
from .scheduler_hook import BudgetParamSchedulerHook  # noqa: E402
from .schedulers import (  # noqa: E402
    NAMED_SCHEDULERS,
    BudgetConfigError,
    BudgetParamScheduler,
    BudgetScheduleLR,
    scheduler_types,
)
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

"""Detectron2 adapter: budget-aware LR schedulers, configs, trainer and launcher.

One-line adoption in a user's ``DefaultTrainer`` subclass (after
``budgeted.detectron2.add_budget_config(cfg)``, then ``SOLVER.LR_SCHEDULER_NAME: BudgetLinear``)::

    class Trainer(DefaultTrainer):
        build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))

Importing registers the schedulers and nothing else (:data:`LAZY` names load when first used).
See ``docs/detectron2.md``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .._require import require

require("budgeted.detectron2", "detectron2", "yaml")

TORCH_JIT_DEPRECATION = r"`torch\.jit\.script` is deprecated"
"""The FutureWarning torch >= 2.10 prints for each ``@torch.jit.script`` function Detectron2 and
fvcore define at import time (nothing a user can act on): silenced while Detectron2 is imported
here, and nowhere else."""

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=TORCH_JIT_DEPRECATION, category=FutureWarning)
    import detectron2.engine
    import detectron2.modeling  # noqa: F401

    from .checkpoint import SafeCheckpointer, use_safe_checkpointer
    from .config import add_budget_config, load_config, resolve_budget, split_overrides
    from .preemption import PreemptionHook
    from .solver import (
        BUDGET_SCHEDULERS,
        LR_SCHEDULER_REGISTRY,
        BudgetConfigError,
        BudgetLRScheduler,
        BudgetResumeError,
        budget_schedule_from_cfg,
        budget_scheduler_names,
        build_lr_scheduler,
        check_max_iter,
        register_budget_scheduler,
    )
    from .time_budget import TimeBudgetHook
    from .trainer import BudgetTrainer, check_budget, has_compiled_ops

LAZY = {
    "launch": "launcher",
    "check_datasets": "data",
    "register_toy_coco": "data",
    "FullGradNormHook": "grad_norm",
}
"""Public names whose modules load on first use (PEP 562): the launcher, the datasets (and the
toy set behind them) and the gradient-norm diagnostic are not needed to train with
:class:`BudgetTrainer` or :func:`build_lr_scheduler`."""


def __getattr__(name: str) -> Any:
    """:func:`launch` and the other :data:`LAZY` names, imported when used."""
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{LAZY[name]}")
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "BUDGET_SCHEDULERS", "LR_SCHEDULER_REGISTRY", "BudgetConfigError", "BudgetLRScheduler",
    "BudgetResumeError", "BudgetTrainer", "FullGradNormHook", "PreemptionHook", "SafeCheckpointer",
    "TimeBudgetHook", "add_budget_config", "budget_schedule_from_cfg", "budget_scheduler_names",
    "build_lr_scheduler", "check_budget", "check_datasets", "check_max_iter", "has_compiled_ops",
    "launch", "load_config", "register_budget_scheduler", "register_toy_coco", "resolve_budget",
    "split_overrides", "use_safe_checkpointer"
]  # fmt: skip

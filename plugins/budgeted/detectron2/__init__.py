"""Detectron2 adapter: budget-aware LR schedulers, configs, trainer and launcher.

One-line adoption in a user's ``DefaultTrainer`` subclass (after
``budgeted.detectron2.add_budget_config(cfg)``, then ``SOLVER.LR_SCHEDULER_NAME: BudgetLinear``)::

    class Trainer(DefaultTrainer):
        build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))

Modules: :mod:`.config` (``SOLVER.BUDGET`` keys, :func:`load_config`), :mod:`.solver` (the
scheduler registry), :mod:`.trainer` (:class:`BudgetTrainer`), :mod:`.cli` (``tools/train_net.py``),
:mod:`.lazy` / :mod:`.lazy_cli` (LazyConfig), :mod:`.runs` (run folders), :mod:`.data` /
:mod:`.toy` (datasets, the toy set), :mod:`.launch` (CPU multi-process), :mod:`.checkpoint`
(:class:`SafeCheckpointer`: untrusted files loaded safely, atomic saves), :mod:`.preemption`
(:class:`PreemptionHook`: SIGTERM / SIGUSR1 stop after the iteration, exit status 75).
Importing registers the schedulers and nothing else (no datasets: :func:`register_toy_coco` is
an explicit call).
See ``docs/detectron2.md``.
"""

from __future__ import annotations

from .._require import require

require("budgeted.detectron2", "detectron2", "yaml")

from .checkpoint import SafeCheckpointer, use_safe_checkpointer  # noqa: E402
from .config import add_budget_config, load_config, resolve_budget, split_overrides  # noqa: E402
from .data import check_datasets, register_toy_coco  # noqa: E402
from .grad_norm import FullGradNormHook  # noqa: E402
from .launch import launch  # noqa: E402
from .preemption import PreemptionHook  # noqa: E402
from .solver import (  # noqa: E402
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
from .time_budget import TimeBudgetHook  # noqa: E402
from .trainer import BudgetTrainer, check_budget, has_compiled_ops  # noqa: E402

__all__ = [
    "BUDGET_SCHEDULERS",
    "LR_SCHEDULER_REGISTRY",
    "BudgetConfigError",
    "BudgetLRScheduler",
    "BudgetResumeError",
    "BudgetTrainer",
    "FullGradNormHook",
    "PreemptionHook",
    "SafeCheckpointer",
    "TimeBudgetHook",
    "add_budget_config",
    "budget_schedule_from_cfg",
    "budget_scheduler_names",
    "build_lr_scheduler",
    "check_budget",
    "check_datasets",
    "check_max_iter",
    "has_compiled_ops",
    "launch",
    "load_config",
    "register_budget_scheduler",
    "register_toy_coco",
    "resolve_budget",
    "split_overrides",
    "use_safe_checkpointer",
]

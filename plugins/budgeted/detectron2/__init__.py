"""Detectron2 adapter: budget-aware LR schedulers, configs, trainer and launcher.

One-line adoption in a user's ``DefaultTrainer`` subclass::

    @classmethod
    def build_lr_scheduler(cls, cfg, optimizer):
        return budgeted.detectron2.build_lr_scheduler(cfg, optimizer)

(after ``budgeted.detectron2.add_budget_config(cfg)``), then ``SOLVER.LR_SCHEDULER_NAME:
BudgetLinear``. See ``docs/detectron2.md``.
"""

from __future__ import annotations

from .config import add_budget_config, load_config, resolve_budget
from .data import check_datasets, register_toy_coco
from .launch import launch
from .solver import (
    BUDGET_SCHEDULERS,
    LR_SCHEDULER_REGISTRY,
    BudgetConfigError,
    BudgetLRScheduler,
    budget_schedule_from_cfg,
    build_lr_scheduler,
    register_budget_scheduler,
)
from .trainer import BudgetTrainer, check_budget, has_compiled_ops

__all__ = [
    "BUDGET_SCHEDULERS",
    "LR_SCHEDULER_REGISTRY",
    "BudgetConfigError",
    "BudgetLRScheduler",
    "BudgetTrainer",
    "add_budget_config",
    "budget_schedule_from_cfg",
    "build_lr_scheduler",
    "check_budget",
    "check_datasets",
    "has_compiled_ops",
    "launch",
    "load_config",
    "register_budget_scheduler",
    "register_toy_coco",
    "resolve_budget",
]

"""budgeted.compat: the plain-PyTorch adapter's two uses of torch names without a public route
(written for torch 2.14). Each test fails when torch (or Detectron2) changes what it relies on."""

from __future__ import annotations

import pytest
import torch

from budgeted.compat import CheckpointedLRScheduler, set_last_lr
from budgeted.pytorch import BudgetLR


def optimizer() -> torch.optim.SGD:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)


@pytest.mark.unit
def test_the_checkpointed_base_is_a_public_lr_scheduler() -> None:
    assert issubclass(CheckpointedLRScheduler, torch.optim.lr_scheduler.LRScheduler)
    assert CheckpointedLRScheduler is not torch.optim.lr_scheduler.LRScheduler


@pytest.mark.integration
def test_detectron2_checkpoints_a_scheduler_of_that_base_and_only_of_it() -> None:
    """Detectron2 v0.6's hooks.LRScheduler saves state only for an ``_LRScheduler``: why
    BudgetLR derives from it."""
    hooks = pytest.importorskip("detectron2.engine.hooks")
    opt = optimizer()
    budget = BudgetLR(opt, "linear", 100, warmup_iters=0)
    assert hooks.LRScheduler(opt, budget).state_dict()["last_epoch"] == 0
    public = torch.optim.lr_scheduler.LRScheduler.__new__(torch.optim.lr_scheduler.LRScheduler)
    assert hooks.LRScheduler(opt, public).state_dict() == {}


@pytest.mark.unit
def test_set_last_lr_is_what_get_last_lr_reports_and_what_step_stores() -> None:
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer(), lambda step: 0.5)
    assert sched.get_last_lr() == [0.05]  # torch's step() stores it
    assert "_last_lr" in vars(sched)
    set_last_lr(sched, [0.02])
    assert sched.get_last_lr() == [0.02]

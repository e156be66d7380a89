"""budgeted.compat: the plain-PyTorch adapter's two uses of torch names without a public route
(written for torch 2.14). Each test fails when torch (or Detectron2) changes what it relies on."""

from __future__ import annotations

import pytest
import torch

from budgeted.compat import CheckpointedLRScheduler, torch_bookkeeping
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
def test_torch_bookkeeping_is_what_torchs_step_leaves_and_get_last_lr_reports() -> None:
    """A ``LambdaLR`` stepped 3 times by torch, and its twin whose bookkeeping is written: the
    same state (every key torch keeps), the same ``get_last_lr()``."""
    stepped = torch.optim.lr_scheduler.LambdaLR(optimizer(), lambda step: 0.5**step)
    for _ in range(3):
        stepped.optimizer.step()
        stepped.step()
    twin = torch.optim.lr_scheduler.LambdaLR(optimizer(), lambda step: 0.5**step)
    twin.last_epoch = 3
    torch_bookkeeping(twin, 4, [0.1 * 0.5**3])
    assert twin.get_last_lr() == stepped.get_last_lr() == [0.1 * 0.5**3]
    ours, theirs = twin.state_dict(), stepped.state_dict()
    ours.pop("lr_lambdas"), theirs.pop("lr_lambdas")
    assert ours == theirs
    assert {"_step_count", "_get_lr_called_within_step", "_last_lr"} <= set(theirs)

"""The plain-PyTorch adapter's two uses of torch names that have no public route.

Written for torch 2.14 (the same in every torch 2.x); tests/test_torch_compat.py fails when torch or
Detectron2 changes either.

- :data:`CheckpointedLRScheduler` is ``torch.optim.lr_scheduler._LRScheduler``, the base of
  :class:`~budgeted.pytorch.BudgetLR`: Detectron2 v0.6's ``hooks.LRScheduler`` saves a scheduler's
  state in its checkpoints only for an instance of that class (``isinstance(..., _LRScheduler)``),
  and torch 2.x keeps it as a subclass of the public ``LRScheduler``. A scheduler built on the
  public class alone would resume from iteration 0 in Detectron2.
- :func:`torch_bookkeeping`: ``BudgetLR.step`` is a table look-up and one write per param group
  (``param_group["lr"]`` is public), not torch's ``LRScheduler.step``; what that step leaves on a
  scheduler (its step count, the LRs ``get_last_lr()`` returns) is written here, so that a saved
  state holds exactly what torch's own schedulers save.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.optim.lr_scheduler import _LRScheduler as CheckpointedLRScheduler

__all__ = ["CheckpointedLRScheduler", "torch_bookkeeping"]


def torch_bookkeeping(scheduler: Any, step_count: int, lrs: Sequence[Any]) -> None:
    """Leave on ``scheduler`` what torch 2.x's ``LRScheduler.step()`` leaves after
    ``step_count`` steps (its construction's among them) that set the LRs ``lrs``:
    ``_step_count``, ``_get_lr_called_within_step`` (False between steps) and ``_last_lr``
    (what ``get_last_lr()`` returns).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
        >>> torch_bookkeeping(sched, 3, [0.05])
        >>> sched.get_last_lr(), sched.state_dict()["_step_count"]
        ([0.05], 3)
    """
    scheduler._step_count = step_count
    scheduler._get_lr_called_within_step = False
    scheduler._last_lr = list(lrs)

"""The plain-PyTorch adapter's two uses of torch names that have no public route.

Written for torch 2.14 (the same in every torch 2.x); tests/test_torch_compat.py fails when torch or
Detectron2 changes either.

- :data:`CheckpointedLRScheduler` is ``torch.optim.lr_scheduler._LRScheduler``, the base of
  :class:`~budgeted.pytorch.BudgetLR`: Detectron2 v0.6's ``hooks.LRScheduler`` saves a scheduler's
  state in its checkpoints only for an instance of that class (``isinstance(..., _LRScheduler)``),
  and torch 2.x keeps it as a subclass of the public ``LRScheduler``. A scheduler built on the
  public class alone would resume from iteration 0 in Detectron2.
- :func:`set_last_lr`: torch's ``get_last_lr()`` returns what ``step()`` stored last; a resumed
  re-planned budget changes the LR of the next iteration without a step, so the value
  ``get_last_lr()`` reports is set directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.optim.lr_scheduler import _LRScheduler as CheckpointedLRScheduler

__all__ = ["CheckpointedLRScheduler", "set_last_lr"]


def set_last_lr(scheduler: Any, lrs: Sequence[Any]) -> None:
    """Make ``scheduler.get_last_lr()`` return ``lrs`` (torch 2.x keeps them in ``_last_lr``).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
        >>> set_last_lr(sched, [0.05]); sched.get_last_lr()
        [0.05]
    """
    scheduler._last_lr = list(lrs)

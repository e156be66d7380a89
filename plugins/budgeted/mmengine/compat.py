"""The MMEngine adapter's uses of MMEngine names that have no public route, all in this module.

Written for MMEngine 0.10.7; each entry says what it relies on, and
tests/mmengine/test_mmengine_compat.py fails loudly when the installed MMEngine changes it. No
other module of the adapter names a private MMEngine attribute (tests/test_framework_internals.py).

- :data:`ParamScheduler`: ``_ParamScheduler``, the base of every MMEngine scheduler (no public
  alias; the runner's ``ParamSchedulerHook`` checks for it);
- :data:`GLOBAL_STEP`, :func:`global_step`, :func:`set_last_value`: a scheduler's count of every
  ``step()`` and the values ``get_last_value()`` returns;
- :func:`built_train_loop`: the runner's train loop if ``train()`` built it (the public
  ``runner.train_loop`` builds it from its config);
- :func:`end_loop_at`: make an iteration an ``IterBasedTrainLoop``'s last;
- :class:`CheckpointSaveHook`, :func:`stock_save`: every save of MMEngine's ``CheckpointHook``
  through one method;
- :func:`parse_option_value`: how ``DictAction`` (``--cfg-options``) reads a value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mmengine.config import DictAction
from mmengine.hooks import CheckpointHook
from mmengine.optim.scheduler.param_scheduler import _ParamScheduler
from mmengine.runner import BaseLoop

__all__ = [
    "GLOBAL_STEP", "CheckpointSaveHook", "ParamScheduler", "built_train_loop", "end_loop_at",
    "global_step", "parse_option_value", "set_last_value", "stock_save"
]  # fmt: skip

ParamScheduler = _ParamScheduler
"""MMEngine 0.10.7's ``mmengine.optim.scheduler.param_scheduler._ParamScheduler``: the base of
its schedulers (a subclass implements ``_get_value``, the documented extension point)."""

GLOBAL_STEP = "_global_step"
"""MMEngine 0.10.7: the key of a saved scheduler state (``state_dict()`` is its ``__dict__``)
that counts every ``step()`` since it was built, ``begin`` or not."""


def global_step(scheduler: Any) -> int:
    """MMEngine 0.10.7: the steps ``scheduler`` took since it was built (``_global_step``; the
    one at its construction makes it 0).

    Example:
        >>> import torch
        >>> from mmengine.optim.scheduler import ConstantLR
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> global_step(ConstantLR(opt, by_epoch=False))
        0
    """
    return scheduler.__dict__[GLOBAL_STEP]


def set_last_value(scheduler: Any, values: Iterable[float]) -> None:
    """MMEngine 0.10.7: make ``scheduler.get_last_value()`` return ``values`` (its
    ``_last_value``, which ``step()`` sets), after a value changed without a step."""
    scheduler._last_value = list(values)


def built_train_loop(runner: Any) -> BaseLoop | None:
    """MMEngine 0.10.7: the runner's train loop if built (``runner._train_loop``: the loop's
    config, or None, until ``train()`` builds it; ``runner.val()`` / ``test()`` never do), else
    None. The public ``runner.train_loop`` would build it.

    Example:
        >>> from types import SimpleNamespace
        >>> built_train_loop(SimpleNamespace(_train_loop=dict(type="IterBasedTrainLoop"))) is None
        True
    """
    loop = getattr(runner, "_train_loop", None)
    return loop if isinstance(loop, BaseLoop) else None


def end_loop_at(loop: Any, iterations: int) -> None:
    """MMEngine 0.10.7: make ``iterations`` the length of an ``IterBasedTrainLoop`` while it runs
    (its ``_max_iters``, which ``run()`` loops to and ``max_iters`` reports): the iteration that
    reaches it is the last, with ``CheckpointHook``'s last checkpoint and the final validation."""
    loop._max_iters = int(iterations)


class CheckpointSaveHook(CheckpointHook):
    """MMEngine 0.10.7's ``CheckpointHook`` whose every save (by interval, the last, the best)
    goes through :meth:`save_with_step`: MMEngine's own hook points call
    ``_save_checkpoint_with_step(runner, step, meta)`` for each."""

    def save_with_step(self, runner: Any, step: int, meta: dict) -> None:
        """Write the checkpoint named after ``step`` (MMEngine's way: :func:`stock_save`)."""
        stock_save(self, runner, step, meta)

    def _save_checkpoint_with_step(self, runner: Any, step: int, meta: dict) -> None:
        self.save_with_step(runner, step, meta)


def stock_save(hook: CheckpointHook, runner: Any, step: int, meta: dict) -> None:
    """MMEngine 0.10.7: ``CheckpointHook._save_checkpoint_with_step``, MMEngine's own save of the
    checkpoint named after ``step`` (a backend other than the local disk, say)."""
    CheckpointHook._save_checkpoint_with_step(hook, runner, step, meta)


def parse_option_value(text: str) -> Any:
    """MMEngine 0.10.7: what ``DictAction`` (``--cfg-options key=value``) reads ``text`` as
    (``DictAction._parse_iterable``, a static method).

    Example:
        >>> parse_option_value("[1,2]"), parse_option_value("0.5")
        ([1, 2], 0.5)
    """
    return DictAction._parse_iterable(text)

"""The optimizers of :mod:`budgeted.optimizers` built in plain PyTorch, and schedule-free's
BatchNorm recalibration.

:func:`build_optimizer` swaps the class, not the experiment: of the keyword arguments a script
states for its optimizer it keeps the ones the table names for the new class (``spec.keeps``), adds
the table's fixed ones (``spec.fixed``: AMSGrad's ``amsgrad=True``) and, for a schedule-free
optimizer, its ``warmup_steps``; the rest (SGD's ``momentum`` for AdamW) is dropped.

A schedule-free optimizer (Defazio et al., NeurIPS 2024; the ``schedulefree`` package) trains at
the point ``y`` and evaluates at the average ``x``: ``optimizer.train()`` before training steps,
``optimizer.eval()`` before every evaluation and before saving. BatchNorm's running statistics were
gathered at the ``y`` points, so the package's README recomputes them at ``x`` before an
evaluation: :func:`recalibrate_bn`.

Example:
    >>> import torch
    >>> model = torch.nn.Linear(2, 1)
    >>> opt = build_optimizer("adamw", model.parameters(), lr=0.01, momentum=0.9, weight_decay=0)
    >>> type(opt).__name__, opt.defaults["lr"], "momentum" in opt.defaults
    ('AdamW', 0.01, False)
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.optim.swa_utils import update_bn

from ._require import require
from .optimizers import OPTIMIZERS, SCHEDULE_FREE, optimizer_target

__all__ = ["RECALIBRATION_BATCHES", "build_optimizer", "optimizer_kwargs", "recalibrate_bn"]

RECALIBRATION_BATCHES = 50
"""How many training batches :func:`recalibrate_bn` forwards (the ``schedulefree`` README's 50)."""


def optimizer_kwargs(
    name: str, schedule_free: bool = False, warmup_steps: int = 0, **config_kwargs: Any
) -> dict[str, Any]:
    """The keyword arguments optimizer ``name`` (its schedule-free form with ``schedule_free``)
    is built with from a script's ``config_kwargs``:
    ``{k: config_kwargs[k] for k in spec.keeps} | spec.fixed`` (``| {"warmup_steps": W}`` when
    schedule-free). An unknown name, or one without a schedule-free form, is one ``ValueError``
    line naming the allowed ones.

    >>> optimizer_kwargs("amsgrad", lr=0.1, momentum=0.9, weight_decay=1e-4)
    {'lr': 0.1, 'weight_decay': 0.0001, 'amsgrad': True}
    >>> optimizer_kwargs("sgd", schedule_free=True, warmup_steps=5, lr=0.1, momentum=0.9)
    {'lr': 0.1, 'momentum': 0.9, 'warmup_steps': 5}
    """
    optimizer_target(name, schedule_free)  # the one-line ValueError
    spec = (SCHEDULE_FREE if schedule_free else OPTIMIZERS)[name]
    kwargs = {key: config_kwargs[key] for key in spec.keeps if key in config_kwargs}
    kwargs.update(spec.fixed)
    if schedule_free:
        kwargs["warmup_steps"] = warmup_steps
    return kwargs


def build_optimizer(
    name: str,
    params: Iterable[Any],
    schedule_free: bool = False,
    warmup_steps: int = 0,
    **config_kwargs: Any,
) -> torch.optim.Optimizer:
    """Optimizer ``name`` of :data:`budgeted.optimizers.OPTIMIZERS` (``schedule_free``: of
    :data:`~budgeted.optimizers.SCHEDULE_FREE`, with ``warmup_steps``) over ``params``, with the
    keyword arguments of :func:`optimizer_kwargs`. A schedule-free optimizer is returned in train
    mode. Without the ``schedulefree`` package: one
    :class:`~budgeted._require.MissingFrameworkError` line naming the extra to install.

    >>> import torch
    >>> p = [torch.nn.Parameter(torch.zeros(1))]
    >>> opt = build_optimizer("sgd", p, schedule_free=True, lr=0.5, momentum=0.9, nesterov=True)
    >>> type(opt).__name__, opt.param_groups[0]["train_mode"], opt.defaults["momentum"]
    ('SGDScheduleFree', True, 0.9)
    """
    kwargs = optimizer_kwargs(name, schedule_free, warmup_steps, **config_kwargs)
    module, _, cls = optimizer_target(name, schedule_free).rpartition(".")
    require(f"optimizer {name!r}" + (" (schedule-free)" if schedule_free else ""), module)
    optimizer = getattr(importlib.import_module(module), cls)(params, **kwargs)
    if schedule_free:
        optimizer.train()
    return optimizer


def recalibrate_bn(
    model: nn.Module, batches: Iterable[Any], count: int = RECALIBRATION_BATCHES
) -> int:
    """Recompute every BatchNorm layer's running statistics from the first ``count`` of
    ``batches`` (inputs, or tuples whose first item is the input), forwarded in train mode without
    gradients: the exact average over them, ``running_mean = (1/n) sum_b mean(batch_b)`` (and
    likewise the variance), as ``torch.optim.swa_utils.update_bn`` computes it. Call it after a
    schedule-free ``optimizer.eval()``, so the statistics are those of the evaluated weights. The
    model keeps its train/eval mode and its layers' momentum. Returns the number of batches
    forwarded: 0, and nothing done or drawn from ``batches``, when the model has no BatchNorm
    or ``count`` is 0.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    >>> torch.manual_seed(0) is not None
    True
    >>> recalibrate_bn(model, [torch.randn(8, 2) for _ in range(3)])
    3
    >>> recalibrate_bn(torch.nn.Linear(2, 2), iter(()))
    0
    """
    forwarded = 0
    if count < 1:  # update_bn would reset the statistics and average over nothing
        return forwarded

    def counted() -> Iterator[Any]:  # update_bn draws nothing when the model has no BatchNorm
        nonlocal forwarded
        for batch in itertools.islice(batches, count):
            forwarded += 1
            yield batch

    update_bn(counted(), model)
    return forwarded

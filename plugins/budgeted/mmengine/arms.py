"""A sweep's arms in ``budgeted-train-seg``: ``--optimizer NAME``, ``--schedule-free``,
``--subset FRACTION`` and ``--validate-every K`` (docs/mmpretrain.md, "Optimizers, schedule-free
and subsets"). Each edit works on the config in place; a bad value or combination is one line
(a ``ValueError``).

The names and kept keys are :mod:`budgeted.optimizers`' (one table for every adapter):
``--optimizer adamw`` turns ``dict(type="SGD", lr=0.1, momentum=0.9, weight_decay=1e-4)`` into
``dict(type="AdamW", lr=0.1, weight_decay=1e-4)``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import torch
from mmengine.config import Config
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin

from ..optimizers import OPTIMIZERS, SCHEDULE_FREE, OptimizerSpec, optimizer_target
from .config_edits import iteration_based, scheduler_groups, scope_registry
from .own_schedule import epoch_based, full_schedule_iters, lr_warmup, make_iteration_based
from .schedule_free import ScheduleFreeHook
from .subset import subset_indices

__all__ = [
    "add_arm_options", "apply_optimizer", "apply_schedule_free", "apply_subset",
    "apply_validate_every", "swap_optimizer"
]  # fmt: skip


def _share(text: str) -> float:
    try:
        value = float(text)
        subset_indices(1, value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is invalid; allowed: a fraction in (0, 1] of the training set"
        ) from None
    return value


def _optimizer(text: str) -> str:
    try:
        optimizer_target(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _every(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; allowed: a whole number >= 1")
    return int(text)


def add_arm_options(parser: argparse.ArgumentParser) -> None:
    """``--optimizer``, ``--schedule-free``, ``--subset``, ``--validate-every``."""
    parser.add_argument(
        "--optimizer",
        type=_optimizer,
        metavar="NAME",
        help=f"train with this optimizer ({', '.join(OPTIMIZERS)}), keeping the config's lr, "
        "weight_decay, ... (budgeted.optimizers)",
    )
    parser.add_argument(
        "--schedule-free",
        action="store_true",
        help="the schedule-free form of --optimizer (else of the config's SGD or AdamW): no LR "
        "scheduler, warmup_steps the budget scheduler's warmup, ScheduleFreeHook added; the "
        "budget (max_iters) is kept",
    )
    parser.add_argument(
        "--subset",
        type=_share,
        metavar="FRACTION",
        help="train on a random subset of max(1, round(FRACTION x N)) training samples, drawn "
        "with randomness.seed (else 0)",
    )
    parser.add_argument(
        "--validate-every",
        type=_every,
        metavar="K",
        help="validate every K iterations (train_cfg.val_interval; iteration-based loops)",
    )


def _short(kind: Any) -> str:
    return str(getattr(kind, "__name__", kind)).rsplit(".", 1)[-1]


def swap_optimizer(old: Mapping, spec: OptimizerSpec, **extra: Any) -> dict:
    """``spec``'s optimizer config: its type, the keys it keeps from ``old``, its fixed ones.

    Example:
        >>> swap_optimizer(dict(type="SGD", lr=0.1, momentum=0.9, weight_decay=1e-4),
        ...                OPTIMIZERS["amsgrad"])
        {'type': 'Adam', 'lr': 0.1, 'weight_decay': 0.0001, 'amsgrad': True}
    """
    kept = {key: old[key] for key in spec.keeps if key in old}
    return {"type": spec.type, **kept, **spec.fixed, **extra}


def _optimizer_config(cfg: Config, flag: str) -> Mapping:
    wrapper = cfg.get("optim_wrapper") or {}
    optimizer = wrapper.get("optimizer") if isinstance(wrapper, Mapping) else None
    if not isinstance(optimizer, Mapping) or "type" not in optimizer:
        raise ValueError(
            f"{flag}: the config has no optim_wrapper.optimizer with a type (several optimizers "
            "or a custom constructor); allowed: a config with one optim_wrapper.optimizer"
        )
    return optimizer


def _check_builds(cfg: Config, optimizer: dict, flag: str) -> None:
    """Build ``optimizer`` over a stand-in parameter: a bad argument is one line now."""
    parameter = torch.nn.Parameter(torch.zeros(1))
    try:
        scope_registry(cfg, "OPTIMIZERS").build(dict(optimizer, params=[parameter]))
    except Exception as err:
        text = " ".join(str(err).split())
        raise ValueError(f"{flag}: optimizer {optimizer} cannot be built: {text}") from None


def _without_lr_schedulers(cfg: Config) -> None:
    """``param_scheduler`` less every LR scheduler (budget or stock)."""
    registry = scope_registry(cfg)

    def lr(entry: Mapping) -> bool:
        cls = registry.get(entry.get("type"))
        return isinstance(cls, type) and issubclass(cls, LRSchedulerMixin)

    cfg.param_scheduler = [e for _, group in scheduler_groups(cfg) for e in group if not lr(e)]


def apply_optimizer(cfg: Config, name: str | None) -> None:
    """``--optimizer NAME``: :data:`budgeted.optimizers.OPTIMIZERS`'s ``NAME`` with the keys it
    keeps from the config's optimizer.

    Raises:
        ValueError: one line: no single optimizer, or one that cannot be built with them.

    Example:
        >>> cfg = Config(dict(optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1,
        ...                   momentum=0.9, weight_decay=1e-4))))
        >>> apply_optimizer(cfg, "adamw")
        >>> cfg.optim_wrapper.optimizer
        {'type': 'AdamW', 'lr': 0.1, 'weight_decay': 0.0001}
    """
    if name is None:
        return
    flag = f"--optimizer {name}"
    cfg.optim_wrapper.optimizer = swap_optimizer(_optimizer_config(cfg, flag), OPTIMIZERS[name])
    _check_builds(cfg, cfg.optim_wrapper.optimizer, flag)


def _schedule_free_name(old: Mapping, name: str | None) -> str:
    """The :data:`~budgeted.optimizers.SCHEDULE_FREE` key of ``--optimizer`` or the config's."""
    if name is None:
        name = {spec.type: key for key, spec in OPTIMIZERS.items()}.get(_short(old["type"]))
        if name not in SCHEDULE_FREE:
            raise ValueError(
                f"--schedule-free: the config's optimizer {_short(old['type'])} has no "
                f"schedule-free form; allowed: --optimizer {' or '.join(SCHEDULE_FREE)}, or a "
                "config with SGD or AdamW"
            )
    elif name not in SCHEDULE_FREE:
        raise ValueError(
            f"--schedule-free: optimizer {name!r} has no schedule-free form; allowed: "
            f"--optimizer {' or '.join(SCHEDULE_FREE)}"
        )
    return name


def apply_schedule_free(cfg: Config, name: str | None) -> int:
    """``--schedule-free`` (before the budget edits, in place of ``--schedule``): the warmup.

    :data:`budgeted.optimizers.SCHEDULE_FREE` of ``name`` (else of the config's ``SGD`` or
    ``AdamW``) with ``warmup_steps`` the config's LR warmup
    (:func:`~budgeted.mmengine.own_schedule.lr_warmup`), every LR scheduler removed, a
    :class:`~budgeted.mmengine.schedule_free.ScheduleFreeHook` added, and an epoch-based loop
    made iteration-based over the full schedule (as ``--schedule`` does).

    Raises:
        ValueError: one line: no single optimizer, no schedule-free form, an optimizer that
            cannot be built with the kept arguments, a dict of optimizers' schedulers.

    Example:
        >>> cfg = Config(dict(optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1,
        ...                   momentum=0.9)), param_scheduler=[]))
        >>> apply_schedule_free(cfg, "adamw")
        0
        >>> cfg.optim_wrapper.optimizer, [h["type"] for h in cfg.custom_hooks]
        ({'type': 'AdamWScheduleFree', 'lr': 0.1, 'warmup_steps': 0}, ['ScheduleFreeHook'])
    """
    old = _optimizer_config(cfg, "--schedule-free")
    name = _schedule_free_name(old, name)
    try:
        warmup = lr_warmup(cfg)[0]
    except ValueError as err:
        raise ValueError(str(err).replace("--schedule:", "--schedule-free:", 1)) from None
    cfg.optim_wrapper.optimizer = swap_optimizer(old, SCHEDULE_FREE[name], warmup_steps=warmup)
    _check_builds(cfg, cfg.optim_wrapper.optimizer, "--schedule-free")
    if epoch_based(cfg):
        make_iteration_based(cfg, full_schedule_iters(cfg))
    _without_lr_schedulers(cfg)
    hooks = list(cfg.get("custom_hooks") or [])
    if not any(isinstance(h, Mapping) and h.get("type") == "ScheduleFreeHook" for h in hooks):
        hooks.append(dict(type=ScheduleFreeHook.__name__))
    cfg.custom_hooks = hooks
    return warmup


def apply_validate_every(cfg: Config, every: int | None) -> None:
    """``--validate-every K``: ``train_cfg.val_interval = K`` (after the budget edits, which set
    it to ``max_iters``); MMEngine also validates at the last iteration.

    Raises:
        ValueError: one line for an epoch-based train loop.

    Example:
        >>> cfg = Config(dict(train_cfg=dict(type="IterBasedTrainLoop", max_iters=86)))
        >>> apply_validate_every(cfg, 43)
        >>> cfg.train_cfg.val_interval
        43
    """
    if every is None:
        return
    if not iteration_based(cfg):
        kind = _short((cfg.get("train_cfg") or {}).get("type"))
        raise ValueError(
            f"--validate-every {every} needs an iteration-based train loop; train_cfg.type is "
            f"{kind}; allowed: IterBasedTrainLoop or TimeBudgetTrainLoop (--schedule makes an "
            "epoch-based config iteration-based)"
        )
    cfg.train_cfg.val_interval = every


def apply_subset(cfg: Config, fraction: float | None) -> None:
    """``--subset FRACTION``: the train set wrapped in
    :class:`~budgeted.mmengine.subset.RandomSubsetDataset` seeded by ``randomness.seed`` (else 0).

    Example:
        >>> cfg = Config(dict(train_dataloader=dict(dataset=dict(type="CustomDataset"))))
        >>> apply_subset(cfg, 0.1)
        >>> cfg.train_dataloader.dataset.type, cfg.train_dataloader.dataset.seed
        ('RandomSubsetDataset', 0)
    """
    if fraction is None:
        return
    loader = cfg.get("train_dataloader") or {}
    if not isinstance(loader.get("dataset"), Mapping):
        raise ValueError(
            f"--subset {fraction}: the config has no train_dataloader.dataset; allowed: a config "
            "with a training set"
        )
    seed = (cfg.get("randomness") or {}).get("seed")
    loader.dataset = dict(
        type="RandomSubsetDataset",
        dataset=loader.dataset,
        fraction=fraction,
        seed=0 if seed is None else seed,
    )

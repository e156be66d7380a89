"""Checks of a config's budget schedulers and this package's hooks, before MMEngine's runner
exists: each entry is built on the config's optimizer over one stand-in parameter (so bad
arguments, an ``end`` other than the loop's and a checkpoint with another budget are one line
before anything is written), each hook and a ``TimeBudgetTrainLoop`` with their own arguments.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping

import torch
from mmengine.config import Config
from mmengine.registry import PARAM_SCHEDULERS, Registry

from ..schedules import BudgetMismatchError, check_on_resume
from .base_lrs import check_resume_base_lrs
from .config_edits import is_budget_entry, scheduler_entries, scheduler_groups
from .grad_norm import FullGradNormHook
from .hooks import CheckpointAtHook, DivergenceHook, PreemptionHook
from .resume import check_time_budget_resume
from .schedulers import BudgetParamScheduler, check_loop_end, resume_step, scheduler_types
from .time_budget import TimeBudgetTrainLoop

__all__ = [
    "RENAMED",
    "build_budget_schedulers",
    "check_budget_hooks",
    "check_budget_schedulers",
    "check_resume_budget",
    "check_scheduler_types",
    "scope_registry",
]

RENAMED = {"BudgetLR": "BudgetScheduleLR"}
"""Former scheduler type names -> today's."""


def scope_registry(cfg: Config, name: str = "PARAM_SCHEDULERS") -> Registry:
    """Registry ``name`` of the config's default scope (``mmseg.registry``'s for MMSeg)."""
    scope = cfg.get("default_scope") or "mmengine"
    try:
        module = importlib.import_module(f"{scope}.registry")
        return getattr(module, name)
    except (ImportError, AttributeError):
        return getattr(importlib.import_module("mmengine.registry"), name)


def _stand_in_optimizer(cfg: Config, group: str | None) -> torch.optim.Optimizer | None:
    """The config's optimizer (of the optimizer wrapper ``group``, None: the only one) over one
    stand-in parameter, so that a scheduler's ``param_name`` is checked against its real
    param-group keys; None where it cannot be built without the model (the runner checks it)."""
    wrapper = cfg.get("optim_wrapper") or {}
    if group is not None:
        wrapper = wrapper.get(group) or {}
    spec = wrapper.get("optimizer") if isinstance(wrapper, Mapping) else None
    if not isinstance(spec, Mapping) or "type" not in spec:
        return None
    parameter = torch.nn.Parameter(torch.zeros(1))
    try:
        return scope_registry(cfg, "OPTIMIZERS").build(dict(spec, params=[parameter]))
    except Exception:  # the runner builds it again and reports its own error
        return None


def check_scheduler_types(cfg: Config) -> None:
    """Every ``param_scheduler`` type must be registered; name ours and the closest match if not.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the unknown type, the closest registered one and ours.

    Example:
        >>> check_scheduler_types(Config(dict(param_scheduler=[dict(type="BudgetLinearLR")])))
    """
    registry = scope_registry(cfg)
    for entry in scheduler_entries(cfg):
        kind = entry.get("type")
        if not isinstance(kind, str) or registry.get(kind) is not None:
            continue
        known = set(registry.module_dict) | set(PARAM_SCHEDULERS.module_dict)
        close = difflib.get_close_matches(kind, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        if kind in RENAMED:
            hint = f"did you mean {RENAMED[kind]!r} (its new name)? "
        raise ValueError(
            f"unknown param_scheduler type {kind!r}; {hint}budget-aware types: "
            f"{', '.join(scheduler_types())} (with custom_imports=dict(imports="
            "['budgeted.mmengine'])); MMEngine's own: LinearLR, PolyLR, ..."
        )


def build_budget_schedulers(
    cfg: Config,
) -> list[tuple[str | None, int, BudgetParamScheduler]]:
    """Build each iteration-based budget entry on the config's optimizer over a stand-in
    parameter: bad arguments fail now, before anything is written.

    ``end`` defaults to ``train_cfg.max_iters`` as in the runner, and an ``end`` that differs
    from it is refused (:func:`~budgeted.mmengine.schedulers.check_loop_end`). Epoch-based entries
    are checked by the scheduler when the runner builds it (their length needs the dataloader).

    Args:
        cfg (Config): the training config.

    Returns:
        list: ``(optimizer name or None, position in its list, scheduler)`` per built entry.

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.
    """
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    policy = cfg.get("budget_on_resume")
    if policy is not None:
        check_on_resume(policy, "budget_on_resume")
    registry = scope_registry(cfg)
    built = []
    for group, entries in scheduler_groups(cfg):
        for index, entry in enumerate(entries):
            by_epoch = entry.get("by_epoch", True)
            if not is_budget_entry(entry) or (by_epoch and entry.get("convert_to_iter_based")):
                continue  # an epoch-based entry: its length needs the dataloader
            args = dict(entry)
            if max_iters is not None and not by_epoch:
                args.setdefault("end", max_iters)
            if policy is not None:  # what the runner's build reads from the config
                args.setdefault("on_resume", policy)
            optimizer = _stand_in_optimizer(cfg, group)
            if optimizer is None:  # the config's optimizer needs the model: lr is checked here
                if args.get("param_name", "lr") != "lr":
                    continue
                optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
            scheduler = registry.build(args, default_args=dict(optimizer=optimizer))
            if isinstance(args.get("end"), int):
                check_loop_end(str(entry["type"]), args["end"], max_iters)
            built.append((group, index, scheduler))
    return built


def check_budget_schedulers(cfg: Config) -> None:
    """:func:`build_budget_schedulers`, for its checks only.

    Args:
        cfg (Config): the training config.

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.

    Example:
        >>> check_budget_schedulers(Config(dict(
        ...     train_cfg=dict(max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR", warmup_iters=5, by_epoch=False)],
        ... )))
    """
    build_budget_schedulers(cfg)


def check_resume_budget(cfg: Config, checkpoint: Mapping, path: str) -> None:
    """Refuse to resume ``checkpoint`` when its budget is not the config's (before the runner).

    Each iteration-based budget scheduler of the config is built (:func:`build_budget_schedulers`)
    and compares the ``budget`` saved in the checkpoint's state at its position
    (:meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.check_resume`): the same one-line
    :class:`~budgeted.schedules.BudgetMismatchError` the runner would raise, but before
    anything is written. A budget scheduler in the checkpoint where the config has a stock one is
    refused too.

    Args:
        cfg (Config): the training config.
        checkpoint (Mapping): the checkpoint, loaded safely.
        path (str): its file, for messages.

    Raises:
        BudgetMismatchError: one line saying what differs and what to do; also for a checkpoint
            whose base LRs are not the ones the config gives each param group
            (:func:`~budgeted.mmengine.base_lrs.check_resume_base_lrs`).
    """
    saved_all = checkpoint.get("param_schedulers")
    built = {(group, index): sched for group, index, sched in build_budget_schedulers(cfg)}
    for group, entries in scheduler_groups(cfg):
        if group is None:
            saved_group = saved_all
        else:
            saved_group = saved_all.get(group) if isinstance(saved_all, Mapping) else None
        if not isinstance(saved_group, list):
            saved_group = []
        for index, entry in enumerate(entries):
            saved = saved_group[index] if index < len(saved_group) else None
            saved = saved if isinstance(saved, Mapping) else None
            scheduler = built.get((group, index))
            if scheduler is not None:
                scheduler.check_resume(
                    saved.get("budget") if saved is not None else None,
                    at=resume_step(saved) if saved is not None else None,
                )
                check_time_budget_resume(cfg, scheduler, saved, path)
            elif saved is not None and "budget" in saved and not is_budget_entry(entry):
                where = f"param_scheduler[{group!r}][{index}]" if group else f"[{index}]"
                raise BudgetMismatchError(
                    f"cannot resume from {path}: its scheduler {where} is budget-aware, the "
                    f"config's is {entry.get('type')}; to resume, keep the checkpoint's "
                    "schedulers; to train another schedule, start a new run from its weights with "
                    f"load_from={path} and resume=False"
                )
    check_resume_base_lrs(cfg, checkpoint, path)


def check_budget_hooks(cfg: Config) -> None:
    """Build each of this package's hooks in ``custom_hooks`` (their arguments are checked when
    built, with no runner) and check a ``TimeBudgetTrainLoop``'s own arguments: a bad value is
    one line now, not after the runner has written into the work dir.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the hook or loop, the value and what is allowed.

    Example:
        >>> check_budget_hooks(Config(dict(custom_hooks=[dict(type="CheckpointAtHook",
        ...                                                  iterations=[40, 80])])))
    """
    ours = {
        cls.__name__: cls
        for cls in (FullGradNormHook, CheckpointAtHook, PreemptionHook, DivergenceHook)
    }
    for entry in cfg.get("custom_hooks") or []:
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if isinstance(kind, str) and kind in ours:
            ours[kind](**{k: v for k, v in entry.items() if k not in ("type", "priority")})
    loop = cfg.get("train_cfg") or {}
    if loop.get("type") in ("TimeBudgetTrainLoop", TimeBudgetTrainLoop):
        TimeBudgetTrainLoop.check_arguments(loop.get("seconds"), loop.get("clock_sync_period", 1))

"""What ``tools/train_seg.py`` changes in a config before MMEngine's runner builds it: the budget
(``--budget FRACTION``, ``--budget-time``), ``--amp``, budget schedulers' ``by_epoch`` from the
loop, and the reliability hooks (atomic checkpoints, preemption, divergence, ``checkpoint_at``).

Each edit works on the config in place and refuses what it cannot apply in one line (a
``ValueError``); nothing here reads a file or writes one.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import math

from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import PARAM_SCHEDULERS, Registry

from ..control.plan import planned_iters
from ..safety import checkpoint_iterations
from ..schedules import parse_duration
from .input_checks import check_time_budget_pair
from .schedulers import scheduler_types

__all__ = [
    "PROG", "RENAMED", "add_checkpoint_at", "add_reliability_hooks", "apply_amp",
    "apply_budget_fraction", "apply_budgets", "apply_time_budget", "check_scheduler_types",
    "fill_budget_scheduler_defaults", "is_budget_entry", "iteration_based", "scheduler_entries",
    "scheduler_groups", "scope_registry"
]  # fmt: skip

PROG = "train_seg"
"""The tool's name, the start of its one-line messages."""


def scheduler_groups(cfg: Config) -> list[tuple[str | None, list[dict]]]:
    """``param_scheduler`` as (optimizer name or None, its entries), as the runner builds it."""
    entries = cfg.get("param_scheduler") or []
    if isinstance(entries, dict):
        if "type" in entries:
            return [(None, [entries])]
        return [
            (name, list(group) if isinstance(group, list) else [group])
            for name, group in entries.items()
        ]
    return [(None, list(entries))]


def scheduler_entries(cfg: Config) -> list[dict]:
    return [entry for _, group in scheduler_groups(cfg) for entry in group]


def is_budget_entry(entry: dict) -> bool:
    return str(entry.get("type", "")) in scheduler_types()


def fill_budget_scheduler_defaults(cfg: Config) -> None:
    """Complete budget entries that leave ``by_epoch`` unset, from the train loop.

    Iteration-based loop: ``by_epoch=False``; epoch-based: ``by_epoch=True`` and
    ``convert_to_iter_based=True``. (A bare MMEngine runner reads a missing ``by_epoch`` as True.)

    Example:
        >>> cfg = Config(dict(
        ...     train_cfg=dict(type="IterBasedTrainLoop", max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR")],
        ... ))
        >>> fill_budget_scheduler_defaults(cfg)
        >>> cfg.param_scheduler[0].by_epoch
        False
    """
    loop = (cfg.get("train_cfg") or {}).get("type", "")
    by_epoch = "max_epochs" in (cfg.get("train_cfg") or {}) or loop == "EpochBasedTrainLoop"
    for entry in scheduler_entries(cfg):
        if is_budget_entry(entry) and "by_epoch" not in entry:
            entry["by_epoch"] = by_epoch
            if by_epoch:
                entry.setdefault("convert_to_iter_based", True)


def apply_budget_fraction(cfg: Config, fraction: float) -> int:
    """Train ``fraction`` of the full schedule; return the iterations.

    The full schedule is ``cfg.full_schedule_iters`` (our configs) or ``train_cfg.max_iters``.
    ``max_iters`` and ``val_interval`` become the budget; schedulers without ``end`` follow it.

    Raises:
        ValueError: one line for a fraction outside (0, 1], an epoch-based config, or a
            scheduler whose fixed ``end`` would not follow the budget.

    Example:
        >>> cfg = Config(dict(full_schedule_iters=80000, train_cfg=dict(max_iters=80000)))
        >>> apply_budget_fraction(cfg, 0.1), cfg.train_cfg.val_interval
        (8000, 8000)
    """
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    if not (ok and math.isfinite(fraction) and 0 < fraction <= 1):
        raise ValueError(
            f"budget fraction={fraction!r} is invalid; allowed: a number in (0, 1], the share of "
            "the full schedule to train (1 trains all of it)"
        )
    train_cfg = cfg.get("train_cfg") or {}
    full = cfg.get("full_schedule_iters", train_cfg.get("max_iters"))
    if full is None:
        raise ValueError("--budget needs train_cfg.max_iters (an iteration-based config)")
    iters = int(planned_iters(fraction, full))
    cfg.train_cfg.max_iters = iters
    cfg.train_cfg.val_interval = iters
    cfg.budget_fraction = fraction
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if checkpoint and checkpoint.get("interval", 0) > iters:
        checkpoint["interval"] = iters
    for entry in scheduler_entries(cfg):
        end = entry.get("end")
        if end is not None and (is_budget_entry(entry) or end > iters):
            raise ValueError(
                f"--budget {fraction}: the {entry.get('type')} scheduler sets end={end} but the "
                f"budget is {iters} iterations; remove its end so that it follows "
                "train_cfg.max_iters"
            )
    return iters


def apply_time_budget(cfg: Config, duration: str | float) -> float:
    """Train for ``duration`` of training time (:class:`~budgeted.mmengine.TimeBudgetTrainLoop`);
    return the seconds.

    The iterations are capped at the full schedule (``cfg.full_schedule_iters``, else
    ``train_cfg.max_iters``).

    Raises:
        ValueError: one line for a bad duration, a loop that is not iteration-based, or a
            fraction config (:func:`~budgeted.mmengine.preflight.check_time_budget_pair`).

    Example:
        >>> cfg = Config(dict(full_schedule_iters=800, train_cfg=dict(max_iters=80)))
        >>> apply_time_budget(cfg, "90m"), cfg.train_cfg.type, cfg.train_cfg.max_iters
        (5400.0, 'TimeBudgetTrainLoop', 800)
    """
    seconds = parse_duration(duration)
    check_time_budget_pair(cfg, duration)
    loop = cfg.get("train_cfg") or {}
    if loop.get("type", "IterBasedTrainLoop") not in ("IterBasedTrainLoop", "TimeBudgetTrainLoop"):
        raise ValueError(
            f"--budget-time needs an iteration-based train loop; train_cfg.type is "
            f"{loop.get('type')!r}"
        )
    apply_budget_fraction(cfg, 1.0)
    cfg.train_cfg.type = "TimeBudgetTrainLoop"
    cfg.train_cfg.seconds = seconds
    return seconds


def apply_budgets(cfg: Config, fraction: float | None, duration: str | None) -> None:
    """``--budget`` or ``--budget-time`` (one of them; a time budget on the full schedule)."""
    if fraction is not None and duration is not None:
        raise ValueError(
            f"--budget {fraction} and --budget-time {duration} are two budgets; "
            "allowed: one of them"
        )
    if fraction is not None:
        apply_budget_fraction(cfg, fraction)
    if duration is not None:
        apply_time_budget(cfg, duration)


def apply_amp(cfg: Config) -> None:
    """``--amp``: MMEngine's ``AmpOptimWrapper`` with a dynamic loss scale."""
    optim_wrapper = cfg.optim_wrapper.type
    if optim_wrapper == "AmpOptimWrapper":
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
    elif optim_wrapper != "OptimWrapper":
        raise ValueError(f"--amp needs optim_wrapper.type OptimWrapper, got {optim_wrapper!r}")
    else:
        cfg.optim_wrapper.type = "AmpOptimWrapper"
        cfg.optim_wrapper.loss_scale = "dynamic"


def iteration_based(cfg: Config) -> bool:
    train_cfg = cfg.get("train_cfg") or {}
    kind = train_cfg.get("type")
    iteration_loops = (
        "IterBasedTrainLoop",
        "TimeBudgetTrainLoop",
    )  # a time budget counts iterations too
    return kind in iteration_loops or (kind is None and train_cfg.get("by_epoch") is False)


def add_checkpoint_at(cfg: Config) -> None:
    """The top-level ``checkpoint_at=[N, ...]`` as a :class:`~budgeted.mmengine.hooks.
    CheckpointAtHook`: extra checkpoints after those iteration counts (``budgeted-branch``).

    Raises:
        ValueError: one line for anything but a list of positive iteration counts.

    Example:
        >>> cfg = Config(dict(checkpoint_at=[152, 304]))
        >>> add_checkpoint_at(cfg)
        >>> cfg.custom_hooks
        [{'type': 'CheckpointAtHook', 'iterations': [152, 304]}]
    """
    at = cfg.get("checkpoint_at")
    if at is None:
        return
    values = checkpoint_iterations(
        "checkpoint_at", at if isinstance(at, (list, tuple)) else [at], allow_empty=False
    )
    hooks = list(cfg.get("custom_hooks") or [])
    hooks.append(dict(type="CheckpointAtHook", iterations=values))
    cfg.custom_hooks = hooks


def add_reliability_hooks(cfg: Config, prog: str = PROG) -> None:
    """Atomic checkpoints, preemption-safe training and a stop at a non-finite loss, in the config
    the runner builds.

    ``CheckpointHook`` becomes :class:`~budgeted.mmengine.hooks.AtomicCheckpointHook`,
    ``ParamSchedulerHook`` :class:`~budgeted.mmengine.scheduler_hook.BudgetParamSchedulerHook`;
    ``DivergenceHook`` and (iteration-based) ``PreemptionHook`` are added unless present, and
    ``custom_imports`` gets ``budgeted.mmengine`` (the dumped config builds with the codebase's
    own tools too).

    Example:
        >>> cfg = Config(dict(train_cfg=dict(type="IterBasedTrainLoop", max_iters=8),
        ...                   default_hooks=dict(checkpoint=dict(type="CheckpointHook"))))
        >>> add_reliability_hooks(cfg)
        >>> cfg.default_hooks.checkpoint.type, cfg.default_hooks.param_scheduler.type
        ('AtomicCheckpointHook', 'BudgetParamSchedulerHook')
        >>> [h.type for h in cfg.custom_hooks]
        ['DivergenceHook', 'PreemptionHook']
    """
    hooks = cfg.get("default_hooks") or {}
    hooks.setdefault("param_scheduler", dict(type="ParamSchedulerHook"))  # MMEngine's default
    for key, ours in (("checkpoint", "AtomicCheckpointHook"),
                      ("param_scheduler", "BudgetParamSchedulerHook")):  # fmt: skip
        hook, stock = hooks.get(key), ours.removeprefix("Atomic").removeprefix("Budget")
        if isinstance(hook, dict) and hook.get("type") in (stock, f"mmengine.{stock}"):
            hooks[key] = {**hook, "type": ours}
    cfg.default_hooks = hooks
    custom = list(cfg.get("custom_hooks") or [])
    have = {h.get("type") for h in custom if isinstance(h, dict)}
    if "DivergenceHook" not in have:
        custom.append(dict(type="DivergenceHook", prog=prog))
    if iteration_based(cfg) and "PreemptionHook" not in have:
        custom.append(dict(type="PreemptionHook", prog=prog))
    cfg.custom_hooks = custom
    loop = cfg.get("train_cfg") or {}
    if loop.get("type") == "TimeBudgetTrainLoop":
        loop.setdefault("prog", prog)
    imports = dict(cfg.get("custom_imports") or {})
    names = list(imports.get("imports") or [])
    if isinstance(names, str):
        names = [names]
    if "budgeted.mmengine" not in names:
        imports["imports"] = [*names, "budgeted.mmengine"]
        imports.setdefault("allow_failed_imports", False)
        cfg.custom_imports = imports


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


def check_scheduler_types(cfg: Config) -> None:
    """Every ``param_scheduler`` type must be registered; name ours and the closest match if not.

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

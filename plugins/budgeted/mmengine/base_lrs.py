"""A resumed checkpoint's base LRs against the config's, before MMEngine's runner exists
(:func:`check_resume_base_lrs`: the model and its optimizer wrapper built without weights,
``paramwise_cfg`` and ``auto_scale_lr`` applied as the runner does; the core's rule,
:func:`~budgeted.schedules.base_lrs.check_base_lrs`). A budget scheduler checks its own
``base_values`` again when any runner loads it (the engine's
:func:`~budgeted.control.engine.check_loaded`, in
:meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.resume_words`).
"""

from __future__ import annotations

import copy
import importlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from mmengine.config import Config

from ..runs.mmengine import saved_schedulers, scheduler_place
from ..schedules.base_lrs import ConfiguredLRs, build_without_weights, check_base_lrs
from .resume import state_place

__all__ = ["LR_KEY", "PlannedLRs", "check_resume_base_lrs", "configured_base_lrs"]

LR_KEY = "optim_wrapper.optimizer.lr"
"""The config key of the LR of the only optimizer wrapper."""


def _lr_key(group: str | None) -> str:
    return LR_KEY if group is None else f"optim_wrapper.{group}.optimizer.lr"


def _scale(cfg: Config) -> float:
    """The factor MMEngine's ``Runner.scale_lr`` applies to the optimizers' param groups (1.0 unless
    ``auto_scale_lr.enable``): the real batch (world size x ``train_dataloader.batch_size``)
    over ``auto_scale_lr.base_batch_size``."""
    auto = cfg.get("auto_scale_lr") or {}
    if not auto.get("enable", False) or not auto.get("base_batch_size"):
        return 1.0
    batch = (cfg.get("train_dataloader") or {}).get("batch_size", 1)
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return float(world * batch) / float(auto["base_batch_size"])


class PlannedLRs(NamedTuple):
    """What a config gives one optimizer wrapper: ``schedulers``, the LR of each param group a
    scheduler of it sees (``OptimWrapper.param_groups``: with ``paramwise_cfg`` one more, the
    base settings it logs), and ``optimizer``, of each of the optimizer's own groups (what its
    state holds)."""

    schedulers: ConfiguredLRs
    optimizer: ConfiguredLRs


def configured_base_lrs(cfg: Config) -> dict[str | None, PlannedLRs] | None:
    """The LR ``cfg`` gives each param group of each optimizer wrapper (``None``: the only one;
    else the ``OptimWrapperDict``'s names), as the runner builds them: the model and
    ``optim_wrapper`` built without weights
    (:func:`~budgeted.schedules.base_lrs.build_without_weights`; its log lines held back),
    ``auto_scale_lr`` applied; None where they cannot be built here (the runner says why).
    """
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope

    if cfg.get("model") is None or cfg.get("optim_wrapper") is None:
        return None
    scope = cfg.get("default_scope") or "mmengine"
    try:  # the scope's registry (``mmseg.registry``), imported: its models registered
        models = importlib.import_module(f"{scope}.registry").MODELS
    except (ImportError, AttributeError):
        from mmengine.registry import MODELS as models

    def build() -> Any:
        spec = copy.deepcopy(cfg.model)
        if cfg.get("data_preprocessor") is not None:  # as Runner.__init__ fills it in
            spec.setdefault("data_preprocessor", copy.deepcopy(cfg.data_preprocessor))
        logging.disable(logging.INFO)  # paramwise_cfg logs a line per parameter
        try:
            with DefaultScope.overwrite_default_scope(scope):
                return build_optim_wrapper(models.build(spec), copy.deepcopy(cfg.optim_wrapper))
        finally:
            logging.disable(logging.NOTSET)

    built = build_without_weights(build)
    if built is None:
        return None
    named = getattr(built, "optim_wrappers", None) or {None: built}
    factor = _scale(cfg)
    found = {}
    for name, wrapper in named.items():
        spec = cfg.optim_wrapper if name is None else cfg.optim_wrapper.get(name, {})
        value = (spec.get("optimizer") or {}).get("lr")
        value = float(value) if isinstance(value, (int, float)) else None

        for group in wrapper.optimizer.param_groups:  # as Runner.scale_lr scales them
            group["lr"] = group["lr"] * factor

        found[name] = PlannedLRs(
            ConfiguredLRs([float(g["lr"]) for g in wrapper.param_groups], _lr_key(name), value),
            ConfiguredLRs(
                [float(g["lr"]) for g in wrapper.optimizer.param_groups], _lr_key(name), value
            ),
        )
    return found


def _saved_optimizers(saved: Any) -> Iterator[tuple[str | None, Mapping]]:
    """``(name, optimizer state)`` of a checkpoint's ``optimizer`` (one state, or a dict of
    them per ``OptimWrapperDict`` name)."""
    if not isinstance(saved, Mapping):
        return
    if "param_groups" in saved:
        yield None, saved
        return
    for name, state in saved.items():
        if isinstance(state, Mapping) and "param_groups" in state:
            yield str(name), state


def _saved_lr_schedulers(checkpoint: Any) -> Iterator[tuple[str | None, str, Mapping]]:
    """``(optimizer name, where, state)`` of each LR scheduler state (``param_name`` "lr")
    holding ``base_values`` in a checkpoint (:func:`budgeted.runs.mmengine.saved_schedulers`)."""
    for key, state in saved_schedulers(checkpoint).items():
        if state.get("param_name", "lr") == "lr" and "base_values" in state:
            group, index = scheduler_place(key)
            yield group, state_place(group, index), state


def check_resume_base_lrs(cfg: Config, checkpoint: Mapping, path: str) -> None:
    """Refuse to resume ``checkpoint`` when its base LRs (each LR scheduler's ``base_values``,
    the optimizer's ``initial_lr`` per param group) are not what the config gives each group.

    Raises:
        BudgetMismatchError: one line naming the file, the group, both base LRs and what to do.
    """
    configured = configured_base_lrs(cfg)
    if configured is None:
        return
    fix = f"start a new run from its weights with --cfg-options load_from={path} (without --resume)"

    def check(name: str | None, of: str, subject: str, where: str, saved: Any) -> None:
        planned = configured.get(name)
        if planned is None:
            return  # another optimizer than the config's: the runner refuses it
        lrs = planned.schedulers if of == "schedulers" else planned.optimizer
        check_base_lrs(saved, lrs.lrs, subject=subject, saved_key=where, config_key=lrs.key,
                       config_value=lrs.value, fix=fix)  # fmt: skip

    for name, where, state in _saved_lr_schedulers(checkpoint):
        subject = f"cannot resume from {path}: its param_scheduler{where}"
        check(name, "schedulers", subject, "base_values", state["base_values"])
    for name, state in _saved_optimizers(checkpoint.get("optimizer")):
        groups = state["param_groups"]
        if not isinstance(groups, list) or not all(isinstance(g, Mapping) for g in groups):
            continue
        key = "initial_lr" if all("initial_lr" in g for g in groups) else "lr"
        if key == "lr" and checkpoint.get("param_schedulers"):
            continue  # a scheduler moved the LR: its base_values are the base
        label = "optimizer" if name is None else f"optimizer[{name!r}]"
        check(name, "optimizer", f"cannot resume from {path}: its {label}",
              f"param groups' {key}", [g[key] for g in groups])  # fmt: skip

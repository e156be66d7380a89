"""An LR-scheduler registry for Detectron2, with the budget-aware schedules registered in it.

Detectron2 v0.6 has no scheduler registry (``detectron2.solver.build_lr_scheduler`` dispatches
with if/elif). :data:`LR_SCHEDULER_REGISTRY` maps a ``SOLVER.LR_SCHEDULER_NAME`` to a builder
``fn(cfg, optimizer) -> scheduler``; :func:`build_lr_scheduler` looks the name up there and hands
every other name to Detectron2's own builder unchanged. A user's trainer adopts it in one line::

    class Trainer(DefaultTrainer):
        @classmethod
        def build_lr_scheduler(cls, cfg, optimizer):
            return budgeted.detectron2.build_lr_scheduler(cfg, optimizer)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from detectron2.config import CfgNode
from detectron2.solver import build_lr_scheduler as d2_build_lr_scheduler
from detectron2.utils.registry import Registry

from ..core import BudgetSchedule
from ..pytorch import BudgetLR, _budget_state

__all__ = [
    "BUDGET_SCHEDULERS",
    "LR_SCHEDULER_REGISTRY",
    "STOCK_SCHEDULERS",
    "BudgetConfigError",
    "BudgetLRScheduler",
    "budget_schedule_from_cfg",
    "build_lr_scheduler",
    "register_budget_scheduler",
]

LR_SCHEDULER_REGISTRY = Registry("LR_SCHEDULER")
LR_SCHEDULER_REGISTRY.__doc__ = """
Registry for LR schedulers: ``fn(cfg, optimizer) -> torch.optim.lr_scheduler._LRScheduler``
(a subclass of ``_LRScheduler`` is what Detectron2's ``hooks.LRScheduler`` checkpoints).
Register with ``@LR_SCHEDULER_REGISTRY.register()``; the function's name is the config name.
"""

STOCK_SCHEDULERS = ("WarmupMultiStepLR", "WarmupCosineLR")
"""The names Detectron2 v0.6's own builder knows (newer versions may know more)."""

# Detectron2 scheduler name -> (core schedule, cfg -> schedule parameters)
_CORE_SCHEDULES: dict[str, tuple[str, Callable[[CfgNode], dict[str, Any]]]] = {}


class BudgetConfigError(ValueError):
    """A budget that cannot be trained as configured (one line: what is wrong, what to do)."""


def _params(cfg: CfgNode, name: str) -> dict[str, Any]:
    return _CORE_SCHEDULES[name][1](cfg)


def budget_schedule_from_cfg(cfg: CfgNode, name: str | None = None) -> BudgetSchedule:
    """The core :class:`BudgetSchedule` that config ``cfg`` states (``name`` defaults to
    ``SOLVER.LR_SCHEDULER_NAME``); bad values raise :class:`BudgetConfigError` naming the keys."""
    name = name or cfg.SOLVER.LR_SCHEDULER_NAME
    if name not in _CORE_SCHEDULES:
        raise BudgetConfigError(
            f"{name!r} is not a budget scheduler; budget schedulers: {', '.join(_CORE_SCHEDULES)}"
        )
    s = cfg.SOLVER
    if s.WARMUP_ITERS >= s.MAX_ITER:
        rws = s.get("REFERENCE_WORLD_SIZE", 0)
        scaled = f" (after REFERENCE_WORLD_SIZE scaling to {rws} workers)" if rws else ""
        raise BudgetConfigError(
            f"SOLVER.WARMUP_ITERS={s.WARMUP_ITERS} is not shorter than the budget "
            f"SOLVER.MAX_ITER={s.MAX_ITER}{scaled}: the decay would be empty; allowed: "
            "WARMUP_ITERS < MAX_ITER (shorten the warmup or raise the budget)"
        )
    try:
        return BudgetSchedule(
            _CORE_SCHEDULES[name][0],
            s.MAX_ITER,
            s.WARMUP_ITERS,
            s.WARMUP_FACTOR,
            s.WARMUP_METHOD,
            _params(cfg, name),
        )
    except ValueError as err:
        raise BudgetConfigError(f"SOLVER.LR_SCHEDULER_NAME={name}: {err}") from None


class BudgetLRScheduler(BudgetLR):
    """:class:`budgeted.BudgetLR` whose resume check names Detectron2's config keys.

    Resuming with a different budget (MAX_ITER, warmup, schedule or its parameters) is refused
    with a :class:`BudgetConfigError`, before training starts.
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("budget")
        mine = _budget_state(self.budget)
        if saved != mine:
            if saved is None:
                old = "a scheduler without a budget (a stock Detectron2 scheduler)"
            else:
                diff = [k for k in mine if saved.get(k) != mine[k]]
                old = ", ".join(f"{k}={saved.get(k)!r}" for k in diff)
                mine = {k: mine[k] for k in diff}
            new = ", ".join(f"{k}={v!r}" for k, v in mine.items())
            raise BudgetConfigError(
                f"cannot resume: the checkpoint was trained with {old}, the config asks for {new} "
                "(total = SOLVER.MAX_ITER, warmup = SOLVER.WARMUP_ITERS); keep the checkpoint's "
                "budget (e.g. the old SOLVER.MAX_ITER) to resume, or start a new run from its "
                "weights with MODEL.WEIGHTS <checkpoint> and no --resume"
            )
        super().load_state_dict(state_dict)
        # the LR of the next iteration, now: a resumed run's first iteration trains at the LR an
        # uninterrupted run would use (Detectron2 v0.6 checkpoints no optimizer LR to restore)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


def register_budget_scheduler(
    name: str, schedule: str, params: Callable[[CfgNode], dict[str, Any]] = lambda cfg: {}
) -> None:
    """Register Detectron2 scheduler ``name`` as core schedule ``schedule`` with parameters
    ``params(cfg)`` (e.g. a schedule added with :func:`budgeted.register_schedule`)."""
    _CORE_SCHEDULES[name] = (schedule, params)

    def build(cfg: CfgNode, optimizer: torch.optim.Optimizer) -> BudgetLRScheduler:
        return BudgetLRScheduler.from_schedule(optimizer, budget_schedule_from_cfg(cfg, name))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"``{name}``: the core's {schedule!r} budget schedule over SOLVER.MAX_ITER."
    LR_SCHEDULER_REGISTRY.register(build)


def _b(cfg: CfgNode) -> CfgNode:
    return cfg.SOLVER.BUDGET


register_budget_scheduler("BudgetLinear", "linear")
register_budget_scheduler("BudgetCosine", "cosine", lambda c: {"eta": _b(c).COSINE_ETA})
register_budget_scheduler("BudgetPoly", "poly", lambda c: {"power": _b(c).POLY_POWER})
register_budget_scheduler(
    "BudgetHTD",
    "htd",
    lambda c: {"lower": _b(c).HTD_LOWER, "upper": _b(c).HTD_UPPER, "eta": _b(c).HTD_ETA},
)
register_budget_scheduler(
    "BudgetStep",
    "step",
    lambda c: {"milestones": list(_b(c).STEP_MILESTONES), "gamma": c.SOLVER.GAMMA},
)
register_budget_scheduler("BudgetExp", "exp", lambda c: {"end_factor": _b(c).EXP_END_FACTOR})
register_budget_scheduler("BudgetConstant", "constant")

BUDGET_SCHEDULERS: tuple[str, ...] = tuple(_CORE_SCHEDULES)
"""The built-in budget scheduler names."""


def valid_names() -> list[str]:
    """Every name :func:`build_lr_scheduler` accepts (registry first, then Detectron2's)."""
    names = [name for name, _ in LR_SCHEDULER_REGISTRY]
    return names + [n for n in STOCK_SCHEDULERS if n not in names]


def build_lr_scheduler(
    cfg: CfgNode, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler._LRScheduler:
    """Build ``cfg.SOLVER.LR_SCHEDULER_NAME``: from :data:`LR_SCHEDULER_REGISTRY` if registered,
    otherwise with Detectron2's own ``build_lr_scheduler`` (unchanged behaviour)."""
    name = cfg.SOLVER.LR_SCHEDULER_NAME
    if name in LR_SCHEDULER_REGISTRY:
        return LR_SCHEDULER_REGISTRY.get(name)(cfg, optimizer)
    try:
        return d2_build_lr_scheduler(cfg, optimizer)
    except ValueError as err:
        if "Unknown LR scheduler" not in str(err):
            raise
        raise BudgetConfigError(
            f"unknown SOLVER.LR_SCHEDULER_NAME {name!r}; valid names: {', '.join(valid_names())}"
        ) from None

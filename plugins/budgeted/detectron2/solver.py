"""An LR-scheduler registry for Detectron2, with every core budget schedule registered in it.

Detectron2 v0.6 has no scheduler registry (``detectron2.solver.build_lr_scheduler`` dispatches
with if/elif). :data:`LR_SCHEDULER_REGISTRY` maps a ``SOLVER.LR_SCHEDULER_NAME`` to a builder
``fn(cfg, optimizer) -> scheduler``; :func:`build_lr_scheduler` looks the name up there and hands
every other name to Detectron2's own builder unchanged. A user's trainer adopts it in one line::

    class Trainer(DefaultTrainer):
        build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))

Every schedule registered in :mod:`budgeted.schedules` (the built-ins and any registered later
with ``budgeted.register_schedule``) becomes ``Budget<Label>`` here, its parameters read from
``SOLVER.BUDGET.<NAME>_<PARAM>`` (:func:`~budgeted.detectron2.config.param_key`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import torch
from detectron2.config import CfgNode
from detectron2.engine import DefaultTrainer
from detectron2.solver import build_lr_scheduler as d2_build_lr_scheduler
from detectron2.utils import comm
from detectron2.utils.registry import Registry

from ..control.plan import adapter_names, built_in_names, length_agrees
from ..errors import BudgetConfigError, BudgetResumeError
from ..pytorch import BudgetLR, BudgetTimeLR
from ..schedules import BudgetSchedule, schedule_info
from ..schedules.contract import BudgetFieldError
from .config import KEYS as BUDGET_DEFAULTS
from .config import (
    budget_max_iter,
    cfg_value,
    check_budget_keys,
    lookup,
    on_resume,
    param_key,
)
from .time_budget import time_budget_from_cfg, time_budget_seconds

logger = logging.getLogger(__name__)

__all__ = [
    "BUDGET_SCHEDULERS", "BUDGET_TRAINER_KEYS", "LR_SCHEDULER_REGISTRY", "STOCK_SCHEDULERS",
    "BudgetConfigError", "BudgetLRScheduler", "BudgetResumeError", "acting_on_trainer_keys",
    "budget_schedule_from_cfg", "budget_scheduler_names", "build_lr_scheduler", "check_budget",
    "check_max_iter", "check_trainer_keys", "on_resume", "register_budget_scheduler"
]  # fmt: skip

LR_SCHEDULER_REGISTRY = Registry("LR_SCHEDULER")
LR_SCHEDULER_REGISTRY.__doc__ = """
Registry for LR schedulers: ``fn(cfg, optimizer) -> torch.optim.lr_scheduler.LRScheduler``
(a subclass of ``_LRScheduler`` is what Detectron2's ``hooks.LRScheduler`` checkpoints).
Register with ``@LR_SCHEDULER_REGISTRY.register()``; the function's name is the config name.
"""

STOCK_SCHEDULERS = ("WarmupMultiStepLR", "WarmupCosineLR")
"""The names Detectron2 v0.6's own builder knows (newer versions may know more)."""

ParamReader = Callable[[CfgNode], dict[str, Any]]
# Detectron2 scheduler name -> (core schedule, cfg -> its parameters, or None: the derived keys)
_SCHEDULERS: dict[str, tuple[str, ParamReader | None]] = {}


def budget_scheduler_names() -> tuple[str, ...]:
    """Every budget scheduler name registered now (``BudgetLinear``, ..., later schedules too).

    Example:
        >>> "BudgetLinear" in budget_scheduler_names()
        True
    """
    return tuple(_SCHEDULERS)


def schedule_params_from_cfg(cfg: CfgNode, schedule: str, name: str | None = None) -> dict:
    """The parameters of core schedule ``schedule`` as ``cfg`` states them (a key it lacks: the
    core's default); a bad value raises :class:`BudgetConfigError` naming the key.

    Example:
        >>> from detectron2.config import get_cfg
        >>> from budgeted.detectron2 import add_budget_config
        >>> schedule_params_from_cfg(add_budget_config(get_cfg()), "poly")
        {'power': 0.9}
    """
    info = schedule_info(schedule)
    params = {}
    for param, default in info.defaults.items():
        key = param_key(schedule, param)
        found, value = lookup(cfg, key)
        value = value if found else default
        test, what = info.rules[param]
        try:
            ok = bool(test(value))
        except Exception:
            ok = False
        if not ok:
            raise BudgetConfigError(
                f"{key}={value!r} is invalid for {name or schedule}; allowed: {what}"
            )
        params[param] = value
    return params


def check_max_iter(cfg: CfgNode) -> None:
    """Refuse (one line, :class:`BudgetConfigError`) a bad ``SOLVER.BUDGET`` key
    (:func:`~budgeted.detectron2.config.check_budget_keys`) and a ``SOLVER.MAX_ITER`` of ``cfg``
    (after any auto-scaling) other than the budget ``SOLVER.BUDGET`` states
    (:func:`~budgeted.detectron2.config.budget_max_iter`; none stated: no check).

    Example:
        >>> from detectron2.config import get_cfg
        >>> from budgeted.detectron2 import add_budget_config
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.FRACTION = 400, 0.1
        >>> cfg.SOLVER.MAX_ITER = 40
        >>> check_max_iter(cfg)  # agrees: nothing happens
    """
    try:
        check_budget_keys(cfg)
    except ValueError as err:
        raise BudgetConfigError(str(err)) from None
    try:
        stated = budget_max_iter(cfg)
    except ValueError as err:
        raise BudgetConfigError(f"SOLVER.BUDGET: {err}") from None
    s = cfg.SOLVER
    if length_agrees(s.MAX_ITER, stated):
        return
    b = s.BUDGET
    iters = round(b.FRACTION * b.FULL_ITERS)
    batch = b.get("IMS_PER_BATCH", 0)
    what = f"SOLVER.BUDGET.FRACTION={b.FRACTION} x FULL_ITERS={b.FULL_ITERS} = {iters} iterations"
    if batch and batch != s.IMS_PER_BATCH:
        what += (
            f" at SOLVER.BUDGET.IMS_PER_BATCH={batch} images, i.e. {round(stated)} at "
            f"SOLVER.IMS_PER_BATCH={s.IMS_PER_BATCH}"
        )
    hint = (
        "; with REFERENCE_WORLD_SIZE auto-scaling also set SOLVER.BUDGET.IMS_PER_BATCH (the "
        "batch FULL_ITERS is counted at)"
        if not batch and s.get("REFERENCE_WORLD_SIZE", 0)
        else ""
    )
    raise BudgetConfigError(
        f"SOLVER.MAX_ITER={s.MAX_ITER} is not the budget the config states ({what}); set "
        f"SOLVER.MAX_ITER {round(stated)} (budgeted.detectron2.load_config does), or "
        f"SOLVER.BUDGET.FULL_ITERS 0 to train SOLVER.MAX_ITER as it is{hint}"
    )


def budget_schedule_from_cfg(cfg: CfgNode, name: str | None = None) -> BudgetSchedule:
    """The core :class:`~budgeted.schedules.BudgetSchedule` that config ``cfg`` states for budget
    scheduler ``name`` (default ``SOLVER.LR_SCHEDULER_NAME``); a bad key: one line
    (:class:`BudgetConfigError`).

    Example:
        >>> from detectron2.config import get_cfg
        >>> from budgeted.detectron2 import add_budget_config
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.MAX_ITER, cfg.SOLVER.WARMUP_ITERS = 900, 50
        >>> budget_schedule_from_cfg(cfg, "BudgetCosine").params
        {'eta': 0.0}
    """
    name = name or cfg.SOLVER.LR_SCHEDULER_NAME
    if name not in _SCHEDULERS:
        raise BudgetConfigError(
            f"{name!r} is not a budget scheduler; budget schedulers: {', '.join(_SCHEDULERS)}"
        )
    s = cfg.SOLVER
    schedule, reader = _SCHEDULERS[name]
    params = reader(cfg) if reader is not None else schedule_params_from_cfg(cfg, schedule, name)
    try:
        return BudgetSchedule(
            schedule, s.MAX_ITER, s.WARMUP_ITERS, s.WARMUP_FACTOR, s.WARMUP_METHOD, params
        )
    except BudgetFieldError as err:
        rws = s.get("REFERENCE_WORLD_SIZE", 0) if err.field == "warmup" else 0
        scaled = f" (after REFERENCE_WORLD_SIZE scaling to {rws} workers)" if rws else ""
        message = err.render(BudgetLRScheduler.RESUME_NAMES) + scaled
        raise BudgetConfigError(f"SOLVER.LR_SCHEDULER_NAME={name}: {message}") from None
    except ValueError as err:
        raise BudgetConfigError(f"SOLVER.LR_SCHEDULER_NAME={name}: {err}") from None


class BudgetLRScheduler(BudgetLR):
    """:class:`budgeted.BudgetLR` whose resume check names Detectron2's config keys: a resume
    with another budget or other base LRs is one line (:class:`BudgetResumeError`, from
    ``load_state_dict``), or with ``SOLVER.BUDGET.ON_RESUME replan`` re-planned
    (docs/detectron2.md, "Resume policy"). A load sets the next iteration's LR at once: a
    resumed run's first iteration trains at the LR an uninterrupted run would use (Detectron2
    v0.6 checkpoints no optimizer LR to restore).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> sched = BudgetLRScheduler(opt, "linear", 900, warmup_iters=50)
        >>> sched.state_dict()["budget"]["total"]
        900
    """

    LOGGER: ClassVar[str] = "detectron2.budgeted"  # a child of Detectron2's: in its log.txt
    RESUME_NAMES: ClassVar[dict[str, str]] = {
        "total": "SOLVER.MAX_ITER",
        "warmup": "SOLVER.WARMUP_ITERS",
        "warmup_factor": "SOLVER.WARMUP_FACTOR",
        "warmup_method": "SOLVER.WARMUP_METHOD",
    }
    RESUME_FIX: ClassVar[str] = (
        "resume with the checkpoint's budget (its SOLVER.MAX_ITER, warmup, schedule and GPU "
        "count), or start a new run from its weights: MODEL.WEIGHTS <checkpoint>, no --resume, "
        "another OUTPUT_DIR"
    )
    BASE_LR_KEY: ClassVar[str | None] = "SOLVER.BASE_LR"
    RESUME_ERROR = BudgetResumeError
    APPLY_ON_LOAD = True


def register_budget_scheduler(name: str, schedule: str, params: ParamReader | None = None) -> None:
    """Register Detectron2 scheduler ``name`` as core schedule ``schedule``, its parameters
    ``params(cfg)`` (default: the schedule's ``SOLVER.BUDGET.<SCHEDULE>_<PARAM>`` keys). An
    unknown schedule or a name already registered: one-line ``ValueError``.

    Example:
        >>> register_budget_scheduler("BudgetGentlePoly", "poly", lambda cfg: {"power": 0.5})
        >>> "BudgetGentlePoly" in LR_SCHEDULER_REGISTRY
        True
    """
    schedule_info(schedule)  # a one-line ValueError for an unknown schedule
    if name in LR_SCHEDULER_REGISTRY or name in STOCK_SCHEDULERS:
        raise ValueError(f"LR scheduler {name!r} is already registered; allowed: a new name")
    _SCHEDULERS[name] = (schedule, params)

    def build(cfg: CfgNode, optimizer: torch.optim.Optimizer) -> BudgetLR | BudgetTimeLR:
        budget = budget_schedule_from_cfg(cfg, name)
        if time_budget_seconds(cfg) > 0:
            return time_budget_from_cfg(cfg, optimizer, budget.schedule, budget.params)
        return BudgetLRScheduler.from_schedule(optimizer, budget, on_resume=on_resume(cfg))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"``{name}``: the core's {schedule!r} budget schedule over SOLVER.MAX_ITER."
    LR_SCHEDULER_REGISTRY.register(build)


adapter_names(
    "",
    lambda info, name: name in _SCHEDULERS or register_budget_scheduler(name, info.name),
    lambda info, err: logger.warning("core schedule %r has no Detectron2 name: %s", info.name, err),
)
BUDGET_SCHEDULERS: tuple[str, ...] = built_in_names()
"""The built-in budget scheduler names (:func:`budget_scheduler_names`: all of them now)."""


def valid_names() -> list[str]:
    """Every name :func:`build_lr_scheduler` accepts (registry first, then Detectron2's)."""
    names = [name for name, _ in LR_SCHEDULER_REGISTRY]
    return names + [n for n in STOCK_SCHEDULERS if n not in names]


BUDGET_TRAINER_KEYS: dict[str, tuple[Any, str, str]] = {
    "WRITER_PERIOD": (
        BUDGET_DEFAULTS["WRITER_PERIOD"],
        "it writes metrics.json every {value} iterations; DefaultTrainer's writer keeps its "
        "period of 20",
        "give the PeriodicWriter of your build_hooks that period",
    ),
    "GRAD_NORM_PERIOD": (
        BUDGET_DEFAULTS["GRAD_NORM_PERIOD"],
        "it registers the FullGradNormHook",
        "insert bd2.FullGradNormHook(period={value}) in your build_hooks",
    ),
    "SAVE_AT": (
        BUDGET_DEFAULTS["SAVE_AT"],
        "it registers the CheckpointAtHook",
        "register budgeted.detectron2.checkpoint.CheckpointAtHook({value})",
    ),
}
"""The ``SOLVER.BUDGET`` keys only :class:`BudgetTrainer` acts on (its ``build_hooks``): key ->
(the value that asks nothing of a trainer, what ``BudgetTrainer`` does with another, how a
trainer of one's own does it).

Example:
    >>> sorted(BUDGET_TRAINER_KEYS)
    ['GRAD_NORM_PERIOD', 'SAVE_AT', 'WRITER_PERIOD']
"""


def check_trainer_keys(cfg: CfgNode) -> None:
    """Refuse, in one line, a :data:`BUDGET_TRAINER_KEYS` key that asks for something, for a
    trainer that is not a :class:`BudgetTrainer`, where it would do nothing, silently.

    Raises:
        BudgetConfigError: naming the key, its value, what is allowed and the ways to have it.

    Example:
        >>> from detectron2.config import get_cfg
        >>> from budgeted.detectron2 import add_budget_config
        >>> cfg = add_budget_config(get_cfg())
        >>> check_trainer_keys(cfg)  # the defaults ask nothing of a trainer
        >>> cfg.SOLVER.BUDGET.WRITER_PERIOD = 5
        >>> check_trainer_keys(cfg)
        Traceback (most recent call last):
        budgeted.errors.BudgetConfigError: SOLVER.BUDGET.WRITER_PERIOD=5 does nothing in this \
trainer: ...
    """
    b = cfg.SOLVER.get("BUDGET", CfgNode())
    for key, (default, what, fix) in BUDGET_TRAINER_KEYS.items():
        value = cfg_value(b.get(key, default))
        if value == default:
            continue
        raise BudgetConfigError(
            f"SOLVER.BUDGET.{key}={value!r} does nothing in this trainer: only bd2.BudgetTrainer "
            f"acts on it ({what.format(value=value)}); allowed here: {default!r}, or train with "
            f"bd2.BudgetTrainer, or {fix.format(value=repr(value))}"
        )


_ACTING_ON_TRAINER_KEYS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "budgeted_detectron2_acting_on_trainer_keys", default=False
)


@contextlib.contextmanager
def acting_on_trainer_keys() -> Iterator[None]:
    """While it is open, :func:`build_lr_scheduler` builds for a trainer that acts on
    :data:`BUDGET_TRAINER_KEYS` (``BudgetTrainer``, our tools' budget checks); elsewhere those
    keys are refused when they ask for anything.

    Example:
        >>> with acting_on_trainer_keys():
        ...     pass
    """
    token = _ACTING_ON_TRAINER_KEYS.set(True)
    try:
        yield
    finally:
        _ACTING_ON_TRAINER_KEYS.reset(token)


def build_lr_scheduler(
    cfg: CfgNode, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LRScheduler:
    """Build ``cfg.SOLVER.LR_SCHEDULER_NAME`` for ``optimizer``: from
    :data:`LR_SCHEDULER_REGISTRY` if registered, else with Detectron2's own builder; first
    :func:`check_max_iter` and (outside :func:`acting_on_trainer_keys`)
    :func:`check_trainer_keys`. An unknown name or a bad budget is one line
    (:class:`BudgetConfigError`).

    Example:
        >>> import torch
        >>> from detectron2.config import get_cfg
        >>> from budgeted.detectron2 import add_budget_config
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.LR_SCHEDULER_NAME, cfg.SOLVER.MAX_ITER = "BudgetLinear", 9000
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.02)
        >>> type(build_lr_scheduler(cfg, opt)).__name__
        'BudgetLRScheduler'
    """
    check_max_iter(cfg)
    if not _ACTING_ON_TRAINER_KEYS.get():
        check_trainer_keys(cfg)
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


def check_budget(cfg: CfgNode, world_size: int | None = None) -> CfgNode:
    """Validate the LR schedule of ``cfg`` (as loaded) as it will be trained on ``world_size``
    workers (default: the current count): a copy scaled by ``REFERENCE_WORLD_SIZE``, its scheduler
    built on a stand-in optimizer. Returns the scaled copy; a bad key is one line
    (:class:`BudgetConfigError`).

    Example:
        >>> from budgeted.detectron2 import load_config
        >>> cfg = load_config("mask_rcnn_budget10.yaml", ["SOLVER.REFERENCE_WORLD_SIZE", "8"])
        >>> check_budget(cfg, world_size=16).SOLVER.MAX_ITER
        4500
    """
    world_size = comm.get_world_size() if world_size is None else world_size
    rws = cfg.SOLVER.REFERENCE_WORLD_SIZE
    if rws and world_size != rws and (cfg.SOLVER.IMS_PER_BATCH % rws) != 0:
        raise BudgetConfigError(
            f"SOLVER.IMS_PER_BATCH={cfg.SOLVER.IMS_PER_BATCH} is not divisible by "
            f"SOLVER.REFERENCE_WORLD_SIZE={rws}; allowed: a multiple of it"
        )
    scaled = DefaultTrainer.auto_scale_workers(cfg.clone(), world_size)
    param = torch.nn.Parameter(torch.zeros(1))
    with acting_on_trainer_keys():  # the budget only: the trainer's keys are its own check
        build_lr_scheduler(scaled, torch.optim.SGD([param], lr=scaled.SOLVER.BASE_LR))
    return scaled

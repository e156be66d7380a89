"""A user's own MMEngine config under a budget-aware schedule: ``budgeted-train-seg``'s
``--schedule NAME`` and ``--full-iters N`` (:func:`apply_own_schedule`: the LR schedule replaced
by one ``Budget<Label>LR``, the config's warmup kept, an epoch loop made iteration-based). Each
refusal is one line (a ``ValueError``); nothing here writes a file.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from mmengine.config import Config
from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.momentum_scheduler import MomentumSchedulerMixin

from ..control.plan import OwnSchedule, step_params
from ..schedules import DEFAULTS, check_params, schedule_info, whole_number
from .config_edits import (
    check_scheduler_types,
    is_budget_entry,
    scheduler_entries,
    scheduler_groups,
    scope_registry,
)
from .input_checks import check_data_roots

__all__ = [
    "LOOPS_FOR_SCHEDULE", "apply_own_schedule", "check_budget_after_warmup", "epoch_based",
    "full_schedule_iters", "iters_per_epoch", "lr_warmup", "make_iteration_based", "poly_power",
    "step_milestones"
]  # fmt: skip

LOOPS_FOR_SCHEDULE = ("EpochBasedTrainLoop", "IterBasedTrainLoop", "TimeBudgetTrainLoop")
"""The train loops ``--schedule`` can put under a budget schedule (an epoch loop becomes an
iteration loop)."""

_LINEAR_START = 1 / 3
"""MMEngine's ``LinearLR`` default ``start_factor``."""


def _short(kind: object) -> str:
    """A type's bare name: ``"mmengine.LinearLR"`` -> ``"LinearLR"``; a class -> its name."""
    return str(getattr(kind, "__name__", kind)).rsplit(".", 1)[-1]


def epoch_based(cfg: Config) -> bool:
    """An ``EpochBasedTrainLoop``, or a ``train_cfg`` with ``max_epochs``."""
    train_cfg = cfg.get("train_cfg") or {}
    return _short(train_cfg.get("type")) == "EpochBasedTrainLoop" or "max_epochs" in train_cfg


def iters_per_epoch(cfg: Config) -> int:
    """Iterations per epoch of one process: ``len(train dataloader)``, ``ceil(N / batch_size)``
    (``floor`` with ``drop_last=True``) for a train set of ``N`` samples, which is built for it
    (the config's ``custom_imports`` imported, its ``default_scope`` set).

    Raises:
        ValueError: one line: missing data, a set that cannot be built, or no whole batch.
    """
    from mmengine.registry import DATASETS, init_default_scope
    from mmengine.utils import import_modules_from_strings

    loader = cfg.get("train_dataloader") or {}
    batch = whole_number("train_dataloader.batch_size", loader.get("batch_size", 1))
    if cfg.get("custom_imports"):
        import_modules_from_strings(**cfg.custom_imports)
    check_data_roots(cfg)
    init_default_scope(cfg.get("default_scope") or "mmengine")
    try:
        size = len(DATASETS.build(copy.deepcopy(loader["dataset"])))
    except Exception as err:  # the user's dataset: any error in it is theirs
        text = " ".join(str(err).split())
        raise ValueError(
            "cannot count the iterations per epoch: train_dataloader.dataset cannot be built: "
            f"{type(err).__name__}: {text}"
        ) from None
    iters = size // batch if loader.get("drop_last") else math.ceil(size / batch)
    if iters < 1:
        raise ValueError(
            f"the train set has {size} samples, no whole batch of {batch}; allowed: a set of at "
            "least one batch"
        )
    return iters


def full_schedule_iters(cfg: Config) -> int:
    """The full schedule in iterations, of which ``--budget`` trains a fraction.

    ``cfg.full_schedule_iters``, else ``train_cfg.max_iters``, else for an epoch-based loop
    (:func:`epoch_based`) ``max_epochs x`` :func:`iters_per_epoch` (the train set is built).

    Raises:
        ValueError: one line where none of them is given, or one is not a whole number >= 1.

    Example:
        >>> full_schedule_iters(Config(dict(train_cfg=dict(type="IterBasedTrainLoop",
        ...                                                max_iters=80000))))
        80000
    """
    if cfg.get("full_schedule_iters") is not None:
        return whole_number("full_schedule_iters", cfg.full_schedule_iters)
    train_cfg = cfg.get("train_cfg") or {}
    if train_cfg.get("max_iters") is not None:
        return whole_number("train_cfg.max_iters", train_cfg.max_iters)
    if epoch_based(cfg) and train_cfg.get("max_epochs") is not None:
        return whole_number("train_cfg.max_epochs", train_cfg.max_epochs) * iters_per_epoch(cfg)
    raise ValueError(
        "cannot tell the full schedule: the config has no full_schedule_iters, "
        "train_cfg.max_iters or train_cfg.max_epochs; allowed: --full-iters N"
    )


def _lr_entries(cfg: Config) -> list[dict]:
    """The entries of a single ``param_scheduler`` list; a non-LR entry is refused."""
    if any(group is not None for group, _ in scheduler_groups(cfg)):
        raise ValueError(
            "--schedule: param_scheduler is a dict of optimizers; allowed: one list of LR "
            "schedulers (one optimizer)"
        )
    check_scheduler_types(cfg)
    registry = scope_registry(cfg)
    entries = scheduler_entries(cfg)
    for entry in entries:
        cls = registry.get(entry.get("type"))
        lr = isinstance(cls, type) and issubclass(cls, LRSchedulerMixin)
        if not lr and not (isinstance(cls, type) and issubclass(cls, MomentumSchedulerMixin)):
            lr = entry.get("param_name") == "lr"
        if not lr:
            named = f" (param_name={entry['param_name']!r})" if "param_name" in entry else ""
            raise ValueError(
                f"--schedule: param_scheduler entry {_short(entry.get('type'))}{named} is not an "
                "LR schedule: the sweep replaces the LR schedule and cannot carry it over; "
                "allowed: LR schedulers only"
            )
    return entries


def _in_iters(entry: dict, end: float, per_epoch: list[int], cfg: Config) -> float:
    """``end`` of ``entry`` in iterations (by_epoch, MMEngine's default: x iterations per epoch,
    counted once into ``per_epoch``)."""
    if not entry.get("by_epoch", True) or math.isinf(end):
        return end
    if not per_epoch:
        per_epoch.append(iters_per_epoch(cfg))
    return end * per_epoch[0]


def lr_warmup(cfg: Config) -> tuple[int, float]:
    """The warmup of the config's LR schedule: ``(W, F)``, iterations and start factor.

    A budget entry (``Budget*LR``) first: its own ``warmup_iters``, ``warmup_factor``. A first
    ``LinearLR`` with ``begin`` 0 (or none) and an ``end`` before the end of the entries after it
    (none: the train loop's end): ``W = end`` (x iterations per epoch when ``by_epoch``, MMEngine's
    default), ``F = start_factor`` (default 1/3). Otherwise ``(0, 1.0)``: no warmup.

    Raises:
        ValueError: one line for a dict of optimizers or a scheduler that is not an LR one.

    Example:
        >>> lr_warmup(Config(dict(param_scheduler=[
        ...     dict(type="LinearLR", start_factor=0.01, by_epoch=False, begin=0, end=4),
        ...     dict(type="PolyLR", power=0.9, begin=0, end=40, by_epoch=False),
        ... ])))
        (4, 0.01)
    """
    entries = _lr_entries(cfg)
    first = entries[0] if entries else {}
    if is_budget_entry(first):  # BudgetParamScheduler's defaults
        warmup = first.get("warmup_iters", DEFAULTS["warmup"])
        return whole_number("warmup_iters", warmup, least=0), float(
            first.get("warmup_factor", DEFAULTS["warmup_factor"])
        )
    if _short(first.get("type")) != "LinearLR" or first.get("begin", 0) != 0:
        return 0, 1.0
    if len(entries) < 2 or first.get("end") is None:
        return 0, 1.0
    per_epoch: list[int] = []
    rest = max(_in_iters(e, e.get("end", math.inf), per_epoch, cfg) for e in entries[1:])
    end = _in_iters(first, first["end"], per_epoch, cfg)
    if end >= rest:
        return 0, 1.0
    return whole_number("warmup end", end, least=0), float(first.get("start_factor", _LINEAR_START))


def step_milestones(cfg: Config) -> dict[str, Any]:
    """The config's own step baseline as the budget ``step``'s parameters: a ``MultiStepLR``'s
    milestones as fractions of the config's own length (in its unit: epochs where ``by_epoch``,
    MMEngine's default, else iterations) and its ``gamma``; ``{}`` without one (the core's
    defaults then).

    Example:
        >>> step_milestones(Config(dict(
        ...     train_cfg=dict(type="EpochBasedTrainLoop", max_epochs=12),
        ...     param_scheduler=[dict(type="MultiStepLR", milestones=[8, 11], gamma=0.1)])))
        {'milestones': (0.6666666666666666, 0.9166666666666666), 'gamma': 0.1}
    """
    steps = [e for e in _lr_entries(cfg) if _short(e.get("type")) == "MultiStepLR"]
    if not steps:
        return {}
    entry, train_cfg = steps[0], cfg.get("train_cfg") or {}
    length = train_cfg.get("max_epochs" if entry.get("by_epoch", True) else "max_iters")
    if not length:
        return {}
    return step_params(entry.get("milestones"), length, float(entry.get("gamma", 0.1)))


def poly_power(cfg: Config) -> tuple[dict[str, Any], str]:
    """The config's own ``PolyLR`` (its first) as the budget ``poly``'s parameters, its ``power``
    (MMEngine's default 1.0), and what the budget ``poly`` does not keep of it, as a line: a
    nonzero ``eta_min`` (it decays to 0, as the paper's schedules do); ``({}, "")`` without one.

    Raises:
        ValueError: a ``power`` the budget ``poly`` does not take (one line).

    Example:
        >>> params, dropped = poly_power(Config(dict(param_scheduler=[
        ...     dict(type="PolyLR", power=2.0, eta_min=1e-4, by_epoch=False)])))
        >>> params, dropped[:53]
        ({'power': 2.0}, 'a poly cell keeps your PolyLR power 2 but not eta_min')
    """
    polys = [e for e in _lr_entries(cfg) if _short(e.get("type")) == "PolyLR"]
    if not polys:
        return {}, ""
    entry = polys[0]
    try:
        params = check_params("poly", {"power": entry.get("power", 1.0)})
    except ValueError as err:
        raise ValueError(f"param_scheduler PolyLR: {err}") from None
    eta_min = entry.get("eta_min", 0.0)
    if not eta_min:
        return params, ""
    return params, (
        f"a poly cell keeps your PolyLR power {params['power']:g} but not eta_min={eta_min!r}: "
        "it decays to 0, as the paper's budget schedules do"
    )


def make_iteration_based(cfg: Config, full: int) -> None:
    """An epoch loop as ``IterBasedTrainLoop`` over ``full`` iterations, its checkpoint, logger
    and log processor counting iterations."""
    cfg.train_cfg = dict(type="IterBasedTrainLoop", max_iters=full, val_interval=full)
    hooks = cfg.get("default_hooks") or {}
    if hooks.get("checkpoint"):
        hooks.checkpoint.update(by_epoch=False, interval=full)
    if hooks.get("logger"):
        hooks.logger.log_metric_by_epoch = False
    if cfg.get("log_processor") is None:
        cfg.log_processor = dict(by_epoch=False)
    else:
        cfg.log_processor.by_epoch = False


def apply_own_schedule(
    cfg: Config, schedule: str | None, full_iters: int | None = None, schedule_free: bool = False
) -> int:
    """``--schedule NAME`` and ``--full-iters N``: a user's config under a budget schedule
    (``schedule_free``: ``--schedule-free`` is its schedule, and makes the loop iteration-based).

    ``--schedule``: the LR entries become one ``Budget<Label>LR(by_epoch=False)`` with the
    config's warmup (:func:`lr_warmup`) and own step milestones (:func:`step_milestones`) or
    ``PolyLR`` power (:func:`poly_power`); an epoch-based loop becomes iteration-based. Apply
    before :func:`apply_budgets`, then :func:`check_budget_after_warmup`.

    Raises:
        ValueError: one line: an unknown schedule, a bad ``--full-iters``, a custom train loop,
            a non-LR scheduler entry, a dict of optimizers.

    Example:
        >>> cfg = Config(dict(train_cfg=dict(type="IterBasedTrainLoop", max_iters=40),
        ...                   param_scheduler=[dict(type="PolyLR", by_epoch=False)]))
        >>> apply_own_schedule(cfg, "htd", 80), cfg.full_schedule_iters
        (0, 80)
        >>> cfg.param_scheduler[0]
        {'type': 'BudgetHTDLR', 'warmup_iters': 0, 'warmup_factor': 1.0, 'by_epoch': False}
    """
    if full_iters is not None:
        cfg.full_schedule_iters = whole_number("--full-iters", full_iters)
        if schedule is None and not schedule_free and epoch_based(cfg):
            raise ValueError(
                f"--full-iters {full_iters} on an epoch-based train loop needs --schedule (which "
                "makes it iteration-based)"
            )
    if schedule is None:
        return 0
    try:
        label = schedule_info(schedule).label
    except ValueError as err:
        raise ValueError(f"--schedule: {err}") from None
    kind = (cfg.get("train_cfg") or {}).get("type")
    if kind is not None and _short(kind) not in LOOPS_FOR_SCHEDULE:
        raise ValueError(
            f"--schedule cannot put train_cfg.type {_short(kind)!r} under a budget schedule; "
            f"allowed: {', '.join(LOOPS_FOR_SCHEDULE)}"
        )
    own = {"step": lambda: step_milestones(cfg), "poly": lambda: poly_power(cfg)[0]}
    plan = OwnSchedule.of(schedule, *lr_warmup(cfg), own=own)  # its own step or poly
    if epoch_based(cfg):
        make_iteration_based(cfg, full_schedule_iters(cfg))
    cfg.param_scheduler = [
        dict(type=f"Budget{label}LR", warmup_iters=plan.warmup, warmup_factor=plan.factor,
             by_epoch=False, **plan.params)
    ]  # fmt: skip
    return plan.warmup


def check_budget_after_warmup(cfg: Config, warmup: int) -> None:
    """After :func:`apply_budgets`: the budget (``train_cfg.max_iters``) must be longer than the
    ``warmup`` kept by :func:`apply_own_schedule`.

    Raises:
        ValueError: one line naming both.

    Example:
        >>> check_budget_after_warmup(Config(dict(train_cfg=dict(max_iters=10))), 4)
    """
    iters = (cfg.get("train_cfg") or {}).get("max_iters")
    if iters is not None and iters <= warmup:
        fraction = cfg.get("budget_fraction")
        given = f"--budget {fraction}: " if fraction is not None else ""
        raise ValueError(
            f"{given}the budget of {iters} iterations is not longer than the config's warmup of "
            f"{warmup} iterations, which --schedule keeps; allowed: a budget > {warmup} "
            "iterations (a larger --budget or --full-iters, or a shorter warmup)"
        )

"""The ``SOLVER.BUDGET`` keys of Detectron2's yacs config: their defaults, the budget they
state, and their checks (:func:`~budgeted.detectron2.config.load_config` reads the yaml
files).

``SOLVER.MAX_ITER`` is the budget ``T``, ``SOLVER.WARMUP_ITERS`` the warmup ``W``;
``SOLVER.WARMUP_FACTOR``, ``SOLVER.WARMUP_METHOD``, ``SOLVER.BASE_LR`` and ``SOLVER.GAMMA`` (the
factor of ``BudgetStep``) keep their Detectron2 meaning. ``SOLVER.BUDGET`` adds the rest:

- ``FULL_ITERS``: length of the full schedule (90000 for Mask R-CNN 1x); 0 means "not stated":
  ``SOLVER.MAX_ITER`` is then trained as it is;
- ``FRACTION``: the budget as a fraction of it;
- ``IMS_PER_BATCH``: the batch size ``FULL_ITERS`` is counted at (0: ``SOLVER.IMS_PER_BATCH`` as
  it is). With ``FULL_ITERS > 0`` the config states a number of images, and
  ``MAX_ITER = round(round(FRACTION * FULL_ITERS) * BUDGET.IMS_PER_BATCH / SOLVER.IMS_PER_BATCH)``
  (what Detectron2's ``REFERENCE_WORLD_SIZE`` auto-scaling gives too);
- ``<SCHEDULE>_<PARAM>``: the parameters of every schedule registered in
 :mod:`budgeted.schedules` (``COSINE_ETA``, ``POLY_POWER``, ``HTD_LOWER``, ..., defaults from
 the core; see :func:`param_key`);
- ``WRITER_PERIOD``: how often :class:`BudgetTrainer` writes metrics (Detectron2 hard-codes 20);
- ``GRAD_NORM_PERIOD``: every how many iterations :class:`BudgetTrainer` logs the full-gradient
  norm over a fixed subset of ``GRAD_NORM_BATCHES`` training batches (0: never; see
  :mod:`budgeted.detectron2.grad_norm`).

``WRITER_PERIOD``, ``GRAD_NORM_PERIOD`` and ``SAVE_AT`` are :class:`BudgetTrainer` 's (its
``build_hooks``; :data:`BUDGET_TRAINER_KEYS`): a trainer of one's own that adopts the schedulers
in the documented line refuses them when they ask for anything (:func:`check_trainer_keys`),
where they would do nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from detectron2.config import CfgNode

from ..errors import BudgetConfigError
from ..safety import checkpoint_iterations
from ..schedules import budget_iters, check_on_resume, schedule_info, schedule_names

__all__ = [
    "BUDGET_TRAINER_KEYS",
    "NATIVE_KEYS",
    "add_budget_config",
    "budget_max_iter",
    "check_budget_keys",
    "check_grad_norm_config",
    "check_trainer_keys",
    "max_iter_agrees",
    "on_resume",
    "param_key",
    "resolve_budget",
    "stated_max_iter",
]

NATIVE_KEYS: dict[tuple[str, str], str] = {("step", "gamma"): "SOLVER.GAMMA"}
"""(core schedule, parameter) -> the Detectron2 key that already holds it."""

logger = logging.getLogger("budgeted.detectron2.config")


def param_key(schedule: str, param: str) -> str:
    """The config key of parameter ``param`` of core schedule ``schedule``.

    ``SOLVER.BUDGET.<SCHEDULE>_<PARAM>``, except for the parameters Detectron2 already has a key
    for (:data:`NATIVE_KEYS`: step's ``gamma`` is ``SOLVER.GAMMA``).

    Args:
        schedule (str): a core schedule name (``"poly"``).
        param (str): one of its parameters (``"power"``).

    Returns:
        str: the full key.

    Example:
        >>> param_key("poly", "power"), param_key("step", "gamma")
        ('SOLVER.BUDGET.POLY_POWER', 'SOLVER.GAMMA')
    """
    return NATIVE_KEYS.get((schedule, param)) or (
        f"SOLVER.BUDGET.{schedule.upper()}_{param.upper()}"
    )


def _cfg_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def add_budget_config(cfg: CfgNode) -> CfgNode:
    """Add the ``SOLVER.BUDGET`` node (Detectron2's ``add_xxx_config`` convention).

    Adds the keys of every schedule registered at this time, with the core's defaults; keys
    already there keep their values, so calling it again adds only the keys of schedules
    registered since.

    Args:
        cfg (CfgNode): a config from ``detectron2.config.get_cfg()``; changed in place.

    Returns:
        CfgNode: ``cfg``.

    Example:
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.POLY_POWER
        (0, 0.9)
    """
    if "BUDGET" not in cfg.SOLVER:
        cfg.SOLVER.BUDGET = CfgNode()
    b = cfg.SOLVER.BUDGET
    keys: dict[str, Any] = {"FULL_ITERS": 0, "FRACTION": 1.0, "IMS_PER_BATCH": 0}
    for name in schedule_names():
        for param, default in schedule_info(name).defaults.items():
            key = param_key(name, param)
            if key.startswith("SOLVER.BUDGET."):
                keys[key[len("SOLVER.BUDGET.") :]] = _cfg_value(default)
    keys["WRITER_PERIOD"] = 20
    keys["GRAD_NORM_PERIOD"] = 0
    keys["GRAD_NORM_BATCHES"] = 2
    keys["ON_RESUME"] = "refuse"  # or "replan": resume a checkpoint of another MAX_ITER
    keys["SAVE_AT"] = ()  # extra checkpoints after these iteration counts (branch points)
    keys["SECONDS"] = 0.0  # > 0: a wall-clock budget of training seconds (MAX_ITER: a cap)
    keys["CLOCK_SYNC_PERIOD"] = 1  # share rank 0's clock every N iterations
    for key, value in keys.items():
        if key not in b:
            b[key] = value
    return cfg


BUDGET_TRAINER_KEYS: dict[str, tuple[Any, str, str]] = {
    "WRITER_PERIOD": (
        20,
        "it writes metrics.json every {value} iterations; DefaultTrainer's writer keeps its "
        "period of 20",
        "give the PeriodicWriter of your build_hooks that period",
    ),
    "GRAD_NORM_PERIOD": (
        0,
        "it registers the FullGradNormHook",
        "insert bd2.FullGradNormHook(period={value}) in your build_hooks",
    ),
    "SAVE_AT": (
        (),
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
    trainer that is not a :class:`BudgetTrainer` (``DefaultTrainer`` with the documented
    ``build_lr_scheduler`` line), where it would do nothing, silently.

    Raises:
        BudgetConfigError: naming the key, its value, what is allowed and the ways to have it.

    Example:
        >>> from detectron2.config import get_cfg
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
        value = _cfg_value(b.get(key, default))
        if value == default:
            continue
        raise BudgetConfigError(
            f"SOLVER.BUDGET.{key}={value!r} does nothing in this trainer: only bd2.BudgetTrainer "
            f"acts on it ({what.format(value=value)}); allowed here: {default!r}, or train with "
            f"bd2.BudgetTrainer, or {fix.format(value=repr(value))}"
        )


def budget_max_iter(cfg: CfgNode) -> float | None:
    """The ``SOLVER.MAX_ITER`` that ``SOLVER.BUDGET`` states, unrounded; None when it states
    none (``FULL_ITERS`` 0 or no ``SOLVER.BUDGET``).

    ``round(FRACTION * FULL_ITERS)`` iterations at ``BUDGET.IMS_PER_BATCH`` images, trained at
    ``SOLVER.IMS_PER_BATCH`` images per iteration: ``FRACTION * FULL_ITERS * BUDGET.IMS_PER_BATCH
    / SOLVER.IMS_PER_BATCH`` (not rounded at the other batch, so that a ``FRACTION`` restated
    from an explicit ``SOLVER.MAX_ITER`` states that ``MAX_ITER`` again).

    Args:
        cfg (CfgNode): a config with :func:`add_budget_config`'s keys (others give None).

    Example:
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.FRACTION = 90000, 0.1
        >>> cfg.SOLVER.BUDGET.IMS_PER_BATCH, cfg.SOLVER.IMS_PER_BATCH = 16, 32
        >>> budget_max_iter(cfg)
        4500.0
    """
    b = cfg.SOLVER.get("BUDGET")
    if b is None or not b.get("FULL_ITERS", 0):
        return None
    iters = budget_iters(fraction=b.FRACTION, full_iters=b.FULL_ITERS)  # also validates them
    batch = b.get("IMS_PER_BATCH", 0) or cfg.SOLVER.IMS_PER_BATCH
    if batch == cfg.SOLVER.IMS_PER_BATCH:
        return float(iters)
    return b.FRACTION * b.FULL_ITERS * batch / cfg.SOLVER.IMS_PER_BATCH


def max_iter_agrees(max_iter: int, stated: float | None) -> bool:
    """Whether ``max_iter`` trains the budget ``stated`` (:func:`budget_max_iter`): equal to it
    rounded, or one of the two whole numbers around a fractional one (Detectron2's
    ``REFERENCE_WORLD_SIZE`` scaling rounds once more). ``stated`` None: always.

    Example:
        >>> max_iter_agrees(9000, 9000.0), max_iter_agrees(9001, 9000.0), max_iter_agrees(7, 6.5)
        (True, False, True)
    """
    return stated is None or max_iter == round(stated) or abs(max_iter - stated) < 1


def stated_max_iter(cfg: CfgNode) -> float | None:
    """:func:`budget_max_iter`, with a bad budget as a one-line ``ValueError``."""
    b = cfg.SOLVER.BUDGET
    try:
        return budget_max_iter(cfg)
    except ValueError as err:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={b.FRACTION!r} x SOLVER.BUDGET.FULL_ITERS={b.FULL_ITERS}: "
            f"{err}"
        ) from None


def _check_int(key: str, value: Any, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{key}={value!r} is invalid; allowed: {what}")


def check_grad_norm_config(cfg: CfgNode) -> None:
    """Validate ``SOLVER.BUDGET.GRAD_NORM_PERIOD`` and ``GRAD_NORM_BATCHES`` (absent keys: their
    defaults, 0 and 2).

    Raises:
        ValueError: one line naming the bad key and what is allowed.

    Example:
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.GRAD_NORM_PERIOD = -1
        >>> try:
        ...     check_grad_norm_config(cfg)
        ... except ValueError as err:
        ...     print(str(err)[:66])
        SOLVER.BUDGET.GRAD_NORM_PERIOD=-1 is invalid; allowed: a whole num
    """
    b = cfg.SOLVER.get("BUDGET") or {}
    _check_int(
        "SOLVER.BUDGET.GRAD_NORM_PERIOD", b.get("GRAD_NORM_PERIOD", 0), 0,
        "a whole number >= 0 (iterations between full-gradient-norm evaluations; 0: off)",
    )  # fmt: skip
    _check_int(
        "SOLVER.BUDGET.GRAD_NORM_BATCHES", b.get("GRAD_NORM_BATCHES", 2), 1,
        "a whole number >= 1 (training batches in the fixed subset)",
    )  # fmt: skip


def check_budget_keys(cfg: CfgNode) -> None:
    """Validate ``SOLVER.BUDGET``'s keys and the solver keys they count in (``MAX_ITER``,
    ``IMS_PER_BATCH``), changing nothing; a config without ``SOLVER.BUDGET`` passes.

    Raises:
        ValueError: one line naming the bad key, its value and what is allowed.

    Example:
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FRACTION = 0.1  # of what? FULL_ITERS is 0
        >>> try:
        ...     check_budget_keys(cfg)
        ... except ValueError as err:
        ...     print(str(err)[:70])
        SOLVER.BUDGET.FRACTION=0.1 needs SOLVER.BUDGET.FULL_ITERS (the full sc
    """
    b = cfg.SOLVER.get("BUDGET")
    if b is None:
        return
    fraction, full = b.get("FRACTION", 1.0), b.get("FULL_ITERS", 0)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not fraction > 0:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={fraction!r} is invalid; allowed: a number > 0 "
            "(the budget as a fraction of SOLVER.BUDGET.FULL_ITERS, e.g. 0.1)"
        )
    _check_int(
        "SOLVER.BUDGET.FULL_ITERS", full, 0,
        "a whole number >= 0 (0: SOLVER.MAX_ITER is the budget as it is)",
    )  # fmt: skip
    _check_int(
        "SOLVER.BUDGET.IMS_PER_BATCH", b.get("IMS_PER_BATCH", 0), 0,
        "a whole number >= 0 (the batch size FULL_ITERS is counted at; 0: SOLVER.IMS_PER_BATCH)",
    )  # fmt: skip
    _check_int("SOLVER.IMS_PER_BATCH", cfg.SOLVER.IMS_PER_BATCH, 1, "a whole number >= 1")
    _check_int("SOLVER.MAX_ITER", cfg.SOLVER.MAX_ITER, 1, "a whole number >= 1")
    _check_int(
        "SOLVER.BUDGET.WRITER_PERIOD", b.get("WRITER_PERIOD", 20), 1,
        "a whole number >= 1 (iterations between metric writes)",
    )  # fmt: skip
    checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", b.get("SAVE_AT", ()), example="(3040, 6080)")
    check_grad_norm_config(cfg)
    if full == 0 and fraction != 1.0:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={fraction!r} needs SOLVER.BUDGET.FULL_ITERS (the full "
            "schedule's length, e.g. 90000); allowed: set FULL_ITERS, or leave FRACTION at 1.0 "
            "and state the budget as SOLVER.MAX_ITER"
        )


def resolve_budget(cfg: CfgNode, *, max_iter_given: bool = False) -> CfgNode:
    """Set ``SOLVER.MAX_ITER`` from ``SOLVER.BUDGET`` (in place) and validate the budget keys.

    With ``FULL_ITERS > 0``: ``MAX_ITER`` becomes :func:`budget_max_iter` (rounded), unless
    ``max_iter_given`` (``SOLVER.MAX_ITER`` was overridden explicitly), in which case ``MAX_ITER``
    wins and ``FRACTION`` is restated to match it.

    Args:
        cfg (CfgNode): a config with :func:`add_budget_config`'s keys.
        max_iter_given (bool): ``SOLVER.MAX_ITER`` was set explicitly and wins.

    Returns:
        CfgNode: ``cfg``.

    Raises:
        ValueError: one line naming a bad key and what is allowed (:func:`check_budget_keys`).

    Example:
        >>> from detectron2.config import get_cfg
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.FRACTION = 400, 0.25
        >>> resolve_budget(cfg).SOLVER.MAX_ITER
        100
    """
    check_budget_keys(cfg)
    b = cfg.SOLVER.BUDGET
    max_iter, full = cfg.SOLVER.MAX_ITER, b.FULL_ITERS
    was_frozen = cfg.is_frozen()
    cfg.defrost()
    if full > 0 and max_iter_given:
        ratio = cfg.SOLVER.IMS_PER_BATCH / (b.get("IMS_PER_BATCH", 0) or cfg.SOLVER.IMS_PER_BATCH)
        b.FRACTION = max_iter * ratio / full
        logger.info(
            "SOLVER.MAX_ITER=%d given explicitly: SOLVER.BUDGET.FRACTION is now %g of %d",
            max_iter,
            b.FRACTION,
            full,
        )
    elif full > 0:
        stated = stated_max_iter(cfg)
        if not max_iter_agrees(max_iter, stated):
            cfg.SOLVER.MAX_ITER = max(1, round(stated))
    if was_frozen:
        cfg.freeze()
    return cfg


def on_resume(cfg: CfgNode) -> str:
    """``SOLVER.BUDGET.ON_RESUME``: ``"refuse"`` (the default), ``"replan"`` or ``"branch"``
    (:meth:`budgeted.schedules.BudgetSchedule.resume`).

    Raises:
        BudgetConfigError: one line for any other value.

    Example:
        >>> from detectron2.config import get_cfg
        >>> on_resume(add_budget_config(get_cfg()))
        'refuse'
    """
    value = cfg.SOLVER.get("BUDGET", CfgNode()).get("ON_RESUME", "refuse")
    return check_on_resume(value, "SOLVER.BUDGET.ON_RESUME")

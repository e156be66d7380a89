"""LazyConfig (python config) support: ``lr_multiplier`` built from the core.

In a LazyConfig, ``lr_multiplier`` is an fvcore ``ParamScheduler`` that Detectron2's
``hooks.LRScheduler`` calls with ``where = iteration / train.max_iter``::

    from detectron2.config import LazyCall as L
    from budgeted.detectron2.lazy import BudgetLRMultiplier

    lr_multiplier = L(BudgetLRMultiplier)(
        schedule="linear", total_iters="${train.max_iter}", warmup_iters=500
    )

:func:`build_lazy_lr_scheduler` makes it a checkpointed, resume-checked scheduler;
:func:`apply_budget` puts a user's own LazyConfig under a budget (``--budget --schedule``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from detectron2.config import LazyCall, instantiate
from detectron2.solver import WarmupParamScheduler
from detectron2.utils.registry import locate
from fvcore.common.param_scheduler import (
    MultiStepParamScheduler,
    ParamScheduler,
    PolynomialDecayParamScheduler,
)
from omegaconf import DictConfig, OmegaConf

from ..control.plan import OwnSchedule, step_params
from ..schedules import DEFAULTS, BudgetSchedule, budget_iters, schedule_names
from ..schedules.contract import BudgetFieldError
from ..schedules.registry import is_finite_number
from .solver import BudgetConfigError, BudgetLRScheduler

__all__ = [
    "BudgetLRMultiplier", "BudgetOptionError", "LazyBudgetLRScheduler", "apply_budget",
    "build_lazy_lr_scheduler", "lazy_poly", "lazy_step", "lazy_warmup"
]  # fmt: skip


class BudgetLRMultiplier(ParamScheduler):
    """fvcore ``ParamScheduler`` for a LazyConfig's ``lr_multiplier``: ``where`` in [0, 1) ->
    ``m(where * total_iters)``, ``m`` the core's budget schedule.

    Example:
        >>> mult = BudgetLRMultiplier("linear", total_iters=900, warmup_iters=50)
        >>> mult(0.5)  # iteration 450: (450 - 50) / (900 - 50) of the decay done
        0.5294117647058824
    """

    def __init__(
        self,
        schedule: str = "linear",
        total_iters: int = 90000,
        warmup_iters: int = DEFAULTS["warmup"],
        warmup_factor: float = DEFAULTS["warmup_factor"],
        warmup_method: str = DEFAULTS["warmup_method"],
        **params: Any,
    ) -> None:
        try:
            self.budget = BudgetSchedule(
                schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
            )
        except BudgetFieldError as err:
            raise BudgetConfigError(err.render(self.KEYS)) from None
        except ValueError as err:
            raise BudgetConfigError(str(err)) from None

    KEYS: ClassVar[dict[str, str]] = {
        "total": "lr_multiplier.total_iters",
        "warmup": "lr_multiplier.warmup_iters",
        "warmup_factor": "lr_multiplier.warmup_factor",
        "warmup_method": "lr_multiplier.warmup_method",
    }
    """The LazyConfig keys a budget's error messages name."""

    def __call__(self, where: float) -> float:
        return self.budget(where * self.budget.total)


class LazyBudgetLRScheduler(BudgetLRScheduler):
    """:class:`~budgeted.detectron2.BudgetLRScheduler` whose resume message names the
    LazyConfig's keys (``train.max_iter``, ``lr_multiplier.*``)."""

    RESUME_NAMES: ClassVar[dict[str, str]] = {
        "total": "train.max_iter",
        "warmup": "lr_multiplier.warmup_iters",
        "warmup_factor": "lr_multiplier.warmup_factor",
        "warmup_method": "lr_multiplier.warmup_method",
        "schedule": "lr_multiplier.schedule",
    }
    BASE_LR_KEY: ClassVar[str] = "optimizer.lr"
    RESUME_FIX: ClassVar[str] = (
        "resume with the checkpoint's budget (its train.max_iter, warmup, schedule and GPU "
        "count), or start a new run from its weights: train.init_checkpoint=<checkpoint>, no "
        "--resume, another train.output_dir"
    )


def build_lazy_lr_scheduler(
    optimizer: torch.optim.Optimizer, multiplier: Any, max_iter: int
) -> Any:
    """The scheduler for ``hooks.LRScheduler`` of a LazyConfig training loop: a
    :class:`LazyBudgetLRScheduler` for a :class:`BudgetLRMultiplier`, else ``multiplier``.

    Raises:
        BudgetConfigError: ``total_iters`` differs from ``train.max_iter`` (one line).

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> mult = BudgetLRMultiplier("linear", total_iters=40, warmup_iters=3)
        >>> type(build_lazy_lr_scheduler(opt, mult, 40)).__name__
        'LazyBudgetLRScheduler'
    """
    if not isinstance(multiplier, BudgetLRMultiplier):
        return multiplier
    b = multiplier.budget
    if b.total != max_iter:
        raise BudgetConfigError(
            f"lr_multiplier.total_iters={b.total} differs from train.max_iter={max_iter}; "
            'allowed: equal (write total_iters="${train.max_iter}")'
        )
    return LazyBudgetLRScheduler.from_schedule(optimizer, b)


class BudgetOptionError(ValueError):
    """A bad ``--budget`` / ``--schedule`` / ``--full-iters``, or a LazyConfig they cannot be
    applied to (:func:`apply_budget`): one line; ``budgeted-lazy-train-net`` prints it and exits
    with :attr:`exit_status` 2 before anything is written."""

    exit_status: ClassVar[int] = 2


_FOLLOWS = "${train.max_iter}"
"""The ``total_iters`` of a :class:`BudgetLRMultiplier` that follows ``train.max_iter``."""


def _target(node: Any) -> Any:
    """The class (or callable) a LazyConfig node calls: its ``_target_``, located if a string."""
    target = node.get("_target_") if hasattr(node, "get") else None
    if isinstance(target, str):
        try:
            return locate(target)
        except Exception:  # a name that does not import: no known kind
            return target
    return target


def _is(node: Any, cls: type) -> bool:
    target = _target(node)
    return isinstance(target, type) and issubclass(target, cls)


def _name(node: Any) -> str:
    target = _target(node)
    if target is None:
        return type(node).__name__
    if isinstance(target, str):
        return target
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', target)}"


def lazy_warmup(lr_multiplier_cfg: Any, full_iters: int) -> tuple[int, float, str]:
    """The warmup of a LazyConfig's ``lr_multiplier`` node, in iterations of a full schedule of
    ``full_iters``: ``(warmup_iters, warmup_factor, warmup_method)``; a ``WarmupParamScheduler``'s
    ``round(warmup_length * full_iters)``, a :class:`BudgetLRMultiplier`'s own, else no warmup.

    Raises:
        BudgetOptionError: a warmup that is no number of the kind allowed (one line).

    Example:
        >>> from detectron2.config import LazyCall as L
        >>> from detectron2.solver import WarmupParamScheduler
        >>> from fvcore.common.param_scheduler import MultiStepParamScheduler
        >>> stock = L(WarmupParamScheduler)(
        ...     scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1], milestones=[300]),
        ...     warmup_length=250 / 400, warmup_factor=0.001)
        >>> lazy_warmup(stock, 400)
        (250, 0.001, 'linear')
    """
    node = lr_multiplier_cfg
    if _is(node, WarmupParamScheduler):
        length = node.get("warmup_length")
        if not is_finite_number(length) or not 0 <= length < 1:
            raise BudgetOptionError(
                f"lr_multiplier.warmup_length={length!r} is invalid; allowed: a fraction in "
                "[0, 1) of the full train.max_iter"
            )
        iters = round(length * full_iters)
        return iters, _factor(node.get("warmup_factor", 0.001)), node.get("warmup_method", "linear")
    if _is(node, BudgetLRMultiplier):
        iters = node.get("warmup_iters", DEFAULTS["warmup"])
        if not is_finite_number(iters) or iters < 0 or iters != int(iters):
            raise BudgetOptionError(
                f"lr_multiplier.warmup_iters={iters!r} is invalid; allowed: a whole number >= 0"
            )
        factor = _factor(node.get("warmup_factor", DEFAULTS["warmup_factor"]))
        return int(iters), factor, node.get("warmup_method", DEFAULTS["warmup_method"])
    return 0, 1.0, "linear"


def _factor(value: Any) -> float:
    if not is_finite_number(value):
        raise BudgetOptionError(
            f"lr_multiplier.warmup_factor={value!r} is invalid; allowed: a number in (0, 1]"
        )
    return float(value)


def _checked_options(
    fraction: Any, schedule: Any, full_iters: Any, max_iter: Any
) -> tuple[int, int]:
    """(the full schedule, the budget) in iterations; :class:`BudgetOptionError` for bad
    options."""
    if schedule is not None and str(schedule).partition(":")[0] not in schedule_names():
        raise BudgetOptionError(
            f"--schedule {schedule} is unknown; allowed: {', '.join(schedule_names())}"
        )
    if fraction is not None and not (is_finite_number(fraction) and 0 < fraction <= 1):
        raise BudgetOptionError(
            f"--budget {fraction} is invalid; allowed: a fraction in (0, 1] of --full-iters "
            "(1 trains all of it)"
        )
    if full_iters is not None and not (is_finite_number(full_iters) and full_iters >= 1
                                       and full_iters == int(full_iters)):  # fmt: skip
        raise BudgetOptionError(
            f"--full-iters {full_iters} is invalid; allowed: a whole number >= 1 (iterations)"
        )
    if not (is_finite_number(max_iter) and max_iter >= 1 and max_iter == int(max_iter)):
        raise BudgetOptionError(
            f"train.max_iter={max_iter!r} is invalid; allowed: a whole number >= 1"
        )
    full = int(max_iter if full_iters is None else full_iters)
    if fraction is None:
        return full, int(max_iter)
    try:
        return full, budget_iters(fraction=fraction, full_iters=full)
    except ValueError:
        raise BudgetOptionError(
            f"--budget {fraction} of --full-iters {full} is less than one iteration; allowed: "
            "a budget of at least one iteration (a larger --budget or --full-iters)"
        ) from None


def _follow(node: Any, old: int, total: int) -> bool:
    """Whether ``node`` is a :class:`BudgetLRMultiplier` whose budget is ``train.max_iter``
    (``old``); one that is not the interpolation is set to ``total``."""
    if not _is(node, BudgetLRMultiplier):
        return False
    given = isinstance(node, DictConfig) and "total_iters" in node
    raw = OmegaConf.to_container(node, resolve=False).get("total_iters") if given else None
    if raw == _FOLLOWS:
        return True
    if node.get("total_iters", 90000) != old:
        return False
    node.total_iters = total
    return True


def apply_budget(
    cfg: Any,
    fraction: float | None = None,
    schedule: str | None = None,
    full_iters: int | None = None,
) -> list[str]:
    """Put LazyConfig ``cfg`` under a budget, in place; returns what changed, as log lines.

    ``train.max_iter = budget_iters(fraction=fraction, full_iters=full_iters)`` (``full_iters``
    default ``train.max_iter``); without ``schedule`` ``lr_multiplier`` must follow it, with one
    it becomes a :class:`BudgetLRMultiplier` of it, the warmup kept in iterations
    (:func:`lazy_warmup`). Nothing is changed where anything is refused.

    Raises:
        BudgetOptionError: a bad option, or a config it cannot be applied to (one line).

    Example:
        >>> from detectron2.config import LazyCall as L, LazyConfig
        >>> from detectron2.solver import WarmupParamScheduler
        >>> from fvcore.common.param_scheduler import MultiStepParamScheduler
        >>> cfg = LazyConfig.load("configs/detectron2/lazy/mask_rcnn_toy_budget10.py")
        >>> cfg.train.max_iter = 400
        >>> cfg.lr_multiplier = L(WarmupParamScheduler)(
        ...     scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1], milestones=[300]),
        ...     warmup_length=40 / 400, warmup_factor=0.001)
        >>> _ = apply_budget(cfg, 0.25, "cosine")
        >>> cfg.train.max_iter, instantiate(cfg.lr_multiplier).budget.warmup
        (100, 40)
    """
    if fraction is None and schedule is None and full_iters is None:
        return []
    old = cfg.train.max_iter
    full, total = _checked_options(fraction, schedule, full_iters, old)
    node, lines = cfg.lr_multiplier, []
    if fraction is not None:
        lines.append(
            f"--budget {fraction}: train.max_iter {old} -> {total} (of --full-iters {full})"
        )
    if schedule is None:
        if total != old:
            _budget_alone(cfg, total, fraction, full)
        return lines
    warmup, factor, method = lazy_warmup(node, full)
    source = _warmup_source(node, full)
    _check_longer(total, warmup, fraction, full, source)
    try:  # "wsd:decay=sqrt": a schedule with its parameters; the config's own step or poly
        own = {"step": lambda: lazy_step(node, old), "poly": lambda: lazy_poly(node)}
        plan = OwnSchedule.of(schedule, warmup, factor, method, own)
        BudgetLRMultiplier(plan.schedule, total, warmup, factor, method, **plan.params)
    except ValueError as err:
        raise BudgetOptionError(f"--schedule {schedule}: {err}") from None
    cfg.train.max_iter = total
    cfg.lr_multiplier = LazyCall(BudgetLRMultiplier)(
        schedule=plan.schedule, total_iters=_FOLLOWS, warmup_iters=warmup,
        warmup_factor=factor, warmup_method=method, **plan.params,
    )  # fmt: skip
    instantiate(cfg.lr_multiplier)  # as the tool will build it
    lines.append(
        f"--schedule {schedule}: lr_multiplier {_name(node)} -> BudgetLRMultiplier(schedule="
        f"{plan.schedule!r}, total_iters=train.max_iter={total}, warmup_iters={warmup}, "
        f"warmup_factor={factor}, warmup_method={method!r}); the warmup: {source}"
    )
    return lines


def lazy_step(lr_multiplier_cfg: Any, length: int) -> dict[str, Any]:
    """The config's own step baseline (a ``WarmupParamScheduler`` over a
    ``MultiStepParamScheduler``) as the budget ``step``'s parameters: its milestones as fractions
    of its ``num_updates`` (else ``length``), ``gamma`` the ratio of its first two values; ``{}``
    for any other.

    Example:
        >>> from detectron2.config import LazyCall as L
        >>> from detectron2.solver import WarmupParamScheduler
        >>> from fvcore.common.param_scheduler import MultiStepParamScheduler
        >>> stock = L(WarmupParamScheduler)(scheduler=L(MultiStepParamScheduler)(
        ...     values=[1.0, 0.1, 0.01], milestones=[60000, 80000]), warmup_length=0.01)
        >>> lazy_step(stock, 90000)
        {'milestones': (0.6666666666666666, 0.8888888888888888), 'gamma': 0.1}
    """
    node = lr_multiplier_cfg
    steps = node.get("scheduler") if _is(node, WarmupParamScheduler) else None
    if steps is None or not _is(steps, MultiStepParamScheduler):
        return {}
    values = list(steps.get("values") or [])
    if len(values) < 2 or not values[0]:
        return {}
    length = steps.get("num_updates") or length
    return step_params(steps.get("milestones"), length, values[1] / values[0])


def lazy_poly(lr_multiplier_cfg: Any) -> dict[str, Any]:
    """The config's own poly schedule (a ``PolynomialDecayParamScheduler``, bare or under a
    ``WarmupParamScheduler``; it decays to 0 as the budget ``poly`` does) as the budget
    ``poly``'s parameters: its ``power``; ``{}`` for any other.

    Example:
        >>> from detectron2.config import LazyCall as L
        >>> from detectron2.solver import WarmupParamScheduler
        >>> from fvcore.common.param_scheduler import PolynomialDecayParamScheduler
        >>> lazy_poly(L(WarmupParamScheduler)(scheduler=L(PolynomialDecayParamScheduler)(
        ...     base_value=1.0, power=2.0), warmup_length=0.01))
        {'power': 2.0}
    """
    node = lr_multiplier_cfg
    if _is(node, WarmupParamScheduler):
        node = node.get("scheduler")
    if node is None or not _is(node, PolynomialDecayParamScheduler) or "power" not in node:
        return {}
    return {"power": node.get("power")}


def _budget_alone(cfg: Any, total: int, fraction: Any, full: int) -> None:
    """``--budget`` without ``--schedule``: ``train.max_iter = total`` where ``lr_multiplier``
    follows it, else :class:`BudgetOptionError`."""
    node, old = cfg.lr_multiplier, cfg.train.max_iter
    warmup, _, _ = lazy_warmup(node, full) if _is(node, BudgetLRMultiplier) else (0, 1.0, "")
    _check_longer(total, warmup, fraction, full, "lr_multiplier.warmup_iters")
    if not _follow(node, old, total):
        raise BudgetOptionError(
            f"--budget {fraction} sets train.max_iter={total}, but lr_multiplier "
            f"({_name(node)}) does not follow train.max_iter (only a BudgetLRMultiplier with "
            f'total_iters="{_FOLLOWS}" does); add --schedule NAME '
            f"({', '.join(schedule_names())}) to train it under a budget schedule, its warmup kept"
        )
    cfg.train.max_iter = total


def _warmup_source(node: Any, full: int) -> str:
    """Where :func:`lazy_warmup` took ``node``'s warmup from, for messages and the log."""
    if _is(node, WarmupParamScheduler):
        return f"lr_multiplier.warmup_length {node.get('warmup_length')} of {full} iterations"
    if _is(node, BudgetLRMultiplier):
        return "lr_multiplier.warmup_iters"
    return (
        f"none, {_name(node)} has no warmup this tool reads (only a WarmupParamScheduler's or a "
        "BudgetLRMultiplier's)"
    )


def _check_longer(total: int, warmup: int, fraction: Any, full: int, source: str) -> None:
    if total > warmup:
        return
    given = (
        f"--budget {fraction} of --full-iters {full}" if fraction is not None else "train.max_iter"
    )
    raise BudgetOptionError(
        f"a budget of {total} iterations ({given}) is not longer than the warmup of {warmup} "
        f"iterations ({source}); allowed: a budget longer than the warmup (a larger --budget)"
    )

"""MMEngine parameter schedulers computed by :class:`budgeted.core.BudgetSchedule`.

One entry does warmup and decay: ``value = base_value * m(t)`` with ``t`` the scheduler's step
count since ``begin`` (MMEngine's ``last_step``), a budget of ``end - begin`` steps, a warmup of
``warmup_iters`` steps and the decay over ``[begin + warmup_iters, end)``. The value is computed in
closed form from the initial value, so these schedulers are not meant to be chained with another
scheduler of the same parameter.
"""

from __future__ import annotations

from typing import Any, ClassVar

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, OptimizerType, _ParamScheduler
from mmengine.registry import PARAM_SCHEDULERS

from ..core import BudgetSchedule

# What makes two budget plans the same; saved in checkpoints and compared on resume.
PLAN_KEYS = ("schedule", "params", "begin", "end", "warmup_iters", "warmup_factor", "warmup_method")


class BudgetMismatchError(ValueError):
    """A checkpoint's budget plan differs from the configured one (resume is refused)."""


@PARAM_SCHEDULERS.register_module()
class BudgetParamScheduler(_ParamScheduler):
    """Budget-aware schedule of any optimizer parameter ``param_name`` (``lr``, ``momentum``...).

    Args:
        optimizer: the (wrapped) optimizer.
        param_name: the ``param_groups`` key to schedule.
        schedule: a :func:`budgeted.core.schedule_names` entry (fixed in the named subclasses).
        warmup_iters: warmup length in iterations (kept in iterations when converting from epochs).
        warmup_factor: the multiplier at the first iteration of the warmup.
        warmup_method: ``"linear"`` or ``"constant"`` warmup.
        begin, end: the budget is ``[begin, end)``; the runner fills a missing ``end`` with
            ``train_cfg.max_iters``.
        last_step, by_epoch, verbose: as in MMEngine; ``by_epoch=True`` needs
            ``convert_to_iter_based=True`` (the budget is planned in iterations).
        **params: the schedule's parameters (``power``, ``eta``, ``milestones``, ``gamma``...).
    """

    fixed_schedule: ClassVar[str | None] = None

    def __init__(
        self,
        optimizer: OptimizerType,
        param_name: str,
        schedule: str | None = None,
        warmup_iters: int = 500,
        warmup_factor: float = 0.001,
        warmup_method: str = "linear",
        begin: int = 0,
        end: int = INF,
        last_step: int = -1,
        by_epoch: bool = True,
        verbose: bool = False,
        **params: Any,
    ) -> None:
        name = type(self).__name__
        if self.fixed_schedule is not None:
            if schedule not in (None, self.fixed_schedule):
                raise ValueError(
                    f"{name} always uses the {self.fixed_schedule!r} schedule, got "
                    f"schedule={schedule!r}; use BudgetLR(schedule={schedule!r}) instead"
                )
            schedule = self.fixed_schedule
        elif schedule is None:
            schedule = "linear"
        if by_epoch:
            raise ValueError(
                f"{name}: by_epoch=True without convert_to_iter_based=True; the budget is planned "
                "in iterations: set by_epoch=False in an iteration-based config "
                "(IterBasedTrainLoop) or convert_to_iter_based=True in an epoch-based one"
            )
        if end >= INF:
            raise ValueError(
                f"{name}: end is not set; pass end=<last iteration + 1> or let the runner fill it "
                "from train_cfg.max_iters"
            )
        for key, value in (("begin", begin), ("end", end), ("warmup_iters", warmup_iters)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name}: {key}={value!r} is invalid; allowed: an integer >= 0")
        if end <= begin + warmup_iters:
            raise ValueError(
                f"{name}: end={end} <= begin + warmup_iters = {begin} + {warmup_iters}: the decay "
                "phase would be empty; allowed: end > begin + warmup_iters (end defaults to "
                "train_cfg.max_iters)"
            )
        try:
            plan = BudgetSchedule(
                schedule, end - begin, warmup_iters, warmup_factor, warmup_method, params
            )
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        self.schedule = schedule
        self.params = dict(plan.params)
        self.warmup_iters = warmup_iters
        self.warmup_factor = warmup_factor
        self.warmup_method = warmup_method
        self._plan = plan
        super().__init__(
            optimizer,
            param_name=param_name,
            begin=begin,
            end=end,
            last_step=last_step,
            by_epoch=by_epoch,
            verbose=verbose,
        )

    @classmethod
    def build_iter_from_epoch(
        cls,
        *args: Any,
        begin: int = 0,
        end: int = INF,
        by_epoch: bool = True,
        epoch_length: int | None = None,
        **kwargs: Any,
    ) -> BudgetParamScheduler:
        """Build from an epoch-based config: ``begin``/``end`` become iterations."""
        if not by_epoch:
            raise ValueError(f"{cls.__name__}: convert_to_iter_based=True needs by_epoch=True")
        if not isinstance(epoch_length, int) or epoch_length <= 0:
            raise ValueError(f"{cls.__name__}: epoch_length={epoch_length!r}; allowed: an int > 0")
        end = end if end >= INF else int(end * epoch_length)
        return cls(*args, begin=int(begin * epoch_length), end=end, by_epoch=False, **kwargs)

    def multiplier(self, step: int | None = None) -> float:
        """The multiplier of the initial value at ``step`` steps since ``begin`` (default: now)."""
        return self._plan(self.last_step if step is None else step)

    def _get_value(self) -> list[float]:
        factor = self._plan(self.last_step)
        return [base * factor for base in self.base_values]

    def plan(self) -> dict[str, Any]:
        """What defines this budget: schedule, params, begin, end and the warmup."""
        return {key: getattr(self, key) for key in PLAN_KEYS}

    def state_dict(self) -> dict[str, Any]:
        """MMEngine's state (plain values only, safe for ``weights_only`` loading)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_plan")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume; refuse a checkpoint whose budget plan differs from this scheduler's."""
        saved = {key: state_dict.get(key) for key in PLAN_KEYS}
        if saved["params"] is not None:
            saved["params"] = dict(saved["params"])
        if saved != self.plan():
            raise BudgetMismatchError(
                f"cannot resume: the checkpoint's budget ({_describe(saved)}) differs from the "
                f"config's ({_describe(self.plan())}); keep the checkpoint's budget (e.g. "
                f"train_cfg.max_iters={saved['end']}) to resume, or start a new run from the "
                "checkpoint's weights with load_from=<checkpoint> and resume=False"
            )
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_plan"})


def _describe(plan: dict[str, Any]) -> str:
    if plan["schedule"] is None:
        return "not a budget scheduler"
    params = "".join(f", {k}={v}" for k, v in sorted(plan["params"].items()))
    return (
        f"{plan['schedule']}{params}, iterations [{plan['begin']}, {plan['end']}), "
        f"warmup {plan['warmup_iters']} x{plan['warmup_factor']} {plan['warmup_method']}"
    )


@PARAM_SCHEDULERS.register_module()
class BudgetLR(LRSchedulerMixin, BudgetParamScheduler):
    """Budget-aware learning rate with any schedule: ``dict(type='BudgetLR', schedule='htd')``."""


@PARAM_SCHEDULERS.register_module()
class BudgetLinearLR(BudgetLR):
    """Linear decay to 0 over the budget (the paper's recommendation)."""

    fixed_schedule = "linear"


@PARAM_SCHEDULERS.register_module()
class BudgetCosineLR(BudgetLR):
    """Cosine decay to ``eta`` (default 0) of the initial LR."""

    fixed_schedule = "cosine"


@PARAM_SCHEDULERS.register_module()
class BudgetPolyLR(BudgetLR):
    """``(1 - p) ** power`` (default 0.9)."""

    fixed_schedule = "poly"


@PARAM_SCHEDULERS.register_module()
class BudgetHTDLR(BudgetLR):
    """Hyperbolic-tangent decay (``lower``, ``upper``, ``eta``)."""

    fixed_schedule = "htd"


@PARAM_SCHEDULERS.register_module()
class BudgetStepLR(BudgetLR):
    """Step decay by ``gamma`` at budget fractions ``milestones`` (default 2/3, 8/9)."""

    fixed_schedule = "step"


@PARAM_SCHEDULERS.register_module()
class BudgetExpLR(BudgetLR):
    """Exponential decay to ``end_factor`` (default 0.01) at the end of the budget."""

    fixed_schedule = "exp"


@PARAM_SCHEDULERS.register_module()
class BudgetConstantLR(BudgetLR):
    """No decay after the warmup."""

    fixed_schedule = "constant"


NAMED_SCHEDULERS: dict[str, type[BudgetLR]] = {
    cls.fixed_schedule: cls  # type: ignore[misc]
    for cls in (
        BudgetLinearLR,
        BudgetCosineLR,
        BudgetPolyLR,
        BudgetHTDLR,
        BudgetStepLR,
        BudgetExpLR,
        BudgetConstantLR,
    )
}
"""The named LR scheduler of each built-in schedule."""

SCHEDULER_TYPES: tuple[str, ...] = (
    "BudgetParamScheduler",
    "BudgetLR",
    *(cls.__name__ for cls in NAMED_SCHEDULERS.values()),
)
"""Every type name this module registers in ``PARAM_SCHEDULERS``."""

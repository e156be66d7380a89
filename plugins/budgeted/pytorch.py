"""Plain-PyTorch adapter: :class:`BudgetLR`, stepped once per iteration."""

from __future__ import annotations

from typing import Any, ClassVar

from torch.optim import Optimizer
from torch.optim.lr_scheduler import _LRScheduler

from .core import BudgetMismatchError, BudgetSchedule

__all__ = ["BudgetLR", "BudgetMismatchError"]


class BudgetLR(_LRScheduler):
    """``lr = base_lr * m(t)`` with ``m`` a :class:`~budgeted.core.BudgetSchedule`.

    A ``torch.optim.lr_scheduler.LRScheduler`` (through ``_LRScheduler``, the class that
    Detectron2's ``hooks.LRScheduler`` checkpoints).

    Call ``step()`` once per iteration, after ``optimizer.step()``. ``t`` is the number of
    ``step()`` calls so far (``last_epoch`` in torch's terms), so the first iteration trains at
    ``base_lr * warmup_factor`` and the budget ends after ``total_iters`` steps.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        schedule: str,
        total_iters: int,
        *,
        warmup_iters: int = 500,
        warmup_factor: float = 0.001,
        warmup_method: str = "linear",
        last_epoch: int = -1,
        **params: Any,
    ) -> None:
        self.budget = BudgetSchedule(
            schedule, total_iters, warmup_iters, warmup_factor, warmup_method, params
        )
        super().__init__(optimizer, last_epoch)

    @classmethod
    def from_schedule(
        cls, optimizer: Optimizer, budget: BudgetSchedule, last_epoch: int = -1
    ) -> BudgetLR:
        """The scheduler of an already validated :class:`~budgeted.core.BudgetSchedule`."""
        return cls(
            optimizer,
            budget.schedule,
            budget.total,
            warmup_iters=budget.warmup,
            warmup_factor=budget.warmup_factor,
            warmup_method=budget.warmup_method,
            last_epoch=last_epoch,
            **budget.params,
        )

    def get_lr(self) -> list[float]:
        factor = self.budget(self.last_epoch)
        return [base_lr * factor for base_lr in self.base_lrs]

    def step(self, epoch: None = None) -> None:
        """Advance one iteration; a lean version of ``LRScheduler.step`` (no epoch argument)."""
        if epoch is not None:
            raise ValueError(
                f"BudgetLR.step() takes no epoch (got {epoch!r}); it counts steps itself"
            )
        if self.last_epoch < 0:  # the call from __init__: let torch set up its bookkeeping
            super().step()
            return
        self._step_count += 1
        self.last_epoch += 1
        factor = self.budget(self.last_epoch)
        lrs = []
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs):
            lr = base_lr * factor
            group["lr"] = lr
            lrs.append(lr)
        self._last_lr = lrs

    RESUME_NAMES: ClassVar[dict[str, str]] = {"total": "total_iters", "warmup": "warmup_iters"}
    """How the budget's state keys are named in this adapter's messages."""
    RESUME_FIX: ClassVar[str] = (
        "build the scheduler with the checkpoint's budget to resume, or start a new run to "
        "train with another budget"
    )

    def state_dict(self) -> dict[str, Any]:
        """torch's scheduler state plus ``budget``: :meth:`BudgetSchedule.state`."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "budget")}
        state["budget"] = self.budget.state()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume; a checkpoint of another budget raises :class:`BudgetMismatchError`."""
        state = dict(state_dict)
        self.budget.check_resume(
            state.pop("budget", None), names=self.RESUME_NAMES, fix=self.RESUME_FIX
        )
        self.__dict__.update(state)


def _budget_state(budget: BudgetSchedule) -> dict[str, Any]:
    """Deprecated: :meth:`BudgetSchedule.state`."""
    return budget.state()

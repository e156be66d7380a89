"""The optimizers a sweep compares (``--optimizers``, the ``schedulefree`` arm), as data: no torch.

Each name is a class and the keyword arguments it keeps from the optimizer a config or script
already states (its base LR, weight decay, ...): a cell swaps the class, not the experiment.
``schedule-free`` (Defazio et al., "The Road Less Scheduled", NeurIPS 2024; the ``schedulefree``
package) replaces the LR schedule itself: its class per optimizer is :data:`SCHEDULE_FREE`.

>>> optimizer_target("adamw"), optimizer_target("sgd", schedule_free=True)
('torch.optim.AdamW', 'schedulefree.SGDScheduleFree')
>>> optimizer_target("amsgrad", schedule_free=True)
Traceback (most recent call last):
ValueError: optimizer 'amsgrad' has no schedule-free form; allowed: sgd, adamw
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OPTIMIZERS", "SCHEDULE_FREE", "OptimizerSpec", "check_optimizer_flags", "optimizer_target"
]  # fmt: skip


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer: its class (``module.Class``; MMEngine's ``type`` is the class name), the
    fixed keyword arguments it adds, and the keys it keeps from the optimizer it replaces."""

    target: str
    keeps: tuple[str, ...]
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        """The class name: MMEngine's ``optim_wrapper.optimizer.type``."""
        return self.target.rsplit(".", 1)[1]


_ADAM_KEYS = ("lr", "weight_decay", "betas", "eps")
OPTIMIZERS: dict[str, OptimizerSpec] = {
    "sgd": OptimizerSpec("torch.optim.SGD", ("lr", "weight_decay", "momentum", "nesterov")),
    "adamw": OptimizerSpec("torch.optim.AdamW", _ADAM_KEYS),
    "amsgrad": OptimizerSpec("torch.optim.Adam", _ADAM_KEYS, {"amsgrad": True}),  # the paper's
}
"""``--optimizers`` name -> the optimizer a cell trains with (the paper's Fig. 4 compares AMSGrad
with SGD; AdamW is today's default)."""

SCHEDULE_FREE: dict[str, OptimizerSpec] = {
    "sgd": OptimizerSpec("schedulefree.SGDScheduleFree", ("lr", "weight_decay", "momentum")),
    "adamw": OptimizerSpec("schedulefree.AdamWScheduleFree", _ADAM_KEYS),
}
"""Optimizer name -> its schedule-free form (``warmup_steps`` is the run's warmup)."""


def optimizer_target(name: str, schedule_free: bool = False) -> str:
    """The class ``name`` trains with (``schedule_free``: its :data:`SCHEDULE_FREE` form); one
    ``ValueError`` line naming what is allowed."""
    table = SCHEDULE_FREE if schedule_free else OPTIMIZERS
    if name not in table:
        what = "has no schedule-free form" if name in OPTIMIZERS else "is not a known optimizer"
        raise ValueError(f"optimizer {name!r} {what}; allowed: {', '.join(table)}")
    return table[name].target


def check_optimizer_flags(optimizer: str, schedule_free: bool, schedule: str) -> None:
    """A script's ``--optimizer``, ``--schedule-free`` and ``--schedule`` (its name) together:
    one ``ValueError`` line where they do not go together.

    >>> check_optimizer_flags("sgd", True, "linear")
    Traceback (most recent call last):
    ValueError: --schedule 'linear' with --schedule-free is invalid; allowed: --schedule constant (the default with it): the optimizer schedules itself
    """  # noqa: E501
    if schedule_free and optimizer not in SCHEDULE_FREE:
        allowed = f"with --schedule-free one of {', '.join(SCHEDULE_FREE)}"
        raise ValueError(f"--optimizer {optimizer!r} has no schedule-free form; allowed: {allowed}")
    if schedule_free and schedule != "constant":
        allowed = "--schedule constant (the default with it): the optimizer schedules itself"
        raise ValueError(
            f"--schedule {schedule!r} with --schedule-free is invalid; allowed: {allowed}"
        )

"""How a budget scheduler learns the runner that trains it, without changing MMEngine's hooks
(``HOOKS.get("ParamSchedulerHook")`` stays MMEngine's own). At the first of three points:

1. :class:`BudgetParamSchedulerHook`, named in the config (our tools write it): in
   ``before_run`` :func:`bind_budget_schedulers` (``end`` is the loop's ``max_iters``, the
   config's ``budget_on_resume``), in ``before_train`` :func:`check_budget_schedulers_in_runner`
   (no overlapping scheduler, every budget scheduler resumed with its state);
2. :class:`~budgeted.mmengine.time_budget.TimeBudgetTrainLoop` calls the same two functions from
   its own hook (a time budget needs its clock before the runner resumes the schedulers);
3. with MMEngine's own ``ParamSchedulerHook``, each budget scheduler checks ``end`` at its first
   ``step()`` against what ``RuntimeInfoHook`` publishes in the runner's ``MessageHub``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mmengine.hooks import ParamSchedulerHook
from mmengine.registry import HOOKS

from .schedulers import BudgetParamScheduler

__all__ = [
    "BudgetParamSchedulerHook", "bind_budget_schedulers", "budget_schedulers",
    "check_budget_schedulers_in_runner"
]  # fmt: skip


def budget_schedulers(schedulers: Any) -> Iterator[BudgetParamScheduler]:
    """The built budget schedulers among a runner's ``param_schedulers`` (a list, a dict of
    lists, None, or configs not built yet).

    Example:
        >>> list(budget_schedulers(None)), list(budget_schedulers([dict(type="BudgetLinearLR")]))
        ([], [])
    """
    groups = list(schedulers.values()) if isinstance(schedulers, Mapping) else [schedulers]
    for group in groups:
        for scheduler in group if isinstance(group, (list, tuple)) else [group]:
            if isinstance(scheduler, BudgetParamScheduler):
                yield scheduler


def bind_budget_schedulers(runner: Any) -> None:
    """Bind each budget scheduler of ``runner`` to ``runner.train_loop`` and the config's
    ``budget_on_resume`` (``before_run``: built, not resumed yet).

    Raises:
        BudgetConfigError: one line (an ``end`` other than the loop's ``max_iters``, say).
    """
    schedulers = list(budget_schedulers(runner.param_schedulers))
    if not schedulers:
        return
    cfg = getattr(runner, "cfg", None)
    policy = cfg.get("budget_on_resume") if callable(getattr(cfg, "get", None)) else None
    loop = runner.train_loop
    for scheduler in schedulers:
        scheduler.bind(loop, policy)


def check_budget_schedulers_in_runner(runner: Any) -> None:
    """Check each budget scheduler of ``runner`` against the others and the resumed iteration
    (``before_train``: resumed, before the first iteration).

    Raises:
        BudgetConfigError, BudgetMismatchError: one line.
    """
    for scheduler in budget_schedulers(runner.param_schedulers):
        scheduler.check_in_runner(runner.param_schedulers, runner.iter)


@HOOKS.register_module()
class BudgetParamSchedulerHook(ParamSchedulerHook):
    """MMEngine's ``ParamSchedulerHook``, which also binds each budget scheduler to the runner
    and checks it before training (see the module). Registered under its own name only.

    Example:
        >>> from mmengine.registry import HOOKS
        >>> type(HOOKS.build(dict(type="BudgetParamSchedulerHook"))).__name__
        'BudgetParamSchedulerHook'
    """

    def before_run(self, runner: Any) -> None:
        """Bind each budget scheduler to ``runner.train_loop`` and the config's
        ``budget_on_resume`` (before the runner resumes them)."""
        bind_budget_schedulers(runner)

    def before_train(self, runner: Any) -> None:
        """Check each budget scheduler against the others and the resumed iteration."""
        check_budget_schedulers_in_runner(runner)

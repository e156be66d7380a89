"""How a budget scheduler learns the runner that trains it, without changing MMEngine's hooks.

MMEngine's runner builds a scheduler from its config entry (filling a missing ``end`` with the
train loop's ``max_iters``) but passes it neither the loop nor the config. Importing
``budgeted.mmengine`` changes no MMEngine class and no registry entry of MMEngine's:
``HOOKS.get("ParamSchedulerHook")`` stays MMEngine's own hook, for every runner. A budget
scheduler learns its runner at the first of three points:

1. :class:`BudgetParamSchedulerHook`, named in the config
   (``default_hooks.param_scheduler=dict(type="BudgetParamSchedulerHook")``): MMEngine's
   ``ParamSchedulerHook`` (it steps every scheduler, as before) that in ``before_run`` (built,
   nothing resumed or trained yet) calls :func:`bind_budget_schedulers` (``end`` must be the
   loop's ``max_iters``, the config's ``budget_on_resume`` is the policy where the entry gives
   none) and in ``before_train`` (resumed, before the first iteration)
   :func:`check_budget_schedulers_in_runner` (no other scheduler of the same parameter in an
   overlapping range, a resume that gave every budget scheduler its state). Our tools write it
   into the config they train (:func:`~budgeted.mmengine.config_edits.add_reliability_hooks`,
   also in the config they dump for MMSegmentation's, MMDetection's or MMPretrain's own
   ``tools/train.py``), and the shipped configs name it.
2. :class:`~budgeted.mmengine.time_budget.TimeBudgetTrainLoop` calls the same two functions from
   the hook it registers itself, whatever the config's ``ParamSchedulerHook``: a time budget needs
   its clock before the runner resumes the schedulers.
3. A config that only imports ``budgeted.mmengine`` (``custom_imports``), with MMEngine's own
   ``ParamSchedulerHook`` or a subclass of it: each budget scheduler checks itself at its first
   ``step()`` (after the first iteration, before that iteration's checkpoint: the
   ``ParamSchedulerHook`` has priority ``LOW``, the ``CheckpointHook`` ``VERY_LOW``), against
   what MMEngine's ``RuntimeInfoHook`` publishes for components without the runner in the
   runner's ``MessageHub`` (``max_iters``, ``iter``): ``end`` is checked; a resume that gave
   a scheduler no state, ``budget_on_resume`` and the other schedulers need point 1 or 2 (an
   entry's own ``on_resume`` works everywhere).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from mmengine.hooks import ParamSchedulerHook
from mmengine.registry import HOOKS

from .schedulers import BudgetParamScheduler

__all__ = [
    "BudgetParamSchedulerHook",
    "bind_budget_schedulers",
    "budget_schedulers",
    "check_budget_schedulers_in_runner",
]


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

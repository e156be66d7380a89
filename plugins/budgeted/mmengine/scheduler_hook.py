"""How a budget scheduler learns the runner that trains it: through a hook, not the call stack.

MMEngine's runner builds a scheduler from its config entry (filling a missing ``end`` with the
train loop's ``max_iters``) but passes it neither the loop nor the config. The runner's
documented hook points do: :class:`BudgetParamSchedulerHook` is MMEngine's ``ParamSchedulerHook``
(it steps every scheduler, as before) that also, for each budget scheduler,

- in ``before_run`` (the schedulers are built; nothing is resumed or trained yet) calls
  :meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.bind` with ``runner.train_loop`` and
  the config's ``budget_on_resume``: ``end`` must be the loop's ``max_iters`` (one line
  otherwise), the resume policy is the config's where the entry gives none, and a
  ``TimeBudgetTrainLoop`` makes the decay run over its seconds;
- in ``before_train`` (resumed, before the first iteration) calls
  :meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.check_in_runner` with
  ``runner.param_schedulers`` and ``runner.iter``: no other scheduler of the same parameter in an
  overlapping range, and a resume that gave every budget scheduler its state.

Every runner has a ``ParamSchedulerHook`` (one of MMEngine's default hooks, built from
``HOOKS`` by its type name), so importing this module registers the hook under that name too
(``force=True``): a config that imports ``budgeted.mmengine`` (``custom_imports``) gets the
checks with MMSegmentation's, MMDetection's or MMPretrain's own ``tools/train.py`` and no other
change. ``dict(type="BudgetParamSchedulerHook")`` names it explicitly.

A config may name a hook of its own instead (``default_hooks.param_scheduler=dict(type=
"MyHook")``, registered by its ``custom_imports``), a subclass of MMEngine's
``ParamSchedulerHook`` class itself, not of this one. So that the checks do not depend on the
exact class, importing this module also gives MMEngine's class the same ``before_run`` and
``before_train`` (:func:`bind_budget_schedulers`, :func:`check_budget_schedulers_in_runner`,
after any of its own: it has none in MMEngine 0.10), which every subclass inherits; only a
subclass that overrides them without calling ``super()`` goes without.
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


def _give_mmengines_hook_the_checks() -> None:
    """MMEngine's ``ParamSchedulerHook`` (so every subclass of it) binds and checks budget
    schedulers too: ``before_run`` / ``before_train`` call its own first, if it has any."""
    for name, check in (("before_run", bind_budget_schedulers),
                        ("before_train", check_budget_schedulers_in_runner)):  # fmt: skip
        own = ParamSchedulerHook.__dict__.get(name)
        if getattr(own, "budgeted", False):  # this module imported again: given already
            continue

        def hook_point(self: Any, runner: Any, _own: Any = own, _check: Any = check) -> None:
            if _own is not None:
                _own(self, runner)
            _check(runner)

        hook_point.budgeted = True  # type: ignore[attr-defined]
        hook_point.__name__ = hook_point.__qualname__ = name
        hook_point.__doc__ = f"MMEngine's hook point, with :func:`{check.__name__}` (budgeted)."
        setattr(ParamSchedulerHook, name, hook_point)


_give_mmengines_hook_the_checks()


@HOOKS.register_module(name="ParamSchedulerHook", force=True)
@HOOKS.register_module()
class BudgetParamSchedulerHook(ParamSchedulerHook):
    """MMEngine's ``ParamSchedulerHook``, which also binds each budget scheduler to the runner
    and checks it before training (see the module).

    Example:
        >>> from mmengine.registry import HOOKS
        >>> HOOKS.get("ParamSchedulerHook") is BudgetParamSchedulerHook
        True
    """

    def before_run(self, runner: Any) -> None:
        """Bind each budget scheduler to ``runner.train_loop`` and the config's
        ``budget_on_resume`` (before the runner resumes them)."""
        bind_budget_schedulers(runner)

    def before_train(self, runner: Any) -> None:
        """Check each budget scheduler against the others and the resumed iteration."""
        check_budget_schedulers_in_runner(runner)

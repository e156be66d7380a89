"""The checks of a budget scheduler's arguments and of the runner that trains it, each a one-line
:class:`~budgeted.errors.BudgetConfigError` (or :class:`~budgeted.errors.BudgetMismatchError`)
naming the value and what is allowed.

Two moments: the arguments alone, when the scheduler is built (:func:`check_scheduler_arguments`,
:func:`check_param_name`); the train loop, the other schedulers and the resume, once the runner
has built them (:func:`check_loop_end`, :func:`check_epoch_entry_end`, :func:`check_no_overlap`,
:func:`check_resumed`; called by :class:`~budgeted.mmengine.scheduler_hook.
BudgetParamSchedulerHook`).
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from mmengine.optim.scheduler.param_scheduler import INF

from ..control.engine import Resumed
from ..errors import BudgetConfigError, BudgetMismatchError
from ..schedules import TimeBudget, schedule_params
from ..schedules.contract import BudgetFieldError, check_fields
from .compat import GLOBAL_STEP, global_step

__all__ = [
    "ARGUMENT_NAMES", "REPLAN_NAMES", "RESUME_NAMES", "SCHEDULER_ARGUMENTS", "Resumed",
    "check_at_first_step", "check_epoch_arguments", "check_epoch_entry_end", "check_loop_end",
    "check_no_overlap", "check_param_name", "check_resumed", "check_scheduler_arguments",
    "resume_budget", "resume_fix", "resume_step"
]  # fmt: skip

SCHEDULER_ARGUMENTS = (
    "begin", "end", "by_epoch", "warmup_iters", "warmup_factor", "warmup_method", "on_resume",
)  # fmt: skip
"""The arguments every budget scheduler takes (besides ``optimizer`` and the schedule's own)."""

ARGUMENT_NAMES = {"total": "end - begin", "warmup": "warmup_iters"}
"""How the core's budget fields read in a refused argument's message (MMEngine's names)."""

RESUME_NAMES = {"total": "train_cfg.max_iters (end - begin)", "warmup": "warmup_iters"}
"""How the core's budget keys read in a refused resume's message (MMEngine's names)."""
REPLAN_NAMES = {"total": "train_cfg.max_iters", "warmup": "warmup_iters"}
"""The same, where the policy is to re-plan (the re-plan line names the loop's length)."""


def check_loop_end(
    name: str,
    end: int,
    max_iters: int | None,
    *,
    epoch_loop: bool = False,
    epochs: tuple[int, int] | None = None,
    loop_name: str = "the train loop",
) -> None:
    """Refuse a budget scheduler whose ``end`` is not the train loop's ``max_iters``
    (:func:`~budgeted.control.plan.length_agrees`; an epoch-based entry's ``epochs``:
    :func:`check_epoch_entry_end`, naming ``loop_name``).

    A budget that ends before the loop trains on at the last value; one that ends after it is
    cut short and never decays to its end. Either way the run would not train the budget the
    config states.

    Raises:
        BudgetConfigError: one line naming both values and the fix.

    Example:
        >>> check_loop_end("BudgetLinearLR", 8000, 8000)
        >>> check_loop_end("BudgetLinearLR", 8000, None)  # no train loop: nothing to compare
    """
    if epochs is not None:
        return check_epoch_entry_end(
            name, epochs, max_iters, epoch_loop=epoch_loop, loop_name=loop_name
        )
    if max_iters is None or end == max_iters:
        return
    effect = "be cut short" if end > max_iters else "end before training does"
    fix = (
        "in an epoch-based loop give begin/end in epochs with by_epoch=True and "
        "convert_to_iter_based=True, and leave out end so that the runner fills it from "
        "train_cfg.max_epochs"
        if epoch_loop
        else f"remove end so that the runner fills it from train_cfg.max_iters, or set "
        f"train_cfg.max_iters={end}"
    )
    raise BudgetConfigError(
        f"{name}: end={end} differs from the train loop's max_iters={max_iters}: the budget "
        f"would {effect}; {fix}"
    )


def check_epoch_entry_end(
    name: str, epochs: tuple[int, int], max_iters: int, *, epoch_loop: bool, loop_name: str
) -> None:
    """Refuse an epoch-based entry (``convert_to_iter_based=True``) whose length in iterations is
    not the train loop's.

    Raises:
        BudgetConfigError: one line naming both lengths and the loop's own key.

    Example:
        >>> check_epoch_entry_end("BudgetLinearLR", (3, 4), 12, epoch_loop=True, loop_name="x")
    """
    end, epoch_length = epochs
    end_iters = end * epoch_length
    if end_iters == max_iters:
        return
    head = (
        f"{name}: end={end} epochs x {epoch_length} iterations = {end_iters} "
        f"differs from the train loop's max_iters={max_iters}"
    )
    if epoch_loop:
        effect = "be cut short" if end_iters > max_iters else "end before training does"
        raise BudgetConfigError(
            f"{head}: the budget would {effect}; leave out end so that the runner fills it "
            f"from train_cfg.max_epochs, or set train_cfg.max_epochs={end}"
        )
    raise BudgetConfigError(
        f"{head} (by_epoch=True with convert_to_iter_based=True in an iteration-based "
        f"loop, {loop_name}); allowed there: by_epoch=False without convert_to_iter_based "
        "(end then defaults to train_cfg.max_iters)"
    )


def _check_schedule_arguments(name: str, schedule: str, params: Mapping[str, Any]) -> None:
    """Refuse an argument that is neither a budget scheduler's nor the schedule's parameter,
    naming both lists and the closest match (a typo such as ``warmup_iter``)."""
    try:
        own = list(schedule_params(schedule))
    except ValueError as err:
        raise BudgetConfigError(f"{name}: {err}") from None
    for key in params:
        if key in own:
            continue
        close = difflib.get_close_matches(key, [*SCHEDULER_ARGUMENTS, *own], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        takes = f"its parameters {', '.join(own)}" if own else "no parameters of its own"
        raise BudgetConfigError(
            f"{name}: unknown argument {key!r}; {hint}allowed: "
            f"{', '.join(SCHEDULER_ARGUMENTS)}, and the {schedule} schedule takes {takes}"
        )


def check_scheduler_arguments(
    name: str,
    schedule: str,
    params: Mapping[str, Any],
    *,
    begin: Any,
    end: Any,
    warmup_iters: Any,
    by_epoch: bool | None,
    warmup_factor: Any = 0.001,
    warmup_method: Any = "linear",
) -> None:
    """The arguments of a budget scheduler, before it is built (no optimizer, no runner): its
    own (``by_epoch``, whole iterations), then the budget contract's fields
    (:func:`budgeted.schedules.contract.check_fields`, named as MMEngine names them:
    :data:`ARGUMENT_NAMES`).

    ``by_epoch=None``: the entry does not set it, and MMEngine's default (True) applies; the
    refusal then says so, since the config never wrote ``by_epoch=True``.

    Raises:
        BudgetConfigError: one line naming the argument, its value and what is allowed.

    Example:
        >>> check_scheduler_arguments("BudgetLinearLR", "linear", {}, begin=0, end=100,
        ...                           warmup_iters=5, by_epoch=False)
    """
    _check_schedule_arguments(name, schedule, params)
    if by_epoch is None:
        raise BudgetConfigError(
            f"{name}: by_epoch is not set, and MMEngine's default makes it True (a schedule in "
            "epochs) without convert_to_iter_based=True; the budget is planned in iterations: "
            "write by_epoch=False in this param_scheduler entry of an iteration-based config "
            "(IterBasedTrainLoop), or by_epoch=True, convert_to_iter_based=True in an "
            "epoch-based one (budgeted-train-seg fills it in from the train loop)"
        )
    if by_epoch:
        raise BudgetConfigError(
            f"{name}: by_epoch=True without convert_to_iter_based=True; the budget is planned "
            "in iterations: set by_epoch=False in an iteration-based config "
            "(IterBasedTrainLoop) or convert_to_iter_based=True in an epoch-based one"
        )
    for key, value in (("begin", begin), ("end", end), ("warmup_iters", warmup_iters)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BudgetConfigError(
                f"{name}: {key}={value!r} is invalid; allowed: an integer >= 0"
                + (" (end defaults to train_cfg.max_iters)" if key == "end" else "")
            )
    if end >= INF:
        raise BudgetConfigError(
            f"{name}: end is not set; pass end=<last iteration + 1> or let the runner fill it "
            "from train_cfg.max_iters"
        )
    try:
        check_fields(
            total=end - begin, warmup=warmup_iters, warmup_factor=warmup_factor,
            warmup_method=warmup_method,
        )  # fmt: skip
    except BudgetFieldError as err:
        raise BudgetConfigError(f"{name}: {err.render(ARGUMENT_NAMES)}") from None


def check_epoch_arguments(
    name: str, begin: Any, end: Any, by_epoch: bool, epoch_length: Any
) -> None:
    """The arguments of an epoch-based entry (``convert_to_iter_based=True``).

    Raises:
        BudgetConfigError: one line naming the argument, its value and what is allowed.

    Example:
        >>> check_epoch_arguments("BudgetLinearLR", 0, 3, True, 4)
    """
    if not by_epoch:
        raise BudgetConfigError(f"{name}: convert_to_iter_based=True needs by_epoch=True")
    if not isinstance(epoch_length, int) or epoch_length <= 0:
        raise BudgetConfigError(
            f"{name}: epoch_length={epoch_length!r} is invalid; allowed: an int > 0"
        )
    for key, value in (("begin", begin), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BudgetConfigError(
                f"{name}: {key}={value!r} is invalid; allowed: a whole number of "
                "epochs >= 0" + (" (end defaults to train_cfg.max_epochs)" if key == "end" else "")
            )


def _is_scalar(value: Any) -> bool:
    """One number a scheduler can scale: a real number (not a bool) or a one-element tensor."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_param_name(name: str, optimizer: Any, param_name: str) -> None:
    """``param_name`` must be one number in every param group of ``optimizer``.

    Raises:
        BudgetConfigError: one line naming the group and the keys that hold numbers.

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> check_param_name("BudgetLinearLR", opt, "lr")
    """
    groups = getattr(optimizer, "param_groups", None) or []
    missing = [i for i, group in enumerate(groups) if param_name not in group]
    numbers_at = sorted(
        {k for group in groups for k, v in group.items() if _is_scalar(v) and k != "params"}
    )
    if missing:
        raise BudgetConfigError(
            f"{name}: param_name={param_name!r} is not a key of the optimizer's param groups "
            f"(group {missing[0]}); allowed: one of {', '.join(numbers_at)}"
        )
    not_scalar = [i for i, group in enumerate(groups) if not _is_scalar(group[param_name])]
    if not_scalar:
        value = groups[not_scalar[0]][param_name]
        raise BudgetConfigError(
            f"{name}: param_name={param_name!r} holds {value!r} in group {not_scalar[0]}, not "
            f"one number to scale; allowed: one of {', '.join(numbers_at)}"
        )


def check_no_overlap(scheduler: Any, schedulers: Iterable[Any]) -> None:
    """Refuse another scheduler of the same parameter and optimizer active in an overlapping
    range: ``scheduler`` computes its value from the initial one, so the other would be
    overwritten, or compound with it.

    Raises:
        BudgetConfigError: one line naming both schedulers and their ranges.
    """
    name = type(scheduler).__name__
    for other in schedulers:
        if (
            other is not scheduler
            and getattr(other, "optimizer", None) is scheduler.optimizer
            and getattr(other, "param_name", None) == scheduler.param_name
            and other.begin < scheduler.end
            and scheduler.begin < other.end
        ):
            raise BudgetConfigError(
                f"{name} [{scheduler.begin}, {scheduler.end}) and {type(other).__name__} "
                f"[{other.begin}, {other.end}) both schedule {scheduler.param_name}: {name} sets "
                "it from its initial value, so the other would be overwritten or compound "
                f"with it; allowed: {name} alone (its warmup_iters is the warmup), or a "
                f"stock warmup before it that ends where {name} begins"
            )


def check_resumed(scheduler: Any, loaded: bool, iteration: int) -> None:
    """Refuse a resume that gave ``scheduler`` no state (MMEngine pairs the config's schedulers
    with the checkpoint's by position: the list changed since the checkpoint), so that it would
    start its budget again at the runner's ``iteration``.

    Raises:
        BudgetMismatchError: one line saying what to keep or do instead.
    """
    if loaded or global_step(scheduler) == iteration:
        return
    raise BudgetMismatchError(
        f"cannot resume: {type(scheduler).__name__} got no state from the checkpoint (the runner "
        f"resumed at iteration {iteration}, this scheduler would start its budget there): "
        "MMEngine pairs param_scheduler entries with the checkpoint's by position, and the list "
        "has changed since the checkpoint; to resume, keep the checkpoint's "
        "param_scheduler list; to train another schedule, start a new run from its "
        "weights with load_from=<checkpoint> and resume=False"
    )


def check_at_first_step(scheduler: Any, epochs: tuple[int, int] | None, loaded: bool) -> None:
    """:func:`check_loop_end` (or :func:`check_epoch_entry_end`) and :func:`check_resumed` at a
    budget scheduler's first step in a runner that did not bind it, from what ``RuntimeInfoHook``
    published in the runner's ``MessageHub`` (:mod:`~budgeted.mmengine.scheduler_hook`, point 3);
    a hub at another step than the scheduler's (another runner's) is ignored.

    Raises:
        BudgetConfigError, BudgetMismatchError: one line.

    Example:
        >>> from types import SimpleNamespace
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> check_at_first_step(SimpleNamespace(optimizer=opt), None, False)  # no runner's hub
    """
    hub = getattr(scheduler.optimizer, "message_hub", None)
    if hub is None or hub.get_info("loop_stage") != "train":
        return
    max_iters, iteration = hub.get_info("max_iters"), hub.get_info("iter")
    if not isinstance(max_iters, int) or not isinstance(iteration, int):
        return
    if iteration != global_step(scheduler) and not loaded:
        return  # a hub another runner left (one stopped by an error), or a resume without state
    epoch_loop = hub.get_info("max_epochs") != 1
    check_loop_end(type(scheduler).__name__, scheduler.end, max_iters, epoch_loop=epoch_loop,
                   epochs=epochs)  # fmt: skip
    check_resumed(scheduler, loaded, iteration)


def resume_fix(saved: Mapping[str, Any] | None) -> str:
    """What to do instead of resuming a checkpoint whose ``saved`` budget is not the config's:
    keep its budget (naming its end where it has one), or start a new run from its weights.

    Example:
        >>> resume_fix({"begin": 0, "total": 900})[:58]
        "to resume, keep the checkpoint's budget (train_cfg.max_ite"
    """
    saved = saved or {}
    end = ""
    if isinstance(saved.get("total"), (int, float)):
        end = f" (train_cfg.max_iters={int(saved.get('begin', 0) + saved['total'])})"
    return (
        f"to resume, keep the checkpoint's budget{end}; to train another budget, start a new "
        "run from its weights with load_from=<checkpoint> and resume=False"
    )


def resume_budget(
    scheduler: Any, state: Mapping[str, Any] | None, time: TimeBudget | None = None
) -> Resumed:
    """A budget scheduler's resume decision (:meth:`budgeted.control.engine.BudgetEngine.resume`)
    on its saved ``state`` (:func:`budgeted.runs.mmengine.saved_schedulers`; None: none at its
    place), in MMEngine's words: its ``begin`` kept, the steps trained counted by
    :func:`resume_step`, and ``time``, its time budget, resumed on the state's clock.

    Raises:
        BudgetMismatchError: one line naming what differs and what to do.
        BudgetReplanError: a re-plan that cannot be made (one line).

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> from budgeted.mmengine import BudgetLinearLR
        >>> sched = BudgetLinearLR(opt, end=900, warmup_iters=100, by_epoch=False)
        >>> resume_budget(sched, sched.state_dict()).line is None  # the same budget
        True
    """
    saved = state.get("budget") if state is not None else None
    return scheduler.engine.resume(
        saved if isinstance(saved, Mapping) else None,
        at=resume_step(state) if state is not None else 0,
        words=scheduler.resume_words(),
        on_resume=scheduler.on_resume,
        fixed={"begin": scheduler.begin},
        state=state,
        time=time,
    )


def resume_step(state: Mapping[str, Any]) -> int:
    """The steps a budget scheduler's saved ``state`` has trained since its ``begin``.

    MMEngine's ``_global_step`` (every ``step()``), less ``begin``: ``last_step`` stops one short
    at the end of the budget (it only counts steps inside ``[begin, end)``), so a finished run's
    ``last_step`` would read as one iteration still to train.

    Example:
        >>> resume_step({"_global_step": 12, "last_step": 11, "begin": 0})
        12
    """
    step = state.get(GLOBAL_STEP)
    if not isinstance(step, int):
        return int(state.get("last_step") or 0)
    return max(step - int(state.get("begin") or 0), 0)

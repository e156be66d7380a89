"""What a run will load (``load_from``, ``--resume``, ``--resume-from``), checked before anything
is written.

MMEngine's runner creates the work dir, a timestamped log folder and the config dump as soon as it
is built, and only then loads the checkpoint, where a refusal comes too late: the folder has
already changed. :func:`plan_load` does the loading's checks first, on the file the runner will
load, and pins that file (``cfg.load_from``) so that the runner loads exactly it:

- the file is loaded as untrusted input (:func:`~budgeted.mmengine.checkpoint.
  load_mmengine_checkpoint`: ``weights_only``, the exact allow-list; ``.pth`` or ``.pkl``): a
  foreign global or a damaged file is one line naming the file (and, when resuming, the newest
  intact checkpoint of its folder, to take with ``--resume-from``);
- a resume needs a checkpoint the runner wrote (``meta``, ``message_hub``), whose budget
  schedulers have stepped as often as its iteration says (:func:`check_scheduler_steps`), with
  the config's budget (each budget scheduler's saved ``budget`` against the config's,
  :meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.check_resume`; a time budget's
  seconds and clock, :func:`check_time_budget_resume`);
- a resume of a finished run (its iterations, or its time budget, all trained) has nothing to do
  (:class:`NothingToResume`).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config
from mmengine.runner import find_latest_checkpoint

from ..safety import DamagedCheckpointError, check_later_checkpoints_kept, newest_intact_checkpoint
from ..schedules import BudgetMismatchError, BudgetReplanError, TimeBudget, parse_duration
from .checkpoint import MMENGINE_EXTRA_GLOBALS, keeping_safe_globals, load_mmengine_checkpoint
from .compat import GLOBAL_STEP

__all__ = [
    "LoadPlan",
    "NothingToResume",
    "check_scheduler_steps",
    "check_time_budget_resume",
    "checkpoint_name_pattern",
    "newest_resumable_checkpoint",
    "plan_load",
    "saved_scheduler_states",
    "state_place",
]

_REMOTE = re.compile(r"^[\w.+-]*:(//)?")
"""``s3://...``, ``open-mmlab://...``, ``torchvision://...``: MMEngine's own loaders, not files."""


class NothingToResume(Exception):
    """``--resume`` of a run that already trained its whole budget (a message, not an error)."""


@dataclass
class LoadPlan:
    """What the runner will load: ``path`` (None: nothing), as a resume or as weights; ``note``:
    a line to log where ``--resume`` chose another file than ``load_from`` names."""

    path: str | None
    resume: bool
    note: str | None = None


def _is_local(path: str) -> bool:
    return not _REMOTE.match(path) or os.path.exists(path)


def _checkpoint_hook(cfg: Config) -> dict[str, Any]:
    """The config's checkpoint hook settings, ``by_epoch`` filled in (MMEngine's default: True)."""
    hook = dict((cfg.get("default_hooks") or {}).get("checkpoint") or {})
    hook.setdefault("by_epoch", True)
    return hook


def checkpoint_name_pattern(cfg: Config) -> re.Pattern[str]:
    """The names the config's checkpoint hook gives its checkpoints (``iter_(\\d+)\\.pth``).

    Example:
        >>> checkpoint_name_pattern(Config(dict())).pattern
        'epoch_(\\\\d+)\\\\.pth'
    """
    hook = _checkpoint_hook(cfg)
    tmpl = hook.get("filename_tmpl") or ("epoch_{}.pth" if hook["by_epoch"] else "iter_{}.pth")
    head, _, tail = tmpl.partition("{}")
    return re.compile(re.escape(head) + r"(\d+)" + re.escape(tail))


def newest_resumable_checkpoint(
    folder: str | os.PathLike[str], cfg: Config, exclude: Iterable[str | os.PathLike[str]] = ()
) -> Path | None:
    """The newest checkpoint in ``folder`` named as the checkpoint hook names them (not
    ``best_*``, not published copies, not temporary files) that loads safely and intact.

    Example:
        >>> import tempfile
        >>> newest_resumable_checkpoint(tempfile.mkdtemp(), Config(dict())) is None
        True
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    pattern = checkpoint_name_pattern(cfg)
    others = [p for p in folder.glob("*.pth") if not pattern.fullmatch(p.name)]
    # a symbolic link to nowhere is no candidate either way (and Path.resolve fails on a loop)
    skip = [p for p in [*exclude, *others] if os.path.exists(p) or not os.path.islink(p)]
    with keeping_safe_globals():
        return newest_intact_checkpoint(
            folder, "*.pth", exclude=skip, extra_globals=MMENGINE_EXTRA_GLOBALS
        )


def _offer(folder: Path, cfg: Config, damaged: str | None) -> str:
    intact = newest_resumable_checkpoint(folder, cfg, exclude=[damaged] if damaged else [])
    if intact is None:
        return f"no intact checkpoint in {folder}: start a new run (another --work-dir)"
    return (
        f"the newest intact checkpoint in {folder} is {intact.name}: resume from it with "
        f"--resume-from {intact}"
    )


def _last_checkpoint(work_dir: Path, cfg: Config, *, required: bool = True) -> str | None:
    """The file MMEngine's ``--resume`` loads (:func:`mmengine.runner.find_latest_checkpoint`:
    the one ``<work_dir>/last_checkpoint`` names), checked; None when there is nothing (or, with
    ``required=False``, no ``last_checkpoint`` even beside checkpoints)."""
    record = work_dir / "last_checkpoint"
    if not record.exists():
        pattern = checkpoint_name_pattern(cfg)
        held = sorted(p.name for p in work_dir.glob("*.pth") if pattern.fullmatch(p.name))
        if held and required:
            raise DamagedCheckpointError(
                f"cannot resume: {work_dir} holds checkpoints ({', '.join(held[:3])}"
                f"{', ...' if len(held) > 3 else ''}) but no last_checkpoint naming the latest; "
                + _offer(work_dir, cfg, None)
            )
        return None  # nothing to resume: MMEngine starts the run from scratch
    try:
        named = find_latest_checkpoint(str(work_dir)) or ""
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedCheckpointError(
            f"cannot resume: {record} cannot be read ({err}); " + _offer(work_dir, cfg, None)
        ) from None
    if not named or "\n" in named:
        raise DamagedCheckpointError(
            f"cannot resume: {record} does not name a checkpoint; " + _offer(work_dir, cfg, None)
        )
    if _REMOTE.match(named) and not os.path.exists(named):
        return named
    here = work_dir / Path(named).name
    if here.is_file() and _real(named).parent != _real(work_dir):
        return str(here)  # the work dir was moved or copied: its own checkpoint, not the old one
    if not os.path.isfile(named):
        raise DamagedCheckpointError(
            f"cannot resume: {record} names {named}, which does not exist; "
            + _offer(work_dir, cfg, None)
        )
    return named


def _real(path: str | os.PathLike[str]) -> Path:
    """The path with its symbolic links resolved as far as they go (a loop stays as it is:
    ``Path.resolve`` raises ``RuntimeError`` on one)."""
    return Path(os.path.realpath(path))


def _link_trouble(path: str) -> str | None:
    """What is wrong with ``path`` when it is a symbolic link that leads to no file."""
    if not os.path.islink(path) or os.path.exists(path):
        return None
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return f"checkpoint '{path}' is a symbolic link loop ({err.strerror})"
    return f"checkpoint '{path}' is a symbolic link to {os.readlink(path)}, which does not exist"


def _holds_tensors(obj: Any, depth: int = 0) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if depth > 3:
        return False
    if isinstance(obj, Mapping):
        return any(_holds_tensors(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_holds_tensors(v, depth + 1) for v in obj[:64])
    return False


def _check_resumable(path: str, checkpoint: Any) -> None:
    meta = checkpoint.get("meta") if isinstance(checkpoint, Mapping) else None
    missing = [
        key
        for key, ok in (
            ("meta.iter", isinstance(meta, Mapping) and isinstance(meta.get("iter"), int)),
            ("meta.epoch", isinstance(meta, Mapping) and isinstance(meta.get("epoch"), int)),
            ("message_hub", isinstance(checkpoint, Mapping) and "message_hub" in checkpoint),
            ("state_dict", isinstance(checkpoint, Mapping) and "state_dict" in checkpoint),
        )
        if not ok
    ]
    if missing:
        raise ValueError(
            f"cannot resume from {path}: it is not a checkpoint of MMEngine's runner (no "
            f"{', '.join(missing)}); resume from an iter_<N>.pth the runner wrote, or start a new "
            f"run from its weights with --cfg-options load_from={path} (without --resume)"
        )


def _check_finished(path: str, checkpoint: Mapping, cfg: Config) -> None:
    train_cfg = cfg.get("train_cfg") or {}
    meta = checkpoint["meta"]
    for key, meta_key in (("max_iters", "iter"), ("max_epochs", "epoch")):
        end = train_cfg.get(key)
        if isinstance(end, int) and meta[meta_key] >= end:
            raise NothingToResume(
                f"nothing to resume: {path} is at {meta_key} {meta[meta_key]} of "
                f"train_cfg.{key}={end}, the run has trained its whole budget (nothing was "
                "written); to train it longer, start a new run from its weights with "
                f"load_from={path}"
            )


def _file_to_load(cfg: Config, own_first: bool) -> tuple[str | None, str | None, str | None]:
    """``(file, started_from, note)``: the file to load, ``cfg.load_from`` where ``--resume``
    found no checkpoint of the run's own (``started_from``, else None), and the line saying that
    the run's own checkpoint wins over ``load_from`` (else None).

    ``own_first``: ``--resume`` (not ``--resume-from``): the checkpoint ``last_checkpoint`` in the
    work dir names comes first.
    """
    path = None if cfg.get("load_from") is None else str(cfg.get("load_from"))
    if not own_first:
        return path, None, None
    # with load_from set, checkpoints without a last_checkpoint are not this run's record
    own = _last_checkpoint(Path(cfg.work_dir), cfg, required=path is None)
    if own is None:
        return path, path, None
    note = None
    if path is not None and not _same_file(own, path):
        note = (
            f"--resume: going on from the work dir's own checkpoint {own}, not from "
            f"load_from={path} (the weights this run started from); to resume that file "
            f"instead, pass --resume-from {path}"
        )
    return own, None, note


def plan_load(
    cfg: Config,
    resume_from: str | None = None,
    check_budget: Callable[[Config, Mapping, str], None] | None = None,
    check_weights: Callable[[Config, Any, str], None] | None = None,
) -> LoadPlan:
    """Check the file the runner will load, before anything is written; pin it in ``cfg``.

    Which file: ``resume_from`` (``--resume-from``: exactly that one, as a resume); with
    ``cfg.resume`` (``--resume``), the file ``last_checkpoint`` in the work dir names (in the
    work dir itself if that folder was moved), as Detectron2's ``--resume`` takes the output
    dir's: a run's own newest checkpoint wins over the ``load_from`` it started from, so a
    preempted fine-tuning run goes on from its own work; with no checkpoint in the work dir,
    ``cfg.load_from``: resumed if the runner wrote it, else loaded as the weights a new run
    starts from (the run never wrote a checkpoint: nothing to resume). Without ``--resume``,
    ``cfg.load_from`` (weights only). Files on MMEngine's remote schemes (``s3://``...) are left
    to MMEngine.

    Args:
        cfg (Config): the training config (``resume``, ``load_from``, ``work_dir``; changed in
            place: ``load_from`` becomes the checked file when resuming).
        resume_from (str, optional): ``--resume-from``.
        check_budget (callable, optional): ``(cfg, checkpoint, path)`` raising a one-line
            ``ValueError`` when the checkpoint's budget is not the config's.
        check_weights (callable, optional): ``(cfg, checkpoint, path)`` raising a one-line
            ``ValueError`` when weights to start from (not resumed) do not fit the model.

    Returns:
        LoadPlan: the file and whether it is resumed.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError, BudgetMismatchError, ValueError: one
            line naming the file and what to do.
        NothingToResume: the checkpoint already reached the end of the budget.
    """
    if resume_from is not None:
        cfg.resume = True
        cfg.load_from = resume_from
    resume = bool(cfg.get("resume"))
    path, started_from, note = _file_to_load(cfg, resume and resume_from is None)
    if path is None:
        return LoadPlan(None, resume)
    if not _is_local(path):
        return LoadPlan(path, resume, note)
    try:
        checkpoint = load_mmengine_checkpoint(path)
    except DamagedCheckpointError as err:
        said = _link_trouble(path) or str(err)
        if not resume:
            raise DamagedCheckpointError(said) from None
        raise DamagedCheckpointError(f"{said}; {_offer(_real(path).parent, cfg, path)}") from None
    if resume and started_from is not None and not _is_runner_checkpoint(checkpoint):
        resume = cfg.resume = False  # nothing of this run to resume: start from the weights
        note = (
            f"--resume: no checkpoint in {cfg.work_dir} yet; starting the run from "
            f"load_from={path} as weights"
        )
    if resume:
        _check_resumable(path, checkpoint)
        check_scheduler_steps(path, checkpoint, cfg)
        if check_budget is not None:
            check_budget(cfg, checkpoint, path)
        _check_finished(path, checkpoint, cfg)
        if resume_from is not None:  # the run's newer checkpoints are not overwritten
            _check_later_kept(cfg, path, checkpoint)
        cfg.load_from = path  # the runner resumes from exactly the file checked here
    else:
        _check_weights(path, checkpoint)
        if check_weights is not None:
            check_weights(cfg, checkpoint, path)
    return LoadPlan(path, resume, note)


def _check_later_kept(cfg: Config, path: str, checkpoint: Mapping) -> None:
    """``--resume-from`` an earlier checkpoint must not overwrite the work dir's later ones."""
    pattern = checkpoint_name_pattern(cfg)
    check_later_checkpoints_kept(
        path,
        checkpoint["meta"]["epoch" if _checkpoint_hook(cfg)["by_epoch"] else "iter"],
        [p for p in Path(cfg.work_dir).glob("*.pth") if pattern.fullmatch(p.name)],
        folder_key="--work-dir",
        extra_globals=MMENGINE_EXTRA_GLOBALS,
    )


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a == b


def _is_runner_checkpoint(checkpoint: Any) -> bool:
    try:
        _check_resumable("", checkpoint)
    except ValueError:
        return False
    return True


def _check_weights(path: str, checkpoint: Any) -> None:
    if not _holds_tensors(checkpoint):
        raise ValueError(
            f"load_from={path} holds no tensors (a plain pickle, not a torch checkpoint): "
            "MMEngine loads weights written by torch.save (.pth)"
        )


def saved_scheduler_states(saved: Any) -> dict[tuple[str | None, int], Mapping]:
    """Each scheduler state of a checkpoint's ``param_schedulers`` (a list, or a dict of lists
    per optimizer) by ``(optimizer name or None, position)``: how MMEngine's ``Runner.resume``
    pairs them with the config's schedulers (``zip`` of the two lists).

    Example:
        >>> saved_scheduler_states([{"last_step": 3}, "not a state"])
        {(None, 0): {'last_step': 3}}
    """
    groups = saved.items() if isinstance(saved, Mapping) else [(None, saved)]
    return {
        (group, index): state
        for group, states in groups
        for index, state in enumerate(states if isinstance(states, list) else [])
        if isinstance(state, Mapping)
    }


def state_place(group: str | None, index: int) -> str:
    """Where a saved scheduler state is in ``param_schedulers``: ``[0]``, ``['backbone'][1]``."""
    return f"[{group!r}][{index}]" if group is not None else f"[{index}]"


def check_scheduler_steps(path: str, checkpoint: Mapping, cfg: Config) -> None:
    """Refuse a checkpoint whose budget schedulers have not stepped as its iteration says.

    The runner steps every iteration-based scheduler once per iteration, so after ``N``
    iterations (``meta.iter``, where the resumed loop goes on) a scheduler of ``[begin, end)``
    holds ``_global_step = N`` and ``last_step = min(N, end - 1) - begin`` (``-1`` before
    ``begin``). A file whose counts disagree (edited, or assembled from two runs) would train
    every remaining iteration off the schedule (a ``last_step`` moved by 20 leaves the LR at its
    end value), so it is refused. Budget schedulers only (their state holds ``budget``).

    Raises:
        ValueError: one line naming the scheduler, both counts and what to do.
    """
    iteration = checkpoint["meta"]["iter"]
    for (group, index), state in saved_scheduler_states(checkpoint.get("param_schedulers")).items():
        where = state_place(group, index)
        begin, end = state.get("begin", 0), state.get("end")
        if "budget" not in state or not isinstance(begin, int) or not isinstance(end, int):
            continue
        expected = (iteration, min(iteration, end - 1) - begin if iteration >= begin else -1)
        found = (state.get(GLOBAL_STEP), state.get("last_step"))
        if found == expected:
            continue
        raise ValueError(
            f"cannot resume from {path}: its budget scheduler param_scheduler{where} has "
            f"_global_step={found[0]!r}, last_step={found[1]!r}, but the checkpoint is at "
            f"iteration {iteration} (meta.iter), where they are {expected[0]}, {expected[1]}: "
            "the schedule would go on from another iteration than training (the file was "
            "edited or mixed); resume from a checkpoint the runner wrote ("
            + _offer(_real(path).parent, cfg, path)
            + ")"
        )


def _time_seconds(cfg: Config) -> float | None:
    loop = cfg.get("train_cfg") or {}
    if str(loop.get("type", "")).split(".")[-1] != "TimeBudgetTrainLoop":
        return None
    return parse_duration(loop.get("seconds"))


def check_time_budget_resume(cfg: Config, scheduler: Any, saved: Mapping | None, path: str) -> None:
    """Compare a time budget with the checkpoint's before the runner exists, as the scheduler
    does when the runner resumes it (:meth:`budgeted.schedules.clock.TimeBudget.resume`): another
    ``seconds`` (unless ``budget_on_resume="replan"``), a re-plan that cannot be made (a
    deadline already passed), a time budget resumed as an iteration budget or the reverse are
    one line; a time budget already spent is :class:`NothingToResume`.

    Args:
        cfg (Config): the training config (``train_cfg``: the loop, its ``seconds``).
        scheduler: the budget scheduler the config builds there (a stand-in optimizer's).
        saved (Mapping, optional): that scheduler's state in the checkpoint.
        path (str): the checkpoint, for messages.

    Raises:
        BudgetMismatchError, BudgetReplanError: one line.
        NothingToResume: the checkpoint's clock already reached the same time budget.
    """
    seconds = _time_seconds(cfg)
    old = (saved or {}).get("time_budget")
    if seconds is None:
        if isinstance(old, Mapping) and isinstance(old.get("seconds"), (int, float)):
            raise BudgetMismatchError(
                f"cannot resume from {path}: its budget is a time budget of {old['seconds']:g} s, "
                "the config's counts iterations; resume with the same time budget (--budget-time "
                f"{old['seconds']:g}s), or start a new run from its weights with "
                f"load_from={path} and resume=False"
            )
        return
    budget = TimeBudget(
        scheduler.schedule,
        seconds,
        scheduler.warmup_iters,
        scheduler.warmup_factor,
        scheduler.warmup_method,
        scheduler.params,
    )
    elapsed = float(((saved or {}).get("clock") or {}).get("elapsed", 0.0))
    try:
        budget.resume(old, elapsed, scheduler.on_resume)
    except BudgetReplanError as err:
        raise BudgetReplanError(f"{type(scheduler).__name__}: {err}") from None
    if isinstance(old, Mapping) and old.get("seconds") == seconds and budget.done(elapsed):
        raise NothingToResume(
            f"nothing to resume: {path} is after {elapsed:.1f} s of training, its whole time "
            f"budget of {seconds:g} s (nothing was written); to train it longer, start a new run "
            f"from its weights with load_from={path}"
        )

"""What a run will load (``load_from``, ``--resume``, ``--resume-from``), checked before anything
is written.

:func:`plan_load` loads the file the runner will load as untrusted input, checks it (a runner's
checkpoint, its schedulers' step counts, the config's budget through the one resume route, not
finished) and pins it (``cfg.load_from``) so that the runner loads exactly it. Its base LRs
(:func:`check_resume_base_lrs`) are the config's as the runner builds them (the model and its
optimizer wrapper built without weights, ``paramwise_cfg`` and ``auto_scale_lr`` applied), through
:meth:`budgeted.control.resume.ResumeCheck.base_lrs`; a budget scheduler checks its own
``base_values`` again when any runner loads it (:func:`~budgeted.control.engine.check_loaded`).
"""

from __future__ import annotations

import copy
import errno
import importlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from mmengine.config import Config
from mmengine.runner import find_latest_checkpoint

from ..control.resume import ResumeCheck
from ..runs import SavedLRs
from ..runs.mmengine import (
    _REMOTE,
    extra_globals,
    load_checkpoint,
    resume_checkpoint,
    saved_base_lrs,
    saved_schedulers,
    scheduler_place,
    state_place,
)
from ..safety import DamagedCheckpointError, check_later_checkpoints_kept, newest_intact_checkpoint
from ..schedules import BudgetMismatchError, parse_duration
from ..schedules.base_lrs import ConfiguredLRs, build_without_weights
from .compat import GLOBAL_STEP
from .scheduler_checks import resume_budget

__all__ = [
    "LR_KEY", "LoadPlan", "NothingToResume", "PlannedLRs", "check_resume_base_lrs",
    "check_scheduler_steps", "check_time_budget_resume", "checkpoint_name_pattern",
    "configured_base_lrs", "newest_resumable_checkpoint", "plan_load", "state_place"
]  # fmt: skip


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
    return newest_intact_checkpoint(folder, "*.pth", exclude=skip, extra_globals=extra_globals())


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
    named = resume_checkpoint(work_dir)
    if named is None:
        try:
            find_latest_checkpoint(str(work_dir))
        except (OSError, UnicodeDecodeError) as err:
            raise DamagedCheckpointError(
                f"cannot resume: {record} cannot be read ({err}); " + _offer(work_dir, cfg, None)
            ) from None
        raise DamagedCheckpointError(
            f"cannot resume: {record} does not name a checkpoint; " + _offer(work_dir, cfg, None)
        )
    if _is_local(named) and not os.path.isfile(named):
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

    Which file: ``resume_from`` (exactly that one, as a resume); with ``cfg.resume``, the file
    ``last_checkpoint`` names (:func:`budgeted.runs.mmengine.resume_checkpoint`: the run's own
    newest checkpoint wins over ``load_from``), else ``cfg.load_from`` (resumed if the runner
    wrote it, else loaded as weights). Remote files (``s3://``...) are left to MMEngine.

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
        checkpoint = load_checkpoint(path)
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
        extra_globals=extra_globals(),
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


def check_scheduler_steps(path: str, checkpoint: Mapping, cfg: Config) -> None:
    """Refuse a checkpoint whose budget schedulers have not stepped as its iteration says.

    After ``N`` iterations (``meta.iter``) a scheduler of ``[begin, end)`` holds
    ``_global_step = N`` and ``last_step = min(N, end - 1) - begin`` (``-1`` before ``begin``);
    other counts (an edited or mixed file) would train off the schedule.

    Raises:
        ValueError: one line naming the scheduler, both counts and what to do.
    """
    iteration = checkpoint["meta"]["iter"]
    for key, state in saved_schedulers(checkpoint).items():
        where = state_place(*scheduler_place(key))
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
    """The pre-flight's resume of one budget scheduler (built on a stand-in optimizer) from its
    ``saved`` state (:func:`~budgeted.mmengine.scheduler_checks.resume_budget`), with the time
    budget of a ``TimeBudgetTrainLoop`` in ``train_cfg``, before the runner exists.

    Raises:
        BudgetMismatchError, BudgetReplanError: one line.
        NothingToResume: the checkpoint's clock already reached the same time budget.
    """
    seconds = _time_seconds(cfg)
    old = (saved or {}).get("time_budget")
    time = None if seconds is None else scheduler.over_seconds(seconds)
    elapsed = resume_budget(scheduler, saved, time).elapsed
    if seconds is None:
        if isinstance(old, Mapping) and isinstance(old.get("seconds"), (int, float)):
            raise BudgetMismatchError(
                f"cannot resume from {path}: its budget is a time budget of {old['seconds']:g} s, "
                "the config's counts iterations; resume with the same time budget (--budget-time "
                f"{old['seconds']:g}s), or start a new run from its weights with "
                f"load_from={path} and resume=False"
            )
    elif isinstance(old, Mapping) and old.get("seconds") == seconds and time.done(elapsed):
        raise NothingToResume(
            f"nothing to resume: {path} is after {elapsed:.1f} s of training, its whole time "
            f"budget of {seconds:g} s (nothing was written); to train it longer, start a new run "
            f"from its weights with load_from={path}"
        )


LR_KEY = "optim_wrapper.optimizer.lr"
"""The config key of the LR of the only optimizer wrapper."""


def _scale(cfg: Config) -> float:
    """The factor MMEngine's ``Runner.scale_lr`` applies to the optimizers' param groups (1.0 unless
    ``auto_scale_lr.enable``): the real batch (world size x ``train_dataloader.batch_size``)
    over ``auto_scale_lr.base_batch_size``."""
    auto = cfg.get("auto_scale_lr") or {}
    if not auto.get("enable", False) or not auto.get("base_batch_size"):
        return 1.0
    batch = (cfg.get("train_dataloader") or {}).get("batch_size", 1)
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return float(world * batch) / float(auto["base_batch_size"])


class PlannedLRs(NamedTuple):
    """What a config gives one optimizer wrapper: ``schedulers``, the LR of each param group a
    scheduler of it sees (``OptimWrapper.param_groups``: with ``paramwise_cfg`` one more, the
    base settings it logs), and ``optimizer``, of each of the optimizer's own groups (what its
    state holds)."""

    schedulers: ConfiguredLRs
    optimizer: ConfiguredLRs


def configured_base_lrs(cfg: Config) -> dict[str | None, PlannedLRs] | None:
    """The LR ``cfg`` gives each param group of each optimizer wrapper (``None``: the only one;
    else the ``OptimWrapperDict``'s names), as the runner builds them: the model and
    ``optim_wrapper`` built without weights
    (:func:`~budgeted.schedules.base_lrs.build_without_weights`; its log lines held back),
    ``auto_scale_lr`` applied; None where they cannot be built here (the runner says why).
    """
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope

    if cfg.get("model") is None or cfg.get("optim_wrapper") is None:
        return None
    scope = cfg.get("default_scope") or "mmengine"
    try:  # the scope's registry (``mmseg.registry``), imported: its models registered
        models = importlib.import_module(f"{scope}.registry").MODELS
    except (ImportError, AttributeError):
        from mmengine.registry import MODELS as models

    def build() -> Any:
        spec = copy.deepcopy(cfg.model)
        if cfg.get("data_preprocessor") is not None:  # as Runner.__init__ fills it in
            spec.setdefault("data_preprocessor", copy.deepcopy(cfg.data_preprocessor))
        logging.disable(logging.INFO)  # paramwise_cfg logs a line per parameter
        try:
            with DefaultScope.overwrite_default_scope(scope):
                return build_optim_wrapper(models.build(spec), copy.deepcopy(cfg.optim_wrapper))
        finally:
            logging.disable(logging.NOTSET)

    built = build_without_weights(build)
    if built is None:
        return None
    named = getattr(built, "optim_wrappers", None) or {None: built}
    factor = _scale(cfg)
    found = {}
    for name, wrapper in named.items():
        spec = cfg.optim_wrapper if name is None else cfg.optim_wrapper.get(name, {})
        value = (spec.get("optimizer") or {}).get("lr")
        value = float(value) if isinstance(value, (int, float)) else None
        key = LR_KEY if name is None else f"optim_wrapper.{name}.optimizer.lr"
        for group in wrapper.optimizer.param_groups:  # as Runner.scale_lr scales them
            group["lr"] = group["lr"] * factor
        seen = (wrapper.param_groups, wrapper.optimizer.param_groups)
        found[name] = PlannedLRs(*(ConfiguredLRs([float(g["lr"]) for g in groups], key, value)
                                   for groups in seen))  # fmt: skip
    return found


def check_resume_base_lrs(cfg: Config, checkpoint: Mapping, path: str) -> None:
    """Refuse to resume ``checkpoint`` when its base LRs (each LR scheduler's ``base_values``,
    the optimizer's ``initial_lr`` per param group) are not what the config gives each group.

    Raises:
        BudgetMismatchError: one line naming the file, the group, both base LRs and what to do.
    """
    configured = configured_base_lrs(cfg)
    if configured is None:
        return
    fix = f"start a new run from its weights with --cfg-options load_from={path} (without --resume)"

    def planned(record: SavedLRs) -> ConfiguredLRs | None:
        found = configured.get(record.group)
        if found is None:
            return None  # another optimizer than the config's: the runner refuses it
        return found.schedulers if record.where == "base_values" else found.optimizer

    ResumeCheck(path, f"cannot resume from {path}", fix).base_lrs(
        saved_base_lrs(checkpoint), planned
    )

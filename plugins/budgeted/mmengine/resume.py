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
- a resume needs a checkpoint the runner wrote (``meta``, ``message_hub``), with the config's
  budget (each budget scheduler's saved ``budget`` against the config's,
  :meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.check_resume`);
- a resume of a finished run has nothing to do (:class:`NothingToResume`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config

from ..checkpoints import (
    DamagedCheckpointError,
    check_later_checkpoints_kept,
    newest_intact_checkpoint,
)
from .checkpoint import MMENGINE_EXTRA_GLOBALS, keeping_safe_globals, load_mmengine_checkpoint

__all__ = [
    "LoadPlan",
    "NothingToResume",
    "checkpoint_name_pattern",
    "newest_resumable_checkpoint",
    "plan_load",
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
    with keeping_safe_globals():
        return newest_intact_checkpoint(
            folder, "*.pth", exclude=[*exclude, *others], extra_globals=MMENGINE_EXTRA_GLOBALS
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
    """The file ``<work_dir>/last_checkpoint`` names, checked; None when there is nothing (or,
    with ``required=False``, no ``last_checkpoint`` even beside checkpoints)."""
    record = work_dir / "last_checkpoint"
    pattern = checkpoint_name_pattern(cfg)
    if not record.exists() and not required:
        return None
    if not record.exists():
        held = sorted(p.name for p in work_dir.glob("*.pth") if pattern.fullmatch(p.name))
        if held:
            raise DamagedCheckpointError(
                f"cannot resume: {work_dir} holds checkpoints ({', '.join(held[:3])}"
                f"{', ...' if len(held) > 3 else ''}) but no last_checkpoint naming the latest; "
                + _offer(work_dir, cfg, None)
            )
        return None  # nothing to resume: MMEngine starts the run from scratch
    try:
        named = record.read_text(encoding="utf-8").strip()
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
    if here.is_file() and Path(named).resolve().parent != work_dir.resolve():
        return str(here)  # the work dir was moved or copied: its own checkpoint, not the old one
    if not os.path.isfile(named):
        raise DamagedCheckpointError(
            f"cannot resume: {record} names {named}, which does not exist; "
            + _offer(work_dir, cfg, None)
        )
    return named


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


def plan_load(
    cfg: Config,
    resume_from: str | None = None,
    check_budget: Callable[[Config, Mapping, str], None] | None = None,
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
    path = None if cfg.get("load_from") is None else str(cfg.get("load_from"))
    note = None
    started_from = None  # --resume with no checkpoint of its own yet: the run's load_from
    if resume and resume_from is None:
        # with load_from set, checkpoints without a last_checkpoint are not this run's record
        own = _last_checkpoint(Path(cfg.work_dir), cfg, required=path is None)
        if own is None:
            started_from = path
        elif path is not None and not _same_file(own, path):
            note = (
                f"--resume: going on from the work dir's own checkpoint {own}, not from "
                f"load_from={path} (the weights this run started from); to resume that file "
                f"instead, pass --resume-from {path}"
            )
        path = own if own is not None else path
    if path is None:
        return LoadPlan(None, resume)
    if not _is_local(path):
        return LoadPlan(path, resume, note)
    try:
        checkpoint = load_mmengine_checkpoint(path)
    except DamagedCheckpointError as err:
        if not resume:
            raise
        folder = Path(path).resolve().parent
        raise DamagedCheckpointError(f"{err}; {_offer(folder, cfg, path)}") from None
    if resume and started_from is not None and not _is_runner_checkpoint(checkpoint):
        resume = cfg.resume = False  # nothing of this run to resume: start from the weights
        note = (
            f"--resume: no checkpoint in {cfg.work_dir} yet; starting the run from "
            f"load_from={path} as weights"
        )
    if resume:
        _check_resumable(path, checkpoint)
        if check_budget is not None:
            check_budget(cfg, checkpoint, path)
        _check_finished(path, checkpoint, cfg)
        if resume_from is not None:  # the run's newer checkpoints are not overwritten
            pattern = checkpoint_name_pattern(cfg)
            check_later_checkpoints_kept(
                path,
                checkpoint["meta"]["epoch" if _checkpoint_hook(cfg)["by_epoch"] else "iter"],
                [p for p in Path(cfg.work_dir).glob("*.pth") if pattern.fullmatch(p.name)],
                folder_key="--work-dir",
                extra_globals=MMENGINE_EXTRA_GLOBALS,
            )
        cfg.load_from = path  # the runner resumes from exactly the file checked here
    else:
        _check_weights(path, checkpoint)
    return LoadPlan(path, resume, note)


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

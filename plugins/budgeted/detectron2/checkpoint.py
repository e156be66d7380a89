"""``SafeCheckpointer``: Detectron2's ``DetectionCheckpointer`` that never runs code from a file
and never leaves a torn checkpoint behind.

Every file is loaded through :func:`budgeted.safety.load_checkpoint` (no pickle runs code; a
refusal is one line), checkpoints are saved atomically, a full disk ends the run in one line. A
trainer of your own adopts it, and preemption, in one line after it is built::

    trainer = Trainer(cfg)
    bd2.use_safe_checkpointer(trainer)  # its hooks save through it too; + PreemptionHook
    trainer.resume_or_load(resume=args.resume)
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.engine import HookBase
from detectron2.utils import comm

from ..runs.detectron2 import resume_checkpoint
from ..safety import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    atomic_write_text,
    checkpoint_iterations,
    is_zip_checkpoint,
    load_checkpoint,
    newest_intact_checkpoint,
)
from ..safety.loading import pickle_globals
from ..safety.writing import save_and_point
from .compat import reads_files_with, replace_checkpointer, trainer_hooks
from .stops import disk_full, is_disk_full

__all__ = [
    "CHECKPOINT_PATTERN", "MMENGINE_CHECKPOINT_NAME", "CheckpointAtHook", "SafeCheckpointer",
    "check_weights_layout", "last_checkpoint_file", "load_weights_file", "offer_intact",
    "resumed_checkpoint_file", "use_safe_checkpointer"
]  # fmt: skip

CHECKPOINT_PATTERN = "model_*.pth"
"""The checkpoints Detectron2's trainers write: ``model_0000999.pth``, ``model_final.pth``."""


def _local(path: str) -> bool:
    return "://" not in path


last_checkpoint_file = resume_checkpoint
"""The checkpoint ``folder/last_checkpoint`` names (the run-folder reader's
:func:`~budgeted.runs.detectron2.resume_checkpoint`)."""


MMENGINE_CHECKPOINT_NAME = re.compile(r"(best_.*_)?(iter|epoch)_\d+\.pth")
"""The names MMEngine's ``CheckpointHook`` gives checkpoints (``iter_40.pth``, ``epoch_3.pth``,
``best_mIoU_iter_40.pth``); Detectron2's are ``model_*.pth``."""


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` is under ``folder``, as written or with links resolved."""
    for where in (os.path.abspath, os.path.realpath):
        inner, outer = where(path), where(folder)
        if os.path.commonpath([inner, outer]) == outer:
            return True
    return False


def _is_mmengine_checkpoint(path: str) -> bool:
    """Whether ``path`` is an MMEngine runner's checkpoint: by the globals its pickle names
    (read, never run: ``mmengine.*``, its message hub's ``HistoryBuffer``), or, for a missing
    file, by MMEngine's names (:data:`MMENGINE_CHECKPOINT_NAME`)."""
    if not os.path.isfile(path):
        return MMENGINE_CHECKPOINT_NAME.fullmatch(os.path.basename(path)) is not None
    try:
        if not is_zip_checkpoint(path):
            return False
        names = pickle_globals(path)
    except Exception:  # unreadable: the load that follows names it
        return False
    return any(name.startswith("mmengine.") for name in names)


def resumed_checkpoint_file(
    folder: str, *, folder_key: str = "OUTPUT_DIR", weights_hint: str = "MODEL.WEIGHTS {path}"
) -> str | None:
    """The checkpoint ``--resume`` continues in run folder ``folder`` (the one
    ``last_checkpoint`` names; None without one), checked before anything loads it.

    Raises:
        DamagedCheckpointError: one line, nothing loaded: ``folder`` is an MMEngine run folder,
            or ``last_checkpoint`` names a file outside ``folder`` (another run's).

    Example:
        >>> resumed_checkpoint_file("/nonexistent") is None
        True
    """
    path = last_checkpoint_file(folder)
    if path is None or not _local(folder):
        return path
    path = os.path.normpath(path)
    if _is_mmengine_checkpoint(path):
        raise DamagedCheckpointError(
            f"cannot resume: {folder_key} {folder!r} is an MMEngine run folder, not a Detectron2 "
            f"one (its last_checkpoint names MMEngine's checkpoint {path!r}); resume it with the "
            f"MMEngine tool that trained it (budgeted-train-seg CONFIG --work-dir {folder} "
            f"--resume), or train this config into another {folder_key}"
        )
    if not _inside(path, folder):
        own = newest_intact_checkpoint(folder, CHECKPOINT_PATTERN)
        go_on = "" if own is None else f"; to go on with this run: --resume-from {own}"
        raise DamagedCheckpointError(
            f"cannot resume: {os.path.join(folder, 'last_checkpoint')!r} names {path!r}, outside "
            f"{folder_key} {folder!r} (another run's checkpoint): --resume continues only the "
            f"run in {folder_key}; to start a new run from its weights: "
            f"{weights_hint.format(path=path)}, no --resume, another {folder_key}{go_on}"
        )
    return path


def offer_intact(
    err: ValueError, folder: str, bad: str, *, how: str = "resume from it with --resume-from {path}"
) -> ValueError:
    """``err`` (about checkpoint ``bad``, which cannot be loaded) with the newest intact
    checkpoint of ``folder`` offered: the same class, one line.
    """
    found = newest_intact_checkpoint(folder, CHECKPOINT_PATTERN, exclude=[bad])
    if found is None:
        offer = (
            f"; there is no intact checkpoint in {folder!r} to resume from: restore the file, or "
            "start a new run in another OUTPUT_DIR"
        )
    else:
        path = os.fspath(found)
        offer = f"; the newest intact checkpoint there is {path!r}: " + how.format(path=path)
    return type(err)(f"{err}{offer}")


def load_weights_file(path: str, *, what: str = "MODEL.WEIGHTS") -> dict[str, Any]:
    """Load ``path`` (a local file, or a URL Detectron2's ``PathManager`` fetches) safely.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line, naming ``what`` and the file.
    """
    from detectron2.utils.file_io import PathManager

    local = path
    if not os.path.isfile(path) and not _local(path):
        try:
            local = PathManager.get_local_path(path)
        except Exception as err:
            reason = " ".join(str(err).split())[:160]
            raise DamagedCheckpointError(f"{what} {path!r} cannot be fetched ({reason})") from None
    try:
        data = load_checkpoint(local)
    except (UnsafeCheckpointError, DamagedCheckpointError) as err:
        raise type(err)(f"{what}: {err}") from None
    check_weights_layout(data, path, what=what)
    return data


def check_weights_layout(data: Any, path: str, *, what: str = "checkpoint") -> None:
    """Refuse (one line) a loaded file that Detectron2 cannot take weights from: not a dict, or
    a dict without ``"model"`` whose values are not all arrays (an MMEngine checkpoint, say).

    Raises:
        DamagedCheckpointError: one line naming the file, what it holds and what is supported.

    Example:
        >>> import torch
        >>> check_weights_layout({"w": torch.ones(1)}, "plain.pth")  # a plain state dict: fine
    """
    import numpy as np
    import torch

    if isinstance(data, dict) and ("model" in data or path.endswith((".pkl", ".pyth"))):
        return
    arrays = (torch.Tensor, np.ndarray)
    if isinstance(data, dict) and all(isinstance(v, arrays) for v in data.values()):
        return
    holds = (
        "keys " + ", ".join(repr(k) for k in list(data)[:6])
        if isinstance(data, dict)
        else f"a {type(data).__name__}"
    )
    if isinstance(data, dict) and "state_dict" in data:
        holds += " (an MMEngine / MMCV checkpoint: its weights are under 'state_dict')"
    raise DamagedCheckpointError(
        f"{what} {path!r} is not a Detectron2 weights file: it holds {holds}; supported: a "
        "Detectron2 checkpoint (weights under 'model'), a model-zoo .pkl, a pycls .pyth, or a "
        "plain dict of tensors"
    )


@reads_files_with("read_file")
class SafeCheckpointer(DetectionCheckpointer):
    """``DetectionCheckpointer`` that loads files safely (then Detectron2's format handling:
    model-zoo ``.pkl``, Caffe2, pycls ``.pyth``) and saves them, and ``last_checkpoint``,
    atomically.

    Raises (from ``load`` / ``resume_or_load``):
        UnsafeCheckpointError: the file names a global outside the allow-list (one line).
        DamagedCheckpointError: the file is missing, truncated or not a checkpoint (one line;
            on a resume with the newest intact checkpoint in ``save_dir`` offered).

    Example:
        >>> import torch
        >>> ckpt = SafeCheckpointer(torch.nn.Linear(2, 2))
        >>> ckpt.load("") == {}  # nothing to load
        True
    """

    def load(self, path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if path and _local(path) and not os.path.isfile(path):
            raise DamagedCheckpointError(f"checkpoint {path!r} does not exist")
        return super().load(path, *args, **kwargs)

    def get_checkpoint_file(self) -> str:
        """The checkpoint ``last_checkpoint`` names ("" without one); one of another run, or of
        an MMEngine run folder, is refused in one line (:func:`resumed_checkpoint_file`)."""
        if not _local(self.save_dir):
            return super().get_checkpoint_file()
        return resumed_checkpoint_file(self.save_dir) or ""

    def resume_or_load(self, path: str, *, resume: bool = True) -> dict[str, Any]:
        if resume and self.has_checkpoint():
            path = self.get_checkpoint_file()
            try:
                return self.load(path)
            except DamagedCheckpointError as err:
                how = "load it with checkpointer.load({path!r})"
                raise offer_intact(err, self.save_dir, path, how=how) from None
        return self.load(path, checkpointables=[])

    def read_file(self, filename: str) -> dict[str, Any]:
        """The checkpoint in ``filename``, loaded safely, in Detectron2's checkpoint layout."""
        data = load_checkpoint(filename)
        check_weights_layout(data, filename)
        if filename.endswith(".pkl"):
            if "model" in data and "__author__" in data:  # Detectron2's model-zoo format
                self.logger.info("Reading a file from '%s'", data["__author__"])
                return data
            # Caffe2 / Detectron 1 model zoo: detection models hold "blobs", ImageNet ones not
            blobs = data.get("blobs", data)
            model = {k: v for k, v in blobs.items() if not str(k).endswith("_momentum")}
            return {"model": model, "__author__": "Caffe2", "matching_heuristics": True}
        if filename.endswith(".pyth"):  # pycls
            if "model_state" not in data:
                raise DamagedCheckpointError(
                    f"checkpoint {filename!r} is not a pycls checkpoint: no 'model_state'"
                )
            model = {
                k: v
                for k, v in data["model_state"].items()
                if not k.endswith("num_batches_tracked")
            }
            return {"model": model, "__author__": "pycls", "matching_heuristics": True}
        return data if "model" in data else {"model": data}

    def save(self, name: str, **kwargs: Any) -> None:
        """Save the model and checkpointables as ``<save_dir>/<name>.pth``, atomically, then
        point ``last_checkpoint`` at it (atomically too)."""
        if not self.save_dir or not self.save_to_disk:
            return
        if not _local(self.save_dir):
            super().save(name, **kwargs)
            return
        data: dict[str, Any] = {"model": self.model.state_dict()}
        for key, obj in self.checkpointables.items():
            data[key] = obj.state_dict()
        data.update(kwargs)
        basename = f"{name}.pth"
        save_file = os.path.join(self.save_dir, basename)
        if os.path.basename(save_file) != basename:
            raise ValueError(f"checkpoint name {name!r} is invalid; allowed: a file name")
        self.logger.info("Saving checkpoint to %s", save_file)
        os.makedirs(self.save_dir, exist_ok=True)

        def write(tmp: str) -> None:  # through a file object: a full disk is an OSError
            with open(tmp, "wb") as f:
                torch.save(data, f)

        pointer = os.path.join(self.save_dir, "last_checkpoint")
        try:
            save_and_point(write, save_file, pointer, basename)
        except (OSError, RuntimeError) as err:
            if not is_disk_full(err):
                raise
            raise disk_full(save_file, self.save_dir) from None

    def tag_last_checkpoint(self, last_filename_basename: str) -> None:
        if not _local(self.save_dir):
            super().tag_last_checkpoint(last_filename_basename)
            return
        atomic_write_text(os.path.join(self.save_dir, "last_checkpoint"), last_filename_basename)


def use_safe_checkpointer(trainer: Any, *, preemption: bool = True) -> SafeCheckpointer:
    """Give ``trainer`` a :class:`SafeCheckpointer` in place of its checkpointer, everywhere (the
    hooks that hold the old one too), and with ``preemption`` a
    :class:`~budgeted.detectron2.PreemptionHook` last; call it before ``resume_or_load``.
    """
    from .preemption import PreemptionHook

    old = trainer.checkpointer
    new = (
        old
        if isinstance(old, SafeCheckpointer)
        else SafeCheckpointer(
            old.model, old.save_dir, save_to_disk=old.save_to_disk, **old.checkpointables
        )
    )
    trainer.checkpointer = new
    for hook in trainer_hooks(trainer):
        replace_checkpointer(hook, old, new)
    if preemption and not any(isinstance(h, PreemptionHook) for h in trainer_hooks(trainer)):
        trainer.register_hooks([PreemptionHook(new)])
    return new


class CheckpointAtHook(HookBase):
    """Save ``model_{N-1:07d}.pth`` once ``N`` iterations are trained, for each ``N`` of
    ``iterations`` (``SOLVER.BUDGET.SAVE_AT``): the points a run is branched from (the
    cooldowns of ``tools/branch.py``), beside the periodic checkpoints.
    """

    def __init__(self, iterations: Any) -> None:
        self.iterations = checkpoint_iterations(
            "SOLVER.BUDGET.SAVE_AT", tuple(iterations), example="(3040, 6080)"
        )

    def after_step(self) -> None:
        done = self.trainer.iter + 1
        if done in self.iterations:
            if comm.is_main_process():
                self.trainer.checkpointer.save(f"model_{done - 1:07d}", iteration=done - 1)
            comm.synchronize()

"""What a work dir of an MMEngine / MMSegmentation run holds: started, finished, its metrics.

The one "already holds a run" rule of ``tools/train_seg.py`` (:func:`check_new_run_folder`), and
the final validation metrics of a finished run (:func:`final_metrics`) for sweeps and reports.
MMEngine writes, in a work dir: checkpoints (``iter_<N>.pth``, ``epoch_<N>.pth``) and
``last_checkpoint``, the config it ran (``<config name>.py``) and, per launch,
``<timestamp>/vis_data/scalars.json`` (one JSON record a line: training iterations and
validations).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..locks import FolderBusyError, FolderLock
from ..records import curve, read_json_lines

__all__ = [
    "CURVE_NAMES",
    "LOCK_NAME",
    "WorkDirBusyError",
    "WorkDirLock",
    "check_new_run_folder",
    "evaluations",
    "final_metrics",
    "holds_run",
    "run_files",
    "train_curve",
]

LOCK_NAME = ".train_seg.lock"
"""The lock file ``tools/train_seg.py`` holds (``flock``) in its work dir while it trains."""


WorkDirBusyError = FolderBusyError
"""Another process trains in the work dir (one line naming it)."""


class WorkDirLock(FolderLock):
    """An exclusive ``flock`` on ``<folder>/.train_seg.lock`` while a run trains there
    (:class:`budgeted.locks.FolderLock`: a lock left by a dead process is never in the way;
    :meth:`check` writes nothing).

    Args:
        folder (str or PathLike): the work dir.

    Example:
        >>> import tempfile
        >>> lock = WorkDirLock(tempfile.mkdtemp())
        >>> lock.check(); lock.acquire(); lock.release()
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        super().__init__(
            folder,
            LOCK_NAME,
            "work dir {folder} is in use: {holder} is training there (it holds {lock}); wait "
            "for it to end, stop it, or choose another --work-dir (nothing was written)",
        )


_NOT_METRICS = frozenset({"step", "iter", "epoch", "time", "data_time"})
"""Keys of a validation record in ``scalars.json`` that are bookkeeping, not metrics."""


def run_files(folder: str | os.PathLike[str]) -> list[str]:
    """The files in ``folder`` that show a run was started there, sorted (relative names).

    Args:
        folder (str or PathLike): an MMEngine work dir.

    Returns:
        list[str]: checkpoints, ``last_checkpoint`` and training logs (``*/vis_data/scalars.json``).

    Example:
        >>> import tempfile
        >>> run_files(tempfile.mkdtemp())
        []
    """
    root = Path(folder)
    if not root.is_dir():
        return []
    found = [p for p in root.glob("*.pth") if p.is_file()]
    found += [root / "last_checkpoint"] if (root / "last_checkpoint").exists() else []
    found += list(root.glob("*/vis_data/scalars.json"))
    return sorted(p.relative_to(root).as_posix() for p in found)


def holds_run(folder: str | os.PathLike[str]) -> bool:
    """Whether an MMEngine run was started in ``folder`` (checkpoints or training logs).

    Args:
        folder (str or PathLike): an MMEngine work dir (need not exist).

    Example:
        >>> import tempfile
        >>> holds_run(tempfile.mkdtemp())
        False
    """
    return bool(run_files(folder))


def check_new_run_folder(folder: str | os.PathLike[str], resume: bool) -> None:
    """Refuse to start a new run in a work dir that already holds one (nothing is overwritten).

    Args:
        folder (str or PathLike): the run's work dir.
        resume (bool): the run continues the one in ``folder`` (``--resume``): always allowed.

    Raises:
        ValueError: one line naming the folder, what it holds and the two ways on.

    Example:
        >>> import tempfile
        >>> check_new_run_folder(tempfile.mkdtemp(), resume=False)  # empty: a new run may start
    """
    held = run_files(folder)
    if resume or not held:
        return
    shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
    raise ValueError(
        f"work dir {os.fspath(folder)} already holds a run ({shown}); pass --resume to continue "
        "it, or choose another --work-dir (nothing is overwritten)"
    )


def _train_length(folder: Path) -> int | None:
    """``train_cfg.max_iters`` of the last launch in ``folder`` that logged training: the
    config that launch saved (``<timestamp>/vis_data/config.py``), else the config MMEngine last
    dumped into ``folder``. A later launch that logged nothing (a resume refused before
    training, which MMEngine lets rewrite the dump first) does not change a run's length."""
    logged = sorted(p.parent for p in folder.glob("*/vis_data/scalars.json"))
    saved = logged[-1] / "config.py" if logged else None
    if saved is not None and saved.is_file():
        dumps = [saved]
    else:
        dumps = sorted(folder.glob("*.py"), key=lambda p: p.stat().st_mtime)
    if not dumps:
        return None
    from mmengine.config import Config

    train_cfg = Config.fromfile(str(dumps[-1]), import_custom_modules=False).get("train_cfg")
    max_iters = (train_cfg or {}).get("max_iters")
    return int(max_iters) if isinstance(max_iters, int) else None


def final_metrics(folder: str | os.PathLike[str]) -> dict[str, float] | None:
    """The validation metrics at the end of a finished run, or None if it did not get there.

    The end is ``train_cfg.max_iters`` of the last launch that logged training (its saved
    config; else the config MMEngine dumped into the work dir); the metrics are those of the
    last validation logged at that iteration in
    ``<folder>/<timestamp>/vis_data/scalars.json`` (for MMSegmentation's ``IoUMetric``:
    ``aAcc``, ``mIoU``, ``mAcc``, in percent).

    Args:
        folder (str or PathLike): an MMEngine work dir.

    Returns:
        dict[str, float] or None: metric name -> value; ``{}`` for a run whose final validation
        logged no metric (MMDetection's ``CocoMetric`` when the model predicted nothing); None
        for a run that is missing, still running, stopped early or epoch-based.

    Example:
        >>> import tempfile
        >>> final_metrics(tempfile.mkdtemp()) is None
        True
    """
    root = Path(folder)
    if not root.is_dir():
        return None
    max_iters = _train_length(root)
    if max_iters is None:
        return None
    finals = [
        record
        for path in sorted(root.glob("*/vis_data/scalars.json"))
        for record in read_json_lines(path)
        if record.get("step") == max_iters and "lr" not in record and "loss" not in record
    ]
    metrics = {
        key: float(value)
        for key, value in (finals[-1].items() if finals else ())
        if key not in _NOT_METRICS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }
    return metrics if finals else None


CURVE_NAMES = {"lr": "lr", "loss": "loss", "grad_norm": "full_grad_norm"}
""":data:`budgeted.records.CURVE_KEYS` -> the key in ``scalars.json``."""


def _scalars(folder: str | os.PathLike[str]) -> list[dict]:
    """The records of every launch's ``scalars.json`` in ``folder``, oldest launch first."""
    return [
        record
        for path in sorted(Path(folder).glob("*/vis_data/scalars.json"))
        for record in read_json_lines(path)
    ]


def train_curve(folder: str | os.PathLike[str]) -> list[dict[str, float]]:
    """The LR, training loss and full-gradient norm (where logged) per logged iteration, from
    every launch's ``scalars.json`` (MMEngine logs every ``LoggerHook`` interval); ``[]``
    without one.

    Example:
        >>> import tempfile
        >>> train_curve(tempfile.mkdtemp())
        []
    """
    return curve(_scalars(folder), "step", CURVE_NAMES)


def evaluations(folder: str | os.PathLike[str]) -> list[tuple[int, dict[str, float]]]:
    """Every validation logged in the work dir: (iteration, its metrics), in order; ``[]``
    without one. With ``train_cfg.val_interval`` below ``max_iters`` there is one per interval.

    Example:
        >>> import tempfile
        >>> evaluations(tempfile.mkdtemp())
        []
    """
    found = []
    for record in _scalars(folder):
        if "lr" in record or "loss" in record or not isinstance(record.get("step"), int):
            continue
        metrics = {
            k: float(v) for k, v in record.items()
            if k not in _NOT_METRICS and isinstance(v, (int, float)) and not isinstance(v, bool)
        }  # fmt: skip
        if metrics:
            found.append((record["step"], metrics))
    return found

"""Checkpoint files in a run folder: which iteration a name holds, the newest intact one, and the
later ones a resume would overwrite.

>>> import pathlib, tempfile
>>> from budgeted.safety.writing import atomic_save
>>> run = pathlib.Path(tempfile.mkdtemp())
>>> atomic_save({"iteration": 4}, run / "model_0000004.pth")
>>> _ = (run / "model_0000009.pth").write_bytes(b"torn by a crash")
>>> newest_intact_checkpoint(run).name
'model_0000004.pth'
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import DamagedCheckpointError, UnsafeCheckpointError
from .loading import load_checkpoint

__all__ = [
    "check_later_checkpoints_kept", "checkpoint_iteration", "checkpoint_iterations",
    "newest_intact_checkpoint"
]  # fmt: skip


def checkpoint_iteration(path: str | os.PathLike[str]) -> float:
    """A sort key for checkpoint names: the last number in the file name (``model_0000007.pth``
    -> 7, ``iter_16.pth`` -> 16), ``inf`` for a ``*final*`` name, ``-1`` for none.

    Example:
        >>> [checkpoint_iteration(p) for p in ("model_0000007.pth", "iter_16.pth", "x_final.pth")]
        [7.0, 16.0, inf]
    """
    name = Path(path).name
    if "final" in name:
        return float("inf")
    numbers = re.findall(r"\d+", name)
    return float(numbers[-1]) if numbers else -1.0


def checkpoint_iterations(
    key: str, values: Any, *, example: str = "[3040, 6080]", allow_empty: bool = True
) -> list[int]:
    """The iteration counts to save a checkpoint after (the branch points of
    ``budgeted-branch``): ``values``, a list or tuple of whole numbers > 0 (NumPy's too), as
    plain ints, sorted, without repeats.

    Raises:
        ValueError: one line naming ``key`` (the config key), the value and what is allowed
            (with ``example``, in the config's own syntax).

    Example:
        >>> checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", (6080, 3040, 6080))
        [3040, 6080]
        >>> checkpoint_iterations("at", [0])
        Traceback (most recent call last):
        ...
        ValueError: at=[0] is invalid; allowed: a list of iteration counts > 0, e.g. [3040, 6080]
    """
    ok = (
        isinstance(values, (list, tuple))
        and (allow_empty or len(values) > 0)
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                for v in values)
    )  # fmt: skip
    if not ok:
        raise ValueError(
            f"{key}={values!r} is invalid; allowed: a list of iteration counts > 0, e.g. {example}"
        )
    return sorted({int(v) for v in values})


def check_later_checkpoints_kept(
    source: str | os.PathLike[str],
    at: float,
    candidates: Iterable[str | os.PathLike[str]],
    *,
    folder_key: str,
    extra_globals: Mapping[str, Any] | None = None,
) -> None:
    """Refuse (one line) a resume from ``source``, ``at`` iterations (or epochs) in, into a
    folder holding intact checkpoints of later ones (``candidates`` named as the trainer names
    them, :func:`checkpoint_iteration`): training on from ``source`` would overwrite them.
    Damaged ones do not count (replacing them is what a resume from an earlier one is for);
    ``source`` itself never counts.

    Raises:
        ValueError: one line naming the checkpoints that would be overwritten and the ways on
            (``folder_key``: the option or config key of the folder written to).
    """
    source = Path(source)
    later = sorted(
        (Path(p) for p in candidates if checkpoint_iteration(p) > at),
        key=checkpoint_iteration,
    )
    later = [p for p in later if not (source.exists() and p.exists() and p.samefile(source))]
    for path in later:
        try:
            load_checkpoint(path, extra_globals=extra_globals)
        except DamagedCheckpointError:
            continue
        except UnsafeCheckpointError:
            pass  # not ours to replace either
        names = ", ".join(p.name for p in later[:3]) + (", ..." if len(later) > 3 else "")
        raise ValueError(
            f"--resume-from {source.name} would overwrite later checkpoints in "
            f"{path.parent} ({names}) as training goes on; allowed: resume into another "
            f"{folder_key} (with --resume-from {source}), or move those checkpoints away first"
        )


def newest_intact_checkpoint(
    folder: str | os.PathLike[str],
    pattern: str = "*.pth",
    *,
    exclude: Iterable[str | os.PathLike[str]] = (),
    key: Callable[[Path], Any] | None = None,
    extra_globals: Mapping[str, Any] | None = None,
) -> Path | None:
    """The newest checkpoint in ``folder`` that :func:`load_checkpoint` reads (intact and safe).

    Candidates are the files matching ``pattern`` (temporary files of :func:`atomic_write`
    start with a dot and never match) but those in ``exclude``, newest first by ``key`` (``Path ->
    sort key``, larger is newer; default: :func:`checkpoint_iteration`, then the modification
    time); each is loaded until one loads. None when none does.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    # realpath, not Path.resolve: a symbolic link loop among them must not raise
    skip = {os.path.realpath(p) for p in exclude}
    files = [p for p in folder.glob(pattern) if p.is_file() and os.path.realpath(p) not in skip]
    order = key or (lambda p: (checkpoint_iteration(p), p.stat().st_mtime_ns))
    for candidate in sorted(files, key=order, reverse=True):
        try:
            load_checkpoint(candidate, extra_globals=extra_globals)
        except ValueError:
            continue
        return candidate
    return None

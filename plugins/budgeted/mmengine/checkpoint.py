"""Safe loading of MMEngine checkpoints under ``torch.load(weights_only=True)``.

torch >= 2.6 loads with ``weights_only=True`` by default, and MMEngine's resume then fails on the
non-tensor objects its checkpoints carry: the message hub's ``HistoryBuffer`` (whose statistics
methods pickle as ``getattr(HistoryBuffer, "min")``) and numpy arrays and scalars.
:func:`allow_mmengine_checkpoints` allow-lists exactly those globals; a checkpoint naming any other
global is still refused by torch, and :func:`check_checkpoint` says so in one line before training.
A checkpoint is untrusted input: unpickling arbitrary globals would run code from the file.

Importing :mod:`budgeted.mmengine` does not change torch's allow-list: our tools call
:func:`allow_mmengine_checkpoints`, and a config opts in by importing
:mod:`budgeted.mmengine.safe_checkpoints` (``custom_imports``).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer

# HistoryBuffer pickles its statistics methods as getattr(HistoryBuffer, "min"), etc.
_STATISTICS = ("min", "max", "current", "mean")


def history_buffer_getattr(owner: Any, name: str) -> Any:
    """What ``builtins.getattr`` resolves to in a checkpoint: HistoryBuffer's statistics only.

    Args:
        owner: the object the checkpoint asks an attribute of.
        name (str): the attribute.

    Raises:
        pickle.UnpicklingError: for anything but HistoryBuffer's ``min``, ``max``, ``current``,
            ``mean``.

    Example:
        >>> history_buffer_getattr(HistoryBuffer, "mean") is HistoryBuffer.mean
        True
    """
    if owner is HistoryBuffer and name in _STATISTICS:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f"refused getattr({owner!r}, {name!r}): checkpoints may only name HistoryBuffer's "
        f"statistics methods ({', '.join(_STATISTICS)})"
    )


def _numpy_globals() -> list[tuple[Any, str]]:
    """numpy's array/scalar reconstruction helpers and dtypes, under the names pickle uses."""
    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar
    found: list[Any] = [_reconstruct, scalar, np.ndarray, np.dtype]
    # The dtype classes (numpy.dtype[float64], ...; numpy.dtypes.Float64DType in numpy 2): pickled
    # dtypes are rebuilt with BUILD, which torch allows only for allow-listed types.
    found += [type(np.dtype(name)) for name in ("float64", "float32", "int64", "int32", "bool")]
    return [(obj, _name(obj)) for obj in found]


def _name(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


MMENGINE_CHECKPOINT_GLOBALS: tuple[tuple[Any, str], ...] = (
    (HistoryBuffer, _name(HistoryBuffer)),
    (history_buffer_getattr, "builtins.getattr"),
    *_numpy_globals(),
)
"""What an MMEngine checkpoint pickles besides tensors and builtins: (object, pickled name)."""


def allow_mmengine_checkpoints() -> None:
    """Allow-list :data:`MMENGINE_CHECKPOINT_GLOBALS` for ``weights_only`` loading (idempotent).

    Process-wide (``torch.serialization.add_safe_globals``); ``tools/train_seg.py`` calls it, a
    config gets it by importing :mod:`budgeted.mmengine.safe_checkpoints`.

    Example:
        >>> allow_mmengine_checkpoints()
        >>> import torch
        >>> (HistoryBuffer, _name(HistoryBuffer)) in torch.serialization.get_safe_globals()
        True
    """
    add: Callable[[list[Any]], None] | None = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 has no weights_only default to satisfy
        add(list(MMENGINE_CHECKPOINT_GLOBALS))


class UnsafeCheckpointError(ValueError):
    """A checkpoint carries globals outside the allow-list (it is not loaded)."""


def unsafe_globals(path: str | os.PathLike[str]) -> list[str]:
    """The globals a checkpoint file needs that ``weights_only`` loading would refuse.

    Args:
        path (str or PathLike): the checkpoint file.

    Returns:
        list[str]: the refused globals' names, sorted; empty for an MMEngine checkpoint.

    Example:
        >>> import tempfile, torch
        >>> path = tempfile.mkdtemp() + "/w.pth"
        >>> torch.save({"w": torch.ones(1)}, path)
        >>> unsafe_globals(path)
        []
    """
    get = torch.serialization.get_unsafe_globals_in_checkpoint
    allowed = {name for _, name in MMENGINE_CHECKPOINT_GLOBALS}
    for entry in torch.serialization.get_safe_globals():
        allowed.add(entry[1] if isinstance(entry, tuple) else _name(entry))
    return sorted(set(get(os.fspath(path))) - allowed)


def check_checkpoint(path: str | os.PathLike[str]) -> None:
    """Raise :class:`UnsafeCheckpointError` (one line) if ``path`` carries a non-allowed global.

    Args:
        path (str or PathLike): the checkpoint file.

    Raises:
        UnsafeCheckpointError: the file names a global outside the allow-list.
        ValueError: the file does not exist.

    Example:
        >>> import tempfile, torch
        >>> path = tempfile.mkdtemp() + "/w.pth"
        >>> torch.save({"w": torch.ones(1)}, path)
        >>> check_checkpoint(path)
    """
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {os.fspath(path)!r} does not exist")
    bad = unsafe_globals(path)
    if bad:
        raise UnsafeCheckpointError(
            f"refusing to load checkpoint {os.fspath(path)!r}: it carries "
            f"{', '.join(bad)}, outside the globals MMEngine checkpoints need; unpickling it "
            "could run code from the file (load only checkpoints you trust, and never with "
            "weights_only=False)"
        )

"""Safe loading of MMEngine checkpoints under ``torch.load(weights_only=True)``.

:func:`allow_mmengine_checkpoints` allow-lists exactly the non-tensor globals MMEngine's
checkpoints carry (the message hub's ``HistoryBuffer`` and its statistics methods, numpy arrays
and scalars); any other global is still refused. :func:`load_mmengine_checkpoint` loads an
untrusted file (:func:`budgeted.safety.load_checkpoint` plus these globals), a foreign global or
a damaged file one line naming it. Importing :mod:`budgeted.mmengine` does not change torch's
allow-list (a config opts in with :mod:`budgeted.mmengine.safe_checkpoints`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..runs.mmengine import extra_globals, history_buffer_getattr, load_checkpoint
from ..safety import DamagedCheckpointError, UnsafeCheckpointError

__all__ = [
    "MMENGINE_CHECKPOINT_GLOBALS",
    "MMENGINE_EXTRA_GLOBALS",
    "DamagedCheckpointError",
    "UnsafeCheckpointError",
    "allow_mmengine_checkpoints",
    "check_checkpoint",
    "history_buffer_getattr",
    "keeping_safe_globals",
    "load_mmengine_checkpoint",
    "unsafe_globals",
]


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


MMENGINE_EXTRA_GLOBALS: dict[str, Any] = extra_globals()
"""What :func:`load_mmengine_checkpoint` allows beyond the shared loader's own set: the reader's
:data:`~budgeted.runs.mmengine.EXTRA_GLOBALS`, resolved (``"module.name" -> object``)."""

MMENGINE_CHECKPOINT_GLOBALS: tuple[tuple[Any, str], ...] = (
    *((obj, name) for name, obj in MMENGINE_EXTRA_GLOBALS.items()),
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
        >>> MMENGINE_CHECKPOINT_GLOBALS[0] in torch.serialization.get_safe_globals()
        True
    """
    add: Callable[[list[Any]], None] | None = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:  # torch < 2.4 has no weights_only default to satisfy
        add(list(MMENGINE_CHECKPOINT_GLOBALS))


load_mmengine_checkpoint = load_checkpoint
"""Load an untrusted MMEngine checkpoint (or ``load_from`` file) without running its code: the
reader's :func:`~budgeted.runs.mmengine.load_checkpoint`."""


@contextlib.contextmanager
def keeping_safe_globals() -> Iterator[None]:
    """Put back torch's process-wide allow-list as it was before the block (the shared loader
    keeps it itself now: torch's ``safe_globals`` removes on exit what was allowed before)."""
    before = torch.serialization.get_safe_globals()
    try:
        yield
    finally:
        now = set(torch.serialization.get_safe_globals())
        lost = [entry for entry in before if entry not in now]
        if lost:
            torch.serialization.add_safe_globals(lost)


def unsafe_globals(path: str | os.PathLike[str]) -> list[str]:
    """The globals a torch checkpoint file needs that ``weights_only`` loading would refuse.

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
    """Raise a one-line ``ValueError`` unless ``path`` is a checkpoint that loads safely.

    It is loaded with :func:`load_mmengine_checkpoint` (a ``.pth`` or a ``.pkl``, whatever its
    name says).

    Raises:
        UnsafeCheckpointError: the file names a global outside the allow-list.
        DamagedCheckpointError: the file does not exist or cannot be read.

    Example:
        >>> import tempfile, torch
        >>> path = tempfile.mkdtemp() + "/w.pth"
        >>> torch.save({"w": torch.ones(1)}, path)
        >>> check_checkpoint(path)
    """
    load_mmengine_checkpoint(path)

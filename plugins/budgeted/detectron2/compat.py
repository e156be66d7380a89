"""The one place the Detectron2 adapter reads or sets a framework's private name (issue 42, item 7).

Detectron2 v0.6 offers no public route to these: a trainer's registered hooks, the trainer inside
``DefaultTrainer``, a ``PeriodicWriter``'s writers and period, the last evaluation's results,
the local process group of a worker, the compiled ops, the file reader of a checkpointer, the DDP
wrapping in ``DefaultTrainer.__init__``. Each access is one function here, written for
:data:`DETECTRON2_VERSION` (fvcore :data:`FVCORE_VERSION`);
tests/detectron2/test_detectron2_compat.py fails loudly when a framework changes one of them.
(torch's: :mod:`budgeted.compat`.)
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

__all__ = [
    "DETECTRON2_VERSION", "FVCORE_VERSION", "ddp_without_device_ids",
    "forget_last_write", "has_compiled_ops", "inner_trainer", "last_eval_results",
    "reads_files_with", "replace_checkpointer", "set_local_process_group",
    "trainer_hooks", "writer_period", "writers_of"
]  # fmt: skip

DETECTRON2_VERSION = "0.6"
"""The Detectron2 version these accesses were written for."""
FVCORE_VERSION = "0.1.5.post20221221"
"""The fvcore version (Detectron2's checkpointer base) :func:`reads_files_with` was written for."""


def has_compiled_ops() -> bool:
    """Whether the real ``detectron2._C`` is installed (not our lite stand-in): the private
    extension module of Detectron2 0.6, imported.

    Example:
        >>> isinstance(has_compiled_ops(), bool)
        True
    """
    try:
        from detectron2 import _C
    except ImportError:
        return False
    return not getattr(_C, "__budgeted_lite__", False)


def trainer_hooks(trainer: Any) -> list[Any]:
    """The hooks registered with ``trainer`` (``TrainerBase._hooks`` of Detectron2 0.6: the live
    list, in calling order); ``[]`` for an object without."""
    return getattr(trainer, "_hooks", [])


def inner_trainer(trainer: Any) -> Any:
    """The ``SimpleTrainer`` (or ``AMPTrainer``) inside a ``DefaultTrainer``
    (``DefaultTrainer._trainer`` of Detectron2 0.6): its state holds the optimizer's."""
    return trainer._trainer


def last_eval_results(trainer: Any) -> Any:
    """The results of a ``DefaultTrainer``'s last evaluation (``_last_eval_results``, set by the
    ``EvalHook`` that Detectron2 0.6's ``build_hooks`` registers); None before any."""
    return getattr(trainer, "_last_eval_results", None)


def writers_of(hook: Any) -> list[Any]:
    """The event writers of a ``PeriodicWriter`` (``PeriodicWriter._writers``, Detectron2 0.6)."""
    return list(hook._writers)


def writer_period(hook: Any) -> int:
    """The period of a ``PeriodicWriter`` (``PeriodicWriter._period``, Detectron2 0.6)."""
    return int(hook._period)


def forget_last_write(writer: Any) -> None:
    """Make a ``CommonMetricPrinter`` forget its previous write (``_last_write``, Detectron2 0.6),
    so that its next write skips the ETA it would estimate from it; other writers: nothing."""
    if hasattr(writer, "_last_write"):
        writer._last_write = None


def replace_checkpointer(hook: Any, old: Any, new: Any) -> None:
    """Give ``hook`` checkpointer ``new`` where it holds ``old``: ``PeriodicCheckpointer``'s
    public ``checkpointer``, ``BestCheckpointer``'s private ``_checkpointer`` (Detectron2 0.6)."""
    for attr in ("checkpointer", "_checkpointer"):
        if getattr(hook, attr, None) is old:
            setattr(hook, attr, new)


def set_local_process_group(group: Any) -> None:
    """Make ``group`` the worker's local process group, as Detectron2 0.6's own launcher does
    (``detectron2.utils.comm._LOCAL_PROCESS_GROUP``; later versions have
    ``comm.create_local_process_group``); set once per worker."""
    from detectron2.utils import comm

    assert comm._LOCAL_PROCESS_GROUP is None
    comm._LOCAL_PROCESS_GROUP = group


@contextlib.contextmanager
def ddp_without_device_ids() -> Iterator[None]:
    """While it is open, ``DefaultTrainer.__init__`` wraps a CPU model in DDP without
    ``device_ids``: Detectron2 0.6 calls the module-level ``create_ddp_model`` of
    ``detectron2.engine.defaults``, which passes ``device_ids=[local rank]`` (refused by DDP for a
    CPU module), and has no method to build the DDP model; that function gets ``device_ids=None``
    and is restored after."""
    from detectron2.engine import defaults

    stock = defaults.create_ddp_model
    defaults.create_ddp_model = functools.partial(stock, device_ids=None)
    try:
        yield
    finally:
        defaults.create_ddp_model = stock


def reads_files_with(method: str) -> Any:
    """Class decorator: the checkpointer class reads a checkpoint file with its own ``method``
    (``fvcore.common.checkpoint.Checkpointer._load_file``, the documented override point of
    fvcore 0.1.5 that ``Checkpointer.load`` calls, taken by Detectron2 0.6's
    ``DetectionCheckpointer`` too)."""

    def decorate(cls: type) -> type:
        cls._load_file = getattr(cls, method)
        return cls

    return decorate

"""Run safety: untrusted checkpoints loaded without running code (:mod:`~.loading`), atomic writes
(:mod:`~.writing`), a run folder's checkpoints (:mod:`~.checkpoint_files`), preemption signals as
a stop at a safe point (:mod:`~.preemption`), one live process per folder (:mod:`~.locks`), what
the ranks agree on (:mod:`~.ranks`). Import every public name from here.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "model_0000007.pth"
>>> atomic_save({"iteration": 7}, path)
>>> load_checkpoint(path), checkpoint_iteration(path)
({'iteration': 7}, 7.0)
"""

from ..errors import DamagedCheckpointError, FolderBusyError, UnsafeCheckpointError
from .checkpoint_files import (
    check_later_checkpoints_kept,
    checkpoint_iteration,
    checkpoint_iterations,
    newest_intact_checkpoint,
)
from .loading import (
    NUMPY_GLOBALS,
    PICKLE_ALLOWED,
    TORCH_ALLOWED,
    RestrictedUnpickler,
    is_zip_checkpoint,
    load_checkpoint,
)
from .locks import FolderLock, unwritable
from .preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    PREEMPTION_SIGNALS,
    UNDECAYED_EXIT_CODE,
    Preempted,
    PreemptionGuard,
    active_guard,
    ignore_late_signals,
    restore_default_signals,
    signal_name,
)
from .ranks import agree_max, broadcast_from_rank0, world_size
from .writing import (
    atomic_save,
    atomic_write,
    atomic_write_text,
    remove_stale_temporaries,
    save_weights_subset,
)

__all__ = [
    "DIVERGED_EXIT_CODE", "NUMPY_GLOBALS", "PICKLE_ALLOWED",
    "PREEMPTED_EXIT_CODE", "PREEMPTION_SIGNALS", "TORCH_ALLOWED", "UNDECAYED_EXIT_CODE",
    "DamagedCheckpointError", "FolderBusyError", "FolderLock", "Preempted", "PreemptionGuard",
    "RestrictedUnpickler", "UnsafeCheckpointError", "active_guard", "agree_max", "atomic_save",
    "atomic_write", "atomic_write_text", "broadcast_from_rank0", "check_later_checkpoints_kept",
    "checkpoint_iteration", "checkpoint_iterations", "ignore_late_signals", "is_zip_checkpoint",
    "load_checkpoint", "newest_intact_checkpoint", "remove_stale_temporaries",
    "restore_default_signals", "save_weights_subset", "signal_name", "unwritable", "world_size"
]  # fmt: skip

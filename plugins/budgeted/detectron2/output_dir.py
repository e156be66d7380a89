"""The output folder of the Detectron2 tools (``OUTPUT_DIR``, ``train.output_dir``): can it be
written, one run at a time in it, and what a killed write left there.

- :func:`check_writable`: a folder (or, for one still to be made, its nearest existing parent)
  that cannot be written (a read-only file system, no permission) is refused in one line before
  anything is written; Detectron2 would fail with an ``OSError`` traceback after its first files.
- :class:`OutputDirLock`: the launching process holds an exclusive ``flock`` on
  ``<folder>/.train_net.lock`` while it trains there (:class:`budgeted.safety.locks.FolderLock`: a
  lock left by a dead process is never in the way), so a second run into the same folder is refused
  in one line naming the first one's PID.
- :func:`claim`: takes that lock and, holding it, removes the temporary files a killed
  checkpoint write left (:func:`budgeted.safety.remove_stale_temporaries`); the worker
  logs what was removed (:func:`log_removed`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from ..safety import remove_stale_temporaries
from ..safety.locks import FolderLock
from ..safety.locks import check_writable as writable

__all__ = ["LOCK_NAME", "OutputDirLock", "check_writable", "claim", "log_removed"]

LOCK_NAME = ".train_net.lock"
"""The lock file the Detectron2 tools hold in their output folder while they train."""


def check_writable(folder: str, *, key: str = "OUTPUT_DIR") -> None:
    """Refuse in one line (``ValueError``) a run folder ``folder`` (or, for one still to be made,
    its nearest existing parent) in which nothing can be created
    (:func:`budgeted.safety.locks.check_writable`, with the config key ``key``).

    Example:
        >>> import tempfile
        >>> check_writable(tempfile.mkdtemp() + "/new/run")  # a writable parent: fine
    """
    allowed = f"a folder this run can write (set another {key}, e.g. {key} ./output/run)"
    writable(folder, key, allowed)


class OutputDirLock(FolderLock):
    """An exclusive ``flock`` on ``<folder>/.train_net.lock`` while a run trains there.

    Example:
        >>> import tempfile
        >>> lock = OutputDirLock(tempfile.mkdtemp())
        >>> lock.check(); lock.acquire(); lock.release()
    """

    def __init__(self, folder: str | os.PathLike[str], key: str = "OUTPUT_DIR") -> None:
        super().__init__(
            folder,
            LOCK_NAME,
            f"{key} {{folder}} is in use: {{holder}} is training there (it holds {{lock}}); "
            f"wait for it to end, stop it, or set another {key} (nothing was written)",
        )


def claim(folder: str, key: str = "OUTPUT_DIR") -> tuple[OutputDirLock, list[str]]:
    """Lock run folder ``folder`` (made if missing) and remove the temporary files a killed
    checkpoint write left there. Returns the held lock and the names removed.

    Raises:
        FolderBusyError: another live process trains there (one line).
    """
    lock = OutputDirLock(folder, key)
    lock.acquire()
    return lock, remove_stale_temporaries(folder)


def log_removed(folder: str, removed: Sequence[str]) -> None:
    """Log (in the run's log.txt) the temporary files :func:`claim` removed, if any."""
    if removed:
        logging.getLogger("detectron2.budgeted").warning(
            "removed %d temporary file(s) a killed checkpoint write left in %s: %s",
            len(removed),
            folder,
            ", ".join(removed),
        )

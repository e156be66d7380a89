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

__all__ = ["LOCK_NAME", "OutputDirLock", "check_writable", "claim", "log_removed"]

LOCK_NAME = ".train_net.lock"
"""The lock file the Detectron2 tools hold in their output folder while they train."""


def _existing(path: str) -> str:
    """``path`` or its nearest existing parent folder."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path


def check_writable(folder: str, *, key: str = "OUTPUT_DIR") -> None:
    """Raise a one-line ``ValueError`` when run folder ``folder`` cannot be written.

    Args:
        folder (str): the output folder (made by the run if it does not exist yet).
        key (str): its config key, for the message.

    Example:
        >>> import tempfile
        >>> check_writable(tempfile.mkdtemp() + "/new/run")  # a writable parent: fine
    """
    if not folder or "://" in folder:
        return
    base = _existing(folder)
    if not os.path.isdir(base):
        raise ValueError(
            f"{key} {folder!r} cannot be made: {base!r} is a file; allowed: a folder path"
        )
    if os.access(base, os.W_OK | os.X_OK):
        return
    where = "" if base == os.path.abspath(folder) else f" (its nearest existing folder {base!r})"
    read_only = bool(os.statvfs(base).f_flag & os.ST_RDONLY)
    why = "is on a read-only file system" if read_only else "is not writable by this user"
    raise ValueError(
        f"{key} {folder!r}{where} {why}; nothing was written; allowed: a folder this run can "
        f"write (set another {key}, e.g. {key} ./output/run)"
    )


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

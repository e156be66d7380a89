"""One process at a time in a folder: an exclusive ``flock`` on a lock file inside it (standard
library only), so a second run or sweep on the same folder is refused in one line naming the
holder's PID. The kernel drops an ``flock`` when its process ends, however it ends (exit, crash,
SIGKILL), so a lock file left by a dead process is never in the way. Checking
(:meth:`FolderLock.check`) writes nothing; only :meth:`FolderLock.acquire` creates the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from ..errors import FolderBusyError

__all__ = ["FolderBusyError", "FolderLock", "check_writable", "unwritable"]


def unwritable(folder: str | os.PathLike[str]) -> str | None:
    """Why nothing can be created in ``folder`` (where it does not exist yet: in the nearest
    folder above it that does), as ``"<folder>: Read-only file system"``; None where it can.

    Example:
        >>> import tempfile
        >>> unwritable(Path(tempfile.mkdtemp()) / "new" / "folder") is None
        True
    """
    path = Path(os.path.abspath(folder))
    while not path.exists() and path != path.parent:
        path = path.parent
    if not path.is_dir():
        return f"{path}: {os.strerror(errno.ENOTDIR)}"  # a file in the way
    effective = os.access in os.supports_effective_ids
    if os.access(path, os.W_OK | os.X_OK, effective_ids=effective):
        return None
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{path}: {os.strerror(errno.EROFS if read_only else errno.EACCES)}"


def check_writable(
    folder: str | os.PathLike[str], what: str, allowed: str, error: type[Exception] = ValueError
) -> None:
    """Refuse, before anything is written, a folder in which nothing can be created: one line
    ``"<what> <folder> cannot be written (<why>); allowed: <allowed> (nothing was written)"``.

    The one check of every tool's output folder; a URL (``s3://...``) is the framework's to check.

    Raises:
        error: the line above, ``why`` from :func:`unwritable`.

    Example:
        >>> import tempfile
        >>> check_writable(tempfile.mkdtemp() + "/new/run", "--out", "a new folder")  # fine
        >>> with tempfile.NamedTemporaryFile() as file:
        ...     check_writable(file.name + "/run", "--out", "a folder path")
        Traceback (most recent call last):
        ...
        ValueError: --out ... cannot be written (...: Not a directory); allowed: a folder path (nothing was written)
    """  # noqa: E501
    if not folder or "://" in str(folder):
        return
    why = unwritable(folder)
    if why is not None:
        raise error(f"{what} {folder} cannot be written ({why}); allowed: {allowed} "
                    "(nothing was written)")  # fmt: skip


class FolderLock:
    """An exclusive ``flock`` on ``<folder>/<name>`` while this process works in ``folder``;
    ``busy`` is the refusal, formatted with ``holder`` (``"pid 4242"``), ``lock`` and ``folder``.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> lock = FolderLock(folder, ".demo.lock", "{folder} is in use by {holder}")
        >>> lock.check(); lock.acquire()
        >>> other = FolderLock(folder, ".demo.lock", "{folder} is in use by {holder}")
        >>> try:
        ...     other.acquire()
        ... except FolderBusyError as err:
        ...     str(err) == f"{folder} is in use by pid {os.getpid()}"
        True
        >>> lock.release(); other.acquire(); other.release()
    """

    def __init__(self, folder: str | os.PathLike[str], name: str, busy: str) -> None:
        self.path = Path(folder) / name
        self.busy = busy
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def holder(self) -> str:
        """``"pid 4242"`` as the lock file records it, else ``"a process"``."""
        try:
            pid = self.path.read_text().strip()
        except OSError:
            pid = ""
        return f"pid {pid}" if pid.isdigit() else "a process"

    def _busy(self) -> FolderBusyError:
        return FolderBusyError(
            self.busy.format(holder=self.holder(), lock=self.path, folder=self.path.parent)
        )

    def _lock(self, fd: int) -> None:
        """Lock ``fd``; where a live process holds the lock, close it and raise the refusal."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._busy() from None
        except OSError:
            pass  # a file system without flock (some network file systems): run unlocked

    def check(self) -> None:
        """Raise :class:`FolderBusyError` if a live process holds the lock (writes nothing)."""
        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return  # no lock file (or unreadable): nobody works here through our tools
        self._lock(fd)
        os.close(fd)

    def acquire(self) -> None:
        """Create the lock file (and the folder), take the lock, record this PID.

        Raises:
            FolderBusyError: another process holds it.
        """
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._lock(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (the file stays: it is only a name to lock)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

"""A training run's output folder (:class:`OutputFolder`): checked before anything is written
(writable, no other run there unless resumed, no live process training there: each tool in its
own order), then claimed (an exclusive :class:`~budgeted.safety.locks.FolderLock`, and the
temporaries a killed checkpoint write left removed, in one logged line).

The accessor (``budgeted.runs.<framework>``) gives the facts: ``LOCK_NAME``,
``check_new_run_folder`` and the ``WORDS`` templates ``folder`` (how a line names the folder),
``writable`` (what is allowed instead), ``in_use``, ``holds_run``, ``removed`` and, where several
processes claim together, ``in_use_agreed``.

Example:
    >>> import pathlib, tempfile
    >>> from budgeted.runs import detectron2
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / ".model_0000009.pth.tmp-0123abcd").write_bytes(b"torn")
    >>> run = OutputFolder(folder, detectron2, "OUTPUT_DIR")
    >>> run.check_writable(); run.check_new_run(resume=False); run.check_not_in_use()
    >>> removed = run.claim(); removed, run.lock.held
    (['.model_0000009.pth.tmp-0123abcd'], True)
    >>> run.removed_line(removed).startswith("removed 1 temporary file(s) a killed checkpoint")
    True
    >>> run.release()
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..errors import FolderBusyError
from ..safety import remove_stale_temporaries
from ..safety.locks import FolderLock, check_writable
from .access import Access, Words

__all__ = ["OutputFolder"]


class OutputFolder:
    """The output folder ``path`` of a training run, as the tool that trains there sees it.

    Args:
        path: the folder (need not exist). An empty one (the run has none) or a URL
            (``s3://...``: the framework's to check) is neither checked writable nor claimed.
        access: the framework's accessor (see the module).
        key: the option or config key naming the folder in the lines (``OUTPUT_DIR``,
            ``train.output_dir``, ``--work-dir``).
    """

    def __init__(self, path: str | os.PathLike[str], access: Access, key: str) -> None:
        self.path, self.access, self.key = os.fspath(path), access, key
        self.words = Words(access.WORDS)
        busy = self.line("in_use", folder="{folder}", holder="{holder}", lock="{lock}")
        self.lock = FolderLock(self.path, access.LOCK_NAME, busy)
        """The folder's lock, held once claimed."""

    def line(self, refusal: str, /, **facts: object) -> str:
        """The accessor's line ``refusal``, with ``key``, ``folder`` and ``facts`` filled in."""
        return self.words.line(refusal, **{"key": self.key, "folder": self.path, **facts})

    def check_writable(self) -> None:
        """Refuse (``ValueError``, one line) a folder in which nothing can be created."""
        check_writable(self.path, self.line("folder"), self.line("writable"))

    def check_new_run(self, resume: bool) -> None:
        """Refuse (``ValueError``, one line) a new run, not ``resume``, in a folder that holds
        one: it would be overwritten."""
        self.access.check_new_run_folder(self.path, resume, key=self.key)

    def check_not_in_use(self) -> None:
        """Refuse (:class:`FolderBusyError`, one line naming its PID) a folder a live process
        trains in. Writes nothing."""
        self.lock.check()

    def claim(self, *, here: bool = True, agree: Callable[[int], int] | None = None) -> list[str]:
        """Lock the folder (made if missing) for this run and remove the temporaries a killed
        checkpoint write left there (:meth:`removed_line`). Returns their names.

        Args:
            here: this process takes the lock (False: another process of the run does, e.g.
                rank 0; this one removes nothing).
            agree: where several processes claim together, every one's call with whether it
                failed (1) that answers whether any did (:func:`budgeted.safety.ranks.
                agree_max`); then all refuse, those that did not fail with ``in_use_agreed``.

        Raises:
            FolderBusyError: another live process holds the lock (one line).
        """
        error = None
        if here and self.path and "://" not in self.path:
            try:
                self.lock.acquire()
            except FolderBusyError as err:
                error = err
        if agree is not None and agree(error is not None) and error is None:
            self.release()
            error = FolderBusyError(self.line("in_use_agreed"))
        if error is not None:
            raise error
        return remove_stale_temporaries(self.path) if self.lock.held else []

    def release(self) -> None:
        """Drop the lock, if held (the lock file stays)."""
        self.lock.release()

    def removed_line(self, removed: list[str] | tuple[str, ...]) -> str | None:
        """The line the run logs for the temporaries :meth:`claim` removed; None for none."""
        if not removed:
            return None
        return self.line("removed", count=len(removed), names=", ".join(removed))

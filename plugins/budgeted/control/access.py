"""What a framework's accessor provides (:class:`Access`), and the records it answers in.

The accessor of a framework is the module ``budgeted.runs.<framework>``: the reader of its run
folders, grown to say where the framework keeps what the run control reads (checkpoint files,
step counters, base LRs, a time budget's seconds) and in which words each refusal names its keys.
It reads files as data only (untrusted) and imports no framework.

Example:
    >>> at = Position(6, counters=(("its iteration", 5, 5), ("last_epoch", 7, 6)))
    >>> at.disagreements()
    [('last_epoch', 7, 6)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..runs import Folder, Position, RunFolderReader, SavedLRs

__all__ = ["Access", "Position", "SavedLRs", "Words"]


@dataclass(frozen=True)
class Words:
    """A framework's refusal templates by key (``str.format`` fields named by their facts): the
    run control decides, the adapter says it in its own words (its keys, its options).

    Example:
        >>> words = Words({"in_use": "{key} {folder} is in use by another run"})
        >>> words.line("in_use", key="--work-dir", folder="work_dirs/a")
        '--work-dir work_dirs/a is in use by another run'
    """

    templates: Mapping[str, str]

    def line(self, refusal: str, /, **facts: Any) -> str:
        """The ``refusal`` in one line.

        Args:
            refusal: which refusal (a key of ``templates``; positional, so that ``key`` may be a
                fact).
            **facts: the value of each field its template names.

        Raises:
            KeyError: ``refusal`` has no template, or a field has no fact.
        """
        return self.templates[refusal].format(**facts)


@runtime_checkable
class Access(RunFolderReader, Protocol):
    """Where a framework keeps what the run control reads: the run folder reader's functions
    (:class:`~budgeted.runs.RunFolderReader`) and these. Checkpoints are loaded as data."""

    CHECKPOINTS: str
    """The glob of the trainer's checkpoint files in a run folder (``model_*.pth``)."""
    LOCK_NAME: str
    """The file whose lock marks a run folder in use (``.train_net.lock``)."""
    WORDS: Words
    """Every refusal's template, verbatim."""

    def checkpoint_files(self, folder: Folder) -> list[str]:
        """The trainer's checkpoints in ``folder``, oldest first."""
        ...

    def check_new_run_folder(self, folder: Folder, resume: bool, key: str) -> None:
        """Refuse (one line naming option ``key``) a new run in a folder that holds one."""
        ...

    def resume_checkpoint(self, folder: Folder) -> str | None:
        """The file the tool's ``--resume`` loads; None where there is none."""
        ...

    def load_checkpoint(self, path: Folder) -> Any:
        """The checkpoint at ``path``, loaded as untrusted data."""
        ...

    def saved_schedulers(self, checkpoint: Any) -> dict[str, dict[str, Any]]:
        """The LR scheduler states ``checkpoint`` holds, by place."""
        ...

    def position(self, checkpoint: Any) -> Position:
        """Where the run saved in ``checkpoint`` stands."""
        ...

    def saved_base_lrs(self, checkpoint: Any) -> list[SavedLRs]:
        """Every record of the base LRs in ``checkpoint``."""
        ...

    def elapsed(self, checkpoint: Any) -> float:
        """A time budget's training seconds saved in ``checkpoint`` (0.0 without a clock)."""
        ...

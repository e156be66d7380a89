"""Every error of the package, in one place: each is raised with one line that names the bad
value and what is allowed, and the tools print that line (never a traceback).

Two families:

- ``ValueError`` s for bad input, refused before anything is written: a budget that cannot be
  trained as configured (:class:`BudgetConfigError`), a checkpoint whose budget differs
  (:class:`BudgetMismatchError`, :class:`BudgetResumeError`), a change that cannot be re-planned
  (:class:`BudgetReplanError`), unsafe or damaged files, a busy folder, bad records, bad sweep or
  report arguments.
- ``SystemExit`` s for a run that ends early on purpose (:class:`RunStopped`): the process ends
  with the stop's exit status (:data:`DIVERGED_EXIT_CODE` 3, :data:`UNDECAYED_EXIT_CODE` 4) after
  the tool printed the line; frameworks' ``except Exception`` blocks let them through.

Example:
    >>> err = Diverged("diverged: the loss is nan at iteration 3 (base LR 1e+08)")
    >>> err.code, str(err)
    (3, 'diverged: the loss is nan at iteration 3 (base LR 1e+08)')
    >>> issubclass(BudgetResumeError, BudgetConfigError)
    True
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "DIVERGED_EXIT_CODE",
    "UNDECAYED_EXIT_CODE",
    "BudgetConfigError",
    "BudgetMismatchError",
    "BudgetReplanError",
    "BudgetResumeError",
    "DamagedCheckpointError",
    "DiskFull",
    "Diverged",
    "FolderBusyError",
    "RecordError",
    "ReportError",
    "RunStopped",
    "SweepError",
    "Undecayed",
    "UnsafeCheckpointError",
]

DIVERGED_EXIT_CODE = 3
"""Exit status of a run whose loss became non-finite: not a result (no final checkpoint)."""
UNDECAYED_EXIT_CODE = 4
"""Exit status of a time-budget run that ended before its schedule decayed (saved and
evaluated as usual: a result, flagged)."""


# --- bad input: one line, nothing written -----------------------------------------------------


class BudgetConfigError(ValueError):
    """A budget that cannot be trained as configured: a bad key or argument, or one that disagrees
    with the train loop (one line: the value, what is allowed)."""


class BudgetMismatchError(ValueError):
    """A checkpoint's budget differs from the configured one: resuming is refused (one line)."""


class BudgetReplanError(ValueError):
    """A budget change that cannot be made (one line: the value, what is allowed)."""


class BudgetResumeError(BudgetMismatchError, BudgetConfigError):
    """A checkpoint's budget differs from the config's, or its scheduler state breaks a rule of
    :mod:`budgeted.schedules.state` (a step count, base LR or clock that no run writes):
    resuming is refused (one line). Both a :class:`BudgetMismatchError` and a
    :class:`BudgetConfigError`, so ``except`` clauses for either catch it."""


class UnsafeCheckpointError(ValueError):
    """A checkpoint that would run code or build objects outside the allow-list when loaded."""


class DamagedCheckpointError(ValueError):
    """A checkpoint that cannot be read: truncated, corrupted or not a checkpoint."""


class FolderBusyError(ValueError):
    """Another live process holds the folder's lock (one line naming it)."""


class RecordError(ValueError):
    """A record file (JSON lines, a run's or a sweep's record) that cannot be read as one."""


class SweepError(ValueError):
    """Bad input to the sweep: reported as one line, exit 2, before anything runs."""


class ReportError(ValueError):
    """Bad input to the report: reported as one line."""


# --- runs that end early on purpose: SystemExit with a status --------------------------------


class RunStopped(SystemExit):
    """A run that ends with one line (``message``, without the tool's name) and exit ``code``.

    Args:
        message (str): the line, e.g. ``"diverged: the loss is nan at iteration 3 (...)"``.
        code (int): the exit status (default: the class's ``CODE``).
    """

    CODE: ClassVar[int] = 1

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(self.CODE if code is None else code)
        self.message = message

    def __str__(self) -> str:
        return self.message


class DiskFull(RunStopped):
    """No space left on the device of the run folder (exit status 1)."""


class Diverged(RunStopped):
    """The loss became non-finite: not a result (exit status 3). Raised on every rank."""

    CODE = DIVERGED_EXIT_CODE


class Undecayed(RunStopped):
    """A time budget ended before its schedule decayed (exit status 4, after saving and
    evaluating)."""

    CODE = UNDECAYED_EXIT_CODE

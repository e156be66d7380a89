"""Run folders: what each training tool's output folder holds, read as data (never run).

The experiments (sweeps, reports, ranking) read run folders through one interface, the
:class:`RunFolderReader` protocol, and find a framework's reader with :func:`reader`; they never
import a framework's module by name. A reader is anything with the protocol's four functions: the
built-in ones are the modules :mod:`budgeted.runs.detectron2`, :mod:`budgeted.runs.mmengine` and
:mod:`budgeted.runs.pytorch` (a module with those functions satisfies the protocol as it is).
Each is imported the first time it is asked for, so reading one framework's runs never imports
another's reader.

A reader may also say where a run's budget is saved, for the one resume route
(:func:`saved_budget`): ``resume_checkpoint(folder)``, the file the tool's ``--resume`` loads, and
``saved_schedulers(checkpoint)``, the LR scheduler states a loaded checkpoint holds by place
(and ``load_checkpoint(path)`` where its checkpoints name more than tensors and containers, as
MMEngine's message hub does: :func:`budgeted.safety.load_checkpoint` with its globals). The
adapters' pre-flights and schedulers read a checkpoint through the same two functions, and the
core (:meth:`budgeted.schedules.BudgetSchedule.resume`, :meth:`~budgeted.schedules.TimeBudget.
resume_from`) decides.

Adding a framework is one module with the four functions and one line, as plain PyTorch's:

    register_reader("pytorch", "budgeted.runs.pytorch")

Example:
    >>> reader("mmseg").__name__, reader("detectron2").final_metrics("/no/such/run") is None
    ('budgeted.runs.mmengine', True)
    >>> isinstance(reader("mmdet"), RunFolderReader)
    True
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import RecordError

__all__ = [
    "BUDGET_KEYS", "Position", "RunFolderReader", "SavedLRs", "check_new_run", "reader",
    "readers", "register_reader", "saved_budget"
]  # fmt: skip

Folder = str | os.PathLike[str]


@dataclass(frozen=True)
class Position:
    """Where a saved run stands: ``trained`` iterations, whether the file holds
    ``weights_only`` (no state to resume), and each step ``counter`` a resumable state keeps, as
    ``(where, value, expected)``: what the checkpoint holds against what a checkpoint saved after
    ``trained`` iterations holds (``("last_epoch", 7, 6)``)."""

    trained: int
    weights_only: bool = False
    counters: tuple[tuple[str, Any, int], ...] = ()

    def disagreements(self) -> list[tuple[str, Any, int]]:
        """The counters whose value is not the expected one (the file was edited or assembled)."""
        return [counter for counter in self.counters if counter[1] != counter[2]]


@dataclass(frozen=True)
class SavedLRs:
    """One record of the base LRs in a checkpoint: the optimizer ``group`` it belongs to (None:
    the only one), ``where`` it sits in the refusal's words, and the saved ``values`` (untrusted:
    checked against the config's, never trusted).

    Example:
        >>> SavedLRs(None, "the LR scheduler's base_lrs", [0.02]).values
        [0.02]
    """

    group: str | None
    where: str
    values: Any
    owner: str = ""
    """What holds them, where the refusal names it (``param_scheduler[0]``, ``optimizer``)."""


@runtime_checkable
class RunFolderReader(Protocol):
    """What the experiments read from a framework's run folder (an ``OUTPUT_DIR``, a work dir).

    Every function takes the run folder (which may not exist) and reads it as data only: logs as
    JSON, configs parsed without being run, checkpoints by name. A file that cannot be read as
    data raises :class:`~budgeted.errors.RecordError` (one line naming it); a run that is
    missing or unfinished is an empty answer, never an error.
    """

    def holds_run(self, folder: Folder) -> bool:
        """Whether the training tool has left a run there (started or finished: checkpoints,
        logs)."""
        ...

    def final_metrics(self, folder: Folder) -> dict[str, float] | None:
        """The evaluation after the last iteration of a finished run, keyed as the tool logs it
        (``bbox/AP``, ``mIoU``); None while the run has not finished; ``{}`` for a final
        evaluation that logged no metric (the model predicted nothing)."""
        ...

    def train_curve(self, folder: Folder) -> list[dict[str, float]]:
        """One point per logged training iteration, ascending: ``iteration`` and those of
        :data:`budgeted.runs.records.CURVE_KEYS` (``lr``, ``loss``, ``grad_norm``) it logged;
        ``[]`` without a log."""
        ...

    def evaluations(self, folder: Folder) -> list[tuple[int, dict[str, float]]]:
        """Every evaluation logged, in order: (iteration counted from 1, results keyed as
        logged); ``[]`` without one."""
        ...


_READERS: dict[str, str | RunFolderReader] = {}
"""framework -> its reader, or the name of the module that is its reader (imported when first
asked for)."""


def register_reader(framework: str, found: str | RunFolderReader) -> None:
    """Make ``found`` (a reader, or the dotted name of a module that is one) the run-folder
    reader of ``framework`` (the name sweeps record: ``detectron2``, ``mmseg``, ...)."""
    _READERS[framework] = found


def readers() -> list[str]:
    """The frameworks that have a reader, sorted."""
    return sorted(_READERS)


def reader(framework: str) -> RunFolderReader:
    """The run-folder reader of ``framework``, importing its module the first time.

    Raises:
        RecordError: no reader is registered for ``framework`` (one line naming the known ones).
    """
    found = _READERS.get(framework)
    if found is None:
        raise RecordError(
            f"no run-folder reader for framework {framework!r}; allowed: {', '.join(readers())}"
        )
    if isinstance(found, str):
        found = importlib.import_module(found)
        if not isinstance(found, RunFolderReader):
            missing = [
                name
                for name in ("holds_run", "final_metrics", "train_curve", "evaluations")
                if not callable(getattr(found, name, None))
            ]
            raise RecordError(
                f"{found.__name__} is not a run-folder reader (no {', '.join(missing)}); "
                "allowed: a module with holds_run, final_metrics, train_curve, evaluations"
            )
        _READERS[framework] = found
    return found


def check_new_run(
    folder: Folder | None,
    resume: bool,
    run_files: Callable[[Folder], list[str]],
    line: str,
    key: str,
) -> None:
    """The one "already holds a run" rule (each reader's ``check_new_run_folder``): a new run
    (not ``resume``) may not start in ``folder`` where ``run_files(folder)`` lists files of a
    run; ``line`` (formatted with ``key``, ``folder`` and ``shown``: the first three files) is the
    ``ValueError``'s. An empty ``folder`` (the run has none) is not checked.

    Example:
        >>> check_new_run("run", False, lambda _: ["a.pth"], "{key} {folder}: {shown}", "--out")
        Traceback (most recent call last):
        ValueError: --out run: a.pth
    """
    held = [] if resume or not folder else run_files(folder)
    if held:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise ValueError(line.format(key=key, folder=os.fspath(folder), shown=shown))


BUDGET_KEYS = ("budget", "time_budget")
"""Where a budget-aware LR scheduler's state keeps its budget: an iteration budget
(:meth:`budgeted.schedules.BudgetSchedule.state`) or a time budget
(:meth:`budgeted.schedules.TimeBudget.state`, beside ``clock``)."""


def saved_budget(framework: str, folder: Folder) -> tuple[str, dict[str, Any] | None] | None:
    """The checkpoint ``--resume`` would load from the run ``folder`` of ``framework``, and the
    budget its budget-aware LR scheduler saved there (``{"budget": ...}`` or ``{"time_budget":
    ..., "clock": ...}``; None: the checkpoint has no budget-aware scheduler); None where the
    folder has no checkpoint to resume (or its reader cannot say).

    The checkpoint is untrusted: it is loaded with :func:`budgeted.safety.load_checkpoint`
    (the reader's ``load_checkpoint``, where it has one; nothing in it runs) and walked by the
    reader's ``saved_schedulers``.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: the file cannot be loaded as data
            (one line naming it).
        RecordError: ``last_checkpoint`` names a file outside the folder (read nothing).

    Example:
        >>> saved_budget("pytorch", "/no/such/run") is None
        True
    """
    found = reader(framework)
    where = getattr(found, "resume_checkpoint", None)
    path = where(folder) if callable(where) else None
    if path is None:
        return None
    inside = os.path.realpath(folder)
    if os.path.commonpath([os.path.realpath(path), inside]) != inside:
        raise RecordError(
            f"{os.path.join(folder, 'last_checkpoint')} names {os.fspath(path)!r}, outside the "
            "run folder (or through a link); allowed: a checkpoint file inside it"
        )
    load = getattr(found, "load_checkpoint", None)  # with the framework's own allowed globals
    if not callable(load):
        from ..safety import load_checkpoint as load
    schedulers = found.saved_schedulers(load(path))  # type: ignore[attr-defined]
    for state in schedulers.values():
        if any(isinstance(state.get(key), dict) for key in BUDGET_KEYS):
            return os.fspath(path), {k: state[k] for k in (*BUDGET_KEYS, "clock") if k in state}
    return os.fspath(path), None


register_reader("detectron2", "budgeted.runs.detectron2")
for _codebase in ("mmengine", "mmseg", "mmdet", "mmpretrain", "mmaction"):
    register_reader(_codebase, "budgeted.runs.mmengine")
del _codebase
register_reader("pytorch", "budgeted.runs.pytorch")

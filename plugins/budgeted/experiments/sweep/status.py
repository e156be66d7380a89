"""Where a sweep's cells stand (``budgeted-sweep --status OUT``), and the one way its cell
records are changed while other writers (the Slurm controller, the cell's job) may change them
too: :func:`update_cell_record`, under the cell's ``flock``, renamed into place.

:func:`cell_states` reads the folder as the sweep and the report do (a cell the report counts is
``done`` here too), the others from their records, the sweep's lock and the Slurm queue; it runs
nothing and writes only how an ended job ended (:func:`record_job_end`). Its states:
:data:`STATES` (docs/sweeps.md).

    $ budgeted-sweep --status output/sweep/mmseg_toy
    cell                        state       job      tries  elapsed  result
    linear_budget1_lr0.01       done        412_0    1      1m02s    mIoU 12.31
    [status] 4 cells: 1 done, 1 running, 1 queued, 1 cancelled
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ...errors import FolderBusyError, ReportError
from ...safety import atomic_write_text
from ...safety.locks import FolderLock
from .records import CELL_FILE, SWEEP_LOCK, metrics_text, read_record, read_sweep, run_status

__all__ = [
    "CELL_LOCK", "LIVE_STATES", "RESUMED", "STATES", "CellState", "cell_states", "format_status",
    "job_of", "queue_answer", "record_job_end", "resume_refusal", "started_at",
    "status_main", "update_cell_record",
]  # fmt: skip

CELL_LOCK = ".sweep_cell.lock"
"""The lock file beside each ``sweep_cell.json`` that its writers hold while they change it."""
LIVE_STATES = frozenset({
    "PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
    "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "PREEMPTED", "RESV_DEL_HOLD", "STOPPED",
})  # fmt: skip
"""Slurm job states of a job that will still run (or is running): its cell is not resubmitted."""


@contextlib.contextmanager
def _cell_lock(run_dir: Path) -> Iterator[None]:
    with (run_dir / CELL_LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_cell_record(
    run_dir: Path, change: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> dict[str, Any]:
    """Read ``<run_dir>/sweep_cell.json`` ({} where none), apply ``change`` (in place, or returning
    a new dict) and write it back atomically, all under the cell's lock.

    >>> import tempfile
    >>> cell = Path(tempfile.mkdtemp())
    >>> _ = update_cell_record(cell, lambda r: r.update(schedule="linear", budget=0.1))
    >>> update_cell_record(cell, lambda r: r.setdefault("tries", []).append({}))["tries"]
    [{}]
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CELL_FILE
    with _cell_lock(run_dir):
        record = read_record(path) if path.is_file() else {}
        changed = change(record)
        record = record if changed is None else changed
        atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return record


def job_of(record: dict[str, Any]) -> str | None:
    """The Slurm job id a cell record names (``{"slurm": {"job_id": "412_3"}}``), None without one
    or where it is not a job id (a record edited by hand: never passed to a command as is)."""
    slurm = record.get("slurm")
    job = slurm.get("job_id") if isinstance(slurm, dict) else None
    if isinstance(job, str) and job and all(c.isdigit() or c in "_+" for c in job):
        return job
    return None


def queue_answer(
    jobs: Sequence[str], env: dict[str, str] | None = None
) -> tuple[dict[str, str] | None, str]:
    """(``{job id: state}`` of those of ``jobs`` Slurm still lists, ``""``); (None, why) where
    Slurm cannot be asked (``why``: squeue's last line, or its time-out)."""
    if not jobs:
        return {}, ""
    if shutil.which("squeue") is None:
        return None, "squeue is not on PATH"
    try:
        done = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T", "-u", _user()],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    except OSError as err:
        return None, f"squeue: {err.strerror}"
    except subprocess.TimeoutExpired:
        return None, "squeue: no answer in 60 s"
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        return None, f"squeue: {said[-1] if said else f'exit status {done.returncode}'}"
    wanted = set(jobs)
    states = {}
    for line in done.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job in wanted:
            states[job] = state
    return states, ""


def ended_state(job: str, env: dict[str, str] | None = None) -> str | None:
    """How a job Slurm no longer queues ended (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...), from
    ``scontrol show job`` while Slurm still keeps it (``MinJobAge``); None after that."""
    if shutil.which("scontrol") is None:
        return None
    try:
        done = subprocess.run(
            ["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60,
            env=env,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    for field in done.stdout.split() if done.returncode == 0 else ():
        key, _, value = field.partition("=")
        if key == "JobState":
            return value
    return None


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


STATES: dict[str, str] = {
    "done": "finished: its result is in the report",
    "undecayed": "ended undecayed (a time budget ran out first): a result, marked in the report",
    "diverged": "diverged (a non-finite loss): a result of its LR, never the best",
    "running": "training now (the local sweep runs it, or its Slurm job runs)",
    "queued": "its Slurm job waits in the queue",
    "requeued": "its Slurm job was preempted or requeued and waits to resume it",
    "suspended": "its Slurm job is suspended",
    "submitted": "its Slurm job was submitted, but Slurm does not answer now",
    "interrupted": "stopped before its end (a signal, a stopped sweep or a vanished job); the "
    "sweep resumes it",
    "cancelled": "its Slurm job was cancelled (scancel); the sweep resumes it",
    "failed": "its last try failed (its sweep.log says why); the sweep retries it",
    "missing": "not started yet, or started and left no result; the sweep runs it",
    "stopped": "stopped early by a search's pruner (budgeted-search --method asha): no result; "
    "a sweep trains it again",
    "mismatch": "its checkpoint holds another iteration budget than the sweep plans: resuming it "
    "is refused (remove its folder, or resume with the tool's on_resume replan)",
    "unreadable": "the checkpoint it resumes from cannot be loaded (damaged or missing)",
}
"""Every state ``--status`` prints -> what it means (docs/sweeps.md has the same list)."""
QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "PREEMPTED",
                    "RESV_DEL_HOLD"})  # fmt: skip
"""Slurm states of a job that waits to start (again)."""
SUSPENDED = frozenset({"SUSPENDED", "STOPPED"})
FAILED_JOB = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL",
                        "DEADLINE"})  # fmt: skip
"""Slurm states of a job that ended badly."""


@dataclass
class CellState:
    """One row of ``--status``: a planned cell, what it is now (:data:`STATES`), its job and
    time so far."""

    name: str
    state: str
    job: str | None
    tries: int
    elapsed_s: float
    result: str


def started_at(attempt: dict[str, Any]) -> float | None:
    """When a try started (its ``started``, as a time stamp); None where it holds none."""
    try:
        return datetime.strptime(str(attempt.get("started")), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


@dataclass
class _Seen:
    """What ``--status`` knows of a cell besides its record."""

    result: str | None  # run_status: what the sweep and the report read in its folder
    live: str | None = None  # its job's state in the queue
    asked: bool = True  # whether Slurm answered (False: why says why not)
    why: str = ""
    ended: str | None = None  # how its job ended, where Slurm no longer queues it
    sweep_since: float | None = None  # when the local sweep now running took the lock


def _state(record: dict[str, Any], seen: _Seen) -> tuple[str, str]:
    """(state, note) of a cell: its result as the sweep and the report read it, else its job's
    state in the queue, else what its record says its last try came to."""
    if seen.result is not None:
        return ("done" if seen.result == "finished" else seen.result), ""
    tries = [t for t in record.get("tries") or [] if isinstance(t, dict)]
    job, status = job_of(record), record.get("status")
    if seen.live is not None:
        if seen.live in QUEUED:
            return ("requeued" if tries else "queued"), ""
        if seen.live in SUSPENDED:
            return "suspended", f"(Slurm: {seen.live})"
        stopped = sum(1 for t in tries if t.get("exit") == 75)
        return "running", f"(requeued {stopped}x)" if stopped else ""
    if job is not None and not seen.asked and seen.ended is None:
        return "submitted", f"(Slurm does not answer: {seen.why})"
    open_try = bool(tries) and tries[-1].get("exit") is None
    if job is None and open_try:
        began = started_at(tries[-1])
        if seen.sweep_since is not None and began is not None and began >= seen.sweep_since - 1:
            return "running", ""
        return "interrupted", "(its sweep stopped during the try; rerun the sweep to resume it)"
    if seen.ended == "CANCELLED":
        return "cancelled", "(rerun the sweep to resume it)"
    if status == "failed":
        return "failed", "(rerun the sweep to retry it)"
    if status == "stopped":
        return "stopped", "(pruned by the search)"
    if status == "interrupted" and not open_try:
        return "interrupted", "(rerun the sweep to resume it)"
    if job is not None and seen.ended in FAILED_JOB:
        return "failed", f"(Slurm job ended {seen.ended}; rerun the sweep to retry it)"
    if job is not None and tries:
        return "interrupted", "(its Slurm job ended before the try; rerun the sweep to resume it)"
    if tries:
        return "missing", "(no result in its folder; rerun the sweep)"
    return "missing", "(not started; rerun the sweep)"


RESUMED = ("interrupted", "cancelled", "failed", "missing", "stopped")
"""States of a cell the next sweep resumes from its checkpoint, where it holds one."""
_REPLANS = re.compile(r"on_resume[= ]+(replan|branch)\b", re.IGNORECASE)


def resume_refusal(
    framework: str, run_dir: Path, iters: int, record: dict[str, Any]
) -> tuple[str, str] | None:
    """("mismatch" or "unreadable", why in one line) where resuming the cell in ``run_dir`` would
    be refused: the checkpoint ``--resume`` loads (:func:`budgeted.runs.saved_budget`) holds
    another iteration budget than the ``iters`` the sweep plans, or is damaged; None where it
    resumes (or holds no checkpoint or a time budget, or its framework is not installed here:
    the tool decides)."""
    from ...errors import DamagedCheckpointError, RecordError, UnsafeCheckpointError
    from ...runs import saved_budget
    from ...schedules import BudgetSchedule

    try:
        found = saved_budget(framework, run_dir)
    except ImportError:  # the framework is not installed here: its tool decides
        return None
    except (DamagedCheckpointError, UnsafeCheckpointError, RecordError, OSError) as err:
        return "unreadable", f"({_one_line(err)})"
    if found is None or found[1] is None or "budget" not in found[1]:
        return None
    path, saved = found
    try:
        total = BudgetSchedule.from_state(saved["budget"]).total
    except Exception as err:  # an untrusted state: any value, one line
        return "unreadable", f"(the budget in {path} cannot be read: {_one_line(err)})"
    command = " ".join(str(t) for t in record.get("command") or [])
    if total == iters or _REPLANS.search(command):
        return None
    return "mismatch", (
        f"({Path(path).name} holds a budget of {total:g} iterations, the sweep plans {iters}: "
        f"resuming is refused; remove {run_dir} to train it anew, or resume with the tool's "
        "on_resume replan)"
    )


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _sweep_since(out: Path) -> float | None:
    """When the local sweep that holds ``out``'s lock now took it (the lock file's time); None
    where none holds it."""
    lock = FolderLock(out, SWEEP_LOCK, "")
    try:
        lock.check()
    except FolderBusyError:
        with contextlib.suppress(OSError):
            return lock.path.stat().st_mtime
    return None


def _elapsed(tries: list[dict[str, Any]], state: str) -> float:
    """The time of every try (a running one: so far)."""
    total = sum(t.get("wall_s") or 0.0 for t in tries)
    began = started_at(tries[-1]) if tries and tries[-1].get("exit") is None else None
    if state == "running" and began is not None:
        total += max(0.0, time.time() - began - (tries[-1].get("wall_s") or 0.0))
    return total


def cell_states(out: Path, env: dict[str, str] | None = None) -> list[CellState]:
    """The state of each cell of the sweep folder ``out``: its result as the report reads it, else
    its job's state in the queue, else its record; :class:`ReportError` for a folder that is not a
    sweep or a record that is not one."""
    found = read_sweep(out)  # every record, cell folder and final metric checked
    framework = found.meta["framework"]
    jobs = [job for job in (job_of(cell.record) for cell in found.cells) if job is not None]
    live, why = queue_answer(jobs, env)
    since = _sweep_since(out)
    rows = []
    for cell in found.cells:
        record, job = cell.record, job_of(cell.record)
        result = run_status(framework, cell.run_dir, cell.final, record.get("status"))
        seen = _Seen(result, (live or {}).get(job or ""), live is not None, why,
                     sweep_since=since)  # fmt: skip
        if result is None and job is not None and seen.live is None:
            asked = ended_state(job, env) if live is not None else None
            seen.ended = asked or _recorded_end(record)
            if asked is not None and asked != _recorded_end(record):
                with contextlib.suppress(OSError):  # a folder this user cannot write: not kept
                    record_job_end(cell.run_dir, job, asked)
        state, note = _state(record, seen)
        if result is None and state in RESUMED:
            iters = found.family.iters(cell.key.budget)
            state, note = resume_refusal(framework, cell.run_dir, iters, record) or (state, note)
        tries = [t for t in record.get("tries") or [] if isinstance(t, dict)]
        final = None if result == "diverged" else cell.final
        text = metrics_text(final.metrics) if final else ""
        rows.append(CellState(cell.run_dir.name, state, job, len(tries), _elapsed(tries, state),
                              text if state in ("done", "undecayed") else note))  # fmt: skip
    return rows


def record_job_end(run_dir: Path, job: str, state: str) -> None:
    """Record how the cell's Slurm job ``job`` ended (``scontrol``, once out of the queue), which
    the job could not know itself; a record that names another job by now is left alone."""

    def change(record: dict[str, Any]) -> None:
        if job_of(record) == job:
            record["slurm"]["state"] = state

    update_cell_record(run_dir, change)


def _recorded_end(record: dict[str, Any]) -> str | None:
    """How the record says its job ended (the controller's or the job's last word), if it did."""
    slurm = record.get("slurm")
    state = slurm.get("state") if isinstance(slurm, dict) else None
    return state if isinstance(state, str) and state not in LIVE_STATES | {"RUNNING"} else None


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def format_status(rows: Sequence[CellState]) -> str:
    """The ``--status`` table and its summary line."""
    head = ("cell", "state", "job", "tries", "elapsed", "result")
    lines = [
        (r.name, r.state, r.job or "-", str(r.tries), _duration(r.elapsed_s), r.result)
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head) - 1)]
    text = [
        "  ".join([*(x[i].ljust(widths[i]) for i in range(len(widths))), x[-1]]).rstrip()
        for x in [head, *lines]
    ]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    text.append(f"[status] {len(rows)} cells: {summary}")
    return "\n".join(text)


def status_main(out: Path) -> int:
    """``budgeted-sweep --status OUT``: print the table; 2 with one line for a folder that is not
    a sweep (or a record that is not one)."""
    import sys

    try:
        rows = cell_states(out)
    except ReportError as err:
        print(f"sweep: error: {err}", file=sys.stderr)
        return 2
    print(format_status(rows))
    return 0

"""Where a sweep's cells stand (``budgeted-sweep --status OUT``), and the one way its cell records
are changed while other writers may change them too.

A sweep whose cells run as Slurm jobs has several writers of one cell's ``sweep_cell.json``: the
controller (it records the job id it submitted) and the job itself, on another node (each try:
start, exit, what it came to). :func:`update_cell_record` reads, changes and rewrites a record
under an exclusive ``flock`` of the cell's ``.sweep_cell.lock``, the new text renamed into place
(atomic): no reader sees half a record, no writer loses another's update, and cells that end in
any order touch only their own records.

:func:`cell_states` reads only records (``sweep.json``, each ``sweep_cell.json``, as JSON, checked
field by field) and, where Slurm answers, the queue's state of the job ids they name: it runs
nothing from the folder.

    $ budgeted-sweep --status output/sweep/mmseg_toy
    cell                        state       job      tries  elapsed  result
    linear_budget1_lr0.01       done        412_0    1      1m02s    mIoU 12.31
    step_budget1_lr0.01         running     412_1    2      0m48s    (requeued 1x)
    ...
    [status] 4 cells: 1 done, 1 running, 1 queued, 1 cancelled
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ReportError
from ...safety import atomic_write_text
from .records import CELL_FILE, SWEEP_FILE, cell_key, cell_name, read_record

__all__ = [
    "CELL_LOCK",
    "LIVE_STATES",
    "CellState",
    "cell_states",
    "format_status",
    "job_of",
    "queue_states",
    "status_main",
    "update_cell_record",
]

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
    """Read ``<run_dir>/sweep_cell.json`` ({} where there is none), apply ``change`` (it edits the
    dict in place, or returns a new one), and write it back atomically, all under the cell's
    lock: two writers (the controller, the cell's job) never lose each other's update.

    Example:
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


def queue_states(jobs: Sequence[str], env: dict[str, str] | None = None) -> dict[str, str] | None:
    """``{job id: state}`` (RUNNING, PENDING, ...) of those of ``jobs`` Slurm still lists
    (``squeue``, array tasks one by one); None where Slurm cannot be asked (no ``squeue``, no
    controller answering)."""
    if not jobs:
        return {}
    if shutil.which("squeue") is None:
        return None
    try:
        done = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T", "-u", _user()],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    wanted = set(jobs)
    states = {}
    for line in done.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job in wanted:
            states[job] = state
    return states


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


@dataclass
class CellState:
    """One row of ``--status``: a planned cell, what it is now, its job and time so far."""

    name: str
    state: str  # done, failed, diverged, undecayed, running, queued, requeued, cancelled, ...
    job: str | None
    tries: int
    elapsed_s: float
    result: str


def _result_text(record: dict[str, Any]) -> str:
    metrics = record.get("metrics")
    if isinstance(metrics, dict) and metrics:
        return ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if isinstance(v, (int, float)))
    return ""


def _state(record: dict[str, Any], live: str | None, known: bool) -> tuple[str, str]:
    """(state, note) of a cell from its record and its job's state in the queue (``live``;
    ``known``: whether the queue could be asked)."""
    status = record.get("status")
    tries = record.get("tries") or []
    slurm = record.get("slurm") if isinstance(record.get("slurm"), dict) else {}
    interrupted = sum(1 for t in tries if isinstance(t, dict) and t.get("exit") == 75)
    if status in ("finished", "undecayed", "diverged"):
        return ("done" if status == "finished" else status), ""
    if live is not None:
        if live in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "PREEMPTED"):
            return ("requeued" if tries else "queued"), ""
        note = f"(requeued {interrupted}x)" if interrupted else ""
        return live.lower() if live != "RUNNING" else "running", note
    ended = slurm.get("state")
    if ended == "CANCELLED":
        return "cancelled", "(rerun the sweep to resume it)"
    if status == "failed":
        return "failed", "(rerun the sweep to retry it)"
    if status == "interrupted":
        return "interrupted", "(rerun the sweep to resume it)"
    if job_of(record) is not None:
        return ("submitted" if not known else "lost"), (
            "(Slurm not asked)" if not known else "(no longer queued; rerun the sweep)"
        )
    return "missing", "(not started; rerun the sweep)"


def cell_states(out: Path, env: dict[str, str] | None = None) -> list[CellState]:
    """The state of each cell of the sweep folder ``out`` (planned in ``sweep.json``, or started):
    from the records and the queue (:func:`queue_states`); :class:`ReportError` for a folder that
    is not a sweep or a record that is not one."""
    meta_file = out / SWEEP_FILE
    if not meta_file.is_file():
        raise ReportError(
            f"{out} is not a sweep folder (no {SWEEP_FILE}); allowed: a folder written by "
            "budgeted-sweep --out"
        )
    meta = read_record(meta_file)
    names = [cell_name(*cell_key(*cell)) for cell in meta["cells"]]
    for extra in sorted(out.glob(f"*/{CELL_FILE}")):
        if extra.parent.name not in names:
            names.append(extra.parent.name)
    records = {}
    for name in names:
        path = out / name / CELL_FILE
        records[name] = read_record(path) if path.is_file() else {}
    jobs = [job for job in map(job_of, records.values()) if job is not None]
    live = queue_states(jobs, env)
    rows = []
    for name in names:
        record = records[name]
        job = job_of(record)
        state, note = _state(record, (live or {}).get(job or ""), live is not None)
        tries = [t for t in record.get("tries") or [] if isinstance(t, dict)]
        elapsed = sum(t.get("wall_s") or 0.0 for t in tries)
        result = _result_text(record) if state in ("done", "undecayed", "diverged") else note
        rows.append(CellState(name, state, job, len(tries), elapsed, result))
    return rows


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


def status_main(argv: Sequence[str]) -> int:
    """``budgeted-sweep --status OUT``: print the table; 2 with one line for a folder that is not
    a sweep (or a record that is not one)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="budgeted-sweep --status")
    parser.add_argument("--status", type=Path, required=True, metavar="OUT")
    known, rest = parser.parse_known_args(argv)
    if rest:
        print(f"sweep: error: --status takes only the sweep folder; got also {' '.join(rest)}; "
              "allowed: budgeted-sweep --status OUT", file=sys.stderr)  # fmt: skip
        return 2
    try:
        rows = cell_states(known.status)
    except ReportError as err:
        print(f"sweep: error: {err}", file=sys.stderr)
        return 2
    print(format_status(rows))
    return 0

"""Running a sweep's planned cells (:func:`start_cell`, :func:`finish_cell`; ``--jobs N``:
:mod:`.local`): signals forwarded, every try recorded atomically in the cell's
``sweep_cell.json``, the sweep's exit status from what the cells came to, one sweep per
``--out`` folder (:func:`sweep_lock`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ...errors import ReportError, SweepError
from ...safety import atomic_write_text
from ...safety.locks import FolderLock
from ...safety.locks import check_writable as writable
from ...safety.preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    UNDECAYED_EXIT_CODE,
    restore_default_signals,
    signal_name,
)
from .commands import show
from .plan import Plan
from .records import (
    CELL_FILE,
    SWEEP_FILE,
    SWEEP_LOCK,
    divergence,
    metrics_text,
    read_cell_record,
    read_final,
    read_record,
    run_status,
)
from .warm import ForkedProcess, fork_cell

__all__ = [
    "ENDED", "Interrupted", "RunningCell", "SignalForwarder", "check_writable", "ended_status",
    "finish_cell", "finish_stopped", "save_sweep", "skip_text", "start_cell", "sweep_lock",
    "try_status"
]  # fmt: skip


def utc_now() -> str:
    """Now, as a cell's record keeps when a try started (``2026-12-02T08:30:00+0000``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def start_child(job: bool = False) -> None:
    """In the training process, before it runs (``preexec_fn``): default signal handling, its own
    process group (Ctrl-C reaches the sweep alone, which forwards it), SIGTERM when the sweep dies
    (``PR_SET_PDEATHSIG``). ``job``: in a Slurm job, SIGUSR2 ignored (submitit's process handles it
    and asks this one to save with SIGUSR1)."""
    restore_default_signals()
    if job:
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
    if not job and os.getppid() == 1:  # the sweep died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


class SignalForwarder:
    """While a sweep runs, SIGINT, SIGTERM and SIGUSR1 are forwarded to every running training
    process (SIGINT as SIGTERM), each of which saves and exits 75; the sweep records their tries and
    starts no other cell. A second SIGINT kills them (SIGKILL; checkpoints are written atomically).

    Example::

        with SignalForwarder() as forwarder:
            child = forwarder.start(command, log, env)  # one or more; then release(child)
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.children: list[subprocess.Popen | ForkedProcess] = []
        self.warm = False  # --preload: fork the cells from this process (:mod:`.warm`)
        self._old: dict[int, Any] = {}

    def __enter__(self) -> SignalForwarder:
        for signum in self.SIGNALS:
            self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, old in self._old.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)
        self._old.clear()

    @property
    def exit_code(self) -> int:
        """The sweep's exit status once interrupted: 130 after SIGINT (as a shell reports
        Ctrl-C), 75 after SIGTERM / SIGUSR1 (:data:`PREEMPTED_EXIT_CODE`: rerun to resume)."""
        return 130 if self.signum == signal.SIGINT else PREEMPTED_EXIT_CODE

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        first = self.signum is None
        if first:
            self.signum = signum
        if signum == signal.SIGINT and not first:
            forward = signal.SIGKILL
        elif signum == signal.SIGUSR1:
            forward = signal.SIGUSR1
        else:
            forward = signal.SIGTERM
        for child in list(self.children):
            if child.returncode is None:  # not yet reaped: its process group still exists
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, forward)

    def start(
        self, command: Sequence[str], log: IO[str], env: dict[str, str]
    ) -> subprocess.Popen | ForkedProcess | None:
        """Start ``command`` in its own process group, its output into ``log``, signals forwarded
        to it until :meth:`release`: a new interpreter, or with :attr:`warm` forked from this
        one; None where a signal came before: nothing is started."""
        if self.signum is not None:
            return None
        if self.warm:
            child: subprocess.Popen | ForkedProcess = fork_cell(command, log, env, start_child)
        else:
            child = subprocess.Popen(
                command, preexec_fn=start_child, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        self.children.append(child)
        if self.signum is not None:  # arrived while the process was being started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
        return child

    def release(self, child: subprocess.Popen | ForkedProcess | None) -> None:
        """Forward nothing more to ``child`` (it has ended)."""
        if child in self.children:
            self.children.remove(child)


class Interrupted(Exception):
    """The sweep got a signal while a cell ran; that cell's try is recorded."""


def new_try(action: str, **more: Any) -> dict[str, Any]:
    """A try as the cell's record keeps it when it starts (``more``: a Slurm job's id, restart
    count and node); its end fills in ``wall_s`` and ``exit``."""
    return {"action": action, "started": utc_now(), "wall_s": None, "exit": None, **more}


def carried_record(record: dict[str, Any], plan: Plan, keep: Sequence[str] = ()) -> dict:
    """The cell's record (``record``, as read) with ``plan``'s settings: its tries carried on
    where it holds the same settings, else a new one (keeping only the keys ``keep``)."""
    if not all(record.get(k) == v for k, v in plan.spec.items()):
        return {**plan.spec, "tries": [], **{k: record[k] for k in keep if k in record}}
    tries = record.get("tries")
    if tries is None:  # a record from before tries were recorded: its total as one try
        tries = [{"wall_s": record["wall_s"]}] if record.get("wall_s") else []
    return {**record, "tries": tries}


def end_record(record: dict[str, Any], plan: Plan, code: int, status: str) -> None:
    """Record a try's end in the cell's record: total wall time, exit status, what it came to
    (``status``), the final metrics (``plan.final``)."""
    record["wall_s"] = round(sum(t.get("wall_s") or 0.0 for t in record["tries"]), 3)
    record["exit"] = code
    record["status"] = status
    record["metrics"] = None if plan.final is None else plan.final.metrics


@dataclass
class RunningCell:
    """A cell whose training process runs (:func:`start_cell`), until :func:`finish_cell`."""

    plan: Plan
    record: dict
    attempt: dict
    log: IO[str]
    process: subprocess.Popen | ForkedProcess | None  # None: a signal came first, none started
    start: float = field(default_factory=time.monotonic)
    head: str = ""  # how the sweep names it in its output: ``[3/20] linear_budget1:``
    stopped: bool = False  # stopped by the executor's watch (a search's pruner), not to resume

    def poll(self) -> int | None:
        """Its exit status once it has ended (-1: never started), else None."""
        return -1 if self.process is None else self.process.poll()

    def wait(self) -> int:
        """Wait for it to end (signals still forwarded meanwhile); its exit status."""
        return -1 if self.process is None else self.process.wait()


def start_cell(plan: Plan, env: dict[str, str], forwarder: SignalForwarder) -> RunningCell:
    """Start one cell's command (output appended to ``<run_dir>/sweep.log``), its try recorded
    as started; :func:`finish_cell` records how it ended."""
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = plan.run_dir / CELL_FILE
    record = carried_record(read_cell_record(plan.run_dir), plan)
    record["command"] = plan.command
    attempt = new_try(plan.action)
    record["tries"].append(attempt)
    atomic_write_text(spec_file, json.dumps(record, indent=1) + "\n")
    log = (plan.run_dir / "sweep.log").open("a")
    try:
        log.write(f"\n$ {show(plan.command)}  # {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        log.write(f"# exactly: {shlex.join(plan.command)}\n")
        log.flush()
        start = time.monotonic()
        process = forwarder.start(plan.command, log, env)
    except BaseException:
        log.close()
        raise
    return RunningCell(plan, record, attempt, log, process, start)


def finish_cell(cell: RunningCell, code: int, forwarder: SignalForwarder) -> float:
    """Record how a started cell's try ended (exit status ``code``), atomically; its wall time (the
    cell's ``wall_s`` sums every try's; its ``status``: :func:`try_status`).

    Raises:
        Interrupted: a signal stopped the try (the training process saved and exited).
        RuntimeError: the training tool failed (one line: its last log line, the log's path).
    """
    wall = time.monotonic() - cell.start
    cell.log.close()
    forwarder.release(cell.process)
    plan, record, attempt = cell.plan, cell.record, cell.attempt
    spec_file = plan.run_dir / CELL_FILE
    attempt.update(wall_s=round(wall, 3), exit=code)
    if forwarder.signum is not None:
        attempt["signal"] = signal_name(forwarder.signum)
    plan.status = try_status(plan, code, interrupted=forwarder.signum is not None)
    end_record(record, plan, code, plan.status)
    atomic_write_text(spec_file, json.dumps(record, indent=1) + "\n")
    if plan.status == "interrupted":
        raise Interrupted(f"training stopped with exit status {code}")
    if plan.status == "failed":
        log = plan.run_dir / "sweep.log"
        if code in (0, UNDECAYED_EXIT_CODE):
            raise RuntimeError(f"{plan.run_dir.name} exited {code} but {plan.note} (log: {log})")
        raise RuntimeError(
            f"{plan.run_dir.name} failed (exit {code}): {last_log_line(plan)} (log: {log}); "
            "rerun the sweep to resume it"
        )
    return wall


def finish_stopped(cell: RunningCell, code: int, forwarder: SignalForwarder) -> None:
    """Record the end of a try the executor stopped (a search's pruner): status ``stopped``, no
    result; a sweep run again would run the cell from its start."""
    cell.log.close()
    forwarder.release(cell.process)
    cell.attempt.update(wall_s=round(time.monotonic() - cell.start, 3), exit=code, stopped=True)
    cell.plan.final, cell.plan.status = None, "stopped"
    end_record(cell.record, cell.plan, code, "stopped")
    atomic_write_text(cell.plan.run_dir / CELL_FILE, json.dumps(cell.record, indent=1) + "\n")


def try_status(plan: Plan, code: int, interrupted: bool) -> str:
    """What a try that ended with exit status ``code`` came to (a
    :data:`budgeted.runs.records.CELL_STATUSES`); ``plan.final`` holds its result, if any.

    Exit 3: ``diverged``; a signal: ``interrupted``, unless the final evaluation was written before
    it; 0 or 4 with the final evaluation logged: ``finished`` or ``undecayed`` (``diverged`` where
    the log holds a non-finite loss); anything else: ``failed``.
    """
    plan.final, plan.note = None, last_log_line(plan)
    if code == DIVERGED_EXIT_CODE:
        return "diverged"
    stopped = interrupted and code not in (0, UNDECAYED_EXIT_CODE)
    if code not in (0, UNDECAYED_EXIT_CODE) and not stopped:
        return "failed"
    try:
        final = read_final(plan.family, plan.budget, plan.run_dir)
    except ReportError as err:
        if stopped:
            return "interrupted"
        plan.note = f"its final metric cannot be read: {err}"
        return "failed"
    if stopped and final is None:
        return "interrupted"
    recorded = "undecayed" if code == UNDECAYED_EXIT_CODE else None
    status = run_status(plan.family.framework, plan.run_dir, final, recorded)
    if status is None and plan.family.script:  # the script contract: docs/sweeps.md
        plan.note = (
            f"wrote no results.json and final metrics.jsonl line in {plan.run_dir}; allowed: a "
            "script that follows the contract of docs/sweeps.md ('Your own script')"
        )
    elif status is None:
        plan.note = f"has no final metric in {plan.run_dir}"
    elif status == "diverged":  # a tool that trained on through a NaN loss, exit 0
        plan.note = f"{divergence(plan.family.framework, plan.run_dir)} (exit {code})"
    plan.final = final if status in ("finished", "undecayed") else None
    return status or "failed"


def last_log_line(plan: Plan) -> str:
    """The last line the cell's training tool printed (its one-line account of how it ended)."""
    lines = [ln for ln in (plan.run_dir / "sweep.log").read_text().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def save_sweep(
    out: Path, framework: str, label: str, plans: Sequence[Plan], experiment: dict | None = None
) -> None:
    """Write ``<out>/sweep.json``: framework, family, every cell ever planned and, for the user's
    own config or script, its ``experiment`` record."""
    record = out / SWEEP_FILE
    cells = read_record(record)["cells"] if record.is_file() else []
    for plan in plans:
        axes = [plan.lr, plan.seed] if (plan.lr, plan.seed) != (None, None) else []
        cell = [plan.schedule, plan.budget, *axes]  # [schedule, budget] without --lrs / --seeds
        if cell not in cells:
            cells.append(cell)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"framework": framework, "family": label, "cells": cells}
    if experiment is not None:
        meta["experiment"] = experiment
    atomic_write_text(record, json.dumps(meta, indent=1) + "\n")


def sweep_lock(out: Path) -> FolderLock:
    """The lock a sweep holds in ``out`` (:data:`SWEEP_LOCK`) while it runs."""
    return FolderLock(
        out,
        SWEEP_LOCK,
        "--out {folder} is in use: {holder} is running a sweep there (it holds {lock}); wait "
        "for it to end, stop it, or choose another --out (nothing was written)",
    )


def check_writable(out: Path, toy_root: Path | None) -> None:
    """Refuse (:class:`SweepError`, before anything is written) an ``--out`` folder, or a toy
    set's folder the sweep would write, in which nothing can be created (read-only)."""
    for what, folder in (("--out", out), ("the toy set's folder", toy_root)):
        if folder is not None:
            writable(folder, what, "a folder you can write to", SweepError)


ENDED = (
    ("diverged", DIVERGED_EXIT_CODE, "diverged (a non-finite loss)", "results of their base LR, "
     "kept and not retrained; budgeted-report names them and never picks their LR as the best "
     "(move a cell's folder away to train it again)"),
    ("undecayed", UNDECAYED_EXIT_CODE, "ended undecayed (the time budget ran out before the LR "
     "decayed)", "their metrics are kept, marked in budgeted-report, and their LR is never the "
     "best"),
)  # fmt: skip
"""(status, the sweep's exit status, what happened, what it means) of the runs that ended
without a plain result."""


def ended_status(plans: Sequence[Plan]) -> int:
    """The sweep's exit status from its cells that diverged (3, first) or ended undecayed (4);
    0 where there are none. Each kind is named in one line."""
    code = 0
    for status, exit_code, happened, meaning in ENDED:
        names = [p.run_dir.name for p in plans if p.status == status]
        if names:
            print(f"sweep: {len(names)} cell(s) {happened}: {', '.join(names)}; {meaning}",
                  file=sys.stderr)  # fmt: skip
            code = code or exit_code
    return code


def skip_text(plan: Plan) -> str:
    """Why a skipped cell is done: ``finished: <metrics>`` (``finished undecayed: ...``), or
    that it diverged."""
    if plan.status == "diverged":
        return "diverged: a result of that base LR (move its folder away to train it again)"
    undecayed = " undecayed" if plan.status == "undecayed" else ""
    return f"finished{undecayed}: {metrics_text(plan.final.metrics)}"

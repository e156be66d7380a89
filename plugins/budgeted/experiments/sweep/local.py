"""The local executor: a sweep's cells on this machine, ``--jobs N`` at a time (:func:`run_cells`),
each recorded as it ends; with N > 1 each run gets ``cores // N`` threads (:func:`thread_share`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...safety.preemption import signal_name
from .commands import short, show
from .execute import (
    Interrupted,
    RunningCell,
    SignalForwarder,
    ended_status,
    finish_cell,
    finish_stopped,
    skip_text,
    start_cell,
)
from .plan import Plan
from .records import metrics_text

__all__ = ["THREAD_VARIABLES", "jobs_environment", "run_cells", "thread_share"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The thread counts each run of ``--jobs N`` > 1 gets (:func:`thread_share`)."""


def thread_share(jobs: int, cores: int | None = None) -> int:
    """The CPU threads each of ``jobs`` runs at once gets: ``cores // jobs``, at least 1.

    >>> thread_share(2, cores=16), thread_share(3, cores=2), thread_share(1, cores=8)
    (8, 1, 8)
    """
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
    return max(1, cores // jobs)


def jobs_environment(env: dict[str, str], jobs: int) -> tuple[dict[str, str], str]:
    """The runs' environment with ``jobs`` at a time, and the line that says so: with ``jobs`` > 1,
    :data:`THREAD_VARIABLES` set to :func:`thread_share` (a value the user set is kept)."""
    if jobs == 1:
        return env, ""
    share = thread_share(jobs)
    env = dict(env)
    kept = []
    for name in THREAD_VARIABLES:
        if env.get(name):
            kept.append(f"{name}={env[name]}")
        else:
            env[name] = str(share)
    threads = f"{share} thread{'s' if share != 1 else ''} each ({' and '.join(THREAD_VARIABLES)})"
    also = f"; kept as set: {', '.join(kept)}" if kept else ""
    return env, f"[sweep] {jobs} runs at a time, {threads}{also}"


Watch = Callable[[Path], bool]
"""Asked about each running cell's run folder every :data:`WATCH_S` seconds: True stops the cell
(``budgeted-search --method asha``: its pruner)."""
WATCH_S = 0.25


def _stop(cell: RunningCell) -> None:
    """Kill a running cell's process group (its run is given up, never resumed)."""
    cell.stopped = True
    if cell.process is not None and cell.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cell.process.pid, signal.SIGKILL)


def _wait_any(
    running: Sequence[RunningCell], watch: Watch | None = None
) -> list[tuple[RunningCell, int]]:
    """Wait until one or more of the ``running`` cells end; those, with their exit statuses.
    Signals are handled (forwarded) meanwhile; ``watch`` stops the cells it says."""
    while True:
        if watch is not None:
            for cell in running:
                if not cell.stopped and cell.poll() is None and watch(cell.plan.run_dir):
                    _stop(cell)
            ended = [(cell, code) for cell in running if (code := cell.poll()) is not None]
            if ended:
                return ended
            time.sleep(WATCH_S)
            continue
        if len(running) == 1:
            return [(running[0], running[0].wait())]
        ended = [(cell, code) for cell in running if (code := cell.poll()) is not None]
        if ended:
            return ended
        ours = {cell.process.pid for cell in running if cell.process is not None}
        try:  # until a child can be waited for, without reaping it (Popen.poll reaps it)
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except (AttributeError, ChildProcessError):  # no waitid (not Linux)
            found = None
        if found is None or found.si_pid not in ours:  # another child of this process
            time.sleep(0.1)


def _ended_line(cell: RunningCell, wall: float) -> str:
    """How a cell that ran to its end is reported: wall time and metrics, or that it diverged."""
    plan = cell.plan
    if plan.status == "diverged":
        return f"DIVERGED after {wall:.1f} s: {plan.note}"
    undecayed = f" (UNDECAYED: {plan.note})" if plan.status == "undecayed" else ""
    return f"{wall:.1f} s: {metrics_text(plan.final.metrics)}{undecayed}"


def run_cells(
    out: Path, plans: Sequence[Plan], env: dict[str, str], forwarder: SignalForwarder,
    keep_going: bool = False, jobs: int = 1, watch: Watch | None = None,
) -> int:  # fmt: skip
    """Run, resume or skip each planned cell in order, up to ``jobs`` at a time; the sweep's exit
    status. A failed run stops the sweep (exit 1), or with ``keep_going`` is reported and the sweep
    goes on; a run that diverged or ended undecayed is a result (:func:`ended_status`); a run
    ``watch`` stopped is recorded as stopped (:data:`Watch`)."""
    total = time.monotonic()
    counts = {"run": 0, "resume": 0, "skip": 0}
    failed: list[str] = []
    stopped: int | None = None  # the exit status once the sweep starts no other cell
    waiting = iter(enumerate(plans, 1))
    running: list[RunningCell] = []
    while True:
        while stopped is None and len(running) < jobs:
            i, plan = next(waiting, (0, None))
            if plan is None:
                break
            if forwarder.signum is not None:
                print(f"sweep: stopped by {signal_name(forwarder.signum)} before "
                      f"{plan.run_dir.name}; rerun the same command to go on",
                      file=sys.stderr)  # fmt: skip
                stopped = forwarder.exit_code
                break
            head = f"[{i}/{len(plans)}] {plan.run_dir.name}:"
            counts[plan.action] += 1
            if plan.action == "skip":
                print(f"{head} skipped, already {skip_text(plan)}", flush=True)
                continue
            verb = "resuming" if plan.action == "resume" else "running"
            print(f"{head} {verb} {show(plan.command)}{' ...' if jobs == 1 else ''}",
                  end="" if jobs == 1 else "\n", flush=True)  # fmt: skip
            cell = start_cell(plan, env, forwarder)
            cell.head = "" if jobs == 1 else head
            running.append(cell)
        if not running:
            break
        for cell, code in _wait_any(running, watch):
            running.remove(cell)
            name = cell.plan.run_dir.name
            if cell.stopped:
                finish_stopped(cell, code, forwarder)
                print(f"{cell.head} stopped early (pruned)", flush=True)
                continue
            try:
                wall = finish_cell(cell, code, forwarder)
            except RuntimeError as err:
                print(f"{cell.head} FAILED", flush=True)
                print(f"sweep: error: {err}", file=sys.stderr, flush=True)
                failed.append(name)
                if not keep_going and stopped is None:
                    stopped = 1
                continue
            except Interrupted as err:
                print(f"{cell.head} interrupted", flush=True)
                print(f"sweep: interrupted by {signal_name(forwarder.signum)} ({err}); rerun the "
                      f"same command to resume {name}", file=sys.stderr)  # fmt: skip
                stopped = forwarder.exit_code
                continue
            print(f"{cell.head} {_ended_line(cell, wall)}", flush=True)
    if stopped is not None:
        return stopped
    print(
        f"[sweep] {counts['run']} run, {counts['resume']} resumed, {counts['skip']} skipped"
        f"{f', {len(failed)} failed' if failed else ''} in {time.monotonic() - total:.0f} s; "
        f"table: budgeted-report {short(str(out))}"
    )
    code = ended_status(plans)
    if failed:
        print(f"sweep: error: {len(failed)} runs failed: {', '.join(failed)}; their logs say why "
              "(<run>/sweep.log); rerun the sweep to retry them", file=sys.stderr)  # fmt: skip
        return 1
    return code

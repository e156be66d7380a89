"""``launch``: Detectron2's ``launch`` on GPUs; on a CPU-only machine, CPU processes with gloo.

(This module was ``budgeted.detectron2.launch``, a name now only the function's:
``from budgeted.detectron2 import launch``.)

Detectron2 v0.6's ``launch`` asserts CUDA for more than one process and hard-codes NCCL. Without
CUDA, :func:`launch` spawns the processes itself, joins them with the gloo backend and sets up
Detectron2's local process group the same way, so ``--num-gpus N`` means N CPU processes.

Preemption, with several workers: each worker catches SIGTERM / SIGUSR1 from its start
(:class:`~budgeted.safety.preemption.PreemptionGuard`), the launching process forwards the ones it
gets to its workers, and when the workers stop for a preemption (exit status 75, see
:class:`~budgeted.detectron2.PreemptionHook`) :func:`launch` raises
:class:`~budgeted.safety.preemption.Preempted` (exit status 75) instead of Detectron2's error.

Failures, with several workers: a worker that stops with one line
(:class:`~budgeted.detectron2.stops.RunStopped`: diverged, undecayed time budget, disk full)
leaves the line for the launcher, which prints it once and exits with its status; a worker killed
by a signal, or one that exits otherwise, is named in one line (after its traceback, for a Python
exception). The other workers, whose collective operations then fail, get
:data:`FAILURE_GRACE_S` to end by themselves and are then killed; their errors are not printed.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.connection
import os
import pickle
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from detectron2.engine.launch import DEFAULT_TIMEOUT, _distributed_worker, _find_free_port
from detectron2.utils import comm

from ..safety.preemption import (
    PREEMPTED_EXIT_CODE,
    Preempted,
    PreemptionGuard,
    active_guard,
    signal_name,
)

__all__ = ["FAILURE_GRACE_S", "PREEMPTION_GRACE_S", "launch"]

PREEMPTED_SIGNAL_FALLBACK = 15  # SIGTERM: what a worker stopped by a preemption got at least

PREEMPTION_GRACE_S = 120.0
"""After one worker stopped for a preemption, how long the others have to stop by themselves
before they are terminated (they passed the same barrier, so they normally need a moment)."""

FAILURE_GRACE_S = 10.0
"""After a worker failed, how long the others have to end by themselves (their next collective
operation fails at once) before they are killed."""


def launch(
    main_func: Callable[..., Any],
    num_gpus_per_machine: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    dist_url: str | None = None,
    args: Sequence[Any] = (),
    timeout: timedelta = DEFAULT_TIMEOUT,
    prog: str = "train_net",
) -> None:
    """Run ``main_func(*args)`` on ``num_gpus_per_machine`` workers of this machine.

    Same signature as ``detectron2.engine.launch``: one worker runs in this process; several
    are spawned, joined with NCCL on GPUs (Detectron2's own worker) or with gloo on CPUs.

    Args:
        main_func (callable): one worker's work (picklable: spawned processes import it).
        num_gpus_per_machine (int): workers on this machine (CPU processes without CUDA).
        num_machines (int): machines in all. Defaults to 1.
        machine_rank (int): this machine's rank. Defaults to 0.
        dist_url (str, optional): ``tcp://HOST:PORT``; ``"auto"`` or None: a free local port.
        args (Sequence): the arguments of ``main_func``.
        timeout (timedelta): the process-group timeout.
        prog (str): the tool's name, for messages.

    Raises:
        ValueError: one line for a bad worker count.
        Preempted: the workers stopped for a preemption signal (exit status 75).

    Example:
        >>> launch(print, 1, args=("one worker",))
        one worker
    """
    world_size = num_machines * num_gpus_per_machine
    if num_gpus_per_machine < 1 or num_machines < 1:
        raise ValueError(
            f"--num-gpus={num_gpus_per_machine} --num-machines={num_machines} is invalid; "
            "allowed: whole numbers >= 1"
        )
    if world_size == 1:
        main_func(*args)
        return
    if dist_url is None or dist_url == "auto":
        if num_machines != 1:
            raise ValueError("--dist-url auto works on one machine only; give tcp://HOST:PORT")
        dist_url = f"tcp://127.0.0.1:{_find_free_port()}"
    worker = _distributed_worker if torch.cuda.is_available() else _cpu_worker
    with tempfile.TemporaryDirectory(prefix="budgeted-launch-") as lines:
        context = mp.start_processes(
            _guarded_worker,
            nprocs=num_gpus_per_machine,
            args=(
                worker,
                lines,
                main_func,
                world_size,
                num_gpus_per_machine,
                machine_rank,
                dist_url,
                tuple(args),
                timeout,
            ),
            daemon=False,
            join=False,
            start_method="spawn",
        )
        _join(context, prog, lines)


def _join(context: Any, prog: str, lines: str) -> None:
    """Wait for the workers; forward SIGTERM / SIGUSR1 to them meanwhile.

    All exit 0: return. Any exits 75 (preempted): wait up to :data:`PREEMPTION_GRACE_S` for the
    others, then raise :class:`Preempted`. Any other failure: :func:`_fail` (one line).
    """
    procs = list(context.processes)
    pids = [p.pid for p in procs]

    def forward(signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    outer = active_guard()
    terminated: set[int] = set()

    def clean(i: int, code: int | None) -> bool:
        """Worker ``i`` stopped without failing: 0, 75, by the forwarded signal, or by us."""
        if code in (0, PREEMPTED_EXIT_CODE) or i in terminated:
            return True
        return guard.requested and code == -(guard.signum or 0)

    with PreemptionGuard(on_signal=forward) as guard:
        if outer is not None and outer.requested:  # arrived before the workers existed
            guard.request(outer.signum or 0)
            forward(outer.signum or 0)
        deadline = None
        while True:
            codes = [p.exitcode for p in procs]
            if all(c is not None for c in codes):
                break
            if any(c is not None and not clean(i, c) for i, c in enumerate(codes)):
                _fail(context, prog, lines)
            if PREEMPTED_EXIT_CODE in codes:
                deadline = deadline or time.monotonic() + PREEMPTION_GRACE_S
                if time.monotonic() > deadline:
                    late = [i for i, c in enumerate(codes) if c is None]
                    print(
                        f"{prog}: workers {late} did not stop within {PREEMPTION_GRACE_S:.0f} s "
                        "of the preemption; terminating them",
                        file=sys.stderr,
                        flush=True,
                    )
                    for i in late:
                        terminated.add(i)
                        procs[i].terminate()
                        procs[i].join()
                    break
            alive = [p.sentinel for p, c in zip(procs, codes) if c is None]
            multiprocessing.connection.wait(alive, timeout=1.0)
    codes = [p.exitcode for p in procs]
    if all(c == 0 for c in codes):
        context.join()
        return
    if not all(clean(i, c) for i, c in enumerate(codes)):
        _fail(context, prog, lines)
    signum = guard.signum or PREEMPTED_SIGNAL_FALLBACK
    if PREEMPTED_EXIT_CODE in codes:  # rank 0 printed the line
        message = f"{prog}: preempted by {signal_name(signum)}; workers exited with {codes}"
    else:  # the workers died of the signal before they could catch it
        message = (
            f"{prog}: preempted by {signal_name(signum)} while the workers were starting: "
            "nothing new to save; resume with --resume"
        )
        print(message, file=sys.stderr, flush=True)
    logging.getLogger(__name__).info(message)
    raise Preempted(message, signum)


def _fail(context: Any, prog: str, lines: str) -> None:
    """A worker failed: stop the others, print one line, exit (:class:`SystemExit`).

    The line is a worker's own one-line stop if one left it (:func:`_guarded_worker`; the exit
    status its own), else it names the failed worker: killed by a signal, or exited with a
    status (after its traceback, for a Python exception); exit status 1.
    """
    procs = list(context.processes)
    failed = _first_failure(context, _stop_others(procs))
    left = sorted(n for n in os.listdir(lines) if not n.endswith(".part"))
    if left:
        with open(os.path.join(lines, left[0]), encoding="utf-8") as f:
            print(f"{prog}: {f.read()}", file=sys.stderr, flush=True)
        raise SystemExit(int(left[0].split("-")[1]))
    code, error = procs[failed].exitcode, _error(context, failed)
    what = f"exited with status {code}"
    if code is not None and code < 0:
        what = f"was killed by {signal_name(-code)}"
    elif error is not None:
        print(error, file=sys.stderr, end="", flush=True)  # the worker's own traceback
        what = "failed (its traceback is above)"
    print(
        f"{prog}: worker {failed} of {len(procs)} {what}; the other workers were stopped; "
        "resume from the last checkpoint with --resume",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


COLLATERAL = re.compile(
    r"Connection (closed|reset) by peer|DistBackendError|ProcessGroup(Gloo|NCCL)|Broken pipe"
)
"""A worker's error that only says a peer went away (its collective operation failed)."""


def _first_failure(context: Any, stopped: set[int]) -> int:
    """The worker whose failure caused the others', as far as the exits tell: one killed by a
    signal (not by us: ``stopped``), else one whose error is its own (not a failed collective
    operation), else the first one failed."""
    procs = list(context.processes)
    failed = [i for i, p in enumerate(procs) if p.exitcode not in (None, 0) and i not in stopped]
    killed = [i for i in failed if procs[i].exitcode < 0]
    own = [i for i in failed if not COLLATERAL.search(_error(context, i) or "")]
    return (killed or own or failed or [0])[0]


def _error(context: Any, i: int) -> str | None:
    """Worker ``i``'s traceback, when it ended with a Python exception."""
    path = context.error_files[i]
    if not os.access(path, os.R_OK):
        return None
    with open(path, "rb") as f:
        return str(pickle.load(f))  # written by torch.multiprocessing in our own worker


def _stop_others(procs: list[Any]) -> set[int]:
    """Give the workers still running :data:`FAILURE_GRACE_S` to end, then kill them; the ones
    killed."""
    deadline = time.monotonic() + FAILURE_GRACE_S
    while any(p.exitcode is None for p in procs) and time.monotonic() < deadline:
        alive = [p.sentinel for p in procs if p.exitcode is None]
        multiprocessing.connection.wait(alive, timeout=max(0.0, deadline - time.monotonic()))
    stopped = {i for i, p in enumerate(procs) if p.exitcode is None}
    for i in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(procs[i].pid, signal.SIGKILL)
    for p in procs:
        p.join()
    return stopped


def _guarded_worker(local_rank: int, worker: Callable[..., Any], lines: str, *args: Any) -> None:
    """A spawned worker: catch preemption signals from its start to its end (never restored:
    a signal while it winds down must not turn its exit status 75 into a death by signal); a
    one-line stop leaves its line in folder ``lines`` (file ``<rank>-<status>``) for the
    launcher to print."""
    from .stops import RunStopped

    PreemptionGuard().__enter__()
    try:
        worker(local_rank, *args)
    except RunStopped as stop:
        path = os.path.join(lines, f"{local_rank:04d}-{stop.code}")
        with open(f"{path}.part", "w", encoding="utf-8") as f:
            f.write(stop.message)
        os.replace(f"{path}.part", path)  # the launcher never reads half a line
        raise


def _cpu_worker(
    local_rank: int,
    main_func: Callable[..., Any],
    world_size: int,
    num_gpus_per_machine: int,
    machine_rank: int,
    dist_url: str,
    args: tuple[Any, ...],
    timeout: timedelta,
) -> None:
    """One CPU process: Detectron2's ``_distributed_worker`` with gloo and without CUDA."""
    rank = machine_rank * num_gpus_per_machine + local_rank
    dist.init_process_group(
        backend="gloo", init_method=dist_url, world_size=world_size, rank=rank, timeout=timeout
    )
    try:
        assert comm._LOCAL_PROCESS_GROUP is None
        for i in range(world_size // num_gpus_per_machine):
            ranks = list(range(i * num_gpus_per_machine, (i + 1) * num_gpus_per_machine))
            group = dist.new_group(ranks)
            if i == machine_rank:
                comm._LOCAL_PROCESS_GROUP = group
        comm.synchronize()
        main_func(*args)
    finally:
        dist.destroy_process_group()

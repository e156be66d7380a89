"""``launch``: Detectron2's ``launch`` on GPUs; on a CPU-only machine, CPU processes with gloo
(``--num-gpus N`` means N CPU processes). (This module was ``budgeted.detectron2.launch``.)

The workers are torch's (``torch.multiprocessing.start_processes``, its exceptions name the
first worker that failed). A preemption (exit status 75) raises
:class:`~budgeted.safety.preemption.Preempted`; a worker's one-line stop
(:class:`~budgeted.detectron2.stops.RunStopped`) comes through a queue and is printed once; the
others get :data:`FAILURE_GRACE_S` (:data:`PREEMPTION_GRACE_S`) to end, and are then stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from detectron2.engine.launch import DEFAULT_TIMEOUT
from detectron2.utils import comm
from torch.multiprocessing.spawn import ProcessException, ProcessRaisedException

from ..control.tool import WorkerExits
from ..safety.preemption import (
    PREEMPTED_EXIT_CODE,
    Preempted,
    PreemptionGuard,
    active_guard,
    signal_name,
)
from .compat import set_local_process_group

__all__ = ["FAILURE_GRACE_S", "PREEMPTION_GRACE_S", "launch"]

_TAIL = "; the other workers were stopped; resume from the last checkpoint with --resume"
PREEMPTED_SIGNAL_FALLBACK = 15  # SIGTERM: what a worker stopped by a preemption got at least

PREEMPTION_GRACE_S = 120.0
"""After one worker stopped for a preemption, how long the others have to stop by themselves
before they are terminated (they passed the same barrier, so they normally need a moment)."""

EXITS = WorkerExits(
    killed="worker {worker} of {n} was killed by {signal}" + _TAIL,
    exited="worker {worker} of {n} exited with status {code}" + _TAIL,
    status=1,
)
RAISED = "worker {worker} of {n} failed (its traceback is above)" + _TAIL
"""The lines for the worker that failed: killed, exited, raised (its traceback printed)."""

FAILURE_GRACE_S = 10.0
"""After a worker failed, how long the others have to end by themselves (their next collective
operation fails at once) before they are stopped."""


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
    are spawned, joined with NCCL on GPUs or with gloo on CPUs.

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
        dist_url = f"tcp://127.0.0.1:{free_port()}"
    lines = mp.get_context("spawn").SimpleQueue()  # (rank, status, line) of one-line stops
    context = mp.start_processes(
        _worker,
        nprocs=num_gpus_per_machine,
        args=(main_func, machine_rank, num_gpus_per_machine, world_size, dist_url, tuple(args),
              timeout, lines),
        daemon=False,
        join=False,
        start_method="spawn",
    )  # fmt: skip
    _join(context, prog, lines)


def free_port() -> int:
    """A TCP port of this machine that is free now.

    Example:
        >>> 0 < free_port() < 65536
        True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _join(context: Any, prog: str, lines: Any) -> None:
    """Wait for the workers (``ProcessContext.join``); forward SIGTERM / SIGUSR1 to them
    meanwhile. All exit 0: return; else :func:`_after_failure`."""
    pids = context.pids()

    def forward(signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    outer = active_guard()
    with PreemptionGuard(on_signal=forward) as guard:
        if outer is not None and outer.requested:  # arrived before the workers existed
            guard.request(outer.signum or 0)
            forward(outer.signum or 0)
        try:
            while not context.join(timeout=1.0, grace_period=_grace(context, guard)):
                pass
            return
        except ProcessException as err:
            failure = err
    _after_failure(context, prog, lines, guard, failure)


def _grace(context: Any, guard: PreemptionGuard) -> float:
    """How long the other workers get once one stopped: longer during a preemption."""
    preempted = guard.requested or PREEMPTED_EXIT_CODE in [p.exitcode for p in context.processes]
    return PREEMPTION_GRACE_S if preempted else FAILURE_GRACE_S


def _after_failure(
    context: Any, prog: str, lines: Any, guard: PreemptionGuard, err: ProcessException
) -> None:
    """A worker stopped with a status other than 0, all are stopped now: its one-line stop
    (exit with its status), a preemption (:class:`Preempted`), or the failed worker named in one
    line (exit status 1)."""
    stops = []
    while not lines.empty():
        stops.append(lines.get())
    if stops:
        _, status, line = min(stops)
        print(f"{prog}: {line}", file=sys.stderr, flush=True)
        raise SystemExit(status)
    codes = [p.exitcode for p in context.processes]
    clean = {0, PREEMPTED_EXIT_CODE} | ({-guard.signum} if guard.signum else set())
    if PREEMPTED_EXIT_CODE in codes:  # workers the join stopped after PREEMPTION_GRACE_S
        late = [i for i, c in enumerate(codes) if c in (-signal.SIGTERM, -signal.SIGKILL)]
        clean |= {-signal.SIGTERM, -signal.SIGKILL}
        if late and all(c in clean for c in codes):
            print(f"{prog}: workers {late} did not stop within {PREEMPTION_GRACE_S:.0f} s of the "
                  "preemption; they were terminated", file=sys.stderr, flush=True)  # fmt: skip
    if (guard.requested or PREEMPTED_EXIT_CODE in codes) and all(c in clean for c in codes):
        _preempted(prog, guard, codes)
    failed = next((i for i, c in enumerate(codes) if c not in clean), err.error_index)
    if codes[err.error_index] not in clean:
        failed = err.error_index
    line, status = EXITS.line(codes[failed], worker=failed, n=len(codes))
    raised = isinstance(err, ProcessRaisedException) and failed == err.error_index
    if raised and not (codes[failed] or 0) < 0:
        print(err.msg, file=sys.stderr, end="", flush=True)  # the worker's own traceback
        line = RAISED.format(worker=failed, n=len(codes))
    print(f"{prog}: {line}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def _preempted(prog: str, guard: PreemptionGuard, codes: list[int | None]) -> None:
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


def _worker(
    local_rank: int,
    main_func: Callable[..., Any],
    machine_rank: int,
    num_gpus_per_machine: int,
    world_size: int,
    dist_url: str,
    args: tuple[Any, ...],
    timeout: timedelta,
    lines: Any,
) -> None:
    """One spawned worker, as Detectron2's own (NCCL on a GPU each) or gloo on CPUs: preemption
    signals caught from its start to its end (never restored: a signal while it winds down must
    not turn its exit status 75 into a death by signal); a one-line stop put in ``lines``."""
    from .stops import RunStopped

    PreemptionGuard().__enter__()
    cuda = torch.cuda.is_available()
    rank = machine_rank * num_gpus_per_machine + local_rank
    dist.init_process_group(backend="nccl" if cuda else "gloo", init_method=dist_url,
                            world_size=world_size, rank=rank, timeout=timeout)  # fmt: skip
    try:
        for i in range(world_size // num_gpus_per_machine):
            ranks = list(range(i * num_gpus_per_machine, (i + 1) * num_gpus_per_machine))
            group = dist.new_group(ranks)
            if i == machine_rank:
                set_local_process_group(group)
        if cuda:
            torch.cuda.set_device(local_rank)
        comm.synchronize()
        main_func(*args)
    except RunStopped as stop:
        lines.put((local_rank, stop.code, stop.message))
        raise
    finally:
        dist.destroy_process_group()

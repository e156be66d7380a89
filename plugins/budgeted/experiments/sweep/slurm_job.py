"""The job of a cell under ``budgeted-sweep --executor slurm`` (:class:`CellJob`), inside the
Slurm job submitit starts: it runs the cell's command, records each try in ``sweep_cell.json``
(job id, restart count, node) and, on preemption or a time limit (submitit's USR2), sends the
tool SIGUSR1 (it saves and exits 75) and has submitit requeue it; the requeued job resumes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...safety.preemption import PREEMPTED_EXIT_CODE, signal_name
from .commands import MMENGINE_FRAMEWORKS, axis_overrides, build_command, show
from .execute import carried_record, end_record, new_try, start_child, try_status
from .plan import Plan
from .records import holds_run
from .slurm_options import SlurmOptions
from .status import ended_state, update_cell_record

__all__ = ["GRACE_S", "CellJob", "job_threads"]

GRACE_S = 300.0
"""How long :meth:`CellJob.checkpoint` waits for the training tool to save (Slurm sends SIGTERM
then SIGKILL after the partition's GraceTime anyway)."""


def job_threads(env: dict[str, str]) -> dict[str, str]:
    """The tool's environment in a job: ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to
    ``SLURM_CPUS_PER_TASK`` (1 without) where the user has not set them.

    >>> job_threads({"SLURM_CPUS_PER_TASK": "8"})["OMP_NUM_THREADS"]
    '8'
    """
    cpus = env.get("SLURM_CPUS_PER_TASK", "1")
    cpus = cpus if cpus.isdigit() and int(cpus) > 0 else "1"
    return {"OMP_NUM_THREADS": cpus, "MKL_NUM_THREADS": cpus, **env}


class CellJob:
    """One cell as a submitit job (picklable): ``__call__`` runs the cell's command (``--resume``
    where the folder holds a started run) and records the try; ``checkpoint`` is submitit's
    preemption / timeout hook."""

    def __init__(
        self, plan: Plan, config: Path, data: Path | None, extra: Sequence[str],
        env: dict[str, str], options: SlurmOptions,
    ) -> None:  # fmt: skip
        self.plan = plan
        self.config = config
        self.data = data
        self.overrides = [*extra, *axis_overrides(plan.family.tool, plan.lr, plan.seed)]
        self.env = dict(env)
        self.nodes = options.nodes
        self.gpus_per_node = options.gpus_per_node
        self._child: subprocess.Popen | None = None
        self._attempt: dict[str, Any] | None = None
        self._start = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_child": None, "_attempt": None}

    def launcher(self, hosts: Sequence[str], node: int) -> list[str]:
        """The framework's launcher flags for the job's GPUs and nodes (none for one process)."""
        framework = self.plan.family.framework
        if self.nodes * self.gpus_per_node <= 1:
            return []
        if framework in MMENGINE_FRAMEWORKS:
            return ["--launcher", "slurm"]
        port = 29500 + int(os.environ.get("SLURM_JOB_ID", "0")) % 20000
        return [
            "--num-gpus", str(self.gpus_per_node), "--num-machines", str(self.nodes),
            "--machine-rank", str(node), "--dist-url", f"tcp://{hosts[0]}:{port}",
        ]  # fmt: skip

    def command(self, hosts: Sequence[str], node: int) -> list[str]:
        framework = self.plan.family.framework
        if getattr(self.plan.family, "script", None):  # a script family: runs from its start
            return list(self.plan.command)
        resume = holds_run(framework, self.plan.run_dir)
        self.plan.action = "resume" if resume else "run"
        return build_command(
            self.plan.family.tool, self.config, self.plan.run_dir, self.data, self.overrides,
            resume, self.launcher(hosts, node), self.plan.family.imports,
        )  # fmt: skip

    def __call__(self) -> str:
        import submitit

        job = submitit.JobEnvironment()
        command = self.command(job.hostnames, job.node)
        env = job_threads({**os.environ, **self.env})
        run_dir = self.plan.run_dir
        if job.global_rank != 0:  # another task of a multi-task job: trains, records nothing
            with (run_dir / f"sweep_rank{job.global_rank}.log").open("a") as log:
                return str(subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env))
        restart = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
        attempt = self._attempt = new_try(
            self.plan.action, job_id=job.job_id, restart=restart, node=socket.gethostname()
        )

        def start_try(record: dict[str, Any]) -> dict[str, Any]:
            slurm = record.get("slurm")
            fresh = carried_record(record, self.plan, keep=("slurm",))
            fresh["command"] = command
            fresh["tries"].append(attempt)
            if isinstance(slurm, dict):
                fresh["slurm"] = {**slurm, "state": "RUNNING"}
            return fresh

        update_cell_record(run_dir, start_try)
        with (run_dir / "sweep.log").open("a") as log:
            log.write(f"\n$ {show(command)}  # {time.strftime('%Y-%m-%d %H:%M:%S')} "
                      f"(Slurm job {job.job_id} on {socket.gethostname()})\n")  # fmt: skip
            log.flush()
            self._start = time.monotonic()
            self._child = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                preexec_fn=functools.partial(start_child, job=True),
            )  # fmt: skip
            while self._child.poll() is None:  # never a blocking wait: checkpoint() may run
                time.sleep(0.5)
        code = self._child.returncode
        self._child = None
        # scancel, scontrol requeue, a time limit: SIGTERM (the tool saves and exits 75, or dies)
        signalled = "SIGTERM" if code in (PREEMPTED_EXIT_CODE, -signal.SIGTERM) else None
        return self._finish(code, signalled, None)

    def _finish(self, code: int, signalled: str | None, slurm_state: str | None) -> str:
        """Record the try's end: wall time, exit status, what it came to."""
        attempt = self._attempt or {}
        attempt.update(wall_s=round(time.monotonic() - self._start, 3), exit=code)
        if signalled is not None:
            attempt["signal"] = signalled
        status = try_status(self.plan, code, interrupted=signalled is not None)
        plan = self.plan

        if slurm_state is None and signalled is None:  # the job ends with this try
            slurm_state = "COMPLETED"
        elif slurm_state is None:  # scancel, scontrol requeue: Slurm says COMPLETING until the
            asked = ended_state(attempt.get("job_id", ""))  # job ends (then the readers ask it)
            slurm_state = asked if asked not in (None, "RUNNING") else "COMPLETING"

        def end_try(record: dict[str, Any]) -> None:
            _put_try(record, attempt)
            end_record(record, plan, code, status)
            if isinstance(record.get("slurm"), dict):
                record["slurm"]["state"] = slurm_state

        update_cell_record(plan.run_dir, end_try)
        return status

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit's hook on preemption or timeout (SIGUSR2): ask the training tool to save
        (SIGUSR1), wait until it has exited, record the try, and hand back this job to requeue."""
        import submitit

        child = self._child
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGUSR1)
            code = _wait_exit(child.pid, GRACE_S)
            self._finish(code, signal_name(signal.SIGUSR2), "REQUEUED")
        return submitit.helpers.DelayedSubmission(self)


def _put_try(
    record: dict[str, Any], attempt: dict[str, Any], replace_only: bool = False
) -> list[dict[str, Any]]:
    """Put ``attempt`` in place of itself as ``start_try`` wrote it (same start and job id), else
    append it (``replace_only``: else leave the record alone); the tries."""
    tries = record.setdefault("tries", [])
    for i, old in enumerate(tries):
        if isinstance(old, dict) and old.get("started") == attempt.get("started") and \
                old.get("job_id") == attempt.get("job_id"):  # fmt: skip
            tries[i] = attempt
            return tries
    if not replace_only:
        tries.append(attempt)
    return tries


def _wait_exit(pid: int, timeout: float) -> int:
    """Wait (without reaping it: the job's own loop does) until process ``pid`` has exited; its
    exit status (-N for a signal N), or -1 after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            return -1
        if info is not None and info.si_pid == pid:
            return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        time.sleep(0.2)
    return -1

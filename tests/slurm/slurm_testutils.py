"""Helpers for the tests against the local Slurm cluster: submit, read a job's state, wait on
observable events (files, ``scontrol show job``) with deadlines of minutes, never fixed sleeps."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

DEADLINE_S = 600.0
"""How long a test waits for one event of a real job (2 busy cores can be very slow)."""
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")
"""Job states after which a job runs no more (REQUEUED, PENDING, RUNNING, ... come before)."""


def slurm(args: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    """A Slurm client command's stdout; its stderr in the error when it fails."""
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit status {done.returncode}: {done.stderr}")
    return done.stdout


def sbatch(options: list[str], env: dict[str, str], cwd: Path) -> str:
    """``sbatch --parsable options`` from ``cwd`` (the job's SLURM_SUBMIT_DIR); the job id."""
    return slurm(["sbatch", "--parsable", *options], env, cwd).strip().split(";")[0]


def job_info(job: str, env: dict[str, str]) -> dict[str, str]:
    """``scontrol show job`` as ``{key: value}`` (JobState, Restarts, ExitCode, ...); {} once
    the job is gone (MinJobAge after its end)."""
    done = subprocess.run(
        ["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        return {}
    info = {}
    for field in done.stdout.split():
        key, _, value = field.partition("=")
        info.setdefault(key, value)
    return info


def wait_for(what: str, condition: Callable[[], object], timeout: float = DEADLINE_S) -> object:
    """Poll ``condition`` until it returns something true (returned); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def wait_for_end(job: str, env: dict[str, str], log: Path) -> dict[str, str]:
    """Wait until ``job`` has ended for good (not requeued); its ``scontrol show job`` fields."""

    def ended() -> dict[str, str] | None:
        info = job_info(job, env)
        return info if info.get("JobState") in ENDED else None

    try:
        return wait_for(f"job {job} to end", ended)
    except AssertionError:
        subprocess.run(["scancel", job], env=env, timeout=60)
        tail = log.read_text()[-3000:] if log.exists() else "(no output file)"
        raise AssertionError(f"job {job} did not end; its output:\n{tail}") from None


def wait_in_job(what: str, job: str, env: dict[str, str], log: Path, condition) -> None:
    """:func:`wait_for` ``condition``, failing at once (with the job's output) when ``job`` has
    ended for good first."""

    def seen_or_ended() -> str | None:
        if condition():
            return "seen"
        return "ended" if job_info(job, env).get("JobState") in ENDED else None

    if wait_for(what, seen_or_ended) == "ended" and not condition():
        tail = log.read_text()[-3000:] if log.exists() else "(no output file)"
        raise AssertionError(f"job {job} ended before {what}: {job_info(job, env)}\n{tail}")


def log_says(log: Path, text: str) -> Callable[[], bool]:
    """The event: the job's output file holds ``text``."""
    return lambda: log.exists() and text in log.read_text()


def job_env(cluster: dict[str, str], **extra: str) -> dict[str, str]:
    """The environment a job is submitted with (sbatch exports it): the cluster's, one compute
    thread, no GPU, the interpreter of these tests."""
    import sys

    return {
        **os.environ,
        **cluster,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHON": sys.executable,
        **extra,
    }

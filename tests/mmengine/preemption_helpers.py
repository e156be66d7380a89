"""Test hooks (``custom_imports`` of the reliability tests): make a real run's timing observable.

Each hook lets a test act at a known point of a real training run (real runner, real signals,
real files): pause at an iteration until the test has sent its signal, send a second signal
while a checkpoint is being written, kill the process while a checkpoint is being written.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from budgeted.safety.preemption import active_guard

DEADLINE_S = 600.0
"""How long a paused run waits for the test (a busy machine can be very slow)."""


@HOOKS.register_module(force=True)
class PauseForSignalHook(Hook):
    """Before iteration ``at`` (0-based): write ``paused_rank<r>`` (the PID), then wait until
    ``go_file`` exists or, without one, until this process's preemption flag is set."""

    priority = "VERY_HIGH"

    def __init__(self, out_dir: str, at: int, go_file: str | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.at = at
        self.go_file = Path(go_file) if go_file else None

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if runner.iter != self.at:
            return
        (self.out_dir / f"paused_rank{runner.rank}").write_text(str(os.getpid()))
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if self.go_file is not None and self.go_file.exists():
                return
            guard = active_guard()
            if self.go_file is None and guard is not None and guard.requested:
                return
            time.sleep(0.02)
        raise TimeoutError(f"PauseForSignalHook: nothing came within {DEADLINE_S} s")


def _when_written(folder: Path, step: int, action) -> None:
    """Call ``action()`` once the checkpoint of ``step`` is being written in ``folder``: its
    temporary file (atomic write) or the file itself (in place, or already renamed) holds
    bytes."""

    def watch() -> None:
        deadline = time.monotonic() + DEADLINE_S
        patterns = (f".iter_{step}.pth.tmp-*", f"iter_{step}.pth")
        while time.monotonic() < deadline:
            for pattern in patterns:
                for path in folder.glob(pattern):
                    try:
                        size = path.stat().st_size
                    except FileNotFoundError:  # renamed meanwhile
                        continue
                    if size > 0:
                        action()
                        return
            time.sleep(0.0005)

    threading.Thread(target=watch, daemon=True).start()


def _pad(checkpoint: dict, megabytes: int) -> None:
    """A write that takes a while: ``megabytes`` more of float32 in ``meta``."""
    checkpoint["meta"]["padding"] = torch.ones(megabytes * 2**18)


@HOOKS.register_module(force=True)
class SignalDuringSaveHook(Hook):
    """When a checkpoint is saved after a preemption signal, send this process ``signum`` again
    while the file is being written (from a thread, as another process would), and note it in
    ``<out_dir>/second_signal``."""

    def __init__(self, out_dir: str, signum: int = signal.SIGTERM, pad_mb: int = 32) -> None:
        self.out_dir = Path(out_dir)
        self.signum = signum
        self.pad_mb = pad_mb

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        guard = active_guard()
        if guard is None or not guard.requested:
            return
        _pad(checkpoint, self.pad_mb)
        pid = os.getpid()

        def send() -> None:
            os.kill(pid, self.signum)
            (self.out_dir / "second_signal").write_text(str(self.signum))

        _when_written(Path(runner.work_dir), checkpoint["meta"]["iter"], send)


@HOOKS.register_module(force=True)
class SelfSignalHook(Hook):
    """Before iteration ``at`` (``-1``: when the run starts, before the checkpoint is loaded),
    send this process ``signum`` (a run in the test process)."""

    priority = "VERY_HIGH"

    def __init__(self, at: int, signum: int = signal.SIGUSR1) -> None:
        self.at = at
        self.signum = signum

    def before_run(self, runner) -> None:
        if self.at == -1:
            os.kill(os.getpid(), self.signum)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if runner.iter == self.at:
            os.kill(os.getpid(), self.signum)


@HOOKS.register_module(force=True)
class KillDuringWriteHook(Hook):
    """When the checkpoint of iteration ``at`` is saved: make it ``pad_mb`` MB larger and
    SIGKILL the process as soon as the file holds bytes (:func:`_when_written`)."""

    def __init__(self, at: int, pad_mb: int = 64) -> None:
        self.at = at
        self.pad_mb = pad_mb

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if checkpoint.get("meta", {}).get("iter") != self.at:
            return
        _pad(checkpoint, self.pad_mb)
        pid = os.getpid()
        _when_written(Path(runner.work_dir), self.at, lambda: os.kill(pid, signal.SIGKILL))


@HOOKS.register_module(force=True)
class NanLossOnRankHook(Hook):
    """After iteration ``at`` (0-based) of rank ``rank``, make the loss it reports NaN: one rank
    diverges while the others do not (the ranks must still stop together). Every rank writes
    the iterations it trained so far to ``<out_dir>/trained_rank<r>`` after each one."""

    priority = "NORMAL"  # after RuntimeInfoHook, before the LoggerHook and the DivergenceHook

    def __init__(self, out_dir: str, rank: int, at: int) -> None:
        self.out_dir = Path(out_dir)
        self.rank = rank
        self.at = at

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        (self.out_dir / f"trained_rank{runner.rank}").write_text(str(runner.iter + 1))
        if runner.rank == self.rank and runner.iter == self.at:
            outputs["loss"] = torch.tensor(float("nan"))


@HOOKS.register_module(force=True)
class SlowIterationHook(Hook):
    """Each training iteration takes at least ``seconds`` more (inside the time budget's clock,
    which starts before the other hooks' ``before_train_iter``): long iterations on a budget."""

    priority = "NORMAL"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        time.sleep(self.seconds)

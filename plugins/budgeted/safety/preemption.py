"""Preemption: turn SIGTERM / SIGUSR1 into a request to stop at the next safe point.

Standard library only. A cluster scheduler stops a job with SIGTERM (Slurm: preemption,
``scancel``, the time limit) and can warn it ahead (``sbatch --signal=USR1@120``). Under
:class:`PreemptionGuard` those signals only set a flag; the training loop looks at it after each
iteration, writes a checkpoint and exits with :data:`PREEMPTED_EXIT_CODE`, which a job script
answers by requeueing the job, and ``--resume`` continues where it stopped.

Example::

    with PreemptionGuard() as guard:
        for it in range(start, max_iter):
            train_one_iteration()
            if guard.requested:
                save_checkpoint(it)
                raise Preempted(f"preempted by {guard.signal_name} at iteration {it + 1}")
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from ..errors import DIVERGED_EXIT_CODE, UNDECAYED_EXIT_CODE

__all__ = [
    "DIVERGED_EXIT_CODE", "PREEMPTED_EXIT_CODE", "PREEMPTION_SIGNALS", "UNDECAYED_EXIT_CODE",
    "Preempted", "PreemptionGuard", "PreemptionPolicy", "active_guard", "ignore_late_signals",
    "restore_default_signals", "signal_name"
]  # fmt: skip

PREEMPTED_EXIT_CODE = 75
"""The exit status of a run stopped by a preemption signal after saving its state: 75 is
``EX_TEMPFAIL`` of ``sysexits.h`` ("temporary failure; retry later"): the job did not fail and
is not done, run it again with ``--resume``. Distinct from a crash (1), a usage error (2), and a
death by signal (128 + N: 143 for SIGTERM, 137 for SIGKILL)."""

# DIVERGED_EXIT_CODE (3) and UNDECAYED_EXIT_CODE (4): budgeted.errors, with the stops that use them.

PREEMPTION_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGUSR1)
"""SIGTERM (what Slurm, Kubernetes and ``kill`` send) and SIGUSR1 (Slurm's advance warning with
``--signal=USR1@<seconds>``)."""

_ACTIVE: list[PreemptionGuard] = []


def signal_name(signum: int) -> str:
    """``"SIGTERM"`` for 15, ...

    Example:
        >>> signal_name(signal.SIGUSR1)
        'SIGUSR1'
    """
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Preempted(SystemExit):
    """Raised to stop a run after a preemption signal, once its state is saved.

    A ``SystemExit`` (so ``except Exception`` blocks, Detectron2's training loop among them,
    let it through untouched) whose ``code`` is :data:`PREEMPTED_EXIT_CODE`: uncaught, the
    interpreter exits with 75 and prints nothing (the trainer printed ``message`` already).
    """

    def __init__(self, message: str = "preempted", signum: int | None = None) -> None:
        super().__init__(PREEMPTED_EXIT_CODE)
        self.message = message
        self.signum = signum

    def __str__(self) -> str:
        return self.message


class PreemptionGuard:
    """A context manager that makes ``signals`` set a flag instead of ending the process.

    On entry it installs a handler for each signal (remembering the old ones); on exit it puts
    the old handlers back. The handler records the first signal (:attr:`signum`), counts them
    (:attr:`count`) and calls ``on_signal(signum)`` if given (a launcher forwarding the signal
    to its workers); it raises nothing, so whatever the process is doing (an iteration, the
    write of a checkpoint) finishes. Only the main thread can install signal handlers: entered
    from another thread, the guard installs nothing and only :meth:`request` sets it.

    Example:
        >>> import os
        >>> with PreemptionGuard() as guard:
        ...     os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs at once (main thread)
        ...     (guard.requested, guard.signal_name)
        (True, 'SIGUSR1')
    """

    def __init__(
        self,
        signals: Iterable[int] = PREEMPTION_SIGNALS,
        on_signal: Callable[[int], Any] | None = None,
    ) -> None:
        self.signals = tuple(signals)
        self.on_signal = on_signal
        self.signum: int | None = None
        self.count = 0
        self._old: dict[int, Any] = {}
        self.installed = False

    @property
    def requested(self) -> bool:
        """Whether a preemption signal (or :meth:`request`) arrived."""
        return self.signum is not None

    @property
    def signal_name(self) -> str | None:
        """The first signal's name (``"SIGTERM"``), None before any."""
        return None if self.signum is None else signal_name(self.signum)

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Set the flag as the signal ``signum`` would (e.g. when another worker got it)."""
        if self.signum is None:
            self.signum = int(signum)
        self.count += 1

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.request(signum)
        if self.on_signal is not None:
            self.on_signal(signum)

    def __enter__(self) -> PreemptionGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in self.signals:
                self._old[signum] = signal.signal(signum, self._handle)
            self.installed = True
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):
            _ACTIVE.remove(self)
        if self.installed:
            for signum, old in self._old.items():
                signal.signal(signum, old if old is not None else signal.SIG_DFL)
            self._old.clear()
            self.installed = False


def active_guard() -> PreemptionGuard | None:
    """The innermost :class:`PreemptionGuard` entered in this process, None if none is.

    A trainer's hook uses the one a tool installed around the whole run (so a signal that
    arrives while the model is built is not lost) or installs its own.

    Example:
        >>> active_guard() is None
        True
    """
    return _ACTIVE[-1] if _ACTIVE else None


class PreemptionPolicy:
    """The one stop policy both frameworks' preemption hooks call: which signal stops the run,
    agreed by every rank, and after which iteration.

    A hook calls :meth:`begin` before the first iteration, :meth:`stop_after` after each and
    :meth:`end` at the end. With several ranks the flag is all-reduced (max) every ``interval``
    iterations, at the same iterations on every rank; a rank that learns the signal from another
    records it in its guard. On a signal the hook writes the checkpoint, waits for every rank and
    raises :class:`Preempted`.

    Example:
        >>> import os
        >>> policy = PreemptionPolicy()
        >>> policy.begin(), policy.stop_after(trained=3, total=10)
        (0, 0)
        >>> os.kill(os.getpid(), signal.SIGTERM)  # only sets the flag
        >>> policy.stop_after(trained=4, total=10) == signal.SIGTERM
        True
        >>> policy.stop_after(trained=10, total=10)  # the last iteration: the run ends anyway
        0
        >>> policy.end()
    """

    def __init__(
        self,
        guard: PreemptionGuard | None = None,
        interval: int = 1,
        world_size: Callable[[], int] | None = None,
    ) -> None:
        from .ranks import world_size as default_world_size

        self.guard = guard
        self.interval = interval
        self.world_size = world_size or default_world_size
        self.syncs = 0
        self.sync_seconds = 0.0
        self._own: PreemptionGuard | None = None

    def take_guard(self) -> None:
        """From now on a signal is a flag: the guard given, else the active one, else one of
        its own (no all-reduce: a hook may call this early, before its ranks agree)."""
        if self.guard is None:
            self.guard = active_guard()
        if self.guard is None:
            self._own = self.guard = PreemptionGuard().__enter__()

    def begin(self) -> int:
        """Take (or install) the guard; the signal any rank got already (0: none; else stop now,
        with nothing new to save)."""
        self.take_guard()
        return self.agreed()

    def agreed(self) -> int:
        """The first preemption signal any rank got (0: none), the same on every rank."""
        from .ranks import agree_max

        local = (self.guard.signum if self.guard is not None else None) or 0
        if self.world_size() == 1:
            return local
        start = time.perf_counter()
        agreed = agree_max(local)
        self.sync_seconds += time.perf_counter() - start
        self.syncs += 1
        if agreed and not local and self.guard is not None:
            self.guard.request(agreed)  # another rank got the signal
        return agreed

    def stop_after(self, trained: int, total: int) -> int:
        """The agreed signal to stop on after ``trained`` of ``total`` iterations (0: go on, and
        after the last one, when the run ends as planned)."""
        if self.world_size() > 1 and trained % self.interval:
            return 0
        signum = self.agreed()
        return 0 if trained >= total else signum

    def end(self) -> str | None:
        """Release a guard :meth:`begin` installed; the all-reduces' cost as one line."""
        if self._own is not None:
            self._own.__exit__(None, None, None)
            self._own = None
        if not self.syncs:
            return None
        each = 1e6 * self.sync_seconds / self.syncs
        return f"preemption flag: {self.syncs} all-reduces, {each:.1f} us each on average"


def restore_default_signals(
    signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1),
    *,
    python: bool = False,
) -> None:
    """Give ``signals`` their default disposition in this process (and in what it execs).

    A command started in the background by a non-interactive shell inherits SIGINT as
    *ignored*, and Python and ``subprocess`` pass that on: Ctrl-C then does nothing.
    ``subprocess.Popen(..., preexec_fn=restore_default_signals)`` gives a child the default
    dispositions; ``python=True`` gives this Python process's SIGINT ``default_int_handler``
    (``KeyboardInterrupt``) rather than ``SIG_DFL``.

    Example:
        >>> restore_default_signals([signal.SIGUSR2])
        >>> signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL
        True
    """
    for signum in signals:
        python_int = python and signum == signal.SIGINT
        signal.signal(signum, signal.default_int_handler if python_int else signal.SIG_DFL)


def ignore_late_signals() -> None:
    """Ignore SIGTERM and SIGUSR1 from now on: call it when a run is over, before the process
    exits. Python gives signals their default disposition back before it tears its modules down
    (seconds, with torch), and a preemption signal then would turn a finished run's exit status
    into a death by signal (143).

    Example:
        >>> ignore_late_signals()
        >>> signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        True
        >>> restore_default_signals()
    """
    for signum in PREEMPTION_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)

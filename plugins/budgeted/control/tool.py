"""A training tool's life (:class:`ToolRun`) and the line for a failed worker
(:class:`WorkerExits`), for every tool and launcher.

A run: preemption signals only set a flag from the start, the pre-flight (nothing written), a
signal meanwhile ending it before training, the output folder claimed, training, a stop's one
line and exit status. What differs between tools is data (:class:`ToolWords`).

Example:
    >>> words = ToolWords("demo", refusal_status=2, error_prefix="error: ")
    >>> ToolRun(words, refused=(ZeroDivisionError,)).checked(lambda: 1 / 0)
    (None, 2)
    >>> WorkerExits("rank {rank} was killed by {signal}", "rank {rank} exited with {code}",
    ...             said=(75,)).line(-9, rank=1)
    ('rank 1 was killed by SIGKILL', 1)
    >>> WorkerExits("", "", said=(75,)).line(75)
    (None, 75)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RunStopped
from ..safety.preemption import (
    PREEMPTED_EXIT_CODE,
    Preempted,
    PreemptionGuard,
    active_guard,
    signal_name,
)

__all__ = ["ToolRun", "ToolWords", "WorkerExits"]


@dataclass(frozen=True)
class ToolWords:
    """How a tool says what ended its run.

    Args:
        prog: the tool's name, first on each line.
        refusal_status: the exit status of bad input, the line printed and the status returned;
            None: ``sys.exit(line)`` (status 1, the line as ``SystemExit.code``) and stops raised.
        error_prefix: after ``<prog>: `` on a refusal's line (MMEngine: ``error: ``).
        preempted_early: the line of a signal before training, ``{signal}`` filled in.
        stops_said: the stops print their own line (the tool adds none).
    """

    prog: str
    refusal_status: int | None = None
    error_prefix: str = ""
    preempted_early: str = (
        "preempted by {signal} before training started: nothing to save; run the same command again"
    )
    stops_said: bool = False

    def say(self, text: object) -> None:
        """Print ``<prog>: text`` on stderr."""
        print(f"{self.prog}: {text}", file=sys.stderr, flush=True)

    def refuse(self, err: BaseException) -> int:
        """The refusal ``err`` in one line: its exit status (or ``sys.exit`` with the line)."""
        line = f"{self.prog}: {self.error_prefix}{err}"
        if self.refusal_status is None:
            sys.exit(line)
        print(line, file=sys.stderr, flush=True)
        return self.refusal_status


class ToolRun:
    """A tool's life (see the module), in the words of ``words``.

    Args:
        words: the tool's :class:`ToolWords`.
        guard: the preemption guard to use (None: the active one, else a new one held for the
            run).
        claim_first: claim the output folder before a signal before training is looked at
            (Detectron2), else after it (MMEngine).
        refused: the pre-flight's and claim's one-line refusals.
        finished: the pre-flight's "nothing to do" (its line; status 0 unless it has one).
        failed: training's refusals (one line, as ``refused``).
        stops: training's stops (their line unless ``words.stops_said``; their status).
        lost: a ``RuntimeError`` in training as an exit status (its line said); None: not one
            of these (raised).
    """

    def __init__(
        self,
        words: ToolWords,
        guard: PreemptionGuard | None = None,
        *,
        claim_first: bool = True,
        refused: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError),
        finished: tuple[type[BaseException], ...] = (RunStopped,),
        failed: tuple[type[BaseException], ...] = (),
        stops: tuple[type[BaseException], ...] = (RunStopped,),
        lost: Callable[[RuntimeError], int | None] | None = None,
    ) -> None:
        self.words, self.guard, self.claim_first = words, guard, claim_first
        self.refused, self.finished, self.failed, self.stops = refused, finished, failed, stops
        self.lost = lost

    def checked(self, check: Callable[[], Any]) -> tuple[Any, int | None]:
        """``check()`` (the pre-flight): its config and None, or None and the exit status of its
        one-line refusal or "nothing to do" (raised where ``words.refusal_status`` is None)."""
        try:
            return check(), None
        except self.finished as done:
            self.words.say(getattr(done, "message", done))
            if self.words.refusal_status is None:
                raise
            return None, done.code if isinstance(done, SystemExit) else 0
        except self.refused as err:
            return None, self.words.refuse(err)

    def run(
        self,
        check: Callable[[], Any],
        claim: Callable[[Any, contextlib.ExitStack], Any],
        train: Callable[[Any], Any],
        stop_early: Callable[[Any], bool] = lambda cfg: True,
    ) -> Any:
        """:meth:`checked`, ``claim(cfg, stack)`` (the output folder, released by ``stack`` at
        the end), ``train(cfg)``: what it returns, or an exit status. ``stop_early(cfg)``: a
        signal before training ends the run here (else training's own hooks act on it)."""
        words = self.words
        with contextlib.ExitStack() as stack:
            guard = self.guard or active_guard() or stack.enter_context(PreemptionGuard())

            def check_and_claim() -> Any:
                cfg = check()
                if self.claim_first and not guard.requested:
                    claim(cfg, stack)
                return cfg

            cfg, status = self.checked(check_and_claim)
            if status is not None:
                return status
            if guard.requested and stop_early(cfg):  # nothing to save: the line, status 75
                line = f"{words.prog}: {words.preempted_early.format(signal=guard.signal_name)}"
                print(line, file=sys.stderr, flush=True)
                if words.refusal_status is None:
                    raise Preempted(line, guard.signum)
                return PREEMPTED_EXIT_CODE
            try:
                if not self.claim_first:
                    try:
                        claim(cfg, stack)
                    except self.refused as err:
                        return words.refuse(err)
                return train(cfg)
            except self.failed as err:
                return words.refuse(err)
            except self.stops as stop:
                if not words.stops_said:
                    words.say(getattr(stop, "message", stop))
                if words.refusal_status is None:
                    raise
                _meet_before_leaving()  # every rank stops here (the stop was agreed)
                return int(getattr(stop, "code", 1))
            except RuntimeError as err:
                status = self.lost(err) if self.lost is not None else None
                if status is None:
                    raise
                return status


def _meet_before_leaving() -> None:
    """With several ranks, wait for all before the process group goes (a rank that tore its
    group down while a peer still used it aborted at exit now and then)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        with contextlib.suppress(RuntimeError):
            dist.barrier()


@dataclass(frozen=True)
class WorkerExits:
    """The line for the worker (rank) that failed, and the launcher's exit status.

    Args:
        killed: the line of a worker killed by a signal (``{signal}``, and the facts given).
        exited: the line of a worker that exited with status ``{code}`` (and the facts).
        said: statuses whose line the worker printed itself: no line, the status passed on.
        status: the launcher's status for a failure (None: the worker's own, 1 outside 1-255).
    """

    killed: str
    exited: str
    said: tuple[int, ...] = ()
    status: int | None = None

    def line(self, code: int | None, **facts: object) -> tuple[str | None, int]:
        """The line for a worker that ended with ``code`` (negative: killed by ``-code``) and
        the exit status."""
        if code in self.said:
            return None, int(code or 0)
        status = self.status or (code if code is not None and 0 < code < 256 else 1)
        if code is not None and code < 0:
            return self.killed.format(**{"signal": signal_name(-code), **facts}), status
        return self.exited.format(code=code, **facts), status

"""The stops of a run, decided once for every framework: divergence, a full disk, the deadline of a
time budget and its undecayed end, preemption after an iteration.

Each framework's hook shim says only where its framework keeps things (the losses, the weights,
the iteration, how to save, how to wait for the other ranks) and words its lines its own way; the
decisions (what stops, with which status, which facts in the line) are here. The policy of a
preemption (the flag agreed over the ranks, when to stop) is
:class:`budgeted.safety.preemption.PreemptionPolicy`.

Example:
    >>> loss_code({"loss": float("inf")}), loss_code({"loss_cls": float("nan"), "loss": 1.0})
    (1, 0)
    >>> print(diverged("nan", 7, 0.02, "lower the LR").message)
    diverged: the loss is nan at iteration 7 (base LR 0.02); lower the LR
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import DiskFull, Diverged, RunStopped
from ..safety import newest_intact_checkpoint
from ..safety.preemption import PreemptionPolicy
from ..schedules.base_lrs import base_lr_in_use

__all__ = [
    "NON_FINITE", "Deadline", "as_stop", "base_lr_of", "disk_full", "diverged", "is_disk_full",
    "loss_code", "mount_point", "non_finite_kind", "preempted_after"
]  # fmt: skip

NON_FINITE = {0: None, 1: "inf", 2: "nan"}
"""A loss code (:func:`loss_code`; the max over the ranks: nan wins over inf) -> its name."""


# --- divergence -------------------------------------------------------------------------------


def loss_code(outputs: Any) -> int:
    """2 for a NaN loss, 1 for an infinite one, 0 for finite (or no loss in ``outputs``).

    ``outputs`` maps names to losses (numbers or tensors): the total under ``loss`` where there
    is one, else every entry whose name holds ``loss`` is read.
    """
    if not isinstance(outputs, Mapping):
        return 0
    keys = ["loss"] if "loss" in outputs else [k for k in outputs if "loss" in str(k)]
    code = 0
    for key in keys:
        value = outputs[key]
        try:
            number = float(value.detach().float().sum()) if torch.is_tensor(value) else float(value)
        except (TypeError, ValueError):
            continue
        if math.isnan(number):
            return 2
        if math.isinf(number):
            code = 1
    return code


def non_finite_kind(tensors: Iterable[torch.Tensor], text: str) -> str:
    """``"nan"`` or ``"inf"``: what diverged weights ``tensors`` hold, else what the error
    ``text`` shows of the losses (after its ``loss_dict``).

    Example:
        >>> non_finite_kind([torch.ones(2)], "loss_dict = {'loss_cls': inf}")
        'inf'
    """
    for tensor in tensors:
        if torch.isnan(tensor).any():
            return "nan"
        if torch.isinf(tensor).any():
            return "inf"
    losses = text.split("loss_dict", 1)[-1].lower()
    return "inf" if "inf" in losses and "nan" not in losses else "nan"


def base_lr_of(bases: Any, groups: Sequence[Mapping[str, Any]]) -> float | None:
    """The base LR in use: the LR scheduler's ``bases`` (what it multiplies: a resumed
    checkpoint's) where it has some, else the param groups' ``initial_lr`` (``lr`` without a
    scheduler); the largest, or the first that is not finite
    (:func:`~budgeted.schedules.base_lrs.base_lr_in_use`).

    Example:
        >>> base_lr_of(None, [{"lr": 0.1, "initial_lr": 0.2}, {"lr": 0.05}])
        0.2
    """
    if not isinstance(bases, (list, tuple)) or not bases:
        bases = [g.get("initial_lr", g.get("lr")) for g in groups]
    return base_lr_in_use(list(bases))


def diverged(kind: str, iteration: int, base_lr: float | None, tail: str) -> Diverged:
    """The stop of a run whose loss is ``kind`` (nan, inf) at ``iteration`` (1-based), trained at
    ``base_lr`` (None: unknown); ``tail``: the framework's advice and what was (not) saved."""
    lr = "unknown" if base_lr is None else format(base_lr, "g")
    return Diverged(f"diverged: the loss is {kind} at iteration {iteration} (base LR {lr}); {tail}")


# --- a full disk ------------------------------------------------------------------------------


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` (or an exception it was raised from) is "no space left on device":
    ``OSError`` ENOSPC, or torch's ``RuntimeError`` from a write that hit it.

    Example:
        >>> is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
        True
    """
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def mount_point(path: str) -> str:
    """The mount point of the file system ``path`` (or its nearest existing folder) is on."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    device = os.stat(path).st_dev
    while path != os.path.dirname(path) and os.stat(os.path.dirname(path)).st_dev == device:
        path = os.path.dirname(path)
    return path


def disk_full(path: str, folder: str, checkpoints: str, *, resume: str = "--resume") -> DiskFull:
    """The one line for a write of ``path`` that found no space left, naming the newest intact
    checkpoint (glob ``checkpoints``) of run ``folder``."""
    intact = newest_intact_checkpoint(folder, checkpoints, exclude=[path])
    last = (
        f"the last intact checkpoint is {os.fspath(intact)!r}"
        if intact is not None
        else f"there is no intact checkpoint in {folder!r} yet"
    )
    device = mount_point(path)
    return DiskFull(
        f"no space left on {device} while writing {path}; {last}: free space on {device} (or set "
        f"another output folder), then resume with {resume}"
    )


def as_stop(err: BaseException, folder: str | None, checkpoints: str) -> RunStopped | None:
    """``err`` as a one-line stop: itself if it is one, a :func:`disk_full` for an error of a full
    disk (the file from the error, else ``folder``); None otherwise."""
    if isinstance(err, RunStopped):
        return err
    if folder and is_disk_full(err):
        filename = getattr(err, "filename", None)
        return disk_full(os.fspath(filename) if filename else folder, folder, checkpoints)
    return None


# --- preemption -------------------------------------------------------------------------------


def preempted_after(
    policy: PreemptionPolicy | None,
    trained: int,
    total: int,
    save_now: Callable[[int], str],
    barrier: Callable[[], None],
) -> tuple[int, str] | None:
    """After ``trained`` of ``total`` iterations: where the ranks agree on a preemption signal,
    save now (``save_now(trained) -> path``) and wait for every rank (the file is in place before
    any stops); ``(signum, path)``, else None."""
    signum = policy.stop_after(trained, total) if policy is not None else 0
    if not signum:
        return None
    path = save_now(trained)
    barrier()
    return signum, path


# --- the deadline of a time budget ------------------------------------------------------------


@dataclass
class Deadline:
    """A time budget of ``seconds`` on a :class:`~budgeted.schedules.clock.TrainingClock`: its
    lines when reached, and the judgement of an end before the schedule decayed.

    Example:
        >>> from budgeted.schedules import TrainingClock
        >>> print(Deadline(60, TrainingClock()).reached_line(9, 61.04, "", "evaluation follows"))
        time budget of 60 s reached after 9 iterations (61.0 s of training); evaluation follows
    """

    seconds: float
    clock: Any

    def reached_line(self, trained: int, elapsed: float, facts: str, tail: str) -> str:
        """The line of a deadline reached after ``trained`` iterations and ``elapsed`` seconds
        (``facts``: more in the parentheses), then the clock's sharing cost."""
        line = (
            f"time budget of {self.seconds:g} s reached after {trained} iterations "
            f"({elapsed:.1f} s of training{facts}); {tail}"
        )
        syncs = self.clock.syncs
        if syncs:
            each = 1e6 * self.clock.sync_seconds / syncs
            line += f"; clock shared {syncs} times, {each:.0f} us each"
        return line

    def undecayed(
        self,
        shortfall: str | None,
        trained: int,
        words: Mapping[str, str],
        *,
        capped: bool,
        warmup: bool,
        **facts: Any,
    ) -> str | None:
        """The line of a run that ended before its schedule decayed after ``trained`` iterations
        (``shortfall``: the judgement of :meth:`~budgeted.schedules.clock.TimeBudget.shortfall`;
        None: it decayed, no line).

        Args:
            words: templates of the cause, ``"capped"`` (the iteration cap came first),
                ``"warmup"`` (the deadline came inside the warmup) and ``"few"`` (too few
                iterations), and of the ``"tail"``; formatted with ``facts`` and ``trained``,
                ``iterations`` ("1 iteration", "2 iterations"), ``seconds``, ``elapsed`` (the
                clock's) and ``average`` (seconds per iteration).

        Example:
            >>> from budgeted.schedules import TrainingClock
            >>> words = dict(capped="", warmup="", few="{iterations} of {average:.3g} s", tail="")
            >>> Deadline(60, TrainingClock()).undecayed("short", 1, words, capped=False,
            ...                                         warmup=False)
            'time budget of 60 s ended before the schedule decayed: short; 1 iteration of 0 s; '
        """
        if shortfall is None:
            return None
        elapsed = self.clock.elapsed
        facts.update(
            trained=trained,
            iterations=f"{trained} iteration{'' if trained == 1 else 's'}",
            seconds=self.seconds,
            elapsed=elapsed,
            average=elapsed / trained,
        )
        cause = words["capped" if capped else "warmup" if warmup else "few"].format(**facts)
        return (
            f"time budget of {self.seconds:g} s ended before the schedule decayed: {shortfall}; "
            f"{cause}; {words['tail'].format(**facts)}"
        )

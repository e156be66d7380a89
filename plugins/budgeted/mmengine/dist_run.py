"""``tools/dist_train.sh``'s launcher: torchrun for ``tools/train_seg.py``, with one line where
torchrun prints pages.

    python -m budgeted.mmengine.dist_run --nproc_per_node=2 ... tools/train_seg.py CONFIG \\
        --launcher pytorch [train_seg options]

Before any rank starts, every check ``train_seg`` makes runs here once
(:func:`budgeted.mmengine.cli.check_only`, exit status 2); a failed rank is one line naming it and
how it ended; a rank's own exit status of ours (3, 4, 75) passes through.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..control.tool import WorkerExits
from ..safety.preemption import DIVERGED_EXIT_CODE, PREEMPTED_EXIT_CODE, UNDECAYED_EXIT_CODE

__all__ = ["main"]

PROG = "dist_train.sh"
EXITS = WorkerExits(
    killed="rank {rank} (pid {pid}) was killed by {signal}; torchrun stopped the others",
    exited="rank {rank} (pid {pid}) failed with exit status {code} (its output above says why); "
    "torchrun stopped the others",
    said=(2, DIVERGED_EXIT_CODE, UNDECAYED_EXIT_CODE, PREEMPTED_EXIT_CODE),
)
"""The line for the rank that failed first and the launcher's exit status; the statuses whose
one line a rank printed itself pass through, nothing added."""


def root_cause(failures: Mapping[int, Any]) -> tuple[int, Any]:
    """The failure to name among torchrun's ``{rank: ProcessFailure}``: a rank killed by a
    signal other than SIGTERM (the OOM killer's SIGKILL, a segfault) first, then a rank that
    exited with a status of its own, then one SIGTERM ended (torchrun sends it to stop the
    others once one failed); the first observed (torchrun stamps them to the second), then the
    lowest rank.

    Example:
        >>> from types import SimpleNamespace as F
        >>> root_cause({0: F(timestamp=5, exitcode=1), 1: F(timestamp=5, exitcode=-9)})[0]
        1
        >>> root_cause({0: F(timestamp=5, exitcode=-15), 1: F(timestamp=5, exitcode=75)})[0]
        1
    """

    def order(item: tuple[int, Any]) -> tuple[int, int, int]:
        rank, failure = item
        code = failure.exitcode
        kind = 2 if code == -signal.SIGTERM else 0 if code < 0 else 1
        return (kind, failure.timestamp, rank)

    return min(failures.items(), key=order)


def main(argv: Sequence[str] | None = None) -> int:
    """Check, then run torchrun; the exit status (see the module)."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from .cli import check_only
    from .launch import LAUNCHER_ENV

    args = torchrun.parse_args(list(sys.argv[1:] if argv is None else argv))
    local_rank = os.environ.get("LOCAL_RANK")
    refused = check_only(list(args.training_script_args))
    if local_rank is None:  # train_seg's parse_args sets it for a lone process
        os.environ.pop("LOCAL_RANK", None)
    if refused is not None:
        return refused
    # torchrun's own account of a failed rank is this module's one line
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").setLevel(logging.CRITICAL)
    os.environ[LAUNCHER_ENV] = "1"
    try:
        torchrun.run(args)
    except ChildFailedError as err:
        rank, failure = root_cause(err.failures)
        line, status = EXITS.line(
            failure.exitcode, rank=rank, pid=failure.pid, signal=failure.signal_name()
        )
        if line is not None:
            print(f"{PROG}: {line}", file=sys.stderr, flush=True)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Train a Detectron2 LazyConfig (python config) under a budget: Detectron2's CLI.

    python tools/lazyconfig_train_net.py --config mask_rcnn_R_50_FPN_budget10.py --num-gpus 8
    python tools/lazyconfig_train_net.py \
        --config-file configs/detectron2/lazy/mask_rcnn_toy_budget10.py train.max_iter=80

The same tool is installed as ``budgeted-lazy-train-net``. SIGTERM / SIGUSR1 stop training after
the current iteration with a checkpoint and exit status 75; ``--resume`` continues. See
docs/detectron2.md and docs/reliability.md (a diverged loss exits 3 in one line).
"""

from __future__ import annotations

import signal
import sys

from budgeted.preemption import (  # the standard library only: imports at once
    PREEMPTION_SIGNALS,
    PreemptionGuard,
)

if __name__ == "__main__":
    # SIGTERM / SIGUSR1 caught from the start to the end (see tools/train_net.py)
    PreemptionGuard().__enter__()
    from budgeted.detectron2.lazy_cli import run

    try:
        status = run()
    finally:  # the run is over: ignore late signals, since Python restores their default
        # disposition before it tears its modules down (seconds, with torch), and a signal
        # then would turn the exit status into a death by signal (143)
        for signum in PREEMPTION_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    sys.exit(status)

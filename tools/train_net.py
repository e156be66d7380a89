#!/usr/bin/env python
"""Train or evaluate a Detectron2 model under a budget: Detectron2's train_net CLI.

    python tools/train_net.py --config mask_rcnn_budget10.yaml --num-gpus 8
    python tools/train_net.py --config-file configs/detectron2/toy/mask_rcnn_toy_budget10.yaml \
        SOLVER.LR_SCHEDULER_NAME=BudgetCosine OUTPUT_DIR ./output/toy_cosine

A shipped config by its bare name or any yaml path; overrides as ``KEY VALUE`` pairs or
``KEY=VALUE``. Without CUDA, ``--num-gpus N`` runs N CPU processes (gloo). The same tool is
installed as ``budgeted-train-net``. SIGTERM / SIGUSR1 stop training after the current
iteration with a checkpoint and exit status 75; ``--resume`` (or ``--resume-from PATH``)
continues. A diverged loss ends the run in one line with exit status 3, a time budget that
ended before its schedule decayed with 4. See docs/detectron2.md and docs/reliability.md.
"""

from __future__ import annotations

import signal
import sys

from budgeted.preemption import (  # the standard library only: imports at once
    PREEMPTION_SIGNALS,
    PreemptionGuard,
)

if __name__ == "__main__":
    # catch SIGTERM / SIGUSR1 from the start (a preemption while torch and Detectron2 import
    # ends the run cleanly, exit status 75) to the end (never restored: a second signal while
    # the process winds down cannot turn its exit status 75 into a death by signal)
    PreemptionGuard().__enter__()
    from budgeted.detectron2.cli import run

    try:
        status = run()
    finally:  # the run is over: ignore late signals, since Python restores their default
        # disposition before it tears its modules down (seconds, with torch), and a signal
        # then would turn the exit status into a death by signal (143)
        for signum in PREEMPTION_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    sys.exit(status)

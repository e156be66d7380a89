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

import sys

from budgeted.entry_points import main  # the standard library only until the tool is imported

if __name__ == "__main__":
    # the console script's function: SIGTERM / SIGUSR1 caught from this line on (a preemption
    # while torch imports exits 75, nothing written) and ignored once the run is over
    sys.exit(main("budgeted-train-net"))

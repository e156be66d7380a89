#!/usr/bin/env python
"""Train or evaluate a Detectron2 model under a budget: Detectron2's train_net CLI.

    python tools/train_net.py --config mask_rcnn_budget10.yaml --num-gpus 8
    python tools/train_net.py --config-file configs/detectron2/toy/mask_rcnn_toy_budget10.yaml \
        SOLVER.LR_SCHEDULER_NAME=BudgetCosine OUTPUT_DIR ./output/toy_cosine

A shipped config by its bare name or any yaml path; overrides as ``KEY VALUE`` pairs or
``KEY=VALUE``. Without CUDA, ``--num-gpus N`` runs N CPU processes (gloo). The same tool is
installed as ``budgeted-train-net``. See docs/detectron2.md.
"""

from __future__ import annotations

import sys

from budgeted.detectron2.cli import run

if __name__ == "__main__":
    sys.exit(run())

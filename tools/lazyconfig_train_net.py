#!/usr/bin/env python
"""Train a Detectron2 LazyConfig (python config) under a budget: Detectron2's CLI.

    python tools/lazyconfig_train_net.py --config mask_rcnn_R_50_FPN_budget10.py --num-gpus 8
    python tools/lazyconfig_train_net.py \
        --config-file configs/detectron2/lazy/mask_rcnn_toy_budget10.py train.max_iter=80

The same tool is installed as ``budgeted-lazy-train-net``. See docs/detectron2.md.
"""

from __future__ import annotations

import sys

from budgeted.detectron2.lazy_cli import run

if __name__ == "__main__":
    sys.exit(run())

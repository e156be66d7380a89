#!/usr/bin/env python
"""Train a Detectron2 LazyConfig (python config) under a budget: Detectron2's CLI.

    python tools/lazyconfig_train_net.py \
        --config-file configs/detectron2/lazy/mask_rcnn_R_50_FPN_budget10.py --num-gpus 8

See docs/detectron2.md.
"""

from __future__ import annotations

from budgeted.detectron2.lazy_cli import run

if __name__ == "__main__":
    run()

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

import sys

from budgeted.entry_points import main  # the standard library only until the tool is imported

if __name__ == "__main__":
    # the console script's function: SIGTERM / SIGUSR1 caught from this line on (a preemption
    # while torch imports exits 75, nothing written) and ignored once the run is over
    sys.exit(main("budgeted-lazy-train-net"))

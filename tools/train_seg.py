#!/usr/bin/env python
"""Train a segmentor under a budget: MMSegmentation's tools/train.py CLI (budgeted.mmengine.cli).

    python tools/train_seg.py pspnet_r50-d8_cityscapes_budget10          # a shipped config's name
    python tools/train_seg.py configs/mmseg/pspnet_r50-d8_cityscapes_budget100.py --budget 0.25
    python tools/train_seg.py CONFIG --cfg-options train_cfg.max_iters=4000 --resume
    python tools/train_seg.py CONFIG --resume-from work_dirs/x/iter_16.pth  # exactly this file
    bash tools/dist_train.sh CONFIG 2                                    # torchrun; gloo on CPUs

Exit status: 0 done, 2 refused in one line (nothing written), 3 diverged (a NaN or infinite
loss: stopped there, not a result), 4 a time budget that ended before its schedule decayed
(saved and validated), 75 preempted by SIGTERM / SIGUSR1 after writing a checkpoint (run it
again with --resume).

See docs/mmseg.md.
"""

from __future__ import annotations

import sys

from budgeted.entry_points import main

if __name__ == "__main__":
    sys.exit(main("budgeted-train-seg"))  # the console script's function

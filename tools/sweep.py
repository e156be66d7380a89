#!/usr/bin/env python
"""``budgeted-sweep`` from a checkout: one training run per (schedule, budget).

    python tools/sweep.py mmseg --toy --schedules linear poly step --budgets 0.05 0.1 \
        --out output/sweep/mmseg_toy

The code is :mod:`budgeted.experiments.sweep`; see docs/sweeps.md.
"""

from __future__ import annotations

import sys

from budgeted.experiments.sweep import main

if __name__ == "__main__":
    sys.exit(main())

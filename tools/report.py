#!/usr/bin/env python
"""``budgeted-report`` from a checkout: tabulate and plot a sweep.

    python tools/report.py output/sweep/mmseg_toy [MORE_SWEEPS ...] [--csv FILE] [--plot FILE.png]

The code is :mod:`budgeted.experiments.report`; see docs/sweeps.md.
"""

from __future__ import annotations

import sys

from budgeted.experiments.report import main

if __name__ == "__main__":
    sys.exit(main())

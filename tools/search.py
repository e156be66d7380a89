#!/usr/bin/env python
"""``budgeted-search`` from a checkout: the schedule and base LR to run at one budget.

    python tools/search.py pytorch --task digits --budget 0.1 --lr-range 0.01 1 \
        --out output/search/digits10

The code is :mod:`budgeted.experiments.search`; see docs/search.md.
"""

from __future__ import annotations

import sys

from budgeted.experiments.search import main

if __name__ == "__main__":
    sys.exit(main())

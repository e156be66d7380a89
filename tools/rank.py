"""Rank architectures at small budgets against the full budget: :mod:`budgeted.experiments.rank`.

python tools/rank.py r18w8=output/nas/r18w8 r18w16=output/nas/r18w16 r34w16=output/nas/r34w16
"""

from __future__ import annotations

import sys

from budgeted.experiments.rank import main

if __name__ == "__main__":
    sys.exit(main())

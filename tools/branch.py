"""One stable WSD run branched into one cooldown per budget: :mod:`budgeted.experiments.branch`.

    python tools/branch.py mmseg --toy --budgets 0.05 0.1 0.25 0.5 1.0 --seeds 0 1 2 \\
        --compare --out output/branch/mmseg_toy
"""

from __future__ import annotations

import sys

from budgeted.experiments.branch import main

if __name__ == "__main__":
    sys.exit(main())

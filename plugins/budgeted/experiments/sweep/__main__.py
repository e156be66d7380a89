"""``python -m budgeted.experiments.sweep``: ``budgeted-sweep``."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a tool walks the package (doctests, pkgutil)
    sys.exit(main())

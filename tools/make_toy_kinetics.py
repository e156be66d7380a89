"""Write a small deterministic toy Kinetics-400 in MMAction2's raw-frame format (the toy set).

    python tools/make_toy_kinetics.py [datasets/toy_kinetics400] [--train-per-class 8]

The writer is :func:`budgeted.toys.kinetics.write`; see docs/mmaction.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from budgeted.toys.kinetics import TOY_ROOT, write

__all__ = ["main", "write"]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the toy set; 0, or 2 with one line for a bad count or an existing set.

    Example:
        ``python tools/make_toy_kinetics.py /tmp/toy_kinetics400 --train-per-class 4``
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=TOY_ROOT)
    parser.add_argument(
        "--train-per-class",
        type=int,
        default=8,
        help="train clips per class (default: %(default)s)",
    )
    parser.add_argument(
        "--val-per-class", type=int, default=4, help="val clips per class (default: %(default)s)"
    )
    parser.add_argument(
        "--frames", type=int, default=20, help="frames per clip (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing toy set")
    args = parser.parse_args(argv)
    try:
        root = write(
            args.root,
            train_per_class=args.train_per_class,
            val_per_class=args.val_per_class,
            frames=args.frames,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    except ValueError as err:
        print(f"make_toy_kinetics: error: {err}", file=sys.stderr)
        return 2
    print(f"toy Kinetics-400 raw frames written to {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

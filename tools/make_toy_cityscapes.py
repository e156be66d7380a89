"""Write a small deterministic synthetic dataset in the real Cityscapes layout (the toy set).

    python tools/make_toy_cityscapes.py [datasets/toy_cityscapes] [--train-per-city 12]

The writer is :func:`budgeted.toys.cityscapes.make_toy_cityscapes`; see docs/mmseg.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from budgeted.toys.cityscapes import TOY_ROOT, make_toy_cityscapes

__all__ = ["main", "make_toy_cityscapes"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=TOY_ROOT)
    parser.add_argument(
        "--train-per-city",
        type=int,
        default=12,
        help="train images per city, 2 cities (default: %(default)s)",
    )
    parser.add_argument(
        "--val-per-city", type=int, default=6, help="val images, 1 city (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing toy set")
    args = parser.parse_args(argv)
    try:
        root = make_toy_cityscapes(
            args.root,
            train_per_city=args.train_per_city,
            val_per_city=args.val_per_city,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    except ValueError as err:
        print(f"make_toy_cityscapes: error: {err}", file=sys.stderr)
        return 2
    print(f"\ntoy Cityscapes written to {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

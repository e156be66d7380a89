#!/usr/bin/env python
"""Write the deterministic toy CIFAR-10 under --root (``cifar-10-batches-py/``, the real format).

The default root is the toy MMPretrain configs' ``data_root`` and the example's ``--data``:

    python tools/make_toy_cifar10.py        # datasets/toy_cifar10/cifar-10-batches-py
"""

from __future__ import annotations

import argparse
import sys

from budgeted.toys.cifar10 import TOY_ROOT, make_toy_cifar10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=TOY_ROOT, help=f"default: {TOY_ROOT}")
    parser.add_argument(
        "--num-train", type=int, default=1000, help="10..50000 (default: %(default)s)"
    )
    parser.add_argument(
        "--num-test", type=int, default=200, help="10..10000 (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        folder = make_toy_cifar10(
            args.root, num_train=args.num_train, num_test=args.num_test, seed=args.seed
        )
    except (ValueError, FileExistsError) as err:
        sys.exit(f"make_toy_cifar10: {err}")
    print(f"toy CIFAR-10: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

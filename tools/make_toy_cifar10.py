#!/usr/bin/env python
"""Write the deterministic toy CIFAR-10 under --root (``cifar-10-batches-py/``, the real format)."""

from __future__ import annotations

import argparse
import sys

from budgeted.toy_cifar import make_toy_cifar10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default="./datasets", help="default: ./datasets")
    parser.add_argument("--num-train", type=int, default=1000, help="10..50000 (default 1000)")
    parser.add_argument("--num-test", type=int, default=200, help="10..10000 (default 200)")
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

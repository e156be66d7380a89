#!/usr/bin/env python
"""Write the deterministic toy ImageNet under --root (MMPretrain's ImageNet layout: train/<wnid>/,
val/, meta/train.txt, meta/val.txt), the data of configs/mmpretrain/toy/resnet18-toy_imagenet_*.

    python tools/make_toy_imagenet.py                       # datasets/toy_imagenet, 200 / 50 images
    python tools/make_toy_imagenet.py --root /tmp/ti --train-per-class 50 --size 96
"""

from __future__ import annotations

import argparse
import sys
import warnings


def main(argv: list[str] | None = None) -> int:
    """Write the set; a bad value or an existing set is one line and exit status 1.

    Example:
        ``main(["--root", "/tmp/toy_imagenet", "--train-per-class", "2"])``
    """
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    from budgeted.toys.mmpretrain import IMAGENET_ROOT, write_imagenet  # imports mmengine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=IMAGENET_ROOT, help=f"default: {IMAGENET_ROOT}")
    parser.add_argument(
        "--train-per-class", type=int, default=20, help="1..1300 (default: %(default)s)"
    )
    parser.add_argument("--val-per-class", type=int, default=5, help="1..50 (default: %(default)s)")
    parser.add_argument(
        "--size", type=int, default=80, help="image side, 32..512 (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        root = write_imagenet(
            args.root,
            train_per_class=args.train_per_class,
            val_per_class=args.val_per_class,
            size=args.size,
            seed=args.seed,
        )
    except (ValueError, FileExistsError) as err:
        sys.exit(f"make_toy_imagenet: {err}")
    print(f"toy ImageNet: {root} (meta/train.txt, meta/val.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

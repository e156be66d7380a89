#!/usr/bin/env python
"""Write the deterministic toy COCO set (``toy_coco/`` under ``$DETECTRON2_DATASETS``)."""

from __future__ import annotations

import argparse
import sys

from budgeted.detectron2.data import datasets_root
from budgeted.detectron2.toy import make_toy_coco


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=None, help="default: $DETECTRON2_DATASETS or ./datasets")
    parser.add_argument("--num-train", type=int, default=64)
    parser.add_argument("--num-val", type=int, default=16)
    parser.add_argument("--size", type=int, default=128, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = args.root or datasets_root()
    try:
        paths = make_toy_coco(
            root, num_train=args.num_train, num_val=args.num_val, size=args.size, seed=args.seed
        )
    except (ValueError, FileExistsError) as err:
        sys.exit(f"make_toy_coco: {err}")
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

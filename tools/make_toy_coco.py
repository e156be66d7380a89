#!/usr/bin/env python
"""Write the deterministic toy COCO set (``toy_coco/`` under ``$DETECTRON2_DATASETS``).

    python tools/make_toy_coco.py                          # ./datasets/toy_coco (both codebases)
    python tools/make_toy_coco.py --root /data             # /data/toy_coco, for Detectron2
    python tools/make_toy_coco.py --out /data/my_toy_coco  # that folder itself: MMDetection's
                                                           # data_root (--cfg-options ...data_root)
    python tools/make_toy_coco.py --objects 3 6 --radius 0.1 0.2   # denser: 3-6 smaller shapes

The writer is :mod:`budgeted.toys.coco` (numpy and Pillow only: no Detectron2 needed). Without
``$DETECTRON2_DATASETS`` the default, ``datasets/toy_coco``, is what both the Detectron2 and the
MMDetection toy configs read.
"""

from __future__ import annotations

import argparse
import sys

from budgeted.toys.coco import datasets_root, make_toy_coco, write_toy_coco


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--root", default=None, help="default: $DETECTRON2_DATASETS or ./datasets")
    where.add_argument(
        "--out",
        default=None,
        help="write the set in this folder itself (MMDetection's data_root), not in toy_coco/ "
        "under it",
    )
    parser.add_argument("--num-train", type=int, default=64, help="(default: %(default)s)")
    parser.add_argument("--num-val", type=int, default=16, help="(default: %(default)s)")
    parser.add_argument(
        "--size", type=int, default=128, help="image side in pixels (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--objects",
        type=int,
        nargs=2,
        default=(1, 3),
        metavar=("MIN", "MAX"),
        help="shapes per image, MIN..MAX inclusive (default: 1 3)",
    )
    parser.add_argument(
        "--radius",
        type=float,
        nargs=2,
        default=(0.12, 0.25),
        metavar=("MIN", "MAX"),
        help="shape radius as a fraction of the image side (default: 0.12 0.25)",
    )
    args = parser.parse_args(argv)
    sizes = dict(
        num_train=args.num_train,
        num_val=args.num_val,
        size=args.size,
        seed=args.seed,
        objects=tuple(args.objects),
        radius=tuple(args.radius),
    )
    try:
        if args.out is not None:
            paths = write_toy_coco(args.out, **sizes)
        else:
            paths = make_toy_coco(args.root or datasets_root(), **sizes)
    except (ValueError, FileExistsError) as err:
        sys.exit(f"make_toy_coco: {err}")
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

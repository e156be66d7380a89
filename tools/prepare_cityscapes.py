"""Convert Cityscapes ``gtFine`` polygons into the label PNGs MMSegmentation reads.

    python tools/prepare_cityscapes.py data/cityscapes --nproc 8 [--all-ids] [--overwrite]

Writes ``*_gtFine_labelTrainIds.png`` beside every ``*_gtFine_polygons.json`` (with ``--all-ids``
also ``*_labelIds.png`` and ``*_instanceIds.png``, for ``CityscapesMetric``); existing PNGs are
kept unless ``--overwrite``. The conversion is :func:`budgeted.toys.cityscapes_labels.convert`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from budgeted.toys.cityscapes_labels import convert

__all__ = ["convert", "main", "parse_args"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cityscapes_path", help="root holding leftImg8bit/ and gtFine/")
    parser.add_argument("--nproc", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--all-ids",
        action="store_true",
        help="also write *_labelIds.png and *_instanceIds.png (for CityscapesMetric)",
    )
    parser.add_argument("--overwrite", action="store_true", help="rewrite existing PNGs")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error(f"--nproc={args.nproc} is invalid; allowed: an integer >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        n_files, n_written = convert(
            args.cityscapes_path, all_ids=args.all_ids, overwrite=args.overwrite, nproc=args.nproc
        )
    except ValueError as err:
        print(f"prepare_cityscapes: error: {err}", file=sys.stderr)
        return 2
    kept = "" if args.overwrite else " (existing PNGs kept; --overwrite rewrites them)"
    print(f"\n{n_files} polygon files, {n_written} label PNGs written{kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Convert Cityscapes ``gtFine`` polygons into the label PNGs MMSegmentation reads.

For every ``gtFine/<split>/<city>/*_gtFine_polygons.json`` this writes, beside it,
``*_gtFine_labelTrainIds.png`` (19 train classes, 255 = ignore; what ``CityscapesDataset``
loads) with cityscapesscripts, and with ``--all-ids`` also ``*_gtFine_labelIds.png`` and
``*_gtFine_instanceIds.png`` (what ``CityscapesMetric`` reads; the official download ships those
two already). Existing PNGs are kept unless ``--overwrite`` is given.

    python tools/prepare_cityscapes.py data/cityscapes --nproc 8
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

POLYGON_SUFFIX = "_gtFine_polygons.json"
OUTPUTS = {
    "trainIds": "_gtFine_labelTrainIds.png",
    "ids": "_gtFine_labelIds.png",
    "instanceIds": "_gtFine_instanceIds.png",
}


def find_polygon_files(root: Path) -> list[Path]:
    """All ``*_gtFine_polygons.json`` under ``root/gtFine``, sorted; a clear error if none."""
    gt_dir = root / "gtFine"
    if not gt_dir.is_dir():
        raise ValueError(
            f"{gt_dir} does not exist; expected the Cityscapes layout <root>/gtFine/<split>/<city>/"
            f"*{POLYGON_SUFFIX} (download gtFine_trainvaltest.zip from cityscapes-dataset.com)"
        )
    files = sorted(gt_dir.rglob(f"*{POLYGON_SUFFIX}"))
    if not files:
        raise ValueError(f"no *{POLYGON_SUFFIX} files under {gt_dir}")
    return files


def convert_one(task: tuple[str, tuple[str, ...], bool]) -> int:
    """Write the requested label PNGs of one polygon file; return how many were written."""
    from cityscapesscripts.preparation.json2instanceImg import json2instanceImg
    from cityscapesscripts.preparation.json2labelImg import json2labelImg

    json_path, kinds, overwrite = task
    stem = json_path[: -len(POLYGON_SUFFIX)]
    written = 0
    for kind in kinds:
        out = stem + OUTPUTS[kind]
        if not overwrite and Path(out).exists():
            continue
        if kind == "instanceIds":
            json2instanceImg(json_path, out, "ids")
        else:
            json2labelImg(json_path, out, kind)
        written += 1
    return written


def convert(
    root: str | Path, *, all_ids: bool = False, overwrite: bool = False, nproc: int = 1
) -> tuple[int, int]:
    """Convert every polygon file under ``root``; return (polygon files, PNGs written)."""
    from mmengine.utils import track_parallel_progress, track_progress

    files = find_polygon_files(Path(root))
    kinds = tuple(OUTPUTS) if all_ids else ("trainIds",)
    tasks = [(str(f), kinds, overwrite) for f in files]
    if nproc > 1:
        counts = track_parallel_progress(convert_one, tasks, nproc=nproc)
    else:
        counts = track_progress(convert_one, tasks)
    return len(files), sum(counts)


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

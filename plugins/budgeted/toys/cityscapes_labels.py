"""Cityscapes ``gtFine`` polygons -> the label PNGs MMSegmentation reads (cityscapesscripts).

For every ``gtFine/<split>/<city>/*_gtFine_polygons.json`` :func:`convert` writes, beside it,
``*_gtFine_labelTrainIds.png`` (19 train classes, 255 = ignore; what ``CityscapesDataset``
loads) and, with ``all_ids=True``, ``*_gtFine_labelIds.png`` and ``*_gtFine_instanceIds.png``
(what ``CityscapesMetric`` reads; the official download ships those two already). Existing PNGs
are kept unless ``overwrite=True``. ``tools/prepare_cityscapes.py`` is its command line.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OUTPUTS", "POLYGON_SUFFIX", "convert", "convert_one", "find_polygon_files"]

POLYGON_SUFFIX = "_gtFine_polygons.json"
OUTPUTS = {
    "trainIds": "_gtFine_labelTrainIds.png",
    "ids": "_gtFine_labelIds.png",
    "instanceIds": "_gtFine_instanceIds.png",
}
"""cityscapesscripts' label kind -> the suffix of the PNG written for it."""


def find_polygon_files(root: str | os.PathLike[str]) -> list[Path]:
    """All ``*_gtFine_polygons.json`` under ``root/gtFine`` (the Cityscapes root's), sorted.

    Raises:
        ValueError: one line when ``gtFine/`` or its polygon files are missing.

    Example:
        >>> import tempfile
        >>> find_polygon_files(tempfile.mkdtemp())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: .../gtFine does not exist; ...
    """
    gt_dir = Path(root) / "gtFine"
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
    """Write the label PNGs ``task`` asks for; how many were written. ``task`` is ``(polygon json
    path, kinds from OUTPUTS, overwrite)``, one picklable argument for worker processes."""
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
    root: str | os.PathLike[str], *, all_ids: bool = False, overwrite: bool = False, nproc: int = 1
) -> tuple[int, int]:
    """Convert every polygon file under ``root`` with ``nproc`` worker processes and a progress
    bar; ``all_ids`` adds ``*_labelIds.png`` and ``*_instanceIds.png``, ``overwrite`` rewrites
    existing PNGs. Returns (polygon files, PNGs written).

    Example:
        ``convert("data/cityscapes", nproc=8)`` writes the ``*_labelTrainIds.png`` MMSeg reads.
    """
    from mmengine.utils import track_parallel_progress, track_progress

    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise ValueError(f"nproc={nproc!r} is invalid; allowed: an integer >= 1")
    files = find_polygon_files(root)
    kinds = tuple(OUTPUTS) if all_ids else ("trainIds",)
    tasks = [(str(f), kinds, overwrite) for f in files]
    if nproc > 1:
        counts = track_parallel_progress(convert_one, tasks, nproc=nproc)
    else:
        counts = track_progress(convert_one, tasks)
    return len(files), sum(counts)

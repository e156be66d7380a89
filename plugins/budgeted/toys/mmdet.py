"""The toy COCO set for the MMDetection toy configs (``configs/mmdet/toy/``), written in their
``data_root`` (default :data:`TOY_ROOT`, ``datasets/toy_coco``)::

    <root>/train/000001.png ...        <root>/annotations/instances_train.json
    <root>/val/000001.png ...          <root>/annotations/instances_val.json

The same synthetic shapes set, byte for byte, that Detectron2's toy configs read as
``toy_coco/`` under ``$DETECTRON2_DATASETS`` (:mod:`budgeted.toys.coco`; Detectron2 is not
imported). ``tools/make_toy_coco.py`` is its command line (``--out ROOT`` for another folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from .coco import TOY_CATEGORIES, TOY_SPLITS, write_toy_coco

__all__ = ["TOY_CATEGORIES", "TOY_ROOT", "TOY_SPLITS", "write"]

TOY_ROOT = "datasets/toy_coco"
"""Where the toy configs read the toy set (their ``data_root``), relative to the current folder."""


def write(
    root: str | os.PathLike[str] = TOY_ROOT,
    *,
    num_train: int = 64,
    num_val: int = 16,
    size: int = 128,
    seed: int = 0,
) -> Path:
    """Write the toy COCO set in ``root`` (the ``data_root`` of the MMDetection toy configs).

    Args:
        root (str or PathLike): the set's folder. Defaults to :data:`TOY_ROOT`.
        num_train (int): training images. Defaults to 64.
        num_val (int): validation images. Defaults to 16.
        size (int): image side in pixels, >= 32. Defaults to 128.
        seed (int): the same seed writes the same bytes. Defaults to 0.

    Returns:
        Path: ``root``.

    Raises:
        ValueError: a count or size out of range (one line).
        FileExistsError: ``root/annotations`` exists already (it is never overwritten).

    Example:
        >>> import tempfile
        >>> root = write(Path(tempfile.mkdtemp()) / "toy_coco", num_train=2, num_val=1, size=32)
        >>> (root / "annotations" / "instances_val.json").is_file()
        True
    """
    write_toy_coco(root, num_train=num_train, num_val=num_val, size=size, seed=seed)
    return Path(root)

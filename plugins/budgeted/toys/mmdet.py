"""The toy COCO set for the MMDetection toy configs (``configs/mmdet/toy/``), written in their
``data_root`` (default :data:`TOY_ROOT`): :func:`budgeted.toys.coco.write_toy_coco`'s set, byte for
byte the one Detectron2's toy configs read as ``toy_coco/`` under ``$DETECTRON2_DATASETS``.
``tools/make_toy_coco.py`` is its command line (``--out ROOT`` for another folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .coco import TOY_CATEGORIES, TOY_SPLITS, write_toy_coco

__all__ = ["TOY_CATEGORIES", "TOY_ROOT", "TOY_SPLITS", "write"]

TOY_ROOT = "datasets/toy_coco"
"""Where the toy configs read the toy set (their ``data_root``), relative to the current folder."""


def write(root: str | os.PathLike[str] = TOY_ROOT, **sizes: Any) -> Path:
    """:func:`~budgeted.toys.coco.write_toy_coco` in ``root`` with ``sizes`` (``num_train``,
    ``num_val``, ``size``, ``seed``, ...), its errors included; returns ``root``.

    Example:
        >>> import tempfile
        >>> root = write(Path(tempfile.mkdtemp()) / "toy_coco", num_train=2, num_val=1, size=32)
        >>> (root / "annotations" / "instances_val.json").is_file()
        True
    """
    write_toy_coco(root, **sizes)
    return Path(root)

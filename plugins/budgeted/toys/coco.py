"""A deterministic synthetic instance-segmentation set in the real COCO json format (no framework).

Each image holds 1-3 filled shapes (square, circle, triangle) on a noisy background; each shape is
one annotation with its polygon mask, box and area (a later shape may hide part of an earlier one,
whose annotation stays whole). The same arguments give the same bytes. A set is a folder laid out
as MMDetection's COCO configs read it::

    <folder>/train/000001.png ...              <folder>/annotations/instances_train.json
    <folder>/val/000001.png ...                <folder>/annotations/instances_val.json

:func:`write_toy_coco` writes it in any folder (MMDetection's ``data_root``);
:func:`make_toy_coco` as ``toy_coco/`` under a datasets folder, where Detectron2 finds it
(``budgeted.detectron2.data.register_toy_coco``). Only numpy and Pillow are imported.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from . import check_count, refuse_existing

__all__ = [
    "TOY_CATEGORIES", "TOY_DATASETS", "TOY_SPLITS", "datasets_root", "make_toy_coco",
    "write_toy_coco"
]  # fmt: skip

TOY_CATEGORIES = ("square", "circle", "triangle")
"""The toy set's categories, ids 1, 2, 3 in its COCO json."""

TOY_SPLITS = {
    "train": ("train", "annotations/instances_train.json"),
    "val": ("val", "annotations/instances_val.json"),
}
"""Split -> (image folder, annotation json), relative to the set's folder."""

TOY_DATASETS = {
    f"toy_coco_{split}": (f"toy_coco/{images}", f"toy_coco/{ann}")
    for split, (images, ann) in TOY_SPLITS.items()
}
"""Detectron2 dataset name -> (image folder, annotation json), relative to :func:`datasets_root`."""


def datasets_root() -> str:
    """``$DETECTRON2_DATASETS`` or ``datasets``: where Detectron2 looks for datasets.

    Example:
        >>> import os
        >>> datasets_root() == os.path.expanduser(os.getenv("DETECTRON2_DATASETS", "datasets"))
        True
    """
    return os.path.expanduser(os.getenv("DETECTRON2_DATASETS", "datasets"))


def _polygon(kind: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    corners = {"square": 4, "triangle": 3, "circle": 24}[kind]
    start = angle if kind != "circle" else 0.0
    return [
        (
            cx + r * math.cos(start + 2 * math.pi * k / corners),
            cy + r * math.sin(start + 2 * math.pi * k / corners),
        )
        for k in range(corners)
    ]


def _split(rng: np.random.RandomState, count: int, size: int, folder: str, first_ann: int,
           objects: tuple[int, int], radius: tuple[float, float]) -> dict:  # fmt: skip
    images, annotations = [], []
    ann_id = first_ann
    for image_id in range(1, count + 1):
        background = rng.randint(0, 90, size=3)
        noise = rng.randint(-20, 21, size=(size, size, 3))
        pixels = np.clip(background + noise, 0, 255).astype(np.uint8)
        img = Image.fromarray(pixels)
        draw = ImageDraw.Draw(img)
        for _ in range(rng.randint(objects[0], objects[1] + 1)):
            cat = rng.randint(len(TOY_CATEGORIES))
            r = rng.uniform(*radius) * size
            cx, cy = rng.uniform(r, size - r, size=2)
            poly = _polygon(TOY_CATEGORIES[cat], cx, cy, r, rng.uniform(0, math.pi))
            color = tuple(int(c) for c in rng.randint(120, 256, size=3))
            draw.polygon(poly, fill=color)
            xs, ys = [p[0] for p in poly], [p[1] for p in poly]
            x0, y0 = max(min(xs), 0.0), max(min(ys), 0.0)
            x1, y1 = min(max(xs), size), min(max(ys), size)
            area = 0.5 * abs(sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(len(xs))))
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "category_id": cat + 1,
                    "iscrowd": 0,
                    "segmentation": [[round(v, 2) for p in poly for v in p]],
                    "bbox": [round(x0, 2), round(y0, 2), round(x1 - x0, 2), round(y1 - y0, 2)],
                    "area": round(area, 2),
                }
            )
            ann_id += 1
        file_name = f"{image_id:06d}.png"
        img.save(os.path.join(folder, file_name))
        images.append({"id": image_id, "file_name": file_name, "width": size, "height": size})
    return {
        "info": {"description": "budgeted-training toy COCO (synthetic shapes)", "version": "1.0"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": [
            {"id": i + 1, "name": n, "supercategory": "shape"} for i, n in enumerate(TOY_CATEGORIES)
        ],
    }


def _is_pair(value: object, kind: type | tuple[type, ...]) -> bool:
    """True for a (list or tuple) pair of ``kind`` values, bools excluded."""
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, kind) and not isinstance(v, bool) for v in value)
    )


def write_toy_coco(folder: str | os.PathLike[str], *, num_train: int = 64, num_val: int = 16,
                   size: int = 128, seed: int = 0, objects: tuple[int, int] = (1, 3),
                   radius: tuple[float, float] = (0.12, 0.25)) -> dict[str, str]:  # fmt: skip
    """Write one toy set in ``folder``: ``{train,val}/*.png`` and
    ``annotations/instances_{train,val}.json`` (:data:`TOY_SPLITS`).

    ``size`` (the image side in pixels) is at least 32. Each image holds ``objects`` (``min..max``
    inclusive, ``1 <= min <= max <= 20``) shapes of radius ``radius`` (``[min, max)`` fractions of
    the side, ``0 < min <= max <= 0.5``, ``min x size >= 2`` pixels); the same seed writes the same
    bytes.

    Returns:
        dict[str, str]: split (``train``, ``val``) -> annotation json path.

    Raises:
        ValueError: a count or size out of range (one line).
        FileExistsError: ``folder/annotations`` exists already (it is never overwritten).

    Example:
        >>> import tempfile
        >>> paths = write_toy_coco(tempfile.mkdtemp(), num_train=2, num_val=1, size=32)
        >>> sorted(paths), paths["val"].endswith("annotations/instances_val.json")
        (['train', 'val'], True)
    """
    check_count("num_train", num_train, 1)
    check_count("num_val", num_val, 1)
    check_count("size", size, 32)
    if not (_is_pair(objects, int) and 1 <= objects[0] <= objects[1] <= 20):  # type: ignore[index]
        raise ValueError(
            f"objects={objects!r} is invalid; allowed: two whole numbers min <= max in 1..20"
        )
    if not (_is_pair(radius, (int, float)) and 0 < radius[0] <= radius[1] <= 0.5):
        raise ValueError(f"radius={radius!r} is invalid; allowed: fractions 0 < min <= max <= 0.5")
    if radius[0] * size < 2:
        raise ValueError(
            f"radius={radius!r} is invalid at size={size}: allowed: min x size >= 2 pixels "
            f"(min >= {2 / size:.3g}), a shape smaller has no mask to annotate"
        )
    folder = os.fspath(folder)
    refuse_existing(Path(folder), [Path(folder, "annotations")])
    rng = np.random.RandomState(seed)
    out = {}
    first_ann = 1
    for (split, (images, ann)), count in zip(TOY_SPLITS.items(), (num_train, num_val)):
        image_dir = os.path.join(folder, images)
        os.makedirs(image_dir, exist_ok=True)
        data = _split(rng, count, size, image_dir, first_ann, tuple(objects), tuple(radius))
        first_ann += len(data["annotations"])
        path = os.path.join(folder, ann)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f)
        out[split] = path
    return out


def make_toy_coco(root: str, **sizes: Any) -> dict[str, str]:
    """Write ``toy_coco/`` under ``root`` (the datasets folder, ``$DETECTRON2_DATASETS``):
    :func:`write_toy_coco` of ``root/toy_coco`` with ``sizes``, its errors included; returns
    dataset name (as Detectron2 registers it) -> annotation json path.

    Example:
        >>> import tempfile
        >>> paths = make_toy_coco(tempfile.mkdtemp(), num_train=2, num_val=1, size=32)
        >>> sorted(paths)
        ['toy_coco_train', 'toy_coco_val']
    """
    paths = write_toy_coco(os.path.join(root, "toy_coco"), **sizes)
    return {f"toy_coco_{split}": path for split, path in paths.items()}

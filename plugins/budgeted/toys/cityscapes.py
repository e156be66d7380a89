"""A small deterministic synthetic dataset in the real Cityscapes layout (the toy data).

``<root>/leftImg8bit/{train,val}/<city>/<city>_<seq>_<frame>_leftImg8bit.png`` (256x128) and
``<root>/gtFine/{train,val}/<city>/..._gtFine_polygons.json`` with Cityscapes label names (road,
sidewalk, building, pole, traffic sign, vegetation, sky, person, car), rendered from the same
polygons; the polygons are then converted (:func:`budgeted.toys.cityscapes_labels.convert`) into
``*_labelTrainIds.png``, ``*_labelIds.png`` and ``*_instanceIds.png``. The same arguments give
byte-identical files. ``tools/make_toy_cityscapes.py`` is its command line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from . import check_count, refuse_existing
from .cityscapes_labels import convert

__all__ = ["CITIES", "COLORS", "TOY_ROOT", "make_toy_cityscapes"]

TOY_ROOT = "datasets/toy_cityscapes"
"""Where the toy configs read the toy set (their ``data_root``), relative to the repository."""

WIDTH, HEIGHT = 256, 128
CITIES = {"train": ("aachen", "bochum"), "val": ("frankfurt",)}
# Cityscapes colours of the classes drawn (the image colour is this, jittered, plus noise).
COLORS = {
    "sky": (70, 130, 180),
    "building": (70, 70, 70),
    "vegetation": (107, 142, 35),
    "road": (128, 64, 128),
    "sidewalk": (244, 35, 232),
    "pole": (153, 153, 153),
    "traffic sign": (220, 220, 0),
    "car": (0, 0, 142),
    "person": (220, 20, 60),
}


def _rect(x0: float, y0: float, x1: float, y1: float) -> list[list[int]]:
    return [[int(x0), int(y0)], [int(x1), int(y0)], [int(x1), int(y1)], [int(x0), int(y1)]]


def scene(rng: np.random.RandomState) -> list[dict]:
    """Polygons of one street scene, back to front (later objects cover earlier ones)."""
    w, h = WIDTH, HEIGHT
    horizon = int(rng.randint(56, 72))
    objects = [{"label": "sky", "polygon": _rect(0, 0, w - 1, horizon)}]
    x = int(rng.randint(-20, 10))
    while x < w:
        width = int(rng.randint(25, 60))
        label = "building" if rng.rand() < 0.7 else "vegetation"
        top = int(rng.randint(8, horizon - 12))
        if label == "building":
            objects.append({"label": label, "polygon": _rect(x, top, x + width, horizon)})
        else:
            cx, r = x + width / 2, width / 2
            poly = [
                [int(cx + r * np.cos(a)), int(top + r + r * np.sin(a))]
                for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)
            ]
            objects.append({"label": label, "polygon": poly})
        x += width
    objects.append({"label": "road", "polygon": _rect(0, horizon, w - 1, h - 1)})
    for side in (0, 1):
        edge = int(rng.randint(30, 70))
        poly = [[0, horizon], [12, horizon], [edge, h - 1], [0, h - 1]]
        if side:
            poly = [[w - 1 - px, py] for px, py in poly]
        objects.append({"label": "sidewalk", "polygon": poly})
    for _ in range(int(rng.randint(1, 4))):
        cw = int(rng.randint(24, 48))
        cx, cy = int(rng.randint(30, w - 30 - cw)), int(rng.randint(horizon + 4, h - 24))
        objects.append({"label": "car", "polygon": _rect(cx, cy, cx + cw, cy + cw // 2)})
    px = int(rng.randint(4, 20))
    objects.append({"label": "pole", "polygon": _rect(px, horizon - 40, px + 3, horizon + 20)})
    sign = _rect(px - 4, horizon - 44, px + 8, horizon - 34)
    objects.append({"label": "traffic sign", "polygon": sign})
    for _ in range(int(rng.randint(1, 3))):
        px = int(rng.choice([rng.randint(w - 40, w - 10), rng.randint(10, 30)]))
        py = int(rng.randint(horizon + 8, h - 30))
        objects.append({"label": "person", "polygon": _rect(px, py, px + 5, py + 20)})
    return objects


def render(objects: list[dict], rng: np.random.RandomState) -> Image.Image:
    """An RGB image of the polygons: jittered class colours plus pixel noise."""
    img = Image.new("RGB", (WIDTH, HEIGHT))
    draw = ImageDraw.Draw(img)
    for obj in objects:
        color = np.clip(np.array(COLORS[obj["label"]]) + rng.randint(-30, 31, 3), 0, 255)
        draw.polygon([tuple(p) for p in obj["polygon"]], fill=tuple(int(c) for c in color))
    noise = rng.normal(0.0, 10.0, (HEIGHT, WIDTH, 3))
    pixels = np.clip(np.asarray(img, dtype=np.float64) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels)


def make_toy_cityscapes(root: str | os.PathLike[str] = TOY_ROOT, *, train_per_city: int = 12,
                        val_per_city: int = 6, seed: int = 0,
                        overwrite: bool = False) -> Path:  # fmt: skip
    """Write the toy set under ``root`` and convert its polygons.

    ``train_per_city`` images for each of the 2 train cities, ``val_per_city`` for the 1 val city;
    the same seed and counts give byte-identical files.

    Raises:
        ValueError: one line for a bad count or an existing set without ``overwrite``.

    Example:
        >>> import tempfile
        >>> root = make_toy_cityscapes(tempfile.mkdtemp(), train_per_city=1, val_per_city=1)
        >>> sorted(p.name for p in (root / "leftImg8bit").iterdir())
        ['train', 'val']
    """
    root = Path(root)
    check_count("train_per_city", train_per_city, 1)
    check_count("val_per_city", val_per_city, 1)
    refuse_existing(root, [root / "leftImg8bit", root / "gtFine"], overwrite)
    index = 0
    for split, count in (("train", train_per_city), ("val", val_per_city)):
        for city in CITIES[split]:
            img_dir = root / "leftImg8bit" / split / city
            gt_dir = root / "gtFine" / split / city
            img_dir.mkdir(parents=True)
            gt_dir.mkdir(parents=True)
            for frame in range(count):
                rng = np.random.RandomState(seed * 100003 + index)
                index += 1
                stem = f"{city}_{frame:06d}_000019"
                objects = scene(rng)
                render(objects, rng).save(img_dir / f"{stem}_leftImg8bit.png")
                polygons = {"imgHeight": HEIGHT, "imgWidth": WIDTH, "objects": objects}
                (gt_dir / f"{stem}_gtFine_polygons.json").write_text(json.dumps(polygons, indent=1))
    convert(root, all_ids=True, overwrite=True)
    return root

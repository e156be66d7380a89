"""A small deterministic toy Kinetics-400 in MMAction2's raw-frame format (the toy video data).

The layout is the one MMAction2's Kinetics tools write and ``RawframeDataset`` reads::

    <root>/kinetics400_train_list_rawframes.txt   "<class>/<clip> <total_frames> <label>" a line
    <root>/kinetics400_val_list_rawframes.txt
    <root>/rawframes_train/<class>/<clip>/img_00001.jpg ...   (48x36 JPEG frames)
    <root>/rawframes_val/<class>/<clip>/img_00001.jpg ...
    <root>/label_map.txt                            class names, one a line, in label order

Four classes, each a square that crosses a noisy background: its colour (red or blue, jittered)
is the appearance, its motion (falling or rising, 1-2 px a frame) the motion; a grey distractor
drifts sideways in every clip. Both cues survive the horizontal flips of the I3D training
pipeline, and telling falling from rising needs the temporal order of the frames. The same
arguments give byte-identical files. ``tools/make_toy_kinetics.py`` is its command line.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from . import check_count, refuse_existing

__all__ = ["CLASSES", "HEIGHT", "TOY_ROOT", "WIDTH", "clip_frames", "write"]

TOY_ROOT = "datasets/toy_kinetics400"
"""Where the toy configs read the toy set (their ``data_root``), relative to the repository."""
WIDTH, HEIGHT = 48, 36
CLASSES = ("red_falling", "red_rising", "blue_falling", "blue_rising")
"""The class names, in label order."""
COLORS = {"red": (200, 40, 40), "blue": (40, 60, 210)}
SPLITS = ("train", "val")


def ann_file(split: str) -> str:
    """The annotation list of ``split``, relative to the root."""
    return f"kinetics400_{split}_list_rawframes.txt"


def clip_frames(label: int, frames: int, rng: np.random.RandomState) -> list[Image.Image]:
    """The frames of one clip of class ``label``.

    Example:
        >>> frames = clip_frames(0, 4, np.random.RandomState(0))
        >>> len(frames), frames[0].size
        (4, (48, 36))
    """
    color_name, motion = CLASSES[label].split("_")
    base = np.clip(np.array(COLORS[color_name]) + rng.randint(-30, 31, 3), 0, 255)
    background = (rng.randint(70, 171) + rng.randint(-15, 16, 3)).astype(np.float64)
    ramp = np.linspace(-20.0, 20.0, HEIGHT)[:, None, None] * rng.choice([-1.0, 1.0])
    side = int(rng.randint(10, 16))
    x = int(rng.randint(2, WIDTH - side - 2))
    speed = float(rng.uniform(1.0, 2.0))
    start = float(rng.uniform(-side / 2, HEIGHT / 4))
    gx, gy = float(rng.uniform(0, WIDTH - 6)), int(rng.randint(2, HEIGHT - 8))
    gdx = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5))
    out = []
    for t in range(frames):
        pixels = np.broadcast_to(background + ramp, (HEIGHT, WIDTH, 3)).copy()
        travelled = (start + speed * t) % (HEIGHT + side) - side
        y = round(travelled if motion == "falling" else HEIGHT - side - travelled)
        pixels[max(y, 0) : max(y + side, 0), x : x + side] = base
        left = round(gx + gdx * t) % WIDTH
        pixels[gy : gy + 6, left : left + 6] = (128, 128, 128)
        pixels += rng.normal(0.0, 8.0, pixels.shape)
        out.append(Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)))
    return out


def write(root: str | os.PathLike[str] = TOY_ROOT, *, train_per_class: int = 8,
          val_per_class: int = 4, frames: int = 20, seed: int = 0,
          overwrite: bool = False) -> Path:  # fmt: skip
    """Write the toy set under ``root``.

    ``train_per_class`` and ``val_per_class`` clips of each of the 4 classes, ``frames`` frames a
    clip (the toy configs sample 8 frames 2 apart); the same seed and counts give byte-identical
    files.

    Raises:
        ValueError: one line for a bad count or an existing set without ``overwrite``.

    Example:
        >>> import tempfile
        >>> root = write(tempfile.mkdtemp(), train_per_class=1, val_per_class=1, frames=2)
        >>> (root / "kinetics400_val_list_rawframes.txt").read_text().splitlines()[0]
        'red_falling/val_0000 2 0'
    """
    root = Path(root)
    check_count("train_per_class", train_per_class, 1)
    check_count("val_per_class", val_per_class, 1)
    check_count("frames", frames, 1)
    ours = [root / f"rawframes_{s}" for s in SPLITS] + [root / ann_file(s) for s in SPLITS]
    refuse_existing(root, ours, overwrite)
    root.mkdir(parents=True, exist_ok=True)
    index = 0
    for split, count in (("train", train_per_class), ("val", val_per_class)):
        lines = []
        for number in range(count):
            for label, name in enumerate(CLASSES):
                rng = np.random.RandomState(seed * 100003 + index)
                index += 1
                clip = f"{name}/{split}_{number:04d}"
                folder = root / f"rawframes_{split}" / clip
                folder.mkdir(parents=True)
                for t, frame in enumerate(clip_frames(label, frames, rng), start=1):
                    frame.save(folder / f"img_{t:05d}.jpg", quality=90)
                lines.append(f"{clip} {frames} {label}")
        (root / ann_file(split)).write_text("".join(f"{line}\n" for line in lines))
    (root / "label_map.txt").write_text("".join(f"{name}\n" for name in CLASSES))
    return root

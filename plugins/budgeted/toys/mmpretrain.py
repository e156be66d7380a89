"""The toy sets of the MMPretrain toy configs (``configs/mmpretrain/toy/``), and the md5-free
CIFAR-10 dataset class that reads the toy CIFAR-10.

* :func:`write_cifar10`: the toy CIFAR-10 (:mod:`budgeted.toys.cifar10`,
  ``tools/make_toy_cifar10.py``).
* :func:`write_imagenet`: a toy ImageNet in the layout MMPretrain documents for ``ImageNet``
  (``tools/make_toy_imagenet.py``)::

      <root>/train/n01440764/n01440764_0000.JPEG ...     one folder per class (wnid)
      <root>/val/ILSVRC2012_val_00000001.JPEG ...         flat, as the real validation set
      <root>/meta/train.txt      "n01440764/n01440764_0000.JPEG 0" a line
      <root>/meta/val.txt        "ILSVRC2012_val_00000001.JPEG 0" a line

  ImageNet's first ten classes (:data:`IMAGENET_WNIDS`, their real labels 0-9), each image a
  class-coloured shape on a noisy background, as the toy CIFAR-10's.
* :class:`ToyCIFAR10` (:mod:`budgeted.toys.compat`), registered in MMPretrain's ``DATASETS`` when
  this module is imported (the toy configs' ``custom_imports``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from . import check_count, refuse_existing
from .cifar10 import CLASS_COLOURS, TOY_ROOT, make_toy_cifar10
from .compat import ToyCIFAR10  # registered in MMPretrain's DATASETS there

__all__ = [
    "CIFAR10_ROOT", "IMAGENET_ROOT", "IMAGENET_WNIDS", "ToyCIFAR10", "write_cifar10",
    "write_imagenet"
]  # fmt: skip

CIFAR10_ROOT = TOY_ROOT
"""Where the toy CIFAR-10 configs read their set (``data_root``), relative to the current folder."""
IMAGENET_ROOT = "datasets/toy_imagenet"
"""Where the toy ImageNet configs read their set (``data_root``), relative to the current folder."""
IMAGENET_WNIDS = (
    "n01440764", "n01443537", "n01484850", "n01491361", "n01494475", "n01496331", "n01498041",
    "n01514668", "n01514859", "n01518878",
)  # fmt: skip
"""The toy ImageNet's classes: ImageNet-1k's first ten wnids (tench, goldfish, great white shark,
tiger shark, hammerhead, electric ray, stingray, cock, hen, ostrich), label ``i`` for
``IMAGENET_WNIDS[i]`` as in the real set."""


def write_cifar10(root: str | os.PathLike[str] = CIFAR10_ROOT, **kwargs: int) -> Path:
    """Write the toy CIFAR-10 in ``root`` (``<root>/cifar-10-batches-py/``, the real format).

    :func:`budgeted.toys.cifar10.make_toy_cifar10` with ``kwargs`` (``num_train``, ``num_test``,
    ``seed``), its errors included; returns ``root``.

    Example:
        >>> import tempfile
        >>> root = write_cifar10(Path(tempfile.mkdtemp()) / "toy_cifar10", num_train=10,
        ...                      num_test=10)
        >>> (root / "cifar-10-batches-py" / "batches.meta").is_file()
        True
    """
    make_toy_cifar10(root, **kwargs)
    return Path(root)


def _shape(draw: ImageDraw.ImageDraw, label: int, cx: float, cy: float, r: float, fill) -> None:
    """Draw class ``label``'s shape at centre ``(cx, cy)``, radius ``r``."""
    box = (cx - r, cy - r, cx + r, cy + r)
    w = max(2, round(r / 3))
    if label == 0:  # square
        draw.rectangle(box, fill=fill)
    elif label == 1:  # disk
        draw.ellipse(box, fill=fill)
    elif label == 2:  # horizontal bar
        draw.rectangle((cx - r, cy - r / 3, cx + r, cy + r / 3), fill=fill)
    elif label == 3:  # vertical bar
        draw.rectangle((cx - r / 3, cy - r, cx + r / 3, cy + r), fill=fill)
    elif label == 4:  # plus
        draw.rectangle((cx - r, cy - r / 4, cx + r, cy + r / 4), fill=fill)
        draw.rectangle((cx - r / 4, cy - r, cx + r / 4, cy + r), fill=fill)
    elif label == 5:  # ring
        draw.ellipse(box, outline=fill, width=w)
    elif label == 6:  # triangle, apex up
        draw.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=fill)
    elif label == 7:  # X
        draw.line((cx - r, cy - r, cx + r, cy + r), fill=fill, width=w)
        draw.line((cx - r, cy + r, cx + r, cy - r), fill=fill, width=w)
    elif label == 8:  # diamond
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=fill)
    else:  # frame
        draw.rectangle(box, outline=fill, width=w)


def _image(rng: np.random.Generator, label: int, size: int) -> Image.Image:
    """One toy image of class ``label``, ``size`` x ``size`` RGB."""
    background = tuple(int(c) for c in rng.integers(0, 110, size=3))
    image = Image.new("RGB", (size, size), background)
    r = rng.uniform(0.22, 0.38) * size
    cx, cy = rng.uniform(r, size - r, size=2)
    colour = 0.65 * CLASS_COLOURS[label] + 0.35 * rng.uniform(0, 255, size=3)
    _shape(ImageDraw.Draw(image), label, cx, cy, r, tuple(int(c) for c in np.rint(colour)))
    pixels = np.asarray(image, dtype=np.float64) + rng.normal(0.0, 16.0, size=(size, size, 3))
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8))


def write_imagenet(root: str | os.PathLike[str] = IMAGENET_ROOT, *, train_per_class: int = 20,
                   val_per_class: int = 5, size: int = 80, seed: int = 0) -> Path:  # fmt: skip
    """Write the toy ImageNet in ``root``, in the layout MMPretrain's ``ImageNet`` reads.

    ``train_per_class`` in [1, 1300] (10 classes), ``val_per_class`` in [1, 50], ``size`` (the
    side in pixels) in [32, 512]: the toy configs crop 64. The same arguments write the same bytes.

    Raises:
        ValueError: a count, the size or the seed out of range (one line).
        FileExistsError: ``root/meta`` exists already (a set is never overwritten).

    Example:
        >>> import tempfile
        >>> root = write_imagenet(Path(tempfile.mkdtemp()) / "toy_imagenet", train_per_class=1,
        ...                       val_per_class=1, size=32)
        >>> (root / "meta" / "val.txt").read_text().splitlines()[0]
        'ILSVRC2012_val_00000001.JPEG 4'
        >>> (root / "meta" / "train.txt").read_text().splitlines()[0]
        'n01440764/n01440764_0000.JPEG 0'
    """
    check_count("train_per_class", train_per_class, 1, 1300)
    check_count("val_per_class", val_per_class, 1, 50)
    check_count("size", size, 32, 512)
    check_count("seed", seed, 0)
    root = Path(root)
    refuse_existing(root, [root / "meta"])
    rng = np.random.default_rng(seed)
    train_lines = []
    for label, wnid in enumerate(IMAGENET_WNIDS):
        (root / "train" / wnid).mkdir(parents=True, exist_ok=True)
        for i in range(train_per_class):
            name = f"{wnid}/{wnid}_{i:04d}.JPEG"
            _image(rng, label, size).save(root / "train" / name, format="JPEG", quality=90)
            train_lines.append(f"{name} {label}")
    val_labels = rng.permutation(np.arange(val_per_class * len(IMAGENET_WNIDS)) % 10)
    (root / "val").mkdir(parents=True, exist_ok=True)
    val_lines = []
    for i, label in enumerate(val_labels, start=1):
        name = f"ILSVRC2012_val_{i:08d}.JPEG"
        _image(rng, int(label), size).save(root / "val" / name, format="JPEG", quality=90)
        val_lines.append(f"{name} {int(label)}")
    meta = root / "meta"
    meta.mkdir()
    (meta / "train.txt").write_text("\n".join(train_lines) + "\n")
    (meta / "val.txt").write_text("\n".join(val_lines) + "\n")  # last: the family's marker
    return root

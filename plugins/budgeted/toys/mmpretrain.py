"""The toy sets of the MMPretrain toy configs (``configs/mmpretrain/toy/``), and the md5-free
CIFAR-10 dataset class that reads the toy CIFAR-10.

* :func:`write_cifar10` writes ``<root>/cifar-10-batches-py/`` in CIFAR-10's real pickle format
  (:func:`budgeted.toys.cifar10.make_toy_cifar10`, the set ``examples/cifar10_budget.py`` reads;
  ``tools/make_toy_cifar10.py --root datasets/toy_cifar10`` is its command line).
* :func:`write_imagenet` writes a toy ImageNet in the layout MMPretrain documents for its
  ``ImageNet`` dataset (``tools/make_toy_imagenet.py`` is its command line)::

      <root>/train/n01440764/n01440764_0000.JPEG ...     one folder per class (wnid)
      <root>/val/ILSVRC2012_val_00000001.JPEG ...         flat, as the real validation set
      <root>/meta/train.txt      "n01440764/n01440764_0000.JPEG 0" a line
      <root>/meta/val.txt        "ILSVRC2012_val_00000001.JPEG 0" a line

  Ten classes, ImageNet's first ten wnids (:data:`IMAGENET_WNIDS`) with their real label
  indices 0-9, so the stock 1000-class names still name them. Each image is a class-coloured
  shape (the class fixes the shape and pulls the colour) at a random place and size on a random
  dark background with pixel noise: learnable, not trivial. The same arguments write the same
  bytes.
* :class:`ToyCIFAR10`, registered in MMPretrain's ``DATASETS`` when this module is imported (the
  toy CIFAR-10 configs import it through ``custom_imports``): MMPretrain's ``CIFAR10`` checks the
  md5 of every file against the real archive's and so refuses any other set; this class reads a
  folder that carries the toy marker (:data:`budgeted.toys.cifar10.TOY_MARKER`) without those
  checksums, and any other folder exactly as the stock class does, checksums and all.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from .cifar10 import CLASS_COLOURS, TOY_ROOT, make_toy_cifar10
from .compat import ToyCIFAR10  # registered in MMPretrain's DATASETS there

__all__ = [
    "CIFAR10_ROOT",
    "IMAGENET_ROOT",
    "IMAGENET_WNIDS",
    "ToyCIFAR10",
    "write_cifar10",
    "write_imagenet",
]

CIFAR10_ROOT = TOY_ROOT
"""Where the toy CIFAR-10 configs read their set (``data_root``), relative to the current folder."""
IMAGENET_ROOT = "datasets/toy_imagenet"
"""Where the toy ImageNet configs read their set (``data_root``), relative to the current folder."""
IMAGENET_WNIDS = (
    "n01440764",  # tench
    "n01443537",  # goldfish
    "n01484850",  # great white shark
    "n01491361",  # tiger shark
    "n01494475",  # hammerhead
    "n01496331",  # electric ray
    "n01498041",  # stingray
    "n01514668",  # cock
    "n01514859",  # hen
    "n01518878",  # ostrich
)
"""The toy ImageNet's classes: ImageNet-1k's first ten wnids, label ``i`` for ``IMAGENET_WNIDS[i]``
(their labels in the real set too)."""


def write_cifar10(root: str | os.PathLike[str] = CIFAR10_ROOT, **kwargs: int) -> Path:
    """Write the toy CIFAR-10 in ``root`` (``<root>/cifar-10-batches-py/``, the real format).

    :func:`budgeted.toys.cifar10.make_toy_cifar10` with its defaults (1,000 train / 200 test
    images, seed 0) unless ``kwargs`` say otherwise.

    Args:
        root (str or PathLike): the toy configs' ``data_root``. Defaults to :data:`CIFAR10_ROOT`.
        **kwargs: ``num_train``, ``num_test``, ``seed`` of ``make_toy_cifar10``.

    Returns:
        Path: ``root``.

    Raises:
        ValueError: a size or the seed is out of range (one line).
        FileExistsError: ``<root>/cifar-10-batches-py`` exists already (never overwritten).

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


def _check(name: str, value: int, least: int, most: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ValueError(
            f"{name}={value!r} is invalid; allowed: a whole number in [{least}, {most}]"
        )


def write_imagenet(
    root: str | os.PathLike[str] = IMAGENET_ROOT,
    *,
    train_per_class: int = 20,
    val_per_class: int = 5,
    size: int = 80,
    seed: int = 0,
) -> Path:
    """Write the toy ImageNet in ``root``, in the layout MMPretrain's ``ImageNet`` reads.

    Args:
        root (str or PathLike): the toy configs' ``data_root``. Defaults to
            :data:`IMAGENET_ROOT`.
        train_per_class (int): training images per class (10 classes), in [1, 1300].
            Defaults to 20.
        val_per_class (int): validation images per class, in [1, 50]. Defaults to 5.
        size (int): image side in pixels, in [32, 512]. Defaults to 80 (the toy configs crop
            64).
        seed (int): a whole number >= 0; the same arguments write the same bytes. Defaults to 0.

    Returns:
        Path: ``root``.

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
    _check("train_per_class", train_per_class, 1, 1300)
    _check("val_per_class", val_per_class, 1, 50)
    _check("size", size, 32, 512)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r} is invalid; allowed: a whole number >= 0")
    root = Path(root)
    if (root / "meta").exists():
        raise FileExistsError(f"{root / 'meta'} already exists; remove {root} to write it again")
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

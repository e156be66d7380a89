"""The UCI handwritten digits (scikit-learn's bundled copy), split once, as the files MMPretrain's
stock ``CustomDataset`` reads.

The data: ``sklearn.datasets.load_digits()``, the *test* set of the UCI "Optical Recognition of
Handwritten Digits" (E. Alpaydin, C. Kaynak, 1998; CC BY 4.0, https://archive.ics.uci.edu/dataset/80):
1,797 8x8 images of 13 writers, each value the "on" pixels (0..16) of a 4x4 block of a 32x32 scan;
no download. Every digits run trains on :func:`upscale`'s 32x32 pixels (the input of MMPretrain's
``LeNet5``) and uses one split (:func:`stratified_split`): 397 images held out for validation,
never trained on (new images of the same writers: the set has no writer ids), 1,400 train,
stratified by class.

The files (:func:`write_digits`, ``tools/make_digits.py``; the same call writes the same bytes)::

    <root>/train/00000.png ...   1,400 32x32 8-bit grey PNGs, named by their load_digits index
    <root>/val/00001.png ...     the 397 held out
    <root>/meta/train.txt        "00000.png 0" a line: file under train/, label
    <root>/meta/val.txt          the same for val/ (written last: the set's marker)
    <root>/README.txt            source, licence and split

    >>> split = digits_split()
    >>> split.train_images.shape, split.val_images.shape, split.val_images.dtype
    ((1400, 32, 32), (397, 32, 32), dtype('uint8'))
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._require import require
from .image_sets import MARKER, ImageSplit, RealSet, stratified_split, write_image_set

__all__ = [
    "CLASSES", "DIGITS_ROOT", "MARKER", "MEAN", "NUM_IMAGES", "SCALE", "SET", "SIDE", "SPLIT_SEED",
    "STD", "TRAIN_SIZE", "VAL_SIZE", "DigitsSplit", "digits_split", "load_digits_arrays",
    "stratified_split", "upscale", "write_digits"
]  # fmt: skip

DIGITS_ROOT = "datasets/digits"
"""Where the digits configs read their set (``data_root``), relative to the current folder."""
NUM_IMAGES = 1797
"""Scans in ``load_digits()``."""
VAL_SIZE = 397
"""Images held out for validation (about 22 %), never trained on."""
TRAIN_SIZE = NUM_IMAGES - VAL_SIZE
"""Training images: 1,400."""
SPLIT_SEED = 0
"""The seed of the split's ``numpy.random.default_rng``."""
LEVELS = 16
"""The largest count of a 4x4 block: the 8x8 values are 0..16."""
SCALE = 4
"""Each 8x8 value is repeated over a SCALE x SCALE block."""
SIDE = 8 * SCALE
"""The side of the images written and trained on: 32."""
MEAN, STD = 77.97, 95.89
"""Mean and standard deviation of the training images' pixels (0..255), rounded to 0.01: the
normalisation of the example and of the configs' ``data_preprocessor``."""
CLASSES = tuple(str(d) for d in range(10))
"""Class names in label order: label ``d`` is the digit ``d``."""
README = """\
UCI handwritten digits, as written by budgeted.toys.digits.write_digits (tools/make_digits.py).

Source: scikit-learn's sklearn.datasets.load_digits(), a copy of the test set of the UCI
"Optical Recognition of Handwritten Digits" data set (E. Alpaydin, C. Kaynak, 1998),
https://archive.ics.uci.edu/dataset/80 ; licence: CC BY 4.0 (as stated there).
1,797 8x8 images of counts 0..16 (on-pixels per 4x4 block of a 32x32 bitmap), 13 writers.
Changes: each count scaled to 0..255 (rint(v * 255 / 16)) and repeated over its 4x4 block
(32x32 8-bit grey PNG); split into train/ (1,400) and val/ (397, held out), stratified by
class, drawn with numpy.random.default_rng(0). File names are the load_digits indices.
"""


DigitsSplit = ImageSplit
"""The digits split (:class:`~.image_sets.ImageSplit`)."""


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """``load_digits()``'s images (uint8 ``1797 x 8 x 8``, values 0..16) and labels (int64).

    Raises:
        budgeted._require.MissingFrameworkError: scikit-learn is not installed (one line naming
            ``pip install "budgeted-training[digits]"``).
        ValueError: the bundled copy is not the 1,797 images of counts 0..16 (one line).
    """
    require("budgeted.toys.digits", "sklearn")
    from sklearn.datasets import load_digits

    digits = load_digits()
    values = np.asarray(digits.images)
    ok = (
        values.shape == (NUM_IMAGES, 8, 8)
        and np.array_equal(values, np.rint(values))
        and values.min() >= 0
        and values.max() <= LEVELS
    )
    if not ok:
        raise ValueError(
            f"load_digits() gave images of shape {values.shape}; allowed: the {NUM_IMAGES} 8x8 "
            f"images of integers 0..{LEVELS} of the UCI set (reinstall scikit-learn)"
        )
    return values.astype(np.uint8), np.asarray(digits.target, dtype=np.int64)


def upscale(images: np.ndarray) -> np.ndarray:
    """8x8 counts (0..16) to 32x32 uint8 pixels: ``rint(v * 255 / 16)`` over each 4x4 block.

    >>> upscale(np.array([[[0, 8] + [16] * 6] * 8]))[0, :1, :9].tolist()
    [[0, 0, 0, 0, 128, 128, 128, 128, 255]]
    """
    pixels = np.rint(np.asarray(images, dtype=np.float64) * 255.0 / LEVELS).astype(np.uint8)
    return pixels.repeat(SCALE, axis=-2).repeat(SCALE, axis=-1)


def digits_split() -> DigitsSplit:
    """The split every digits run uses, at the pixels it trains on (:func:`upscale`)."""
    images, labels = load_digits_arrays()
    return DigitsSplit.held_out(upscale(images), labels, VAL_SIZE, SPLIT_SEED)


def write_digits(root: str | os.PathLike[str] = DIGITS_ROOT) -> Path:
    """Write the split (:func:`digits_split`) under ``root`` in ``CustomDataset``'s layout
    (:func:`~.image_sets.write_image_set`: atomically, never over an existing set). Returns
    ``root``.

    Raises:
        FileExistsError: ``root`` exists and is not an empty folder (never overwritten).
        budgeted._require.MissingFrameworkError: scikit-learn is not installed (one line).

    Example:
        >>> import tempfile
        >>> root = write_digits(Path(tempfile.mkdtemp()) / "digits")
        >>> (root / "meta" / "val.txt").read_text().splitlines()[0]
        '00001.png 1'
        >>> len(list((root / "train").iterdir())), len(list((root / "val").iterdir()))
        (1400, 397)
    """
    write_image_set(root, "the digits")  # refused before the split is loaded
    return write_image_set(root, "the digits", digits_split(), README)


SET = RealSet(
    name="digits", title="UCI digits (scikit-learn), 8x8 scans at 32x32", root=DIGITS_ROOT,
    full_iters=1720, mean=MEAN, std=STD, train_size=TRAIN_SIZE, val_size=VAL_SIZE,
    split="budgeted.toys.digits:digits_split", write="budgeted.toys.digits:write_digits",
)  # fmt: skip
"""The digits as a real set (:mod:`.image_sets`): 40 epochs of 43 batches of 32 = 1,720."""

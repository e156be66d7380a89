"""Small real image sets, split once and written as the files MMPretrain's stock ``CustomDataset``
reads: what the UCI digits (:mod:`.digits`) and MNIST-5k (:mod:`.mnist5k`) share.

Each set is a module that declares its :class:`RealSet` as ``SET`` (name, files, full schedule,
normalisation, its split and writer); :func:`real_set` finds it by name, so the plain-PyTorch
script and the tools read one table. Every set uses one split rule (:func:`stratified_split`) and
one writer (:func:`write_image_set`)::

    <root>/train/00000.png ...   8-bit grey PNGs, named by their index in the source
    <root>/val/00001.png ...     the held-out images
    <root>/meta/train.txt        "00000.png 0" a line: file under train/, label
    <root>/meta/val.txt          the same for val/ (written last: the set's marker)
    <root>/README.txt            source, licence and split

    >>> real_set("mnist5k").full_iters, REAL_SET_NAMES
    (1250, ('digits', 'mnist5k'))
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "MARKER", "REAL_SET_NAMES", "ImageSplit", "RealSet", "real_set", "stratified_split",
    "write_image_set",
]  # fmt: skip

REAL_SET_NAMES = ("digits", "mnist5k")
"""The real sets, each the module ``budgeted.toys.<name>`` with its ``SET``."""
MARKER = "meta/val.txt"
"""The file (under the root) written last: the set exists once it does."""


class ImageSplit(NamedTuple):
    """A split's images (uint8, ``N x 32 x 32``), labels (int64) and indices in the source."""

    train_images: np.ndarray
    train_labels: np.ndarray
    train_indices: np.ndarray
    val_images: np.ndarray
    val_labels: np.ndarray
    val_indices: np.ndarray

    @classmethod
    def held_out(
        cls, pixels: np.ndarray, labels: np.ndarray, val_size: int, seed: int
    ) -> ImageSplit:
        """``val_size`` of ``pixels`` held out by :func:`stratified_split` (``seed``).

        >>> ImageSplit.held_out(np.zeros((4, 2, 2)), np.array([0, 0, 1, 1]), 2, 0).val_labels
        array([0, 1])
        """
        train, val = stratified_split(labels, val_size, seed)
        return cls(pixels[train], labels[train], train, pixels[val], labels[val], val)


@dataclass(frozen=True)
class RealSet:
    """One real set: ``root`` (the configs' ``data_root``), the full schedule (``full_iters`` at
    batch 32), the training pixels' ``mean`` and ``std``, the split's sizes, and its ``split`` and
    ``write`` functions as ``"module:function"``."""

    name: str
    title: str
    root: str
    full_iters: int
    mean: float
    std: float
    train_size: int
    val_size: int
    split: str
    write: str

    def load(self) -> ImageSplit:
        """The split every run of this set uses (its extra missing: one line)."""
        module, function = self.split.split(":")
        return getattr(importlib.import_module(module), function)()


def real_set(name: str) -> RealSet:
    """The set called ``name`` (one of :data:`REAL_SET_NAMES`; another is one line)."""
    if name not in REAL_SET_NAMES:
        raise ValueError(f"real set {name!r} is unknown; allowed: {', '.join(REAL_SET_NAMES)}")
    return importlib.import_module(f"budgeted.toys.{name}").SET


def stratified_split(labels: np.ndarray, val_size: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(train, val) indices into ``labels``, each ascending; ``val_size`` held out by class.

    Class ``c`` with ``n_c`` of the ``N`` images gives ``floor(val_size n_c / N)`` images, and the
    classes with the largest remainders one more each (ties: the lower class), so the shares sum to
    ``val_size``. Classes are drawn in label order, each from one ``rng.permutation`` of its
    indices (``rng = numpy.random.default_rng(seed)``).

    >>> train, val = stratified_split(np.array([0, 0, 0, 0, 1, 1]), val_size=3, seed=0)
    >>> len(train), len(val), sorted(np.array([0, 0, 0, 0, 1, 1])[val].tolist())
    (3, 3, [0, 0, 1])
    """
    labels = np.asarray(labels)
    if not (isinstance(val_size, int) and 0 < val_size < len(labels)):
        raise ValueError(f"val_size={val_size!r} is invalid; allowed: 0 < val_size < {len(labels)}")
    classes, counts = np.unique(labels, return_counts=True)
    exact = [val_size * int(n) for n in counts]
    quota = [e // len(labels) for e in exact]
    by_remainder = sorted(range(len(classes)), key=lambda i: (-(exact[i] % len(labels)), i))
    for i in by_remainder[: val_size - sum(quota)]:
        quota[i] += 1
    rng = np.random.default_rng(seed)
    val = np.concatenate(
        [rng.permutation(np.flatnonzero(labels == c))[:q] for c, q in zip(classes, quota)]
    )
    val.sort()
    return np.setdiff1d(np.arange(len(labels)), val), val


def _write_split(folder: Path, name: str, images: np.ndarray, labels, indices) -> str:
    """Write one split's PNGs under ``folder/name``; its annotation text."""
    from PIL import Image  # Pillow: a torchvision and MMCV dependency

    (folder / name).mkdir()
    lines = []
    for image, label, index in zip(images, labels, indices):
        file = f"{int(index):05d}.png"
        Image.fromarray(image, mode="L").save(folder / name / file, format="PNG")
        lines.append(f"{file} {int(label)}\n")
    return "".join(lines)


def write_image_set(
    root: str | os.PathLike[str], what: str, split: ImageSplit | None = None, readme: str = ""
) -> Path:
    """Write ``split`` under ``root`` in ``CustomDataset``'s layout (module docstring), with
    ``readme`` as ``README.txt``; ``what`` names the set in the refusal. ``split`` None: the root
    is only checked (called before loading the split, so a refusal costs nothing).

    The set is written into a temporary folder beside ``root`` and renamed into place, so
    ``root`` never holds half a set. Returns ``root``.

    Raises:
        FileExistsError: ``root`` exists and is not an empty folder (never overwritten).
    """
    root = Path(root)
    if root.exists() and not (root.is_dir() and not any(root.iterdir())):
        raise FileExistsError(f"{root} already exists; remove it to write {what} again")
    if split is None:
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        train = _write_split(staging, "train", *split[:3])
        val = _write_split(staging, "val", *split[3:])
        (staging / "README.txt").write_text(readme)
        (staging / "meta").mkdir()
        (staging / "meta" / "train.txt").write_text(train)
        (staging / MARKER).write_text(val)
        staging.chmod(0o777 & ~_umask())
        os.replace(staging, root)  # an empty root folder is replaced; a full one raises
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return root


def _umask() -> int:
    """The process's umask (``mkdtemp`` makes its folder 0o700; the set gets the usual mode)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask

"""Toy and small real datasets, written in the formats the frameworks read.

Every writer checks its arguments and the folder it writes in with the two helpers below.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def check_count(name: str, value: Any, least: int, most: int | None = None) -> None:
    """Refuse (one line) ``value`` unless it is a whole number (not a bool) in ``[least, most]``.

    >>> check_count("size", 16, 32)
    Traceback (most recent call last):
    ValueError: size=16 is invalid; allowed: a whole number >= 32
    """
    whole = isinstance(value, int) and not isinstance(value, bool)
    if not (whole and least <= value <= (value if most is None else most)):
        span = f">= {least}" if most is None else f"in [{least}, {most}]"
        raise ValueError(f"{name}={value!r} is invalid; allowed: a whole number {span}")


def refuse_existing(root: Path, ours: Iterable[Path], overwrite: bool | None = None) -> None:
    """Refuse a set already in ``root`` (any of ``ours`` exists) in one line: a
    ``FileExistsError`` for a writer that never overwrites (``overwrite`` None), a ``ValueError``
    naming ``--overwrite`` without it; ``overwrite=True`` removes ``ours`` instead.
    """
    found = [path for path in ours if path.exists()]
    if found and overwrite is None:
        raise FileExistsError(f"{found[0]} already exists; remove it to write the toy set again")
    if found and not overwrite:
        raise ValueError(
            f"{root} already holds a dataset; pass --overwrite (overwrite=True) to regenerate it"
        )
    for path in found:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

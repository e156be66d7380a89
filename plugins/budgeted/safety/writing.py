"""Files written atomically: a reader (or a resumed run) sees the old file or the new one, never a
torn one (:func:`atomic_write` and the writers through it); :func:`remove_stale_temporaries`
removes what a killed write left.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "last_checkpoint"
>>> atomic_write_text(path, "model_0000004.pth")
>>> try:
...     with atomic_write(path, "w") as f:
...         _ = f.write("model_00000")
...         raise KeyboardInterrupt  # killed mid-write
... except KeyboardInterrupt:
...     pass
>>> path.read_text(), sorted(p.name for p in path.parent.iterdir())
('model_0000004.pth', ['last_checkpoint'])
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

from .loading import load_checkpoint

__all__ = [
    "atomic_save", "atomic_write", "atomic_write_text", "remove_stale_temporaries",
    "replace_durably", "save_and_point", "save_weights_subset"
]  # fmt: skip


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success flush, fsync and rename it
    to ``path`` (atomic on POSIX); on an exception remove it and leave ``path`` as it was.

    The temporary file is ``.<name>.tmp-<random>`` in the same folder (the same file system, so
    the rename is atomic; the leading dot keeps it out of ``*.pth`` globs), its permissions as a
    plain ``open``'s. ``mode``: ``"wb"`` or ``"w"`` (text, UTF-8).

    Example:
        >>> import json, tempfile
        >>> path = tempfile.mkdtemp() + "/record.json"
        >>> with atomic_write(path, "w") as f:
        ...     json.dump({"done": True}, f)
        >>> open(path).read()
        '{"done": true}'
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode {mode!r} is invalid; allowed: 'wb', 'w'")
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{name}.tmp-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f
        replace_durably(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp-[0-9a-f]{8}")
"""The name :func:`atomic_write` gives its temporary file: ``.<name>.tmp-<8 hex digits>``."""


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[str]:
    """Remove the temporary files :func:`atomic_write` left in ``folder`` when a process was
    killed mid-write (SIGKILL, a power cut: a partial copy of a checkpoint, often hundreds of
    MB). Call it at the start of a run, holding the folder's lock: no other writer of ours is
    at work there then. Other files, and folders, are left alone.

    Returns:
        list[str]: the names removed, sorted.

    Example:
        >>> import pathlib, tempfile
        >>> run = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (run / ".model_0000009.pth.tmp-0123abcd").write_bytes(b"torn")
        >>> _ = (run / "model_0000004.pth").write_bytes(b"kept")
        >>> remove_stale_temporaries(run)
        ['.model_0000009.pth.tmp-0123abcd']
        >>> sorted(p.name for p in run.iterdir())
        ['model_0000004.pth']
    """
    removed = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return removed
    for entry in entries:
        if _TEMPORARY.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return removed


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_durably(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """fsync ``tmp`` (a file written by code that does not, MMEngine's file backend say), rename
    it to ``path`` and fsync the folder (best effort): the second half of :func:`atomic_write`.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _ = open(folder + "/last_checkpoint.tmp", "w").write("iter_8.pth")
        >>> replace_durably(folder + "/last_checkpoint.tmp", folder + "/last_checkpoint")
        >>> open(folder + "/last_checkpoint").read()
        'iter_8.pth'
    """
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_folder(os.path.dirname(os.path.abspath(path)))


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save(obj, path)`` through :func:`atomic_write`.

    Example:
        >>> import tempfile, torch
        >>> path = tempfile.mkdtemp() + "/model.pth"
        >>> atomic_save({"w": torch.ones(2)}, path)
        >>> load_checkpoint(path)["w"].tolist()
        [1.0, 1.0]
    """
    import torch

    with atomic_write(path, "wb") as f:
        torch.save(obj, f)


def save_and_point(
    write: Callable[[str], Any],
    path: str | os.PathLike[str],
    pointer: str | os.PathLike[str],
    text: str,
    *,
    main: bool = True,
) -> None:
    """A checkpoint written atomically, then named by its ``pointer`` file (``last_checkpoint``).

    ``write(tmp)`` writes the file under the temporary name :func:`atomic_write` uses, beside
    ``path``; where ``main`` (the process that writes files: rank 0) it is fsynced and renamed
    to ``path``, and ``pointer`` atomically holds ``text``. On an exception the temporary file
    is removed and ``path`` and ``pointer`` are left as they were.

    Example:
        >>> import pathlib, tempfile
        >>> run = pathlib.Path(tempfile.mkdtemp())
        >>> save_and_point(lambda tmp: pathlib.Path(tmp).write_bytes(b"w"), run / "m_1.pth",
        ...                run / "last_checkpoint", "m_1.pth")
        >>> sorted(p.name for p in run.iterdir()), (run / "last_checkpoint").read_text()
        (['last_checkpoint', 'm_1.pth'], 'm_1.pth')
    """
    folder, name = os.path.split(os.path.abspath(os.fspath(path)))
    tmp = os.path.join(folder, f".{name}.tmp-{secrets.token_hex(4)}")
    try:
        write(tmp)
        if main:
            replace_durably(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if main:
        atomic_write_text(pointer, text)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_write` (``last_checkpoint``, records).

    Example:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/last_checkpoint"
        >>> atomic_write_text(path, "model_0000007.pth")
        >>> open(path).read()
        'model_0000007.pth'
    """
    with atomic_write(path, "w") as f:
        f.write(text)


def save_weights_subset(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    prefix: str,
    *,
    extra_globals: Mapping[str, Any] | None = None,
) -> int:
    """Save the weights of checkpoint ``src`` whose names start with ``prefix`` to a new ``dst``.

    The new file keeps the names and the source's layout: ``{"model": {name: tensor}}`` from a
    Detectron2 checkpoint (``MODEL.WEIGHTS`` loads it), ``{"state_dict": {name: tensor}}`` from an
    MMEngine one (``init_cfg=dict(type="Pretrained", checkpoint=dst, prefix=prefix)``); a file
    that is the weights itself gives ``"model"``. ``src`` is loaded with :func:`load_checkpoint`
    (untrusted). Returns the number of tensors written.

    Raises:
        ValueError: one line, for an existing ``dst`` or a ``prefix`` that names nothing in
            ``src`` (the message lists the top-level names there are).

    Example:
        >>> import tempfile, torch
        >>> folder = tempfile.mkdtemp()
        >>> atomic_save({"model": {"backbone.w": torch.ones(1), "head.w": torch.ones(1)}},
        ...             folder + "/full.pth")
        >>> save_weights_subset(folder + "/full.pth", folder + "/backbone.pth", "backbone.")
        1
        >>> list(load_checkpoint(folder + "/backbone.pth")["model"])
        ['backbone.w']
    """
    if os.path.exists(dst):
        raise ValueError(f"{os.fspath(dst)!r} already exists; remove it or choose another file")
    checkpoint = load_checkpoint(src, extra_globals=extra_globals)
    weights, key = checkpoint, "model"
    if isinstance(checkpoint, Mapping):
        key = next((k for k in ("model", "state_dict") if k in checkpoint), "model")
        weights = checkpoint.get(key, checkpoint)
    if not isinstance(weights, Mapping):
        raise ValueError(f"checkpoint {os.fspath(src)!r} holds no weights (a dict of tensors)")
    kept = {name: value for name, value in weights.items() if str(name).startswith(prefix)}
    if not kept:
        tops = sorted({str(name).split(".")[0] + "." for name in weights})
        raise ValueError(
            f"prefix {prefix!r} names no weight in {os.fspath(src)!r}; its names start with: "
            + ", ".join(tops[:10])
        )
    atomic_save({key: kept}, dst)
    return len(kept)

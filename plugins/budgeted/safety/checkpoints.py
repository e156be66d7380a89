"""Untrusted checkpoint files, loaded safely; checkpoints and records written atomically.

Framework-free (torch and numpy are imported only when a checkpoint is loaded or saved), shared
by the Detectron2 and MMEngine adapters and the sweep tools.

Loading (:func:`load_checkpoint`): every file is untrusted. Unpickling runs whatever callable the
file names, so nothing is unpickled with a free hand:

- a torch checkpoint (a zip archive, as ``torch.save`` writes; or torch's legacy format) goes
  through ``torch.load(weights_only=True)`` with :data:`TORCH_ALLOWED` added for that call
  only (the globals are checked first, so a refusal names them);
- a plain pickle (Detectron2's model-zoo ``.pkl``: a dict of numpy arrays, perhaps under
  ``"model"``, with ``"__author__"`` and ``"matching_heuristics"``) goes through
  :class:`RestrictedUnpickler`, which resolves only :data:`PICKLE_ALLOWED`.

Anything else is refused with an :class:`UnsafeCheckpointError` naming the file and the global;
a truncated or unreadable file raises a :class:`DamagedCheckpointError` naming the file. Both
are ``ValueError`` s with a one-line message. Each adapter may allow a few globals of its own
(``extra_globals``).

Writing (:func:`atomic_write`, :func:`atomic_save`, :func:`atomic_write_text`): to a temporary
file in the same folder, flushed and fsynced, then renamed over the target (``os.replace``), so a
reader (or a resumed run) sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import _compat_pickle
import contextlib
import numbers
import os
import pickle
import re
import secrets
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ..errors import DamagedCheckpointError, UnsafeCheckpointError

__all__ = [
    "NUMPY_GLOBALS",
    "PICKLE_ALLOWED",
    "TORCH_ALLOWED",
    "DamagedCheckpointError",
    "RestrictedUnpickler",
    "UnsafeCheckpointError",
    "atomic_save",
    "atomic_write",
    "atomic_write_text",
    "check_later_checkpoints_kept",
    "checkpoint_iteration",
    "checkpoint_iterations",
    "is_zip_checkpoint",
    "load_checkpoint",
    "newest_intact_checkpoint",
    "remove_stale_temporaries",
    "save_weights_subset",
]


# --- what a checkpoint may name ------------------------------------------------------------------

NUMPY_GLOBALS: tuple[str, ...] = (
    "numpy.core.multiarray._reconstruct",  # ndarray.__reduce__, numpy 1.x
    "numpy._core.multiarray._reconstruct",  # the same, numpy 2.x
    "numpy.core.multiarray.scalar",  # numpy scalars (np.float32(1.0), ...)
    "numpy._core.multiarray.scalar",
    "numpy.core.numeric._frombuffer",  # ndarray.__reduce_ex__ with pickle protocol 5
    "numpy._core.numeric._frombuffer",
    "numpy.ndarray",
    "numpy.dtype",
)
"""The globals numpy 1.x and 2.x pickle an array or a scalar with (names as a pickle holds them)."""

PICKLE_ALLOWED: tuple[str, ...] = (
    *NUMPY_GLOBALS,
    "collections.OrderedDict",  # a state_dict converted to numpy keeps its OrderedDict
    "builtins.set",  # pickle protocols < 4 name the containers they cannot write as opcodes
    "builtins.frozenset",
    "builtins.bytearray",
    "_codecs.encode",  # bytes under pickle protocol 2 (latin-1 only: see _latin1_encode)
)
"""Every global :class:`RestrictedUnpickler` resolves: what a Detectron2 model-zoo ``.pkl``
(a dict of numpy arrays, written by Python 2 or 3, numpy 1.x or 2.x) can hold. Dicts, lists,
tuples, strings, numbers, booleans and None need no global."""

TORCH_ALLOWED: tuple[str, ...] = NUMPY_GLOBALS
"""Globals allowed in a torch checkpoint beyond torch's own ``weights_only`` set (tensors,
``OrderedDict``, builtin containers and scalars), which is all a checkpoint of our trainers
holds: numpy arrays and scalars, which weights converted by other tools may hold (Detectron2
converts them to tensors when loading)."""

_ZIP_MAGIC = b"PK\x03\x04"
_TORCH_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER


class _Refused(pickle.UnpicklingError):
    """An allowed global called in a way a checkpoint never calls it."""


def _latin1_encode(obj: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it (``bytes`` as latin-1 text), only."""
    if not isinstance(obj, str) or encoding.replace("_", "-").lower() not in ("latin1", "latin-1"):
        raise _Refused(
            f"it calls _codecs.encode with encoding {encoding!r}, which a checkpoint never does "
            "(only 'latin1', for bytes)"
        )
    return obj.encode("latin-1", errors)


def _numpy_object(name: str) -> Any:
    """The object a numpy global name means, under whichever numpy is installed."""
    import numpy as np

    if name in ("numpy.ndarray", "numpy.dtype"):
        return getattr(np, name.split(".")[1])
    module, attr = name.rsplit(".", 1)
    submodule = module.split(".")[-1]  # multiarray, numeric
    for package in ("numpy._core", "numpy.core"):  # numpy 2 names first: 1.x lacks numpy._core
        try:
            mod = __import__(f"{package}.{submodule}", fromlist=[attr])
        except ImportError:
            continue
        if hasattr(mod, attr):
            return getattr(mod, attr)
    raise ImportError(name)


def _resolve(name: str) -> Any:
    if name == "_codecs.encode":
        return _latin1_encode
    if name.startswith("numpy."):
        return _numpy_object(name)
    module, attr = name.rsplit(".", 1)
    return getattr(__import__(module, fromlist=[attr]), attr)


def _short(path: str | os.PathLike[str]) -> str:
    return repr(os.fspath(path))


def _refusal(path: str | os.PathLike[str], names: Iterable[str], allowed: str) -> str:
    names = sorted(set(names))
    what = "the global" if len(names) == 1 else "the globals"
    return (
        f"refusing to load {_short(path)}: it names {what} {', '.join(names)}, outside the "
        f"allow-list ({allowed}); loading it could run code from the file, so nothing of it was "
        "loaded (use only checkpoints you trust, and never weights_only=False)"
    )


_PICKLE_WHAT = "numpy arrays and scalars, OrderedDict, set, frozenset, bytearray"
_TORCH_WHAT = "tensors, builtin containers and scalars, OrderedDict, numpy arrays and scalars"


class RestrictedUnpickler(pickle.Unpickler):
    """A ``pickle.Unpickler`` that resolves only the globals in ``allowed``.

    Args:
        file: a binary file object.
        path (str or PathLike): the file's name, for messages.
        allowed (Mapping[str, Any], optional): ``"module.name" -> object``; default
            :data:`PICKLE_ALLOWED` (resolved lazily).

    Raises:
        UnsafeCheckpointError: (from ``load``) the pickle names any other global.
    """

    def __init__(
        self,
        file: IO[bytes],
        path: str | os.PathLike[str],
        allowed: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(file, encoding="latin1")  # Python 2 pickles (Caffe2, Detectron 1)
        self._path = path
        self._allowed: Mapping[str, Any] = allowed if allowed is not None else {}
        extra = sorted(self._allowed)
        self._what = ", ".join([_PICKLE_WHAT, *extra])

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names (__builtin__.set, copy_reg, ...), as pickle's own find_class maps them
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full in self._allowed:
            return self._allowed[full]
        if full in PICKLE_ALLOWED:
            try:
                return _resolve(full)
            except (ImportError, AttributeError):
                pass
        raise UnsafeCheckpointError(_refusal(self._path, [full], self._what))

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeCheckpointError(
            f"refusing to load {_short(self._path)}: it holds a persistent reference "
            f"({str(pid)[:40]!r}), which a plain checkpoint pickle never holds"
        )


# --- loading ----------------------------------------------------------------------


def is_zip_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a zip archive (``torch.save``'s format since torch 1.6)."""
    with open(path, "rb") as f:
        return f.read(4) == _ZIP_MAGIC


def _damaged(path: str | os.PathLike[str], reason: Any) -> DamagedCheckpointError:
    text = " ".join(str(reason).split()) or type(reason).__name__
    text = text.split(". ")[0].rstrip(".")  # torch's miniz errors go on for lines
    if len(text) > 160:
        text = text[:157] + "..."
    return DamagedCheckpointError(
        f"checkpoint {_short(path)} cannot be read (truncated or damaged: {text})"
    )


def _torch_refusal(path: str | os.PathLike[str], err: Exception, allowed: str) -> ValueError:
    """One line from torch's multi-line weights-only error."""
    text = str(err)
    found = re.findall(r"GLOBAL ([\w.]+)", text)
    if found:
        return UnsafeCheckpointError(_refusal(path, found, allowed))
    reason = re.search(r"(Unsupported[^\n]*|Trying to load[^\n]*)", text)
    return UnsafeCheckpointError(
        f"refusing to load {_short(path)}: torch's weights-only loader refuses it "
        f"({reason.group(1).strip() if reason else type(err).__name__}); it is not loaded "
        "(use only checkpoints you trust, and never weights_only=False)"
    )


_TORCH_DAMAGED = (
    RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError,
    # torch's legacy (pre-1.6) format, truncated or corrupted: its reader unpacks headers with
    # struct and asserts on what the pickle names (measured: a truncated or bit-flipped file)
    struct.error, AssertionError, TypeError, AttributeError,
)  # fmt: skip
"""What ``torch.load`` raises for a file that is not a whole checkpoint."""


def _load_torch(
    path: str | os.PathLike[str], map_location: Any, extra: Mapping[str, Any], zipped: bool
) -> Any:
    import torch

    allowed = {name: _resolve(name) for name in TORCH_ALLOWED if _resolvable(name)}
    allowed.update(extra)
    what = ", ".join([_TORCH_WHAT, *sorted(extra)])
    if zipped:
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(os.fspath(path))
        except Exception as err:  # a truncated archive: no central directory
            raise _damaged(path, err) from None
        bad = set(unsafe) - set(allowed)
        if bad:
            raise UnsafeCheckpointError(_refusal(path, bad, what))
    safe = [(obj, name) for name, obj in allowed.items()]
    safe += _numpy_dtype_classes()  # pickled dtypes are rebuilt with BUILD on their class
    # torch's safe_globals() removes its globals on exit, also those allowed before it (the
    # MMEngine allow-list, say): keep the process-wide list as it was.
    before = list(torch.serialization.get_safe_globals())
    try:
        with torch.serialization.safe_globals(safe):
            return torch.load(os.fspath(path), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "Weights only load failed" in str(err):
            raise _torch_refusal(path, err, what) from None
        raise _damaged(path, err) from None
    except _TORCH_DAMAGED as err:
        raise _damaged(path, err) from None
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(before)


def _resolvable(name: str) -> bool:
    try:
        _resolve(name)
    except (ImportError, AttributeError):
        return False
    return True


def _numpy_dtype_classes() -> list[Any]:
    try:
        import numpy as np
    except ImportError:
        return []
    names = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
    return [type(np.dtype(n)) for n in names]


def _load_pickle(path: str | os.PathLike[str], extra: Mapping[str, Any]) -> Any:
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, path, extra).load()
    except UnsafeCheckpointError:
        raise
    except _Refused as err:
        raise UnsafeCheckpointError(
            f"refusing to load {_short(path)}: {err}; nothing of it was loaded"
        ) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise _damaged(path, err) from None
    # LookupError: IndexError, KeyError, and an unknown error handler named to _codecs.encode
    except (LookupError, MemoryError, OverflowError, UnicodeDecodeError) as err:
        raise _damaged(path, err) from None


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    map_location: Any = "cpu",
    extra_globals: Mapping[str, Any] | None = None,
) -> Any:
    """Load an untrusted checkpoint file without letting it run code.

    The format is read from the file, not its name: a zip archive or torch's legacy format is
    loaded with ``torch.load(weights_only=True)`` and :data:`TORCH_ALLOWED`; any other file
    (Detectron2's model-zoo ``.pkl``, a plain pickle) with :class:`RestrictedUnpickler` and
    :data:`PICKLE_ALLOWED`.

    Args:
        path (str or PathLike): the file.
        map_location: where torch puts the tensors. Defaults to ``"cpu"``.
        extra_globals (Mapping[str, Any], optional): further globals to allow,
            ``"module.name" -> object`` (an adapter's own checkpoint classes).

    Returns:
        The unpickled object (usually a dict).

    Raises:
        UnsafeCheckpointError: the file names a global outside the allow-list (one line naming
            the file and the global); nothing from it ran.
        DamagedCheckpointError: the file is missing, truncated or not a checkpoint (one line).

    Example:
        >>> import pickle, tempfile
        >>> path = tempfile.mkdtemp() + "/w.pkl"
        >>> with open(path, "wb") as f:
        ...     pickle.dump({"model": {"w": [1.0]}, "__author__": "me"}, f)
        >>> load_checkpoint(path)["__author__"]
        'me'
    """
    extra = dict(extra_globals or {})
    if not os.path.exists(path):
        raise DamagedCheckpointError(f"checkpoint {_short(path)} does not exist")
    if not os.path.isfile(path):
        raise DamagedCheckpointError(f"checkpoint {_short(path)} is not a file")
    try:
        zipped = is_zip_checkpoint(path)
    except OSError as err:
        raise _damaged(path, err) from None
    if zipped:
        return _load_torch(path, map_location, extra, zipped=True)
    obj = _load_pickle(path, extra)  # the first pickle in the file
    if type(obj) is int and obj == _TORCH_LEGACY_MAGIC:  # torch's pre-1.6 format
        return _load_torch(path, map_location, extra, zipped=False)
    return obj


def checkpoint_iteration(path: str | os.PathLike[str]) -> float:
    """A sort key for checkpoint names: the last number in the file name (``model_0000007.pth``
    -> 7, ``iter_16.pth`` -> 16), ``inf`` for a ``*final*`` name, ``-1`` for none.

    Example:
        >>> [checkpoint_iteration(p) for p in ("model_0000007.pth", "iter_16.pth", "x_final.pth")]
        [7.0, 16.0, inf]
    """
    name = Path(path).name
    if "final" in name:
        return float("inf")
    numbers = re.findall(r"\d+", name)
    return float(numbers[-1]) if numbers else -1.0


def checkpoint_iterations(
    key: str, values: Any, *, example: str = "[3040, 6080]", allow_empty: bool = True
) -> list[int]:
    """The iteration counts to save a checkpoint after (the branch points of
    ``budgeted-branch``): ``values``, a list or tuple of whole numbers > 0 (NumPy's too), as
    plain ints, sorted, without repeats.

    Args:
        key (str): the config key or argument, for the message.
        values: the value given.
        example (str): an example of an allowed value, in the config's own syntax.
        allow_empty (bool): whether no counts at all is allowed.

    Raises:
        ValueError: one line naming ``key``, the value and what is allowed.

    Example:
        >>> checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", (6080, 3040, 6080))
        [3040, 6080]
        >>> checkpoint_iterations("at", [0])
        Traceback (most recent call last):
        ...
        ValueError: at=[0] is invalid; allowed: a list of iteration counts > 0, e.g. [3040, 6080]
    """
    ok = (
        isinstance(values, (list, tuple))
        and (allow_empty or len(values) > 0)
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                for v in values)
    )  # fmt: skip
    if not ok:
        raise ValueError(
            f"{key}={values!r} is invalid; allowed: a list of iteration counts > 0, e.g. {example}"
        )
    return sorted({int(v) for v in values})


def check_later_checkpoints_kept(
    source: str | os.PathLike[str],
    at: float,
    candidates: Iterable[str | os.PathLike[str]],
    *,
    folder_key: str,
    extra_globals: Mapping[str, Any] | None = None,
) -> None:
    """Refuse (one line) a resume from ``source``, ``at`` iterations (or epochs) in, into a
    folder holding intact checkpoints of later ones (``candidates`` named as the trainer names
    them, :func:`checkpoint_iteration`): training on from ``source`` would overwrite them.
    Damaged ones do not count (replacing them is what a resume from an earlier one is for).

    Args:
        source (str or PathLike): the checkpoint resumed from (never counted itself).
        at (float): its iteration (or epoch), in the unit of the names' numbers.
        candidates (Iterable): the checkpoints in the folder the resumed run writes to.
        folder_key (str): that folder's option or config key, for the message.
        extra_globals (Mapping[str, Any], optional): as for :func:`load_checkpoint`.

    Raises:
        ValueError: one line naming the checkpoints that would be overwritten and the ways on.
    """
    source = Path(source)
    later = sorted(
        (Path(p) for p in candidates if checkpoint_iteration(p) > at),
        key=checkpoint_iteration,
    )
    later = [p for p in later if not (source.exists() and p.exists() and p.samefile(source))]
    for path in later:
        try:
            load_checkpoint(path, extra_globals=extra_globals)
        except DamagedCheckpointError:
            continue
        except UnsafeCheckpointError:
            pass  # not ours to replace either
        names = ", ".join(p.name for p in later[:3]) + (", ..." if len(later) > 3 else "")
        raise ValueError(
            f"--resume-from {source.name} would overwrite later checkpoints in "
            f"{path.parent} ({names}) as training goes on; allowed: resume into another "
            f"{folder_key} (with --resume-from {source}), or move those checkpoints away first"
        )


def newest_intact_checkpoint(
    folder: str | os.PathLike[str],
    pattern: str = "*.pth",
    *,
    exclude: Iterable[str | os.PathLike[str]] = (),
    key: Callable[[Path], Any] | None = None,
    extra_globals: Mapping[str, Any] | None = None,
) -> Path | None:
    """The newest checkpoint in ``folder`` that :func:`load_checkpoint` reads (intact and safe).

    Candidates are the files matching ``pattern`` (temporary files of :func:`atomic_write`
    start with a dot and never match), newest first by ``key`` (default: the iteration in the
    name, :func:`checkpoint_iteration`, then the modification time); each is loaded until one
    loads.

    Args:
        folder (str or PathLike): a run folder.
        pattern (str): a glob pattern. Defaults to ``"*.pth"``.
        exclude (Iterable[str | os.PathLike[str]]): files not to offer (e.g. the damaged one).
        key (callable, optional): ``Path -> sort key``, larger is newer.
        extra_globals (Mapping[str, Any], optional): as for :func:`load_checkpoint`.

    Returns:
        Path or None: the newest intact checkpoint, or None when there is none.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    # realpath, not Path.resolve: a symbolic link loop among them must not raise
    skip = {os.path.realpath(p) for p in exclude}
    files = [p for p in folder.glob(pattern) if p.is_file() and os.path.realpath(p) not in skip]
    order = key or (lambda p: (checkpoint_iteration(p), p.stat().st_mtime_ns))
    for candidate in sorted(files, key=order, reverse=True):
        try:
            load_checkpoint(candidate, extra_globals=extra_globals)
        except ValueError:
            continue
        return candidate
    return None


# --- writing ----------------------------------------------------------------------


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on success flush, fsync and rename it
    to ``path`` (atomic on POSIX); on an exception remove it and leave ``path`` as it was.

    The temporary file is ``.<name>.tmp-<random>`` in the same folder (the same file system, so
    the rename is atomic; the leading dot keeps it out of ``*.pth`` globs). Its permissions
    follow the umask, as a plain ``open`` would.

    Args:
        path (str or PathLike): the file to write.
        mode (str): ``"wb"`` (default) or ``"w"`` (text, UTF-8).

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
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


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
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    Detectron2 checkpoint, which ``MODEL.WEIGHTS`` loads (the other parameters keep their random
    init, and it says which); ``{"state_dict": {name: tensor}}`` from an MMEngine one, which
    ``init_cfg=dict(type="Pretrained", checkpoint=dst, prefix=prefix)`` loads. It is how the toy
    evidence grid starts every run from one toy-pretrained backbone, as the paper's runs start
    from ImageNet weights (tools/evidence.sh). ``src`` is loaded with :func:`load_checkpoint`
    (untrusted); its weights are under ``"model"`` (Detectron2) or ``"state_dict"`` (MMEngine),
    or are the file itself.

    Args:
        src (str or PathLike): the checkpoint to take weights from.
        dst (str or PathLike): the file to write; an existing file is refused, never replaced.
        prefix (str): the names to keep, e.g. ``"backbone.bottom_up."`` (Detectron2's ResNet) or
            ``"backbone."`` (an MMSegmentation model's backbone).
        extra_globals (Mapping[str, Any], optional): as :func:`load_checkpoint`'s.

    Returns:
        int: the number of tensors written.

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
        raise ValueError(f"{_short(dst)} already exists; remove it or choose another file")
    checkpoint = load_checkpoint(src, extra_globals=extra_globals)
    weights, key = checkpoint, "model"
    if isinstance(checkpoint, Mapping):
        key = next((k for k in ("model", "state_dict") if k in checkpoint), "model")
        weights = checkpoint.get(key, checkpoint)
    if not isinstance(weights, Mapping):
        raise ValueError(f"checkpoint {_short(src)} holds no weights (a dict of tensors)")
    kept = {name: value for name, value in weights.items() if str(name).startswith(prefix)}
    if not kept:
        tops = sorted({str(name).split(".")[0] + "." for name in weights})
        raise ValueError(
            f"prefix {prefix!r} names no weight in {_short(src)}; its names start with: "
            + ", ".join(tops[:10])
        )
    atomic_save({key: kept}, dst)
    return len(kept)

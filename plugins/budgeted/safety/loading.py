"""Untrusted checkpoint files, loaded without letting them run code.

Every file is untrusted: unpickling runs whatever callable the file names, so nothing is unpickled
with a free hand. :func:`load_checkpoint` reads the format from the file, not its name:

- a torch checkpoint (a zip archive, as ``torch.save`` writes; or torch's legacy format) goes
  through ``torch.load(weights_only=True)`` with :data:`TORCH_ALLOWED` added for that call
  only (the globals are checked first, so a refusal names them);
- a plain pickle (Detectron2's model-zoo ``.pkl``: a dict of numpy arrays, perhaps under
  ``"model"``, with ``"__author__"`` and ``"matching_heuristics"``) goes through
  :class:`RestrictedUnpickler`, which resolves only :data:`PICKLE_ALLOWED`.

Anything else is refused with an :class:`UnsafeCheckpointError` naming the file and the global;
a truncated or unreadable file raises a :class:`DamagedCheckpointError` naming the file. Both
are ``ValueError`` s with a one-line message. Each adapter may allow a few globals of its own
(``extra_globals``). Framework-free: torch and numpy are imported only when a file needs them.

>>> import os, pickle, tempfile
>>> class RunsCode:
...     def __reduce__(self):
...         return os.system, ("echo pwned",)
>>> path = tempfile.mkdtemp() + "/weights.pkl"
>>> with open(path, "wb") as f:
...     pickle.dump({"model": RunsCode()}, f)
>>> load_checkpoint(path)
Traceback (most recent call last):
budgeted.errors.UnsafeCheckpointError: refusing to load '...weights.pkl': it names the global \
posix.system, outside the allow-list (...); loading it could run code from the file, so nothing \
of it was loaded (use only checkpoints you trust, and never weights_only=False)
"""

from __future__ import annotations

import _compat_pickle
import os
import pickle
import re
import struct
from collections.abc import Iterable, Mapping
from typing import IO, Any

from ..errors import DamagedCheckpointError, UnsafeCheckpointError

__all__ = [
    "NUMPY_GLOBALS", "PICKLE_ALLOWED", "TORCH_ALLOWED", "DamagedCheckpointError",
    "RestrictedUnpickler", "UnsafeCheckpointError", "is_zip_checkpoint", "load_checkpoint",
    "pickle_globals"
]  # fmt: skip


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
    """A ``pickle.Unpickler`` that resolves only :data:`PICKLE_ALLOWED` and ``allowed``
    (``"module.name" -> object``); ``path`` names the file in messages.

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


def is_zip_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a zip archive (``torch.save``'s format since torch 1.6)."""
    with open(path, "rb") as f:
        return f.read(4) == _ZIP_MAGIC


def pickle_globals(path: str | os.PathLike[str]) -> set[str]:
    """Every ``module.name`` global the pickle of ``torch.save``'s zip file ``path`` names, read
    with ``pickletools`` (nothing runs). Not torch's ``get_unsafe_globals_in_checkpoint``: that
    leaves out what ``torch.serialization.add_safe_globals`` allowed in this process, which is no
    answer to what the file holds (whose checkpoint it is, say).

    Raises:
        OSError, zipfile.BadZipFile, StopIteration: the file is no readable torch zip file.
    """
    import pickletools
    import zipfile

    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "data.pkl")
        data = archive.read(name)
    found: set[str] = set()
    strings: list[str] = []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":  # protocol 2, torch.save's default: "module name"
            found.add(str(arg).replace(" ", "."))
        elif isinstance(arg, str) and "UNICODE" in op.name:
            strings.append(arg)
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.add(f"{strings[-2]}.{strings[-1]}")
    return found


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
    # LookupError: IndexError, KeyError, and an unknown error handler named to _codecs.encode
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, LookupError,
            MemoryError, OverflowError) as err:  # fmt: skip
        raise _damaged(path, err) from None


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    map_location: Any = "cpu",
    extra_globals: Mapping[str, Any] | None = None,
) -> Any:
    """Load an untrusted checkpoint file without letting it run code: a zip archive or torch's
    legacy format through ``torch.load(weights_only=True)``, any other file through
    :class:`RestrictedUnpickler`. ``extra_globals`` (``"module.name" -> object``) allows more.

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

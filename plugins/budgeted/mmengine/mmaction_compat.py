"""Make ``import mmaction.models`` work on mmaction2 1.2.0 from PyPI (a config imports this).

The 1.2.0 wheel's ``mmaction/models/localizers/__init__.py`` runs ``from .drn.drn import DRN``
without shipping that folder. Importing this module runs :func:`install`: only where that import
cannot be found, it puts stand-in modules in ``sys.modules`` and a stand-in ``DRN`` in
MMAction2's ``MODELS`` (building it raises one line saying why). In a config::

    custom_imports = dict(
        imports=["budgeted.mmengine", "budgeted.mmengine.mmaction_compat"],
        allow_failed_imports=False,
    )
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec, all_suffixes
from pathlib import Path
from types import ModuleType

__all__ = ["DRN_MODULES", "MISSING_DRN", "DRNUnavailable", "install", "needs_stand_in"]

DRN_MODULES = ("mmaction.models.localizers.drn", "mmaction.models.localizers.drn.drn")
"""The modules ``mmaction/models/localizers/__init__.py`` imports that 1.2.0 does not ship."""
MISSING_DRN = (
    "DRN is not available: the installed mmaction2 lacks mmaction/models/localizers/drn (its "
    "PyPI 1.2.0 wheel does not ship it; budgeted.mmengine.mmaction_compat stands in for it so "
    "that the other models import); to train DRN, install mmaction2 from source"
)
"""What building the stand-in ``DRN`` raises."""


class DRNUnavailable:
    """The stand-in ``DRN``: building it raises :data:`MISSING_DRN` (one line).

    Example:
        >>> DRNUnavailable()
        Traceback (most recent call last):
        ...
        ModuleNotFoundError: DRN is not available: ...
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError(MISSING_DRN)


def needs_stand_in(package_dirs: Sequence[str | Path] | None = None) -> bool:
    """Whether ``mmaction.models`` cannot import without the stand-in: ``localizers/__init__.py``
    imports ``drn.drn`` and the import system finds no such module under the package.

    Example:
        >>> import tempfile
        >>> needs_stand_in([tempfile.mkdtemp()])  # no localizers/__init__.py: nothing to do
        False
    """
    if package_dirs is None:
        spec = importlib.util.find_spec("mmaction")
        package_dirs = list(spec.submodule_search_locations or []) if spec else []
    for base in package_dirs:
        localizers = Path(base) / "models" / "localizers"
        init = localizers / "__init__.py"
        if not init.is_file() or "drn.drn" not in init.read_text(errors="replace"):
            continue
        if not _finds_module(localizers / "drn", "drn"):
            return True
    return False


def _finds_module(folder: Path, name: str) -> bool:
    """Whether the import system finds module ``name`` in package folder ``folder`` (a regular
    or namespace package, as a folder of the source tree without ``__init__.py`` is)."""
    if not folder.is_dir():
        return False
    return (folder / name).is_dir() or any(
        (folder / f"{name}{suffix}").is_file() for suffix in all_suffixes()
    )


def _stand_in(name: str, is_package: bool) -> ModuleType:
    module = ModuleType(name, f"Stand-in for {name}: {MISSING_DRN}.")
    module.__spec__ = ModuleSpec(name, None, is_package=is_package)
    module.__budgeted_stand_in__ = True
    if is_package:
        module.__path__ = []  # nothing below it imports (drn_utils, ...)
    return module


def install() -> bool:
    """Register the stand-in modules where :func:`needs_stand_in`; idempotent.

    Example:
        >>> import mmaction.models  # after install(), on mmaction2 1.2.0 from PyPI too
    """
    present = sys.modules.get(DRN_MODULES[1])
    if present is not None:
        return bool(getattr(present, "__budgeted_stand_in__", False))
    if "mmaction.models" in sys.modules or not needs_stand_in():
        return False
    from mmaction.registry import MODELS

    package, module = _stand_in(DRN_MODULES[0], True), _stand_in(DRN_MODULES[1], False)
    module.DRN = DRNUnavailable
    package.drn = module
    sys.modules[DRN_MODULES[0]] = package
    sys.modules[DRN_MODULES[1]] = module
    if "DRN" not in MODELS.module_dict:  # (MODELS.get would import mmaction.models)
        MODELS.register_module(name="DRN", module=DRNUnavailable)
    return True


install()

"""The package reaches into the frameworks only through their public names, except in its
``compat.py`` modules: one per adapter, each entry with the framework version it was written for
and a test of its own that fails when the framework changes (``tests/**/test_*compat.py``).

Three scans, each listing what it finds so that a failure names the file and line:

- an import of a private framework name (``from detectron2.engine.launch import _find_free_port``,
  ``import torch._C``);
- an attribute starting with ``_`` that the package never defines itself, read on any object
  (``trainer._hooks``, ``comm._LOCAL_PROCESS_GROUP``), also as a string given to
  ``getattr``/``hasattr``/``setattr``/``delattr``;
- in a class of the package that subclasses a framework class, a private name of that framework
  class used on ``self`` (``self._last_lr`` in an ``LRScheduler``, an override of
  ``CheckpointHook._save_checkpoint_with_step``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "plugins" / "budgeted"
FRAMEWORKS = (
    "detectron2", "fvcore", "iopath", "lightning", "mmaction", "mmcv", "mmdet", "mmengine",
    "mmpretrain", "mmseg", "omegaconf", "optuna", "schedulefree", "submitit", "torch",
    "transformers",
)  # fmt: skip
ACCESSORS = {"getattr", "hasattr", "setattr", "delattr"}
EXTENSION_POINTS = {
    "_load_file": "fvcore's Checkpointer: 'Can be overwritten by subclasses to support different "
    "formats' (its docstring)",
    "_get_value": "MMEngine's _ParamScheduler: the abstract method every scheduler implements",
}
"""Private names the frameworks document as the route for subclasses: overriding and calling
them is the public route."""


def private(name: str) -> bool:
    """``_name``, not ``__dunder__``."""
    return name.startswith("_") and not name.startswith("__")


def trees() -> dict[Path, ast.Module]:
    """Every module of the package, parsed."""
    return {path: ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def defined_names(parsed: dict[Path, ast.Module]) -> set[str]:
    """The names the package defines anywhere: functions, classes, assigned names, ``self.x``
    it assigns in classes of its own, arguments and non-private import aliases."""
    names: set[str] = set()
    for tree in parsed.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.alias) and not private(node.name.split(".")[-1]):
                names.add(node.asname or node.name.split(".")[-1])
    return names


def is_compat(path: Path) -> bool:
    return path.name == "compat.py"


def private_imports(parsed: dict[Path, ast.Module]) -> Iterator[str]:
    for path, tree in parsed.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                parts = node.module.split(".")
                if parts[0] in FRAMEWORKS:
                    for alias in node.names:
                        if private(alias.name) or any(private(p) for p in parts):
                            yield f"{where(path, node)}: from {node.module} import {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in FRAMEWORKS and any(private(p) for p in parts):
                        yield f"{where(path, node)}: import {alias.name}"


def accessed_name(node: ast.AST) -> str | None:
    """The attribute name ``node`` reads: ``x.name``, or ``getattr(x, "name", ...)`` and its
    kin with a constant name; None for any other node."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1:
        name = node.args[1]
        if node.func.id in ACCESSORS and isinstance(name, ast.Constant):
            return name.value if isinstance(name.value, str) else None
    return None


def private_attributes(parsed: dict[Path, ast.Module]) -> Iterator[str]:
    own = defined_names(parsed)
    for path, tree in parsed.items():
        for node in ast.walk(tree):
            name = accessed_name(node)
            if name is not None and private(name) and name not in own:
                yield f"{where(path, node)}: {ast.unparse(node)}"


def framework_private_names(cls: type) -> set[str]:
    """The private names the framework classes among ``cls``'s bases define or use on ``self``."""
    names: set[str] = set()
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] not in FRAMEWORKS:
            continue
        names |= {n for n in vars(base) if private(n)}
        with contextlib.suppress(OSError, TypeError):
            names |= set(re.findall(r"self\.(_[A-Za-z]\w*)", inspect.getsource(base)))
    return names


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_uses_in_subclasses(parsed: dict[Path, ast.Module]) -> Iterator[str]:
    for path, tree in parsed.items():
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.bases]
        if not classes:
            continue
        try:
            module = importlib.import_module(module_name(path))
        except ImportError:  # a framework this machine lacks: its own tests say so
            continue
        for node in classes:
            cls = getattr(module, node.name, None)
            if not isinstance(cls, type):
                continue
            theirs = framework_private_names(cls)
            for sub in ast.walk(node):
                name = None
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = sub.name
                elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
                    name = sub.attr if sub.value.id in ("self", "cls") else None
                if name and private(name) and name in theirs and name not in EXTENSION_POINTS:
                    yield f"{where(path, sub)}: {node.name} uses {name} of its framework base"


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"


@pytest.mark.unit
def test_private_framework_names_are_imported_only_in_compat_modules() -> None:
    parsed = trees()
    found = [line for line in private_imports(parsed) if "compat.py" not in line.split(":")[0]]
    assert found == [], "\n".join(found)


@pytest.mark.unit
def test_private_framework_attributes_are_read_only_in_compat_modules() -> None:
    parsed = trees()
    found = [line for line in private_attributes(parsed) if "compat.py" not in line.split(":")[0]]
    assert found == [], "\n".join(found)


@pytest.mark.integration
def test_subclasses_of_framework_classes_use_no_private_name_of_their_base() -> None:
    parsed = {p: t for p, t in trees().items() if not is_compat(p)}
    found = list(private_uses_in_subclasses(parsed))
    assert found == [], "\n".join(found)


@pytest.mark.unit
def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scans are not vacuous: each finds its example."""
    source = (
        "from detectron2.engine.launch import _find_free_port\n"
        "import torch._C\n"
        "def f(trainer):\n"
        "    return trainer._hooks, getattr(trainer, '_checkpointer', None)\n"
    )
    parsed = {PACKAGE / "example.py": ast.parse(source)}
    assert [line.split(": ", 1)[1] for line in private_imports(parsed)] == [
        "from detectron2.engine.launch import _find_free_port",
        "import torch._C",
    ]
    assert [line.split(": ", 1)[1] for line in private_attributes(parsed)] == [
        "trainer._hooks",
        "getattr(trainer, '_checkpointer', None)",
    ]
    import torch

    class Scheduler(torch.optim.lr_scheduler.LRScheduler):
        pass

    assert "_last_lr" in framework_private_names(Scheduler)

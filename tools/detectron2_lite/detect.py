"""Print which Detectron2 this interpreter has: ``full``, ``lite``, ``broken`` or ``missing``.

``full``: a build with compiled ops (kept by tools/setup_env.sh); ``lite``: ours, whose
``detectron2._C`` is the stand-in; ``broken``: importable without any ``detectron2._C``.
"""

from __future__ import annotations

import importlib
import importlib.util


def detectron2_kind() -> str:
    if importlib.util.find_spec("detectron2") is None:
        return "missing"
    importlib.import_module("torch")  # a compiled _C links against torch
    try:
        compiled = importlib.import_module("detectron2._C")
    except ImportError:
        return "broken"
    return "lite" if getattr(compiled, "__budgeted_lite__", False) else "full"


if __name__ == "__main__":
    print(detectron2_kind())

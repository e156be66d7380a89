"""Print which Detectron2 this interpreter has: ``full``, ``lite``, ``stale-lite``, ``broken`` or
``missing``.

``full``: a build with compiled ops (kept by tools/setup_env.sh); ``lite``: ours, whose
``detectron2._C`` is the stand-in; ``stale-lite``: an older lite build than
tools/detectron2_lite makes now (rebuilt by tools/setup_env.sh); ``broken``: importable without
any ``detectron2._C``.
"""

from __future__ import annotations

import importlib
import importlib.util

LITE_VERSION = 2
"""The version of the lite build tools/detectron2_lite makes (``__budgeted_lite__`` of its
``_C.py``): 2 since the fast COCO evaluator falls back to pycocotools."""


def detectron2_kind() -> str:
    if importlib.util.find_spec("detectron2") is None:
        return "missing"
    importlib.import_module("torch")  # a compiled _C links against torch
    try:
        compiled = importlib.import_module("detectron2._C")
    except ImportError:
        return "broken"
    version = getattr(compiled, "__budgeted_lite__", False)
    if not version:
        return "full"
    return "lite" if version >= LITE_VERSION else "stale-lite"


if __name__ == "__main__":
    print(detectron2_kind())

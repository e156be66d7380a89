"""Stand-in for ``detectron2._C`` in a "lite" Detectron2 build (no compiled ops).

Detectron2 v0.6 imports ``detectron2._C`` at import time in a few modules, but Mask R-CNN
training and pycocotools-based evaluation never call it. Every compiled op is reported by
name when used, with what to install instead. ``collect_env`` gets the three helpers it needs.
The fast COCO evaluator (``COCOeval_opt``, the default of ``COCOEvaluator``) falls back to
pycocotools' ``COCOeval`` in this build (tools/detectron2_lite/build_wheel.py).
"""

from __future__ import annotations

__budgeted_lite__ = 2
"""The lite build's version (true for every lite build): 2 since ``COCOeval_opt`` falls back to
pycocotools; tools/detectron2_lite/detect.py reports an older one as ``stale-lite``."""


def get_compiler_version() -> str:
    return "none (lite build without compiled ops)"


def get_cuda_version() -> str:
    return "none (lite build without compiled ops)"


def has_cuda() -> bool:
    return False


class MissingCompiledOp(AttributeError):
    """An op of Detectron2's C++/CUDA extension that the lite build does not have."""


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise MissingCompiledOp(
        f"detectron2._C.{name} is a compiled op, and this Detectron2 is a lite build without "
        "compiled ops (rotated boxes, deformable convolution and the fast COCO evaluator need "
        "them); install a full Detectron2 build to use it"
    )

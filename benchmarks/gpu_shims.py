"""Compatibility shims for running Detectron2 0.6 and the OpenMMLab codebases outside our pins.

Used by ``benchmarks/gpu_real_size.py`` on the GPU machine, whose image has numpy 2.x, Pillow
11+ and no compiled mmcv (only ``mmcv-lite``, the pure-Python mmcv 2.1.0, can travel there as a
wheel). Nothing here edits a file of Detectron2, mmcv or mmseg: each shim adds a missing name at
run time, and only when it is missing, so under the project's own pins (numpy 1.23.5, Pillow
9.5.0, mmcv 2.1.0 with ops) every function below is a no-op.

- :func:`apply_numpy_pillow_shims` (call before importing detectron2): the numpy aliases removed
  in numpy 1.24 (``np.int``, ``np.float``, ...) that Detectron2 0.6 still names, and the Pillow
  constants removed in Pillow 10 (``Image.LINEAR`` is a default argument evaluated when
  ``detectron2.data.transforms`` is imported).
- :func:`apply_mmcv_ops_standin` (call before importing mmseg): mmseg imports ``mmcv.ops`` at
  import time in a few modules although PSPNet never calls an op. When the real ``mmcv.ops``
  cannot be imported, a stand-in module is registered whose every attribute is a placeholder
  that raises :class:`MissingMmcvOp` when used.
- :func:`apply_multimodal_off` (call before importing mmpretrain or mmaction models): their
  multi-modal models do not import under transformers 5.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings

# The numpy < 1.24 aliases of builtins that Detectron2 0.6 names (removed in numpy 1.24; np.bool
# came back in numpy 2): np.bool in structures/masks.py (polygon rasterization, used by Mask
# R-CNN's mask targets), np.int / np.float in data/build.py and evaluation/, np.str in
# data/datasets/pascal_voc.py.
_NUMPY_ALIASES = {"int": int, "float": float, "bool": bool, "str": str}

# Pillow < 10 constants: missing name -> the name that replaced it. Detectron2 0.6's
# data/transforms/transform.py evaluates Image.LINEAR as a default argument at import time.
_PILLOW_ALIASES = {"LINEAR": "BILINEAR"}


def _has(module: types.ModuleType, name: str) -> bool:
    with warnings.catch_warnings():  # numpy 2 warns about some removed aliases it probes
        warnings.simplefilter("ignore")
        try:
            getattr(module, name)
        except AttributeError:
            return False
    return True


def apply_numpy_pillow_shims() -> list[str]:
    """Add the numpy aliases and Pillow constants that are missing; return what was added."""
    import numpy as np
    from PIL import Image

    applied = []
    for name, value in _NUMPY_ALIASES.items():
        if not _has(np, name):
            setattr(np, name, value)
            applied.append(f"numpy {np.__version__}: np.{name} = {value.__name__}")
    for name, replacement in _PILLOW_ALIASES.items():
        if not _has(Image, name) and _has(Image, replacement):
            setattr(Image, name, getattr(Image, replacement))
            applied.append(f"Pillow: Image.{name} = Image.{replacement}")
    return applied


class MissingMmcvOp(RuntimeError):
    """An op of mmcv's compiled extension, used while only the ``mmcv.ops`` stand-in exists."""


def _placeholder(name: str) -> type:
    message = (
        f"mmcv.ops.{name} is a placeholder of benchmarks/gpu_shims.py: the real mmcv.ops (mmcv "
        "with compiled ops) is not installed here; install a full mmcv 2.1.0 to use it"
    )

    def refuse(*args: object, **kwargs: object) -> None:
        raise MissingMmcvOp(message)

    # A class, so that a module that subclasses an op at import time still imports; creating
    # an instance (or calling a function op) raises.
    return type(name, (), {"__new__": refuse, "__doc__": message, "__module__": "mmcv.ops"})


class _MmcvOpsStandIn(types.ModuleType):
    """``mmcv.ops`` without ops: any attribute is a placeholder that raises when used."""

    __budgeted_standin__ = True

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(name)
        setattr(self, name, value)
        return value


def apply_mmcv_ops_standin() -> list[str]:
    """Register the ``mmcv.ops`` stand-in if the real one cannot be imported; return a note."""
    try:
        importlib.import_module("mmcv.ops")
    except (ImportError, OSError) as err:
        reason = f"{type(err).__name__}: {err}"
    else:
        return []
    for name in [m for m in sys.modules if m == "mmcv.ops" or m.startswith("mmcv.ops.")]:
        del sys.modules[name]
    import mmcv

    standin = _MmcvOpsStandIn("mmcv.ops", _MmcvOpsStandIn.__doc__)
    sys.modules["mmcv.ops"] = standin
    mmcv.ops = standin
    return [
        f"mmcv {mmcv.__version__}: mmcv.ops is a stand-in without compiled ops (the real one "
        f"failed to import: {reason}); any op used raises MissingMmcvOp"
    ]


def standin_in_use() -> bool:
    """Whether ``mmcv.ops`` is the stand-in of this module."""
    return bool(getattr(sys.modules.get("mmcv.ops"), "__budgeted_standin__", False))


def apply_multimodal_off() -> list[str]:
    """Skip mmpretrain's and mmaction2's multi-modal models where transformers breaks them.

    mmpretrain 1.2.0 and mmaction2 1.2.0 import their multi-modal models (BLIP, VindLU, ...) when
    ``transformers>=4.28`` is installed, and those import ``apply_chunking_to_forward`` and other
    names from ``transformers.modeling_utils`` that transformers 5 removed: ``import
    mmpretrain.models`` raises ``TypeError: NoneType takes no arguments`` and ``import
    mmaction.models`` an ``ImportError``. Where a name is missing, this sets each codebase's own
    switch for an install without transformers, ``<codebase>.utils.dependency.WITH_MULTIMODAL =
    False`` (placeholders are registered instead). Call before importing either's models.
    """
    missing = []
    for module, names in _MULTIMODAL_TRANSFORMERS_NAMES.items():
        try:
            found = importlib.import_module(module)
        except Exception as err:  # transformers raises more than ImportError on a broken import
            missing.append(f"{module} ({type(err).__name__})")
            continue
        missing += [f"{module}.{name}" for name in names if not _has(found, name)]
    if not missing:
        return []
    notes = []
    for codebase in ("mmpretrain", "mmaction"):
        try:
            dependency = importlib.import_module(f"{codebase}.utils.dependency")
        except ImportError:
            continue
        if dependency.WITH_MULTIMODAL:
            dependency.WITH_MULTIMODAL = False
            notes.append(f"{codebase}.utils.dependency.WITH_MULTIMODAL = False")
    if not notes:
        return []
    version = importlib.import_module("transformers").__version__
    return [
        f"transformers {version}: no {', '.join(missing)}, which the multi-modal models of "
        f"mmpretrain 1.2.0 and mmaction2 1.2.0 import; {'; '.join(notes)}"
    ]


# What mmpretrain 1.2.0's models/multimodal/blip/language_model.py imports from transformers
# (mmaction2 1.2.0's models/multimodal/vindlu/modeling_bert.py imports the same names)
_MULTIMODAL_TRANSFORMERS_NAMES = {
    "transformers.activations": ("ACT2FN",),
    "transformers.modeling_outputs": (
        "BaseModelOutputWithPastAndCrossAttentions",
        "BaseModelOutputWithPoolingAndCrossAttentions",
        "CausalLMOutputWithCrossAttentions",
    ),
    "transformers.modeling_utils": (
        "PreTrainedModel",
        "apply_chunking_to_forward",
        "find_pruneable_heads_and_indices",
        "prune_linear_layer",
    ),
    "transformers.models.bert.configuration_bert": ("BertConfig",),
}

"""Opt in, from a config, to loading MMEngine checkpoints under ``torch.load(weights_only=True)``.

Importing this module runs :func:`budgeted.mmengine.checkpoint.allow_mmengine_checkpoints`: it
allow-lists exactly the globals MMEngine's checkpoints carry (``HistoryBuffer``, its statistics
methods, numpy arrays and scalars), so that torch >= 2.6 resumes them; a checkpoint naming any
other global is still refused. ``import budgeted.mmengine`` alone changes nothing in torch.

In a config run by MMEngine's or MMSegmentation's own tools::

    custom_imports = dict(
        imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
        allow_failed_imports=False,
    )

Every config under ``configs/mmseg/`` lists it; ``tools/train_seg.py`` allow-lists by itself.
"""

from __future__ import annotations

from .checkpoint import allow_mmengine_checkpoints

allow_mmengine_checkpoints()

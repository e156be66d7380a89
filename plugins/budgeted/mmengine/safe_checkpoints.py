"""Opt in, from a config, to loading MMEngine checkpoints under ``torch.load(weights_only=True)``
(:func:`budgeted.mmengine.checkpoint.allow_mmengine_checkpoints`, run on import)::

    custom_imports = dict(
        imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
        allow_failed_imports=False,
    )
"""

from __future__ import annotations

from .checkpoint import allow_mmengine_checkpoints

allow_mmengine_checkpoints()

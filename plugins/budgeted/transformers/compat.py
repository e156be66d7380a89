"""The Hugging Face ``Trainer`` internals :mod:`budgeted.transformers` relies on (transformers
4.51.3 and 5.25.0; ``tests/hf_transformers/test_hf_compat.py`` checks each).

- the callbacks a trainer holds: ``trainer.callback_handler.callbacks`` (no public getter);
- ``trainer._created_lr_scheduler``: set by ``Trainer.create_scheduler`` when it built the
  scheduler, so that a second ``train()`` call builds it anew (with that call's step count);
- the checkpoint folder ``<output_dir>/checkpoint-<global_step>`` (``PREFIX_CHECKPOINT_DIR``);
- ``transformers.trainer.datasets``: the module ``transformers.trainer`` imported as the
  ``datasets`` library, which 4.51.3 and 5.25.0 import from any folder named ``datasets`` on
  ``sys.path`` (``is_datasets_available`` checks only that ``find_spec`` finds it), and its
  ``Trainer`` then fails with an ``AttributeError``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

TESTED_VERSIONS = ("4.51.3", "5.25.0")
"""4.51.3: the pinned one (requirements/constraints.txt); 5.25.0: when this module was written."""


def callbacks_of(trainer: Any) -> list[Any]:
    """The callbacks ``trainer`` calls, in order."""
    return list(trainer.callback_handler.callbacks)


def mark_scheduler_created(trainer: Any) -> None:
    """Tell ``trainer`` that it built its scheduler (a later ``train()`` builds it again)."""
    trainer._created_lr_scheduler = True


def checkpoint_folder(output_dir: str, global_step: int) -> str:
    """The folder ``Trainer`` saves the checkpoint of ``global_step`` steps to."""
    return os.path.join(output_dir, f"{PREFIX_CHECKPOINT_DIR}-{global_step}")


def shadowing_datasets_folder() -> str | None:
    """The folder ``transformers.trainer`` imported as the ``datasets`` library, where that is
    a plain folder (a namespace package: no ``__file__``), not the library; else None."""
    module = getattr(sys.modules.get("transformers.trainer"), "datasets", None)
    if module is None or getattr(module, "__file__", None) is not None:
        return None
    return next(iter(getattr(module, "__path__", [])), "?")

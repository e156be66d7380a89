"""Helpers of the tests of ``budgeted.transformers``: a tiny ResNet built from its config on the
UCI digits (examples/transformers_digits.py's data), a Trainer over it, and a recorder of the
LR every step trained at.

The folder is ``tests/hf_transformers`` (no ``__init__.py``, as every tests/ folder), not
``tests/transformers``: a folder of that name on ``sys.path`` could stand in for the library."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

import torch
from transformers import (
    PrinterCallback,
    ResNetConfig,
    ResNetForImageClassification,
    TrainerCallback,
    TrainingArguments,
)

from budgeted.toys.image_sets import real_set
from budgeted.transformers import BudgetTrainer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PATH = ROOT / "examples" / "transformers_digits.py"
_spec = importlib.util.spec_from_file_location("transformers_digits", EXAMPLE_PATH)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

BASE_LR = 0.003


def digits() -> Any:
    """The 1,400 training images as the Trainer's dataset."""
    split = real_set("digits").load()
    return example.Digits(split.train_images, split.train_labels)


class LRs(TrainerCallback):
    """``(step, lr)`` of every logged step (``logging_steps=1``: every step), 0-based."""

    def __init__(self) -> None:
        self.trace: list[tuple[int, float]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "learning_rate" in logs and "loss" in logs:
            self.trace.append((state.global_step - 1, logs["learning_rate"]))


def model_of() -> Any:
    """A 3k-parameter ResNet built from its config, seed 0."""
    torch.manual_seed(0)
    config = ResNetConfig(num_channels=1, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1],
                          num_labels=10)  # fmt: skip
    return ResNetForImageClassification(config)


def trainer_of(
    out: Path, data: Any, callbacks: list, *, cls: type = BudgetTrainer, max_steps: int = 30,
    model: Any = None, optimizers: tuple = (None, None), **overrides: Any,
) -> Any:  # fmt: skip
    """A ``cls`` over :func:`model_of` (or ``model``), checkpoints in ``out``, quiet."""
    settings = dict(
        output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=32,
        learning_rate=BASE_LR, logging_steps=1, report_to="none", disable_tqdm=True,
        use_cpu=True, save_strategy="no", dataloader_num_workers=0,
    )  # fmt: skip
    args = TrainingArguments(**{**settings, **overrides})
    trainer = cls(model=model or model_of(), args=args, train_dataset=data, callbacks=callbacks,
                  optimizers=optimizers)  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    return trainer


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }

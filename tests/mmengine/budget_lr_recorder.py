"""A test hook: each rank writes the learning rate of every training iteration to a JSON file."""

from __future__ import annotations

import json
from pathlib import Path

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module(force=True)
class RecordLRHook(Hook):
    """Write ``{iteration: lr}`` (the LR each iteration trained with) to ``lr_rank<r>.json``."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = Path(out_dir)
        self.lrs: dict[int, float] = {}

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        self.lrs[runner.iter] = runner.optim_wrapper.get_lr()["lr"][0]

    def after_train(self, runner) -> None:
        path = self.out_dir / f"lr_rank{runner.rank}.json"
        path.write_text(json.dumps(self.lrs))

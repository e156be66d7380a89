"""A test hook: what a schedule-free run looked like at each iteration, validation and the end."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


def _mode(runner) -> bool:
    return bool(runner.optim_wrapper.optimizer.param_groups[0].get("train_mode", True))


@HOOKS.register_module(force=True)
class RecordScheduleFreeHook(Hook):
    """Write ``record.json``: the optimizer's mode and scheduled LR at each training iteration
    (after ScheduleFreeHook's ``train()``), its mode at each validation, the training set's
    length and the optimizer's class; ``y_last.pth``, the weights after the last iteration's
    step (before its checkpoint), and ``final.pth``, the weights the run ends with."""

    priority = "LOW"  # after ScheduleFreeHook (ABOVE_NORMAL)

    def __init__(self, out_dir: str) -> None:
        self.out_dir = Path(out_dir)
        self.record: dict = {"train_mode": {}, "scheduled_lr": {}, "val": {}}

    def before_train(self, runner) -> None:
        optimizer = runner.optim_wrapper.optimizer
        self.record["optimizer"] = type(optimizer).__module__ + "." + type(optimizer).__name__
        self.record["defaults"] = {k: optimizer.defaults[k] for k in ("lr", "weight_decay")}
        self.record["train_size"] = len(runner.train_dataloader.dataset)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        group = runner.optim_wrapper.optimizer.param_groups[0]
        self.record["train_mode"][runner.iter] = _mode(runner)
        self.record["scheduled_lr"][runner.iter] = group.get("scheduled_lr", group["lr"])
        if runner.iter + 1 == runner.max_iters:  # the training point y, before the last save
            self.out_dir.mkdir(parents=True, exist_ok=True)
            torch.save(runner.model.state_dict(), self.out_dir / "y_last.pth")

    def before_val_epoch(self, runner) -> None:
        self.record["val"][runner.iter] = _mode(runner)

    def after_run(self, runner) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "record.json").write_text(json.dumps(self.record))
        torch.save(runner.model.state_dict(), self.out_dir / "final.pth")

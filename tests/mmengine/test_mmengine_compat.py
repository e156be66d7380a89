"""Each entry of ``budgeted.mmengine.compat`` against the installed MMEngine: the private name it
uses exists on the real class and does what the entry relies on (written for MMEngine 0.10.7). A
failure here means MMEngine changed it: update the entry, not this test."""

from __future__ import annotations

import inspect
import logging

import pytest
import torch
from mmengine.config import DictAction
from mmengine.hooks import CheckpointHook
from mmengine.model import BaseModel
from mmengine.optim.scheduler import ConstantLR, LinearLR
from mmengine.runner import IterBasedTrainLoop, Runner
from torch import nn
from torch.utils.data import Dataset

from budgeted.mmengine import compat


def optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)


@pytest.mark.unit
def test_param_scheduler_is_the_base_of_mmengines_schedulers_with_get_value() -> None:
    from mmengine.optim import _ParamScheduler

    assert compat.ParamScheduler is _ParamScheduler
    assert issubclass(LinearLR, compat.ParamScheduler)
    assert "_get_value" in vars(compat.ParamScheduler)  # the method a subclass implements


@pytest.mark.unit
def test_global_step_counts_every_step_and_is_saved_under_its_key() -> None:
    sched = LinearLR(optimizer(), start_factor=0.5, begin=2, end=4, by_epoch=False)
    assert compat.global_step(sched) == 0  # the step MMEngine takes at construction
    for _ in range(5):
        sched.step()  # outside [begin, end) too
    assert compat.global_step(sched) == 5
    assert sched.state_dict()[compat.GLOBAL_STEP] == 5


@pytest.mark.unit
def test_set_last_value_is_what_get_last_value_returns() -> None:
    sched = ConstantLR(optimizer(), factor=0.5, by_epoch=False)
    compat.set_last_value(sched, [0.25])
    assert sched.get_last_value() == [0.25]


@pytest.mark.unit
def test_dict_actions_parse_iterable_reads_values_as_cfg_options_does() -> None:
    assert isinstance(inspect.getattr_static(DictAction, "_parse_iterable"), staticmethod)
    assert compat.parse_option_value("[1,(2,3)]") == [1, (2, 3)]
    assert compat.parse_option_value("a") == "a"


class TinyNet(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)

    def forward(self, x, mode="tensor"):
        out = self.linear(x)
        return {"loss": out.pow(2).mean()} if mode == "loss" else out


class Ones(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict:
        return {"x": torch.ones(1)}


def runner(tmp_path, name: str, **kwargs) -> Runner:
    built = Runner(
        model=TinyNet(), work_dir=str(tmp_path / name), experiment_name=f"compat_{name}",
        train_dataloader=dict(dataset=Ones(), sampler=dict(type="DefaultSampler", shuffle=False),
                              batch_size=1, collate_fn=dict(type="default_collate")),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1)),
        train_cfg=dict(type="IterBasedTrainLoop", max_iters=8), default_scope="mmengine",
        **kwargs,
    )  # fmt: skip
    built.logger.setLevel(logging.ERROR)
    return built


@pytest.mark.integration
def test_built_train_loop_is_none_until_train_builds_it(tmp_path) -> None:
    unbuilt = runner(tmp_path, "loop")
    assert compat.built_train_loop(unbuilt) is None  # the config, still
    assert isinstance(unbuilt.train_loop, IterBasedTrainLoop)  # the public route builds it
    assert compat.built_train_loop(unbuilt) is unbuilt.train_loop


@pytest.mark.integration
def test_end_loop_at_makes_that_iteration_the_last_with_its_checkpoint(tmp_path) -> None:
    from mmengine.hooks import Hook

    class StopAtThree(Hook):
        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            if runner.iter + 1 == 3:
                compat.end_loop_at(runner.train_loop, 3)

    built = runner(
        tmp_path, "end", custom_hooks=[StopAtThree()],
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=100, by_epoch=False)),
    )  # fmt: skip
    built.train()
    assert built.iter == 3 and built.train_loop.max_iters == 3
    assert (tmp_path / "end" / "iter_3.pth").exists()  # the last checkpoint (save_last)


@pytest.mark.integration
def test_every_save_of_the_checkpoint_hook_goes_through_save_with_step(tmp_path) -> None:
    assert "_save_checkpoint_with_step" in vars(CheckpointHook)
    saved = []

    class Recorded(compat.CheckpointSaveHook):
        def save_with_step(self, runner, step, meta):
            saved.append(step)
            super().save_with_step(runner, step, meta)  # MMEngine's own save: compat.stock_save

    built = runner(
        tmp_path, "save",
        default_hooks=dict(checkpoint=Recorded(interval=3, by_epoch=False)),
    )  # fmt: skip
    built.train()
    assert saved == [3, 6, 8]  # by interval, and the last
    assert sorted(p.name for p in (tmp_path / "save").glob("*.pth")) == [
        "iter_3.pth", "iter_6.pth", "iter_8.pth",
    ]  # fmt: skip

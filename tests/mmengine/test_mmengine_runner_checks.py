"""What only the runner shows a budget scheduler, checked with MMEngine's real ``Runner`` on a tiny
model (the scheduler learns it through ``BudgetParamSchedulerHook``, as our tools and configs name
it, or at its first step from the runner's ``MessageHub`` under MMEngine's own hook; never the
call stack):
an ``end`` other than the train loop's ``max_iters``, the config's ``budget_on_resume``, another
scheduler of the same parameter in an overlapping range, a resume that gave the scheduler no state
(MMEngine pairs schedulers with the checkpoint's by position), and an epoch-based entry whose
length is not the loop's."""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import re
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn
from torch.utils.data import Dataset

import budgeted.mmengine
from budgeted.mmengine import BudgetConfigError
from budgeted.mmengine.checkpoint import allow_mmengine_checkpoints
from budgeted.schedules import BudgetMismatchError, BudgetSchedule


class TinyNet(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1)

    def forward(self, x, y=None, mode="tensor"):
        out = self.linear(x).squeeze(-1)
        return {"loss": ((out - y) ** 2).mean()} if mode == "loss" else out


class Pairs(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        return {"x": torch.tensor([float(i), 1.0]), "y": torch.tensor(float(i % 3))}


class RecordLR(Hook):
    priority = "VERY_HIGH"

    def __init__(self, lrs: dict[int, float], stop_at: int | None = None) -> None:
        self.lrs, self.stop_at = lrs, stop_at

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if runner.iter == self.stop_at:
            raise KeyboardInterrupt  # a crash after the checkpoint of iteration stop_at
        self.lrs[runner.iter] = runner.optim_wrapper.optimizer.param_groups[0]["lr"]


RUNS = itertools.count()
"""Numbers the runners of this module's tests."""


def train(
    work_dir: Path,
    schedulers,
    *,
    train_cfg=None,
    resume=False,
    stop_at=None,
    cfg=None,
    hooks=None,
) -> dict[int, float]:
    """Train the tiny model (12 iterations, checkpoints every 4); the LR of each iteration.
    ``cfg``: the top-level config keys the runner holds (``budget_on_resume``); ``hooks``: more
    ``default_hooks`` (a ``param_scheduler`` hook of the user's)."""
    lrs: dict[int, float] = {}
    runner = Runner(
        model=TinyNet(),
        work_dir=str(work_dir),
        # a name of its own: MMEngine keeps one visualizer / logger per name in a process, and
        # the default name (the time, to the second) would reuse a previous test's, whose folder
        # is gone
        experiment_name=f"runner_checks_{next(RUNS)}",
        train_dataloader=dict(
            dataset=Pairs(), sampler=dict(type="DefaultSampler", shuffle=False), batch_size=2,
            collate_fn=dict(type="default_collate"),
        ),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1, momentum=0.9)),
        param_scheduler=copy.deepcopy(schedulers),
        train_cfg=train_cfg or dict(type="IterBasedTrainLoop", max_iters=12),
        default_hooks={
            "checkpoint": dict(type="CheckpointHook", interval=4, by_epoch=False),
            "param_scheduler": dict(type="BudgetParamSchedulerHook"),  # as our tools write it
            **(hooks or {}),
        },
        custom_hooks=[RecordLR(lrs, stop_at)],
        resume=resume,
        default_scope="mmengine",
        cfg=cfg,
    )  # fmt: skip
    runner.logger.setLevel(logging.ERROR)
    with contextlib.suppress(KeyboardInterrupt):
        runner.train()
    return lrs


LINEAR = dict(type="BudgetLinearLR", warmup_iters=2, by_epoch=False)


@pytest.mark.integration
def test_an_end_other_than_the_train_loops_max_iters_is_refused_before_training(tmp_path):
    """The stock runner, a config with only ``custom_imports`` and our scheduler (MMEngine's own
    ``ParamSchedulerHook``): an ``end`` of 100 in a loop of 50 iterations is one line at the
    scheduler's first step, nothing saved; with ``BudgetParamSchedulerHook``, the same line
    before the first iteration."""
    lrs = {}
    stock = dict(param_scheduler=dict(type="ParamSchedulerHook"))
    with pytest.raises(BudgetConfigError) as err:
        lrs = train(
            tmp_path / "run",
            [{**LINEAR, "end": 100}],
            train_cfg=dict(type="IterBasedTrainLoop", max_iters=50),
            hooks=stock,
        )
    assert str(err.value) == (
        "BudgetLinearLR: end=100 differs from the train loop's max_iters=50: the budget would be "
        "cut short; remove end so that the runner fills it from train_cfg.max_iters, or set "
        "train_cfg.max_iters=100"
    )
    assert lrs == {} and not list((tmp_path / "run").glob("*.pth"))
    with pytest.raises(BudgetConfigError, match=r"^BudgetLinearLR: end=30 .* end before training"):
        train(tmp_path / "short", [{**LINEAR, "end": 30}], hooks=stock,
              train_cfg=dict(type="IterBasedTrainLoop", max_iters=50))  # fmt: skip
    with pytest.raises(BudgetConfigError) as ours:
        train(tmp_path / "ours", [{**LINEAR, "end": 100}],
              train_cfg=dict(type="IterBasedTrainLoop", max_iters=50))  # fmt: skip
    assert str(ours.value) == str(err.value)


@pytest.mark.integration
def test_a_by_epoch_the_config_never_wrote_is_named_as_mmengines_default(tmp_path):
    """Issue 40/5: an entry without ``by_epoch`` is read by MMEngine as ``by_epoch=True``; the
    line says that the default made it so and what to write. A ``by_epoch=True`` the config wrote
    keeps its own line. Nothing trained either way."""
    with pytest.raises(BudgetConfigError) as err:
        train(tmp_path / "unset", [dict(type="BudgetLinearLR", warmup_iters=2)])
    assert str(err.value) == (
        "BudgetLinearLR: by_epoch is not set, and MMEngine's default makes it True (a schedule "
        "in epochs) without convert_to_iter_based=True; the budget is planned in iterations: "
        "write by_epoch=False in this param_scheduler entry of an iteration-based config "
        "(IterBasedTrainLoop), or by_epoch=True, convert_to_iter_based=True in an epoch-based "
        "one (budgeted-train-seg fills it in from the train loop)"
    )
    with pytest.raises(BudgetConfigError) as err:
        train(tmp_path / "written", [{**LINEAR, "by_epoch": True}])
    assert str(err.value) == (
        "BudgetLinearLR: by_epoch=True without convert_to_iter_based=True; the budget is planned "
        "in iterations: set by_epoch=False in an iteration-based config (IterBasedTrainLoop) or "
        "convert_to_iter_based=True in an epoch-based one"
    )
    assert not list(tmp_path.glob("*/*.pth"))


USER_HOOK = '''"""A user's own ParamSchedulerHook: MMEngine's stock class, subclassed."""
from mmengine.hooks import ParamSchedulerHook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class {name}(ParamSchedulerHook):
    """Steps the schedulers as the stock hook does, and counts the iterations it stepped."""

    steps = 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        type(self).steps += 1
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
'''


@pytest.mark.integration
def test_a_users_own_param_scheduler_hook_keeps_the_end_check(tmp_path, monkeypatch):
    """Issue 40/23: ``default_hooks.param_scheduler`` names the user's subclass of MMEngine's
    ``ParamSchedulerHook``, registered by the config's ``custom_imports``: an ``end`` of 30 in a
    loop of 60 is refused at the scheduler's first step, before any checkpoint (it trained 31-60
    at a flat LR), and a budget that fits trains the core's LR, stepped by the user's hook."""
    number = next(RUNS)
    name, module = f"UserSchedulerHook{number}", f"user_scheduler_hooks_{number}"
    (tmp_path / f"{module}.py").write_text(USER_HOOK.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "config.py").write_text(
        f"custom_imports = dict(imports=['budgeted.mmengine', {module!r}], "
        "allow_failed_imports=False)\n"
        f"default_hooks = dict(param_scheduler=dict(type={name!r}))\n"
    )
    hooks = Config.fromfile(tmp_path / "config.py").default_hooks.to_dict()
    lrs = {}
    with pytest.raises(BudgetConfigError) as err:
        lrs = train(tmp_path / "short", [{**LINEAR, "end": 30}], hooks=hooks,
                    train_cfg=dict(type="IterBasedTrainLoop", max_iters=60))  # fmt: skip
    assert str(err.value) == (
        "BudgetLinearLR: end=30 differs from the train loop's max_iters=60: the budget would end "
        "before training does; remove end so that the runner fills it from "
        "train_cfg.max_iters, or set train_cfg.max_iters=30"
    )
    assert lrs == {} and not list((tmp_path / "short").glob("*.pth"))
    # refused at the scheduler's first step (MMEngine's hook, so the user's, calls no budget code
    # before): one iteration, no checkpoint
    assert getattr(sys.modules[module], name).steps == 1
    lrs = train(tmp_path / "run", [LINEAR], hooks=hooks)
    assert lrs == pytest.approx({t: 0.1 * BudgetSchedule("linear", 12, 2)(t) for t in range(12)})
    assert getattr(sys.modules[module], name).steps == 1 + 12


@pytest.mark.integration
@pytest.mark.usefixtures("mmengine_checkpoints_allowed")
def test_the_configs_budget_on_resume_reaches_the_scheduler(tmp_path):
    """A top-level ``budget_on_resume="replan"`` lets a run of 12 iterations resume at 8 with
    ``max_iters=16``: the LR goes on from the checkpoint's to the new end; without it (refuse)
    and with a value not allowed, one line and nothing trained."""
    train(tmp_path / "run", [LINEAR], stop_at=9)  # checkpoints at 4 and 8
    longer = dict(type="IterBasedTrainLoop", max_iters=16)
    with pytest.raises(BudgetMismatchError, match=r"^cannot resume: .*train_cfg\.max_iters"):
        train(tmp_path / "run", [LINEAR], train_cfg=longer, resume=True)
    with pytest.raises(BudgetConfigError) as err:
        train(tmp_path / "run", [LINEAR], train_cfg=longer, resume=True,
              cfg=dict(budget_on_resume="later"))  # fmt: skip
    assert str(err.value) == (
        "BudgetLinearLR: budget_on_resume='later' is invalid; allowed: refuse, replan, branch"
    )
    assert not (tmp_path / "run" / "iter_12.pth").exists()
    lrs = train(tmp_path / "run", [LINEAR], train_cfg=longer, resume=True,
                cfg=dict(budget_on_resume="replan"))  # fmt: skip
    assert sorted(lrs) == list(range(8, 16))
    replanned = BudgetSchedule("linear", 12, 2).replan(16, at=8)
    assert [lrs[t] for t in range(8, 16)] == pytest.approx(
        [0.1 * replanned(t) for t in range(8, 16)]
    )
    # an entry's own on_resume wins over the config's
    with pytest.raises(BudgetMismatchError):
        train(tmp_path / "run", [{**LINEAR, "on_resume": "refuse"}], resume=True,
              train_cfg=dict(type="IterBasedTrainLoop", max_iters=20),
              cfg=dict(budget_on_resume="replan"))  # fmt: skip


@pytest.mark.e2e
def test_a_stock_warmup_that_ends_where_the_budget_begins_trains_both(tmp_path):
    warmup = dict(type="LinearLR", start_factor=0.1, begin=0, end=4, by_epoch=False)
    budget = dict(type="BudgetLinearLR", begin=4, warmup_iters=0, by_epoch=False)
    lrs = train(tmp_path / "run", [warmup, budget])
    assert [lrs[t] for t in range(4)] == pytest.approx([0.01, 0.04, 0.07, 0.1])
    plan = BudgetSchedule("linear", 8, 0)
    assert [lrs[t] for t in range(4, 12)] == pytest.approx([0.1 * plan(t) for t in range(8)])


@pytest.mark.e2e
@pytest.mark.parametrize(
    "other",
    [
        dict(type="LinearLR", start_factor=0.1, begin=0, end=4, by_epoch=False),
        dict(type="PolyLR", power=1.0, by_epoch=False),
        dict(type="BudgetCosineLR", warmup_iters=2, by_epoch=False),
    ],
)
def test_another_scheduler_of_the_lr_in_the_same_range_is_refused(other, tmp_path):
    with pytest.raises(BudgetConfigError) as err:
        train(tmp_path / "run", [other, LINEAR])
    message = str(err.value)
    # the first budget scheduler to step names itself and the other
    kind = other["type"]
    pair = rf"(BudgetLinearLR \[0, 12\) and {kind}|{kind} \[0, 12\) and BudgetLinearLR)"
    assert re.match(rf"{pair} \[0, (4|12)\) both schedule lr: ", message), message
    assert "\n" not in message and "a stock warmup before it that ends where" in message


@pytest.fixture
def mmengine_checkpoints_allowed():
    """MMEngine's resume under torch's weights_only loading (as a config's safe_checkpoints
    import allows it); torch's allow-list is put back afterwards."""
    saved = torch.serialization.get_safe_globals()
    allow_mmengine_checkpoints()
    yield
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(saved)


@pytest.mark.e2e
@pytest.mark.usefixtures("mmengine_checkpoints_allowed")
def test_a_resume_that_gives_a_budget_scheduler_no_state_is_refused(tmp_path):
    """A scheduler added since the checkpoint gets no state from MMEngine (it pairs them by
    position) and would start its budget again at iteration 8; the same list resumes exactly."""
    momentum = dict(type="BudgetParamScheduler", param_name="momentum", schedule="cosine",
                    warmup_iters=0, by_epoch=False)  # fmt: skip
    whole = train(tmp_path / "whole", [LINEAR])
    train(tmp_path / "run", [LINEAR], stop_at=9)  # checkpoints at 4 and 8
    checkpoint = (tmp_path / "run" / "iter_8.pth").read_bytes()
    with pytest.raises(BudgetMismatchError) as err:
        train(tmp_path / "run", [LINEAR, momentum], resume=True)
    message = str(err.value)
    assert message.startswith(
        "cannot resume: BudgetParamScheduler got no state from the checkpoint (the runner "
        "resumed at iteration 8, this scheduler would start its budget there)"
    )
    assert "keep the checkpoint's param_scheduler list" in message and "\n" not in message
    assert (tmp_path / "run" / "iter_8.pth").read_bytes() == checkpoint
    assert not (tmp_path / "run" / "iter_12.pth").exists()
    resumed = train(tmp_path / "run", [LINEAR], resume=True)
    assert resumed == pytest.approx({t: whole[t] for t in range(8, 12)})


@pytest.mark.e2e
def test_an_epoch_entry_whose_length_is_not_the_loops_names_the_loops_own_key(tmp_path):
    entry = dict(type="BudgetLinearLR", warmup_iters=2, by_epoch=True, convert_to_iter_based=True)
    epochs = dict(type="EpochBasedTrainLoop", max_epochs=3)  # 4 iterations an epoch
    lrs = train(tmp_path / "a", [entry], train_cfg=epochs)
    assert [lrs[t] for t in range(12)] == pytest.approx(
        [0.1 * BudgetSchedule("linear", 12, 2)(t) for t in range(12)]
    )
    with pytest.raises(BudgetConfigError) as err:
        train(tmp_path / "b", [{**entry, "end": 2}], train_cfg=epochs)
    assert str(err.value) == (
        "BudgetLinearLR: end=2 epochs x 4 iterations = 8 differs from the train loop's "
        "max_iters=12: the budget would end before training does; leave out end so that the "
        "runner fills it from train_cfg.max_epochs, or set train_cfg.max_epochs=2"
    )
    with pytest.raises(BudgetConfigError) as err:  # an epoch entry in an iteration loop
        train(tmp_path / "c", [entry])
    assert "allowed there: by_epoch=False without convert_to_iter_based" in str(err.value)
    assert "train_cfg.max_iters=" not in str(err.value)


@pytest.mark.unit
def test_a_param_name_the_optimizer_lacks_is_one_line():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9)
    with pytest.raises(BudgetConfigError) as err:
        budgeted.mmengine.BudgetParamScheduler(
            opt, param_name="mom", end=10, warmup_iters=0, by_epoch=False
        )
    assert str(err.value).startswith(
        "BudgetParamScheduler: param_name='mom' is not a key of the optimizer's param groups "
        "(group 0); allowed: one of "
    )
    assert "momentum" in str(err.value) and "lr" in str(err.value)

"""budgeted.optimizers (the table, torch-free) and budgeted.torch_optimizers (built in torch:
build_optimizer, recalibrate_bn), with the real ``schedulefree`` package."""

from __future__ import annotations

import importlib
import sys

import pytest
import schedulefree
import torch
from torch import nn

from budgeted._require import MissingFrameworkError
from budgeted.optimizers import OPTIMIZERS, SCHEDULE_FREE, optimizer_target
from budgeted.torch_optimizers import (
    RECALIBRATION_BATCHES,
    build_optimizer,
    optimizer_kwargs,
    recalibrate_bn,
)

pytestmark = pytest.mark.unit

CONFIG = {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}
"""What a script states for its SGD (examples/digits_budget.py's numbers)."""


def params(seed: int = 0) -> list[nn.Parameter]:
    torch.manual_seed(seed)
    return list(nn.Linear(3, 2).parameters())


def test_every_table_entry_names_a_real_class_that_takes_its_keywords():
    for table, free in ((OPTIMIZERS, False), (SCHEDULE_FREE, True)):
        for name, spec in table.items():
            module, _, cls = spec.target.rpartition(".")
            assert getattr(importlib.import_module(module), cls).__name__ == spec.type == cls
            optimizer = build_optimizer(name, params(), free, **CONFIG, betas=(0.9, 0.99))
            assert set(spec.keeps) - {"nesterov"} <= set(optimizer.defaults), (name, free)


def test_the_default_sgd_is_the_scripts_sgd_exactly():
    ours = build_optimizer("sgd", params(), **CONFIG)
    theirs = torch.optim.SGD(params(), **CONFIG)
    assert type(ours) is torch.optim.SGD and ours.defaults == theirs.defaults


@pytest.mark.parametrize(
    ("name", "cls", "expected"),
    [
        ("adamw", torch.optim.AdamW, {"lr": 0.1, "weight_decay": 1e-4}),
        ("amsgrad", torch.optim.Adam, {"lr": 0.1, "weight_decay": 1e-4, "amsgrad": True}),
    ],
)
def test_another_optimizer_keeps_its_keys_and_drops_the_rest(name, cls, expected):
    assert optimizer_kwargs(name, **CONFIG) == expected
    optimizer = build_optimizer(name, params(), **CONFIG)
    assert type(optimizer) is cls and "momentum" not in optimizer.defaults
    assert {k: optimizer.defaults[k] for k in expected} == expected
    assert optimizer.defaults["amsgrad"] == (name == "amsgrad")


@pytest.mark.parametrize(
    ("name", "cls"), [("sgd", "SGDScheduleFree"), ("adamw", "AdamWScheduleFree")]
)
def test_schedule_free_is_built_in_train_mode_with_its_warmup(name, cls):
    optimizer = build_optimizer(name, params(), schedule_free=True, warmup_steps=4, **CONFIG)
    assert type(optimizer) is getattr(schedulefree, cls)
    assert optimizer.defaults["warmup_steps"] == 4 and optimizer.defaults["lr"] == 0.1
    assert optimizer.param_groups[0]["train_mode"] is True
    weights = optimizer.param_groups[0]["params"]
    for _ in range(3):  # steps need train mode (the package raises otherwise)
        optimizer.zero_grad()
        sum((w**2).sum() for w in weights).backward()
        optimizer.step()
    assert optimizer.param_groups[0]["scheduled_lr"] == pytest.approx(0.1 * 3 / 4)
    trained_at = [w.detach().clone() for w in weights]
    optimizer.eval()  # the average x, not the point y it trained at
    assert not all(torch.equal(a, b) for a, b in zip(trained_at, weights))


@pytest.mark.parametrize(
    ("name", "free", "message"),
    [
        ("adam", False, "optimizer 'adam' is not a known optimizer; allowed: sgd, adamw, amsgrad"),
        ("amsgrad", True, "optimizer 'amsgrad' has no schedule-free form; allowed: sgd, adamw"),
    ],
)
def test_a_bad_name_is_one_line(name, free, message):
    with pytest.raises(ValueError) as err:
        build_optimizer(name, params(), free, **CONFIG)
    assert str(err.value) == message
    assert optimizer_target("adamw") == "torch.optim.AdamW"


def test_schedule_free_without_the_package_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "schedulefree", None)
    with pytest.raises(MissingFrameworkError) as err:
        build_optimizer("adamw", params(), schedule_free=True, **CONFIG)
    assert str(err.value) == (
        "optimizer 'adamw' (schedule-free) needs 'schedulefree', which is not installed; install "
        'it with pip install "budgeted-training[schedulefree]"'
    )
    assert type(build_optimizer("adamw", params(), **CONFIG)) is torch.optim.AdamW  # the rest


def bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3, momentum=0.3), nn.ReLU())


def test_recalibration_recomputes_batchnorm_statistics_as_the_batches_average():
    """The running mean becomes the plain average of the batches' means (not a momentum blend
    with what was there); the model keeps its mode and the layer its momentum."""
    model = bn_model().eval()
    bn = model[1]
    bn.running_mean.fill_(5.0)  # statistics of other weights
    torch.manual_seed(1)
    data = [torch.randn(8, 4) + k for k in range(3)]
    assert recalibrate_bn(model, iter(data)) == 3
    with torch.no_grad():
        means = torch.stack([model[0](x).mean(0) for x in data])
    assert torch.allclose(bn.running_mean, means.mean(0), atol=1e-6)
    assert not model.training and bn.momentum == 0.3 and int(bn.num_batches_tracked) == 3
    model.train()
    assert recalibrate_bn(model, ((x, None) for x in data)) == 3 and model.training  # tuples


def test_recalibration_forwards_at_most_its_count():
    model = bn_model()
    endless = (torch.randn(4, 4) for _ in iter(int, 1))
    assert recalibrate_bn(model, endless) == RECALIBRATION_BATCHES == 50
    assert recalibrate_bn(model, endless, count=2) == 2


def test_recalibration_without_batchnorm_does_nothing_and_draws_nothing():
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    before = [p.detach().clone() for p in model.parameters()]
    data = iter([torch.randn(2, 4)])
    assert recalibrate_bn(model, data) == 0
    assert next(data).shape == (2, 4)  # still there
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))

"""budgeted.mmengine.schedule_free: schedulefree's optimizers in MMEngine's registry and
``ScheduleFreeHook``, through MMPretrain's own tools/train.py and our ``budgeted-train-seg
--schedule-free`` on the LeNet-5 digits family (configs/mmpretrain/digits)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import schedulefree
import torch
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.registry import HOOKS, OPTIMIZERS
from mmengine.runner import Runner
from mmseg_testutils import REPO, child_env, logged
from test_mmpretrain_digits import MIM, SPLITS

from budgeted.mmengine import schedule_free
from budgeted.toys.digits import write_digits

BUDGET2 = REPO / "configs/mmpretrain/digits/lenet5_digits_budget2.py"  # 34 iterations


@pytest.fixture(scope="module")
def digits_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


def data_options(root: Path) -> list[str]:
    return [f"{split}_dataloader.dataset.data_root={root}" for split in SPLITS]


def record(out: Path) -> dict:
    return json.loads((out / "record.json").read_text())


def weights(path: Path) -> dict[str, torch.Tensor]:
    loaded = torch.load(path, map_location="cpu", weights_only=False)
    return loaded.get("state_dict", loaded)


@pytest.mark.unit
def test_the_package_registers_schedulefree_and_the_hook() -> None:
    assert OPTIMIZERS.get("SGDScheduleFree") is schedulefree.SGDScheduleFree
    assert OPTIMIZERS.get("AdamWScheduleFree") is schedulefree.AdamWScheduleFree
    assert HOOKS.get("ScheduleFreeHook") is schedule_free.ScheduleFreeHook
    result = doctest.testmod(schedule_free, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.unit
def test_without_the_package_a_config_naming_one_is_one_line() -> None:
    """What ``import budgeted.mmengine`` registers where schedulefree is not installed."""
    build = schedule_free._missing("SGDScheduleFree")
    with pytest.raises(ImportError) as caught:
        build(params=[], lr=0.1)
    assert str(caught.value) == (
        "SGDScheduleFree needs the schedulefree package, which is not installed; allowed: pip "
        "install budgeted-training[schedulefree] (or pip install schedulefree==1.4.1)"
    )


@pytest.mark.unit
def test_without_the_package_our_tool_refuses_such_a_config_in_one_line(
    digits_root, tmp_path, cli, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(schedule_free, "schedulefree_available", lambda: False)
    config = tmp_path / "sf.py"
    config.write_text(
        f'_base_ = "{BUDGET2}"\n'
        "optim_wrapper = dict(optimizer=dict(_delete_=True, type='AdamWScheduleFree', lr=0.1))\n"
    )
    argv = [str(config), "--work-dir", str(tmp_path / "w"), "--cfg-options"]
    assert cli.main([*argv, *data_options(digits_root)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "train_seg: error: optim_wrapper.optimizer.type=AdamWScheduleFree needs the "
        "schedulefree package, which is not installed; allowed: pip install "
        "budgeted-training[schedulefree] (or pip install schedulefree==1.4.1)"
    ]
    assert not (tmp_path / "w").exists()


@pytest.mark.e2e
def test_mmpretrain_train_py_validates_and_saves_at_x(digits_root, tmp_path) -> None:
    """A user's config with SGDScheduleFree and ScheduleFreeHook, trained by MMPretrain's own
    tools/train.py: train mode at every iteration, eval mode at each validation, every
    checkpoint saved in eval mode, and the last checkpoint's weights are those the run ends
    with (``x``, after ``optimizer.eval()``), not the training point ``y``."""
    config = tmp_path / "sf.py"
    config.write_text(
        f'_base_ = "{BUDGET2}"\n'
        'custom_imports = dict(imports=["budgeted.mmengine", "schedule_free_recorder"], '
        "allow_failed_imports=False)\n"
        "optim_wrapper = dict(optimizer=dict(_delete_=True, type='SGDScheduleFree', lr=0.1, "
        "momentum=0.9, weight_decay=1e-4, warmup_steps=4))\n"
        "param_scheduler = []\n"
        "train_cfg = dict(val_interval=17)\n"
        "default_hooks = dict(checkpoint=dict(interval=17))\n"
        f"custom_hooks = [dict(type='ScheduleFreeHook'), "
        f"dict(type='RecordScheduleFreeHook', out_dir='{tmp_path / 'out'}')]\n"
    )
    work_dir = tmp_path / "work"
    cmd = [
        sys.executable, str(MIM / "tools/train.py"), str(config), "--work-dir", str(work_dir),
        "--cfg-options", *data_options(digits_root),
    ]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = record(tmp_path / "out")
    assert seen["optimizer"] == "schedulefree.sgd_schedulefree.SGDScheduleFree"
    assert set(seen["train_mode"].values()) == {True} and len(seen["train_mode"]) == 34
    assert seen["val"] == {"17": False, "34": False}
    lrs = [seen["scheduled_lr"][str(i)] for i in range(6)]
    assert lrs == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1])  # warmup_steps=4
    for name in ("iter_17.pth", "iter_34.pth"):
        saved = torch.load(work_dir / name, map_location="cpu", weights_only=False)
        assert {g["train_mode"] for g in saved["optimizer"]["param_groups"]} == {False}
    saved = torch.load(work_dir / "iter_34.pth", map_location="cpu", weights_only=False)
    y, final = weights(tmp_path / "out/y_last.pth"), weights(tmp_path / "out/final.pth")
    names = [n for n, _ in load_model(config).named_parameters()]  # the optimizer's order
    assert len(names) == len(saved["optimizer"]["state"]) > 0
    for index, name in enumerate(names):
        x = torch.lerp(y[name], saved["optimizer"]["state"][index]["z"], 1 - 1 / 0.9)
        assert torch.allclose(saved["state_dict"][name], x, rtol=0, atol=1e-6), name
        assert not torch.allclose(saved["state_dict"][name], y[name], rtol=0, atol=1e-6), name
        assert torch.equal(saved["schedule_free_y"][name], y[name]), name  # for an exact resume
    for key, value in saved["state_dict"].items():  # x again, up to eval/train round trips
        assert torch.allclose(final[key], value, rtol=0, atol=1e-6), key
    assert list(logged(work_dir, "accuracy/top1")) == [17, 34]


def load_model(config: Path) -> torch.nn.Module:
    """The config's model, built in MMPretrain's scope."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS

    with DefaultScope.overwrite_default_scope("mmpretrain"):
        return MODELS.build(Config.fromfile(config).model)


class Stopped(Exception):
    """Raised by :class:`StopAfterHook`: the run stopped as a killed job would."""


@HOOKS.register_module(force=True)
class StopAfterHook(Hook):
    """Stop the run after iteration ``at`` (its checkpoints written), as a job killed then."""

    priority = "LOWEST"

    def __init__(self, at: int) -> None:
        self.at = at

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at:
            raise Stopped


def schedule_free_args(root: Path, out: Path, stop_at: int | None = None) -> list[str]:
    """``budgeted-train-seg --schedule-free --validate-every 17`` on the 2 % digits budget with
    the budget scheduler's warmup at 5 (a user config adds the recorder, and a stop)."""
    stop = f", dict(type='StopAfterHook', at={stop_at})" if stop_at else ""
    config = out.parent / f"{out.name}.py"
    config.write_text(
        f'_base_ = "{BUDGET2}"\n'
        'custom_imports = dict(imports=["budgeted.mmengine", "schedule_free_recorder"], '
        "allow_failed_imports=False)\n"
        f"custom_hooks = [dict(type='RecordScheduleFreeHook', out_dir='{out}'){stop}]\n"
    )
    return [
        str(config), "--work-dir", str(out / "work"), "--schedule-free", "--validate-every", "17",
        "--cfg-options", *data_options(root), "param_scheduler.0.warmup_iters=5",
        "default_hooks.checkpoint.interval=17",
    ]  # fmt: skip


@pytest.mark.integration
def test_a_resumed_schedule_free_run_is_the_uninterrupted_one(
    digits_root, tmp_path, cli, monkeypatch
) -> None:
    """``--schedule-free`` (SGDScheduleFree, warmup_steps = the budget scheduler's 5, the budget
    kept): stopped after 20 iterations (checkpoint at 17) and resumed, the run ends with the
    uninterrupted run's weights, optimizer state and scheduled LRs, bit for bit."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    first, second = tmp_path / "first", tmp_path / "second"
    assert cli.main(schedule_free_args(digits_root, first)) == 0
    with pytest.raises(Stopped):
        cli.main(schedule_free_args(digits_root, second, stop_at=20))
    assert cli.main([*schedule_free_args(digits_root, second), "--resume"]) == 0

    one, two = record(first), record(second)
    assert one["optimizer"] == "schedulefree.sgd_schedulefree.SGDScheduleFree"
    lrs = [one["scheduled_lr"][str(i)] for i in range(7)]
    assert lrs == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.1, 0.1, 0.1])  # warmup_steps=5
    assert {k: v for k, v in one["scheduled_lr"].items() if int(k) >= 17} == two["scheduled_lr"]
    assert list(two["scheduled_lr"]) == [str(i) for i in range(17, 34)]
    assert list(logged(first / "work", "accuracy/top1")) == [17, 34]  # 34 / --validate-every 17
    end_one = torch.load(first / "work/iter_34.pth", map_location="cpu", weights_only=False)
    end_two = torch.load(second / "work/iter_34.pth", map_location="cpu", weights_only=False)
    for key, value in end_one["state_dict"].items():
        assert torch.equal(value, end_two["state_dict"][key]), key
    states = (end_one["optimizer"]["state"], end_two["optimizer"]["state"])
    assert all(torch.equal(a["z"], b["z"]) for a, b in zip(*(s.values() for s in states)))
    assert end_one["optimizer"]["param_groups"] == end_two["optimizer"]["param_groups"]
    final = weights(second / "final.pth")
    for key, value in end_two["state_dict"].items():
        assert torch.allclose(final[key], value, rtol=0, atol=1e-6), key


class BatchNormNet(BaseModel):
    """A regression net with one BatchNorm1d: the model the recalibration acts on."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1)
        )

    clock_readings: ClassVar[list[float]] = []  # a time budget's clock at each no-grad forward
    clock = None

    def forward(self, inputs, labels, mode="tensor"):
        if mode == "loss" and not torch.is_grad_enabled() and self.clock is not None:
            self.clock_readings.append(self.clock.local_elapsed())  # the recalibration's
        out = self.net(inputs).squeeze(1)
        if mode == "loss":
            return {"loss": ((out - labels) ** 2).mean()}
        return [out]


class Points(torch.utils.data.Dataset):
    metainfo: ClassVar[dict] = {}

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(32, 4, generator=generator) * 3 + 1
        self.labels = self.inputs.sum(1)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index):
        return {"inputs": self.inputs[index], "labels": self.labels[index]}


class MeanError(BaseMetric):
    def process(self, data_batch, data_samples) -> None:
        self.results.append(float((data_samples[0] - data_batch["labels"]).abs().mean()))

    def compute_metrics(self, results) -> dict:
        return {"error": sum(results) / len(results)}


class AtValidation(Hook):
    """Record the BatchNorm statistics each validation sees, with the mean it should have: the
    dataset's mean of the first layer's output at the validated weights; and the end."""

    priority = "LOW"

    def __init__(self) -> None:
        self.seen: list[tuple[torch.Tensor, torch.Tensor, float | None]] = []
        self.end: dict[str, torch.Tensor] = {}

    def before_val_epoch(self, runner) -> None:
        net = runner.model.net
        with torch.no_grad():
            expected = net[0](runner.train_dataloader.dataset.inputs).mean(0)
        self.seen.append((net[1].running_mean.clone(), expected, net[1].momentum))

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == runner.max_iters:
            self.end = {k: v.clone() for k, v in runner.model.state_dict().items()}


def train_points(work_dir: Path, bn_batches: int, loop: dict | None = None) -> AtValidation:
    """12 iterations of SGDScheduleFree, validating every 4, a checkpoint every 4 (``loop``: the
    train loop's type and arguments)."""
    seen = AtValidation()
    torch.manual_seed(0)  # the same initial weights
    loader = dict(
        dataset=Points(),
        sampler=dict(type="DefaultSampler", shuffle=True),
        batch_size=8,
        collate_fn=dict(type="default_collate"),
    )
    runner = Runner(
        model=BatchNormNet(),
        work_dir=str(work_dir),
        train_dataloader=loader,
        val_dataloader={**loader, "sampler": dict(type="DefaultSampler", shuffle=False)},
        val_evaluator=dict(type=MeanError),
        val_cfg=dict(),
        optim_wrapper=dict(optimizer=dict(type="SGDScheduleFree", lr=0.01)),
        train_cfg=dict(max_iters=12, val_interval=4, **(loop or dict(by_epoch=False))),
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=4, by_epoch=False)),
        custom_hooks=[schedule_free.ScheduleFreeHook(bn_batches=bn_batches), seen],
        randomness=dict(seed=0),
    )
    if loop is not None:
        runner.model.clock = runner.train_loop.clock
    runner.train()
    return seen


@pytest.mark.integration
def test_batchnorm_is_recalibrated_at_x_without_changing_the_training(tmp_path) -> None:
    """bn_batches=4 (the 32 points once, as 4 batches of 8): at each validation the BatchNorm
    means are the points' mean at the validated weights ``x``, the momentum is back after;
    the training is bit for bit the run with bn_batches=0 (parameters and the training's own
    statistics), whose validations see the training statistics instead."""
    with_bn = train_points(tmp_path / "bn", bn_batches=4)
    without = train_points(tmp_path / "none", bn_batches=0)
    assert len(with_bn.seen) == len(without.seen) == 3
    for (mean, expected, momentum), (plain, _, _) in zip(with_bn.seen, without.seen):
        assert torch.allclose(mean, expected, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(plain, expected, rtol=1e-2, atol=1e-2)
        assert momentum == 0.1
    assert with_bn.end.keys() == without.end.keys()
    for key, value in with_bn.end.items():
        assert torch.equal(value, without.end[key]), key


@pytest.mark.integration
def test_the_recalibration_is_spent_from_a_time_budget(tmp_path) -> None:
    """Under a ``TimeBudgetTrainLoop`` the clock (paused for validation) runs while the
    BatchNorm statistics are recomputed: training compute, counted in the budget."""
    import budgeted.mmengine  # noqa: F401  TimeBudgetTrainLoop registered

    BatchNormNet.clock_readings.clear()
    loop = dict(type="TimeBudgetTrainLoop", seconds=3600)
    train_points(tmp_path / "t", bn_batches=4, loop=loop)
    readings = BatchNormNet.clock_readings
    assert len(readings) == 3 * 4  # 3 validations x 4 batches
    for start in range(0, 12, 4):
        batch = readings[start : start + 4]
        assert all(a < b for a, b in zip(batch, batch[1:])), batch  # counting, not paused

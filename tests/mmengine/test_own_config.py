"""``budgeted-train-seg --schedule NAME --full-iters N`` on a user's own MMEngine config (what a
sweep runs per cell): an FCN written here (not one of configs/) trained under a budget cosine with
its own warmup kept, ``--full-iters``, an epoch-based MMPretrain config made iteration-based, and
each refusal as one line before anything is written (:mod:`budgeted.mmengine.own_schedule`).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest
from mmengine.config import Config
from mmseg_testutils import logged, snapshot
from own_configs import STOCK_SCHEDULE, digits_config, fcn_config

from budgeted.mmengine.cli import parse_args
from budgeted.mmengine.own_schedule import (
    apply_own_schedule,
    full_schedule_iters,
    lr_warmup,
    step_milestones,
)
from budgeted.mmengine.preflight import preflight
from budgeted.schedules import BudgetSchedule, budget_iters


@pytest.fixture(scope="module")
def digits_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sklearn", reason="the digits set needs scikit-learn")
    from budgeted.toys.digits import write_digits

    return write_digits(tmp_path_factory.mktemp("data") / "digits")


def dumped(work_dir: Path) -> Config:
    """The config the runner dumped into the work dir."""
    (path,) = work_dir.glob("*.py")
    return Config.fromfile(str(path))


@pytest.mark.integration
def test_own_fcn_config_trains_a_budget_cosine_with_its_warmup(tmp_path, toy_root, cli):
    config, work_dir = fcn_config(tmp_path, toy_root), tmp_path / "work"
    argv = [str(config), "--work-dir", str(work_dir), "--budget", "0.25", "--schedule", "cosine"]
    assert cli.main(argv) == 0
    plan = BudgetSchedule("cosine", total=10, warmup=4, warmup_factor=0.01)
    expected = {it + 1: 0.01 * plan(it) for it in range(10)}  # logged 1-based
    assert logged(work_dir, "lr") == pytest.approx(expected, rel=1e-9, abs=1e-15)
    cfg = dumped(work_dir)
    assert cfg.train_cfg.max_iters == 10
    assert [e.type for e in cfg.param_scheduler] == ["BudgetCosineLR"]
    assert cfg.optim_wrapper.optimizer.type == "SGD"
    assert cfg.optim_wrapper.optimizer.momentum == 0.9
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.0005
    assert cfg.model.decode_head.type == "FCNHead"
    assert cfg.model.backbone.type == "ResNetV1c"


@pytest.mark.unit
def test_full_iters_sets_the_full_schedule_the_budget_cuts(tmp_path, toy_root):
    config, work_dir = fcn_config(tmp_path, toy_root), tmp_path / "work"
    args = parse_args([str(config), "--work-dir", str(work_dir), "--budget", "0.25"])
    args.schedule, args.full_iters = "cosine", 80
    cfg = preflight(args)
    assert (cfg.full_schedule_iters, cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == (
        80,
        20,
        20,
    )
    assert cfg.param_scheduler == [
        dict(type="BudgetCosineLR", warmup_iters=4, warmup_factor=0.01, by_epoch=False)
    ]
    assert not work_dir.exists()


@pytest.mark.integration
def test_full_iters_run_dumps_the_budget_of_the_given_full_schedule(tmp_path, toy_root, cli):
    config, work_dir = fcn_config(tmp_path, toy_root), tmp_path / "work"
    argv = [str(config), "--work-dir", str(work_dir), "--full-iters", "80", "--budget", "0.0625"]
    assert cli.main([*argv, "--schedule", "linear"]) == 0  # 5 iterations of 80
    cfg = dumped(work_dir)
    assert (cfg.full_schedule_iters, cfg.train_cfg.max_iters) == (80, 5)
    assert sorted(logged(work_dir, "lr")) == [1, 2, 3, 4, 5]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("schedule", "warmup"),
    [
        (STOCK_SCHEDULE, (4, 0.01)),
        ('[dict(type="LinearLR", by_epoch=False, end=5), dict(type="PolyLR", by_epoch=False)]',
         (5, 1 / 3)),
        ('[dict(type="BudgetLinearLR", warmup_iters=7, warmup_factor=0.1, by_epoch=False)]',
         (7, 0.1)),
        ('[dict(type="BudgetPolyLR", by_epoch=False)]', (500, 0.001)),
        ('[dict(type="LinearLR", by_epoch=False, begin=2, end=5), dict(type="PolyLR")]', (0, 1.0)),
        ('[dict(type="LinearLR", by_epoch=False, end=40), dict(type="PolyLR", by_epoch=False, '
         "end=40)]", (0, 1.0)),
        ('[dict(type="LinearLR", by_epoch=False, end=4)]', (0, 1.0)),
        ('dict(type="PolyLR", by_epoch=False)', (0, 1.0)),
    ],
)  # fmt: skip
def test_the_warmup_kept_in_iterations(schedule, warmup, tmp_path, toy_root):
    cfg = Config.fromfile(str(fcn_config(tmp_path, toy_root, schedule)))
    assert lr_warmup(cfg) == pytest.approx(warmup)


@pytest.mark.unit
def test_an_epoch_config_counts_its_full_schedule_and_warmup(tmp_path, digits_root):
    cfg = Config.fromfile(str(digits_config(tmp_path, digits_root)))
    assert full_schedule_iters(cfg) == 2 * math.ceil(1400 / 32) == 88
    warm = '[dict(type="LinearLR", start_factor=0.1, end=1), dict(type="CosineAnnealingLR")]'
    cfg = Config.fromfile(str(digits_config(tmp_path, digits_root, warm)))
    assert lr_warmup(cfg) == pytest.approx((44, 0.1))  # 1 epoch (by_epoch: MMEngine's default)


@pytest.mark.unit
def test_a_step_cell_drops_where_the_configs_own_step_schedule_does(tmp_path, digits_root):
    """The budget-aware conversion of the config's own MultiStepLR (epoch 1 of 2, x0.1): its
    milestones as fractions of the config's length; any other schedule gets none."""
    cfg = Config.fromfile(str(digits_config(tmp_path, digits_root)))
    assert step_milestones(cfg) == {"milestones": (0.5,), "gamma": 0.1}
    apply_own_schedule(cfg, "step")
    assert cfg.param_scheduler == [dict(type="BudgetStepLR", warmup_iters=0, warmup_factor=1.0,
                                        by_epoch=False, milestones=(0.5,), gamma=0.1)]  # fmt: skip
    cfg = Config.fromfile(str(digits_config(tmp_path, digits_root)))
    apply_own_schedule(cfg, "linear")
    assert "milestones" not in cfg.param_scheduler[0]
    iterations = '[dict(type="MultiStepLR", by_epoch=False, milestones=[30, 36, 50], gamma=0.5)]'
    cfg = Config.fromfile(str(fcn_config(tmp_path, digits_root, iterations)))  # 40 iterations
    assert step_milestones(cfg) == {"milestones": (0.75, 0.9), "gamma": 0.5}
    assert step_milestones(Config.fromfile(str(fcn_config(tmp_path, digits_root)))) == {}


@pytest.mark.integration
def test_an_epoch_mmpretrain_config_trains_iteration_based(tmp_path, digits_root, cli):
    config, work_dir = digits_config(tmp_path, digits_root), tmp_path / "work"
    argv = [str(config), "--work-dir", str(work_dir), "--budget", "0.05", "--schedule", "linear"]
    assert cli.main(argv) == 0
    iters = budget_iters(fraction=0.05, full_iters=88)
    assert iters == 4
    cfg = dumped(work_dir)
    assert cfg.train_cfg == dict(type="IterBasedTrainLoop", max_iters=4, val_interval=4)
    assert cfg.param_scheduler == [
        dict(type="BudgetLinearLR", warmup_iters=0, warmup_factor=1.0, by_epoch=False)
    ]
    assert cfg.default_hooks.checkpoint.by_epoch is False
    assert cfg.default_hooks.checkpoint.interval == 4
    assert cfg.log_processor.by_epoch is False
    assert cfg.default_hooks.logger.log_metric_by_epoch is False
    plan = BudgetSchedule("linear", total=4, warmup=0)
    expected = {it + 1: 0.1 * plan(it) for it in range(4)}
    assert logged(work_dir, "lr") == pytest.approx(expected, rel=1e-9)
    assert (work_dir / "iter_4.pth").is_file()


MOMENTUM = STOCK_SCHEDULE.replace(
    "]", '    dict(type="CosineAnnealingMomentum", T_max=40, by_epoch=False),\n]'
)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("schedule", "options", "words"),
    [
        (STOCK_SCHEDULE, ["--schedule", "nope"], ["'nope'", "cosine", "linear"]),
        (STOCK_SCHEDULE, ["--schedule", "cosine", "--full-iters", "0"], ["--full-iters"]),
        (MOMENTUM, ["--schedule", "cosine"], ["CosineAnnealingMomentum", "cannot carry it over"]),
        (
            STOCK_SCHEDULE,
            ["--schedule", "cosine", "--cfg-options", "train_cfg.type=MyLoop"],
            ["MyLoop", "IterBasedTrainLoop"],
        ),
        (STOCK_SCHEDULE, ["--schedule", "cosine", "--budget", "0.1"], ["4 iterations", "warmup"]),
    ],
    ids=["unknown-schedule", "full-iters-0", "momentum", "custom-loop", "budget-in-warmup"],
)
def test_a_refusal_is_one_line_and_writes_nothing(
    schedule, options, words, tmp_path, toy_root, cli: ModuleType, capsys
):
    config, work_dir = fcn_config(tmp_path, toy_root, schedule), tmp_path / "work"
    before = snapshot(tmp_path)
    assert cli.main([str(config), "--work-dir", str(work_dir), *options]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("train_seg: error: "), lines
    assert all(word in lines[0] for word in words), lines[0]
    assert snapshot(tmp_path) == before and not work_dir.exists()

"""``budgeted-sweep --config`` on users' own MMEngine configs written here (none of configs/): an
MMSeg FCN (another model than the toy PSPNet) and an epoch-based MMPretrain LeNet-5, each swept
over 2 schedules x 2 budgets by the real console scripts; every cell's logged LR is the core's
over the budget of the config's own full schedule, with its warmup; the user's optimizer and data
stay in each cell's dumped config; the report prints the table; budgeted-branch branches the
user's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mmengine.config import Config
from own_configs import digits_config, fcn_config
from own_sweeps import check_cell_lrs, report_ok, sweep_ok, tool

from budgeted.schedules import BudgetSchedule


@pytest.fixture(scope="module")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from budgeted.toys.cityscapes import make_toy_cityscapes

    root = tmp_path_factory.mktemp("toy") / "toy_cityscapes"
    return make_toy_cityscapes(root, train_per_city=4, val_per_city=3)


def dumped(run_dir: Path) -> Config:
    (path,) = run_dir.glob("*/vis_data/config.py") or run_dir.glob("*.py")
    return Config.fromfile(str(path))


@pytest.mark.e2e
def test_an_own_mmseg_config_sweeps_its_budgets_with_the_core_lr(tmp_path, toy_root):
    config = fcn_config(tmp_path, toy_root)  # LinearLR warmup 4 (factor 0.01), PolyLR, 40 iters
    out = tmp_path / "sweep"
    sweep_ok("--config", config, "--schedules", "linear", "cosine", "--budgets", "0.25", "0.5",
             "--seeds", "0", "--out", out, cwd=tmp_path)  # fmt: skip
    assert check_cell_lrs(out, "mmseg", 40, 4, 0.01, dict.fromkeys(["linear", "cosine"], 0.01)) == 4
    cfg = dumped(out / "cosine_budget50_seed0")
    assert cfg.optim_wrapper.optimizer.to_dict() == dict(
        type="SGD", lr=0.01, momentum=0.9, weight_decay=0.0005
    )
    assert cfg.model.decode_head.type == "FCNHead"
    assert cfg.train_dataloader.dataset.data_root == str(toy_root)
    assert [e["type"] for e in cfg.param_scheduler] == ["BudgetCosineLR"]
    table = report_ok(out)
    assert "### mIoU: mmseg " + str(config) in table
    assert "| 0.25 | 10 |" in table and "| 0.5 | 20 |" in table


@pytest.mark.e2e
def test_an_own_epoch_based_mmpretrain_config_counts_epochs_as_iterations(tmp_path):
    pytest.importorskip("sklearn", reason="the digits set needs scikit-learn")
    from budgeted.toys.digits import write_digits

    root = write_digits(tmp_path / "digits")
    config = digits_config(tmp_path, root)  # 2 epochs x 44 iterations, MultiStepLR, no warmup
    out = tmp_path / "sweep"
    sweep_ok("--config", config, "--schedules", "linear", "step", "--budgets", "0.05", "0.1",
             "--lrs", "0.05", "--out", out, cwd=tmp_path)  # fmt: skip
    own_step = {"step": {"milestones": (0.5,), "gamma": 0.1}}  # MultiStepLR at epoch 1 of 2
    assert check_cell_lrs(out, "mmpretrain", 88, 0, 1.0, {}, own_step) == 4
    cfg = dumped(out / "step_budget10_lr0.05")
    assert cfg.train_cfg.type == "IterBasedTrainLoop" and cfg.train_cfg.max_iters == 9
    assert cfg.optim_wrapper.optimizer.momentum == 0.9
    assert "### top-1: mmpretrain" in report_ok(out)


@pytest.mark.e2e
def test_every_new_arm_runs_on_an_own_epoch_based_config(tmp_path):
    """issue 43: a schedule variant, schedule-free (which found the epoch-based loop refused
    without ``--schedule``) and the subset baseline, by two optimizers, on the user's config."""
    pytest.importorskip("sklearn", reason="the digits set needs scikit-learn")
    from budgeted.toys.digits import write_digits

    root = write_digits(tmp_path / "digits")
    config = digits_config(tmp_path, root)  # 2 epochs x 44 iterations, MultiStepLR, no warmup
    out = tmp_path / "sweep"
    sweep_ok("--config", config, "--schedules", "wsd:decay=sqrt", "schedulefree", "subset",
             "--optimizers", "sgd", "adamw", "--budgets", "0.1", "--lrs", "0.05", "--lrs-for",
             "adamw=0.003", "--out", out, cwd=tmp_path)  # fmt: skip
    free = dumped(out / "schedulefree-adamw_budget10_lr0.003")
    assert free.optim_wrapper.optimizer.type == "AdamWScheduleFree"
    assert free.param_scheduler == [] and free.train_cfg.max_iters == 9
    assert "ScheduleFreeHook" in [h["type"] for h in free.custom_hooks]
    subset = dumped(out / "subset-sgd_budget10_lr0.05").train_dataloader.dataset
    assert (subset.type, subset.fraction) == ("RandomSubsetDataset", 0.1)
    wsd = dumped(out / "wsd-decay-sqrt-sgd_budget10_lr0.05").param_scheduler
    assert [(e["type"], e["decay"]) for e in wsd] == [("BudgetWSDLR", "sqrt")]
    table = report_ok(out)
    assert "6/6 runs finished" in table and "| subset@adamw |" in table


@pytest.mark.e2e
def test_branch_takes_an_own_mmseg_config(tmp_path, toy_root):
    """One WSD run of the user's config at 0.5 (20 iterations, their warmup of 4), its cooldown
    branched for 0.25 (10) from its checkpoint after iteration 9."""
    config = fcn_config(tmp_path, toy_root)
    out = tmp_path / "branch"
    done = tool("budgeted-branch", "--config", config, "--budgets", "0.25", "0.5", "--seeds", "0",
                "--out", out, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[branch] compute: one stable run + cooldowns = 21 iterations" in done.stdout
    stable, branch = out / "wsd_budget50_seed0", out / "wsd_budget25_seed0"
    assert (stable / "iter_9.pth").is_file()
    for cell in (stable, branch):
        record = json.loads((cell / "sweep_cell.json").read_text())
        assert record["status"] == "finished" and record["config"] == str(config)
    plan = BudgetSchedule("wsd", total=10, warmup=4, warmup_factor=0.01)
    from budgeted.runs import reader

    trace = {int(p["iteration"]) - 1: p["lr"] for p in reader("mmseg").train_curve(branch)}
    assert trace == pytest.approx({9: 0.01 * plan(9)}, rel=1e-9)  # the cooldown's one iteration
    assert "wsd" in report_ok(out)

"""tools/train_seg.py (budgeted.mmengine.cli): bad input fails with one line (exit 2) before any
training starts; a shipped config is found by its bare name."""

from __future__ import annotations

import pytest
from mmseg_testutils import REPO, toy_args, toy_config

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--budget", "0"], "argument --budget: 0 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "-0.5"], "argument --budget: -0.5 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "1.5"], "argument --budget: 1.5 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "half"], "argument --budget: 'half' is not a number; allowed: a fraction"),
        (
            ["--cfg-options", "param_scheduler.0.type=BudgetLinerLR"],
            "did you mean 'BudgetLinearLR'",
        ),
        (["--cfg-options", "train_dataloader.dataset.data_root=/no/such/dir"], "/no/such/dir does"),
        (
            ["--cfg-options", "param_scheduler.0.warmup_iters=12"],
            "warmup_iters=12 is not shorter than the budget end - begin=12",
        ),
        (
            ["--cfg-options", "param_scheduler.0.gamma=2"],
            "BudgetLinearLR: unknown argument 'gamma'; allowed: begin, end,",
        ),
        (
            ["--cfg-options", "checkpoint_at=[0,4]"],
            "checkpoint_at=[0, 4] is invalid; allowed: a list of iteration counts > 0",
        ),
        (["--cfg-options", "checkpoint_at=four"], "checkpoint_at=['four'] is invalid; allowed"),
        (
            ["--cfg-options", "param_scheduler.0.end=20"],
            "BudgetLinearLR: end=20 differs from the train loop's max_iters=12",
        ),
        (
            ["--cfg-options", "param_scheduler.0.by_epoch=True"],
            "BudgetLinearLR: by_epoch=True without convert_to_iter_based=True",
        ),
        (
            ["--cfg-options", "train_cfg.max_iters=abc"],
            "BudgetLinearLR: end='abc' is invalid; allowed: an integer >= 0",
        ),
    ],
)
def test_bad_input_is_one_line_before_training(options, message, tmp_path, toy_root, cli, capsys):
    work_dir = tmp_path / "work"
    args = toy_args(toy_config(tmp_path), work_dir, toy_root)
    if options[0] == "--cfg-options":
        args += options[1:]
    else:
        args += options
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train_seg: error:") and message in err and "\n" not in err
    assert not work_dir.exists()


def test_work_dir_holding_a_run_is_not_overwritten(tmp_path, toy_root, cli, capsys):
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    (work_dir / "iter_6.pth").write_bytes(b"weights")
    assert cli.main(toy_args(toy_config(tmp_path), work_dir, toy_root)) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (work_dir / "iter_6.pth").read_bytes() == b"weights"


def test_a_shipped_config_is_found_by_its_bare_name(tmp_path, toy_root, cli):
    for name in ("pspnet_r18-toy_cityscapes_budget10", "pspnet_r18-toy_cityscapes_budget10.py"):
        args = cli.parse_args([name, *toy_args(REPO, tmp_path / "work", toy_root, iters=40)[1:]])
        cfg = cli.preflight(args)
        assert cfg.filename == str(REPO / "configs/mmseg/toy" / f"{name.removesuffix('.py')}.py")
        assert cfg.train_cfg.max_iters == 40 and cfg.budget_fraction == 0.1


def test_an_unknown_config_name_lists_candidates_in_one_line(tmp_path, cli, capsys):
    assert cli.main(["pspnet_r18-toy_cityscapes_budget11"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train_seg: error: config 'pspnet_r18-toy_cityscapes_budget11' does not")
    assert "candidates: " in err and "pspnet_r18-toy_cityscapes_budget1.py" in err
    assert "\n" not in err
    assert cli.main([str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err

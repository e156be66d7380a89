"""tools/train_seg.py: bad input fails with one line (exit 2) before any training starts."""

from __future__ import annotations

import pytest
from mmseg_testutils import toy_args, toy_config


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--budget", "0"], "budget fraction=0.0 is invalid; allowed: a number > 0"),
        (["--budget", "-0.5"], "budget fraction=-0.5 is invalid"),
        (
            ["--cfg-options", "param_scheduler.0.type=BudgetLinerLR"],
            "did you mean 'BudgetLinearLR'",
        ),
        (["--cfg-options", "train_dataloader.dataset.data_root=/no/such/dir"], "/no/such/dir does"),
        (["--cfg-options", "param_scheduler.0.warmup_iters=12"], "end=12 <= begin + warmup_iters"),
        (
            ["--cfg-options", "param_scheduler.0.gamma=2"],
            "BudgetLinearLR: schedule 'linear' has no",
        ),
    ],
)
def test_bad_input_is_one_line_before_training(
    options, message, tmp_path, toy_root, train_seg, capsys
):
    work_dir = tmp_path / "work"
    args = toy_args(toy_config(tmp_path), work_dir, toy_root)
    if options[0] == "--cfg-options":
        args += options[1:]
    else:
        args += options
    assert train_seg.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train_seg: error:") and message in err and "\n" not in err
    assert not work_dir.exists()


def test_work_dir_holding_a_run_is_not_overwritten(tmp_path, toy_root, train_seg, capsys):
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    (work_dir / "iter_6.pth").write_bytes(b"weights")
    assert train_seg.main(toy_args(toy_config(tmp_path), work_dir, toy_root)) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (work_dir / "iter_6.pth").read_bytes() == b"weights"


def test_missing_config_is_one_line(tmp_path, train_seg, capsys):
    assert train_seg.main([str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err

"""Real MMEngine Runner on CPU, toy PSPNet: logged LR, resume, refusals, metrics, 2 ranks."""

from __future__ import annotations

import fractions
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
from mmseg_testutils import HERE, REPO, logged, recorded_lrs, toy_args, toy_config

from budgeted.core import BudgetSchedule

pytestmark = pytest.mark.slow
ITERS, WARMUP, BASE_LR = 12, 4, 0.01


def core_lr(it: int, total: int = ITERS, warmup: int = WARMUP) -> float:
    return BASE_LR * BudgetSchedule("linear", total, warmup)(it)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, toy_root, train_seg):
    """One uninterrupted toy run of 12 iterations (checkpoints at 6 and 12)."""
    tmp = tmp_path_factory.mktemp("first")
    work_dir = tmp / "work"
    assert train_seg.main(toy_args(toy_config(tmp), work_dir, toy_root)) == 0
    return tmp, work_dir


def test_logged_lr_equals_the_core_and_mmseg_computes_miou(first_run):
    tmp, work_dir = first_run
    lrs = logged(work_dir, "lr")
    assert sorted(lrs) == list(range(1, ITERS + 1))
    for it, lr in lrs.items():  # MMEngine logs iteration it (1-based) with the LR it trained at
        assert lr == pytest.approx(core_lr(it - 1), rel=1e-6), it
    assert recorded_lrs(tmp) == pytest.approx({it: core_lr(it) for it in range(ITERS)})
    miou = logged(work_dir, "mIoU")
    assert list(miou) == [ITERS] and 0.0 <= miou[ITERS] <= 100.0
    assert (work_dir / "iter_6.pth").is_file() and (work_dir / f"iter_{ITERS}.pth").is_file()


def resume_dir(first_run, tmp_path):
    _, work_dir = first_run
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(work_dir / "iter_6.pth", resumed / "iter_6.pth")
    return resumed


def test_resume_from_mid_budget_reproduces_the_lr(first_run, tmp_path, toy_root, train_seg):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}")
    assert train_seg.main([*args, "--resume"]) == 0
    first = recorded_lrs(first_run[0])
    after = recorded_lrs(tmp_path)
    assert sorted(after) == list(range(6, ITERS))
    assert after == {it: first[it] for it in after}  # bit-for-bit the uninterrupted run's LR
    first_logged = logged(first_run[1], "lr")
    assert logged(resumed, "lr") == {it: first_logged[it] for it in range(7, ITERS + 1)}


def test_resume_with_a_changed_budget_is_refused(first_run, tmp_path, toy_root, train_seg, capsys):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}", iters=20)
    assert train_seg.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("train_seg: error: cannot resume")
    assert "[0, 12)" in err and "[0, 20)" in err and "max_iters=12" in err and "load_from" in err
    assert sorted(p.name for p in resumed.glob("*.pth")) == ["iter_6.pth"]  # nothing trained
    assert not (tmp_path / "lr_rank0.json").exists()


def test_checkpoint_with_a_foreign_global_is_refused(
    first_run, tmp_path, toy_root, train_seg, capsys
):
    resumed = resume_dir(first_run, tmp_path)
    ckpt = resumed / "iter_6.pth"
    checkpoint = torch.load(ckpt)  # weights_only, through the allow-list
    checkpoint["meta"]["note"] = fractions.Fraction(1, 3)
    torch.save(checkpoint, ckpt)
    args = toy_args(toy_config(tmp_path), resumed, toy_root, f"load_from={ckpt}")
    assert train_seg.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "refusing to load checkpoint" in err and "fractions.Fraction" in err


def test_test_split_metrics_iou_and_cityscapes(first_run, tmp_path, toy_root, train_seg):
    from mmengine.runner import Runner

    _, work_dir = first_run
    args = train_seg.parse_args(
        toy_args(
            toy_config(tmp_path),
            tmp_path / "test",
            toy_root,
            f"load_from={work_dir / f'iter_{ITERS}.pth'}",
            f"test_evaluator.1.output_dir={tmp_path / 'cityscapes_results'}",
        )
    )
    runner = Runner.from_cfg(train_seg.build_config(args))
    metrics = runner.test()
    assert 0.0 <= metrics["mIoU"] <= 100.0
    assert 0.0 <= metrics["averageScoreCategories"] <= 1.0  # cityscapesscripts' evaluator


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_cpu_processes_with_torchrun_see_the_same_lr(tmp_path, toy_root):
    """tools/dist_train.sh: 2 gloo processes on CPU; every rank trains with the core's LR."""
    iters = 6
    args = toy_args(toy_config(tmp_path), tmp_path / "work", toy_root, iters=iters, warmup=2)
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "PORT": str(free_port()),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": "",
    }
    proc = subprocess.run(
        ["bash", str(REPO / "tools/dist_train.sh"), args[0], "2", *args[1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rank0, rank1 = recorded_lrs(tmp_path, 0), recorded_lrs(tmp_path, 1)
    assert sorted(rank0) == list(range(iters))
    assert rank0 == rank1
    expected = {it: core_lr(it, iters, 2) for it in range(iters)}
    assert rank0 == pytest.approx(expected, rel=1e-12)
    assert "Distributed training: True" in proc.stdout and "GPU number: 2" in proc.stdout

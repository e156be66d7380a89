"""The budget and resume guarantees of the MMSeg configs hold for MMDetection's configs.

Our training tool trains the toy Mask R-CNN's 1 % budget to its end; a resume of that run at
another budget is then refused before anything is written, in one line naming both budgets (the
same ``BudgetMismatchError`` check as MMSeg's, tests/mmengine/test_mmseg_reliability.py, which
also covers exact resumes; the scheduler and the tool are the same for every MMEngine codebase,
so one codebase beside MMSeg stands for MMPretrain and MMAction2, whose toy budgets the other
tests train).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mmseg_testutils import REPO, child_env, snapshot

from budgeted.experiments.families import MMDET_MASK_RCNN_TOY, ConfigFamily
from budgeted.experiments.sweep import make_toy_data
from budgeted.runs.mmengine import final_metrics

pytestmark = pytest.mark.e2e


def train_seg(family: ConfigFamily, budget: float, work_dir, data, *extra: str):
    data_roots = [
        f"{split}_dataloader.dataset.data_root={data}" for split in ("train", "val", "test")
    ]
    command = [sys.executable, str(REPO / "tools/train_seg.py"),
               Path(family.filename(budget)).stem,
               "--work-dir", str(work_dir), *extra, "--cfg-options", *data_roots]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1")
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_a_finished_mmdet_budget_is_not_resumed_at_another_budget(tmp_path):
    family = MMDET_MASK_RCNN_TOY
    data = tmp_path / "toy"
    make_toy_data(family, data)
    work_dir = tmp_path / "work"
    first = train_seg(family, 0.01, work_dir, data)
    assert first.returncode == 0, first.stderr[-3000:]
    iters = family.iters(0.01)
    assert iters == 4 and (work_dir / f"iter_{iters}.pth").is_file()
    metrics = final_metrics(work_dir)
    assert metrics is not None
    before = snapshot(work_dir)

    other = train_seg(family, 0.01, work_dir, data, "--resume", "--budget", "0.05")
    assert other.returncode == 2, other.stderr[-3000:]
    ours = [ln for ln in other.stderr.splitlines() if ln.startswith("train_seg:")]
    assert len(ours) == 1, other.stderr[-3000:]  # one line (beside the codebases' own warnings)
    line = ours[0]
    assert line.startswith(
        "train_seg: error: cannot resume: the checkpoint's budget has train_cfg.max_iters "
        f"(end - begin)={iters}, the config's train_cfg.max_iters (end - begin)="
        f"{family.iters(0.05)}"
    ), line
    assert snapshot(work_dir) == before  # nothing written

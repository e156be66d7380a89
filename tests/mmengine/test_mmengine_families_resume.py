"""The budget and resume guarantees of the MMSeg configs hold for the other MMEngine codebases.

For the toy family of each (MMDetection, MMPretrain, MMAction2), our training tool trains the 1 %
budget to its end; a resume of that run at another budget is then refused before anything is
written, in one line naming both budgets (the same ``BudgetMismatchError`` check as MMSeg's,
tests/mmengine/test_mmseg_reliability.py), and a resume at the same budget continues to the same
end without training again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mmseg_testutils import REPO, child_env, snapshot

from budgeted.families import I3D_TOY, MMDET_MASK_RCNN_TOY, RESNET18_CIFAR10_TOY, ConfigFamily
from budgeted.mmengine.runs import final_metrics
from budgeted.sweep import make_toy_data

FAMILIES = [MMDET_MASK_RCNN_TOY, RESNET18_CIFAR10_TOY, I3D_TOY]


def train_seg(family: ConfigFamily, budget: float, work_dir, data, *extra: str):
    data_roots = [
        f"{split}_dataloader.dataset.data_root={data}" for split in ("train", "val", "test")
    ]
    command = [sys.executable, str(REPO / "tools/train_seg.py"),
               Path(family.filename(budget)).stem,
               "--work-dir", str(work_dir), *extra, "--cfg-options", *data_roots]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1")
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES, ids=[f.framework for f in FAMILIES])
def test_a_finished_budget_resumes_only_at_its_own_budget(family, tmp_path):
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

    same = train_seg(family, 0.01, work_dir, data, "--resume")
    assert same.returncode == 0, same.stderr[-3000:]
    assert sorted(p.name for p in work_dir.glob("iter_*.pth")) == [f"iter_{iters}.pth"]
    assert final_metrics(work_dir) is not None

"""MMDetection Mask R-CNN: the budget configs of MMDET_MASK_RCNN(_TOY), the toy COCO writer, one
toy run with MMDetection's own tools/train.py, and a refusal of tools/train_seg.py.

The stock route is the one MMDetection documents: ``python <mmdet>/.mim/tools/train.py CONFIG``
(``Runner.from_cfg(Config.fromfile(...)).train()``), with nothing of ours but the config's
``custom_imports``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mmdet
import pytest
from mmengine.config import Config
from mmseg_testutils import (
    REPO,
    check_budget_config,
    child_env,
    logged,
    recorded_lrs,
    snapshot,
    without_scope,
)

import budgeted
from budgeted.experiments.families import MMDET_MASK_RCNN, MMDET_MASK_RCNN_TOY, ConfigFamily
from budgeted.runs.mmengine import final_metrics
from budgeted.toys.coco import TOY_CATEGORIES, make_toy_coco
from budgeted.toys.mmdet import TOY_ROOT, write

CONFIGS = REPO / "configs"
MIM = Path(mmdet.__file__).parent / ".mim"
STOCK = "mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py"
IMPORTS = ["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"]
TOY_BASE = CONFIGS / "mmdet/toy/mask-rcnn_r18-toy_coco_base.py"
SPLITS = ("train", "val", "test")
BUDGETS = [
    (family, fraction, schedule)
    for family in (MMDET_MASK_RCNN, MMDET_MASK_RCNN_TOY)
    for fraction in family.fractions
    for schedule in family.schedules
]


def datasets(cfg: Config) -> list[dict]:
    return [cfg[f"{split}_dataloader"].dataset for split in SPLITS]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("family", "fraction", "schedule"),
    BUDGETS,
    ids=[f"{f.name}-{fr}-{s}" for f, fr, s in BUDGETS],
)
def test_budget_configs_load_with_the_family_budget(
    family: ConfigFamily, fraction: float, schedule: str
) -> None:
    cfg = Config.fromfile(CONFIGS / family.filename(fraction, schedule))
    scheduler = check_budget_config(cfg, family, fraction, schedule, "mmdet", IMPORTS)
    if schedule == "step":
        assert tuple(scheduler.milestones) == family.step_milestones == (2 / 3, 8 / 9)
    assert cfg.train_dataloader.sampler.type == "InfiniteSampler"
    assert cfg.val_cfg.type == "ValLoop" and cfg.test_cfg.type == "TestLoop"
    for evaluator in (cfg.val_evaluator, cfg.test_evaluator):
        assert evaluator.type == "CocoMetric" and evaluator.metric == ["bbox", "segm"]
    for dataset in datasets(cfg):  # the data root straight on each dataset, no wrappers
        assert dataset.type == "CocoDataset" and "data_root" in dataset
    if family is MMDET_MASK_RCNN:
        assert cfg.optim_wrapper.optimizer.lr == 0.02 and cfg.train_dataloader.batch_size == 2
        assert cfg.auto_scale_lr.base_batch_size == 16  # 2 images x 8 GPUs, as the stock 1x
        assert cfg.model.backbone.init_cfg.checkpoint == "torchvision://resnet50"
    else:
        assert cfg.optim_wrapper.optimizer.lr == 0.01 and cfg.model.backbone.init_cfg is None
        assert cfg.model.backbone.depth == 18 and cfg.model.roi_head.bbox_head.num_classes == 3
        # the ground truth of whichever set the dataloaders read (a sweep's --data)
        assert cfg.val_evaluator.ann_file is None and cfg.test_evaluator.ann_file is None
        for split in SPLITS:
            loader = cfg[f"{split}_dataloader"]
            assert loader.num_workers == 0 and loader.persistent_workers is False
            assert loader.dataset.data_root == f"{TOY_ROOT}/"
            assert loader.dataset.metainfo.classes == TOY_CATEGORIES


@pytest.mark.unit
def test_the_real_base_is_mmdetection_1x_made_iteration_based() -> None:
    ours = Config.fromfile(CONFIGS / "mmdet/mask-rcnn_r50_fpn_coco_base.py")
    stock = Config.fromfile(MIM / "configs" / STOCK)
    assert ours.train_cfg == dict(type="IterBasedTrainLoop", max_iters=90000, val_interval=90000)
    assert ours.param_scheduler == [] and ours.full_schedule_iters == MMDET_MASK_RCNN.full_iters
    for key in ("model", "optim_wrapper", "val_evaluator", "test_evaluator", "auto_scale_lr"):
        assert without_scope(ours[key].to_dict()) == stock[key].to_dict(), key
    for split in SPLITS:
        ours_loader = without_scope(ours[f"{split}_dataloader"].to_dict())
        stock_loader = stock[f"{split}_dataloader"].to_dict()
        if split == "train":
            assert ours_loader.pop("sampler") == dict(type="InfiniteSampler", shuffle=True)
            stock_loader.pop("sampler")
        assert ours_loader == stock_loader, split


@pytest.mark.unit
def test_toy_writer_writes_what_mmdetection_cocodataset_reads(tmp_path: Path) -> None:
    from mmdet.datasets import CocoDataset
    from mmdet.registry import DATASETS
    from mmengine.registry import DefaultScope

    root = write(tmp_path / "toy_coco", num_train=3, num_val=2, size=64, seed=1)
    assert (root / "annotations/instances_val.json").is_file()  # the family's ToyData marker
    assert (root / MMDET_MASK_RCNN_TOY.toy_data.marker).is_file()
    with pytest.raises(FileExistsError, match="already exists"):
        write(root)
    # the same bytes as Detectron2's toy_coco/ (one set, two layouts of its parent folder)
    make_toy_coco(str(tmp_path / "d2"), num_train=3, num_val=2, size=64, seed=1)
    assert snapshot(root) == snapshot(tmp_path / "d2/toy_coco")

    cfg = Config.fromfile(TOY_BASE)
    for split, count in (("train", 3), ("val", 2)):
        with DefaultScope.overwrite_default_scope("mmdet"):  # the pipeline's transforms
            dataset = DATASETS.build({**cfg[f"{split}_dataloader"].dataset, "data_root": root})
            item = dataset[0]  # through the config's pipeline
        assert type(dataset) is CocoDataset and len(dataset) == count
        assert dataset.metainfo["classes"] == TOY_CATEGORIES
        gt = item["data_samples"].gt_instances
        assert item["inputs"].shape[1:] == (128, 128)  # resized 64 -> 128
        # the test pipeline loads the annotations after resizing (as the stock): original size
        size = {"train": (128, 128), "val": (64, 64)}[split]
        assert len(gt) >= 1 and gt.masks.masks.shape[1:] == size
        assert set(gt.labels.tolist()) <= {0, 1, 2}
        if split == "val":  # the raw instances CocoMetric(ann_file=None) evaluates against
            assert len(item["data_samples"].instances) == len(gt)


@pytest.mark.e2e
def test_toy_writer_and_tool_need_no_detectron2(tmp_path: Path) -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['make_toy_coco.py', '--out', {str(tmp_path / 'set')!r}, '--num-train', '1',"
        " '--num-val', '1', '--size', '32']\n"
        "try:\n"
        f"    runpy.run_path({str(REPO / 'tools/make_toy_coco.py')!r}, run_name='__main__')\n"
        "except SystemExit as err:\n"
        "    assert err.code == 0, err.code\n"
        "import budgeted.toys.mmdet\n"
        "assert 'detectron2' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "set/annotations/instances_val.json").is_file()
    assert "val: " in proc.stdout


@pytest.mark.e2e
def test_mmdetection_train_py_trains_a_toy_budget_with_the_core_lr(tmp_path: Path) -> None:
    root = write(tmp_path / "toy_coco", num_train=8, num_val=4)
    fraction, schedule = 0.05, "linear"
    budget = CONFIGS / MMDET_MASK_RCNN_TOY.filename(fraction, schedule)
    config = tmp_path / "toy_budget.py"
    config.write_text(
        f'_base_ = "{budget}"\n'
        f"custom_imports = dict(imports={[*IMPORTS, 'budget_lr_recorder']!r}, "
        "allow_failed_imports=False)\n"
        f'custom_hooks = [dict(type="RecordLRHook", out_dir="{tmp_path}")]\n'
    )
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={root}/" for split in SPLITS]
    cmd = [sys.executable, str(MIM / "tools/train.py"), str(config), "--work-dir", str(work_dir),
           "--cfg-options", *options, "default_hooks.logger.interval=1"]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # 2 threads on a busy 2-core box
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    iters, warmup, base_lr = MMDET_MASK_RCNN_TOY.iters(fraction), MMDET_MASK_RCNN_TOY.warmup, 0.01
    expected = {
        it: base_lr * budgeted.lr_multiplier(schedule, it, iters, warmup_iters=warmup)
        for it in range(iters)
    }
    assert (iters, warmup) == (20, 3)
    assert recorded_lrs(tmp_path) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    lrs = logged(work_dir, "lr")  # MMEngine logs iteration it (1-based) with the LR it trained at
    assert lrs == pytest.approx({it + 1: lr for it, lr in expected.items()}, rel=1e-12)
    metrics = final_metrics(work_dir)  # what sweeps and reports read
    assert metrics is not None, proc.stderr[-3000:]
    for key in ("coco/bbox_mAP", "coco/segm_mAP"):
        assert 0.0 <= metrics[key] <= 1.0, metrics
    assert metrics == pytest.approx(
        {k: v for k, v in logged_record(work_dir, iters).items() if k.startswith("coco/")}
    )
    assert (work_dir / f"iter_{iters}.pth").is_file()


def logged_record(work_dir: Path, step: int) -> dict:
    """The validation record MMEngine logged at ``step``."""
    (path,) = work_dir.glob("*/vis_data/scalars.json")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (record,) = [r for r in records if r.get("step") == step and "lr" not in r]
    return record


@pytest.mark.unit
def test_our_tool_refuses_a_missing_toy_set_in_one_line_and_writes_nothing(
    tmp_path: Path, cli, capsys, monkeypatch
) -> None:
    name = Path(MMDET_MASK_RCNN_TOY.filename(0.01)).stem  # a bare shipped name
    monkeypatch.chdir(tmp_path)  # the toy data root is relative: datasets/toy_coco
    assert cli.main([name, "--work-dir", "work"]) == 2  # what tools/train_seg.py runs
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"train_seg: error: train_dataloader: {TOY_ROOT}/ does not exist; set "
        "train_dataloader.dataset.data_root (--cfg-options) or create the data "
        "(tools/make_toy_coco.py for the toy set; COCO 2017 as docs/mmdet.md lays it out)"
    )
    assert snapshot(tmp_path) == {}  # no work dir, no logs

"""MMPretrain ResNet-18 on CIFAR-10 and ImageNet (configs/mmpretrain, real and toy): the budget
configs, the toy writers and the md5-free toy CIFAR-10 reader, one toy run with MMPretrain's own
``tools/train.py`` (LR compared to the core) and a refusal of ``tools/train_seg.py``.

The stock route is the one MMPretrain documents: ``python <mmpretrain>/.mim/tools/train.py
CONFIG`` (``Runner.from_cfg(Config.fromfile(...)).train()``), with nothing of ours but the
config's ``custom_imports``.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import math
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import mmpretrain
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpretrain.datasets import CIFAR10, ImageNet
from mmpretrain.registry import DATASETS
from mmseg_testutils import (
    REPO,
    check_budget_config,
    child_env,
    load_tool,
    logged,
    recorded_lrs,
    snapshot,
    without_scope,
)

import budgeted
from budgeted.experiments.families import (
    RESNET18_CIFAR10,
    RESNET18_CIFAR10_TOY,
    RESNET18_IMAGENET,
    RESNET18_IMAGENET_TOY,
    ConfigFamily,
)
from budgeted.mmengine import toy_mmpretrain
from budgeted.mmengine.cli import check_budget_schedulers
from budgeted.runs.mmengine import final_metrics
from budgeted.toys.cifar10 import BASE_FOLDER, TOY_MARKER
from budgeted.toys.mmpretrain import (
    IMAGENET_WNIDS,
    ToyCIFAR10,
    write_cifar10,
    write_imagenet,
)

CONFIGS = REPO / "configs"
MIM = Path(mmpretrain.__file__).parent / ".mim"
STOCK = {"cifar10": "resnet/resnet18_8xb16_cifar10.py", "imagenet": "resnet/resnet18_8xb32_in1k.py"}
IMPORTS = ["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"]
TOY_IMPORTS = [*IMPORTS, "budgeted.toys.mmpretrain"]
SPLITS = ("train", "val", "test")
FAMILIES = (RESNET18_CIFAR10, RESNET18_CIFAR10_TOY, RESNET18_IMAGENET, RESNET18_IMAGENET_TOY)
BUDGETS = [(f, x, s) for f in FAMILIES for x in f.fractions for s in f.schedules]


@pytest.fixture(scope="module")
def toy_cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small toy CIFAR-10: 100 train / 20 test images."""
    return write_cifar10(tmp_path_factory.mktemp("toy") / "toy_cifar10", num_train=100, num_test=20)


def datasets(cfg: Config) -> list[dict]:
    return [cfg[f"{split}_dataloader"].dataset for split in SPLITS]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("family", "fraction", "schedule"), BUDGETS, ids=[f"{f.name}-{x}-{s}" for f, x, s in BUDGETS]
)
def test_budget_configs_load_with_the_family_budget(
    family: ConfigFamily, fraction: float, schedule: str
) -> None:
    cfg = Config.fromfile(CONFIGS / family.filename(fraction, schedule))
    iters = family.iters(fraction)
    toy = family.toy_data is not None
    imports = TOY_IMPORTS if toy and family.task == "cifar10" else IMPORTS
    scheduler = check_budget_config(cfg, family, fraction, schedule, "mmpretrain", imports)
    if schedule == "step":  # CIFAR: MMPretrain's epochs 100/150 of 200; ImageNet: the paper's
        cifar = family.task == "cifar10"
        assert tuple(scheduler.milestones) == ((1 / 2, 3 / 4) if cifar else (1 / 3, 2 / 3))
    assert without_scope(cfg.train_dataloader.sampler) == dict(type="InfiniteSampler", shuffle=True)
    assert cfg.val_cfg == {} and cfg.test_cfg == {}  # the stock ValLoop / TestLoop
    topk = (1,) if family.task == "cifar10" else (1, 5)
    for evaluator in (cfg.val_evaluator, cfg.test_evaluator):
        assert without_scope(evaluator) == dict(type="Accuracy", topk=topk)  # logs accuracy/top1
    kind = {"cifar10": "ToyCIFAR10" if toy else "CIFAR10", "imagenet": "ImageNet"}[family.task]
    root = family.toy_data.root if toy else f"data/{family.task}"
    for dataset in datasets(cfg):  # the data root straight on each dataset, no wrappers
        assert dataset.type == kind and dataset.data_root == root
    lr, decay = 0.1, 5e-4 if family.task == "cifar10" else 1e-4
    optimizer = dict(type="SGD", lr=lr, momentum=0.9, weight_decay=decay)
    assert without_scope(cfg.optim_wrapper.optimizer) == optimizer
    assert iters > family.warmup  # every budget, 1 % of the toys included, leaves a decay
    check_budget_schedulers(cfg)  # builds: the budget leaves a decay after the warmup


@pytest.mark.unit
def test_the_real_bases_are_the_stock_configs_made_iteration_based() -> None:
    for family in (RESNET18_CIFAR10, RESNET18_IMAGENET):
        ours = Config.fromfile(CONFIGS / family.filename(1.0))
        stock = Config.fromfile(MIM / "configs" / STOCK[family.task])
        assert ours.train_cfg.max_iters == family.full_iters
        assert not isinstance(stock.param_scheduler, list)  # one stock MultiStepLR, replaced
        for key in ("model", "data_preprocessor", "val_evaluator", "auto_scale_lr", "env_cfg"):
            assert without_scope(ours[key].to_dict()) == stock[key].to_dict(), key
        ours_loaders = {s: without_scope(ours[f"{s}_dataloader"].to_dict()) for s in SPLITS}
        stock_loaders = {s: stock[f"{s}_dataloader"].to_dict() for s in SPLITS}
        assert ours_loaders["train"].pop("sampler") == dict(type="InfiniteSampler", shuffle=True)
        stock_loaders["train"].pop("sampler")
        if family.task == "cifar10":  # 45,000 train / the last 5,000 validate / the test set
            assert ours_loaders["train"]["dataset"].pop("indices") == 45000
            assert ours_loaders["val"]["dataset"].pop("indices") == -5000
            assert ours_loaders["val"]["dataset"].pop("split") == "train"
            assert stock_loaders["val"]["dataset"].pop("split") == "test"
            for split in SPLITS:  # the stock writes data/cifar10/ for validation and test
                stock_loaders[split]["dataset"]["data_root"] = "data/cifar10"
            assert ours.train_dataloader.batch_size * 8 == 128 == ours.auto_scale_lr.base_batch_size
            assert stock.optim_wrapper.optimizer.weight_decay == 1e-4  # ours: the paper's 5e-4
        else:
            assert ours.train_dataloader.batch_size * 8 == 256 == ours.auto_scale_lr.base_batch_size
        assert ours_loaders == stock_loaders


@pytest.mark.unit
def test_the_cifar_holdout_is_the_last_5000_training_images_as_the_example(toy_cifar) -> None:
    spec = importlib.util.spec_from_file_location(
        "cifar10_budget", REPO / "examples/cifar10_budget.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    _, args = example.parse_args(["--data", "d", "--budget", "1", "--out", "o"])
    cfg = Config.fromfile(CONFIGS / RESNET18_CIFAR10.filename(1.0))
    train, val = cfg.train_dataloader.dataset, cfg.val_dataloader.dataset
    assert (train.indices, val.indices) == (50000 - args.holdout, -args.holdout) == (45000, -5000)
    per_epoch = math.ceil(train.indices / args.batch_size)
    assert args.epochs_full * per_epoch == 200 * 352 == RESNET18_CIFAR10.full_iters
    # the same int indices on the toy set (100 images): the first 90 train, the last 10 validate
    rows = [
        pickle.loads((toy_cifar / BASE_FOLDER / f"data_batch_{k}").read_bytes(), encoding="bytes")[
            b"data"
        ]
        for k in range(1, 6)
    ]
    images = np.vstack(rows).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    for dataset, expected in ((train, images[:90]), (val, images[-10:])):
        kept = {**dataset, "type": "ToyCIFAR10", "data_root": str(toy_cifar), "pipeline": []}
        kept["indices"] = 90 if dataset.indices > 0 else -10
        built = DATASETS.build(kept)
        assert np.array_equal(
            np.stack([built.get_data_info(i)["img"] for i in range(len(built))]), expected
        )


@pytest.mark.unit
def test_the_toy_bases_are_small_self_initialised_and_on_the_toy_sets() -> None:
    for family in (RESNET18_CIFAR10_TOY, RESNET18_IMAGENET_TOY):
        cfg = Config.fromfile(CONFIGS / family.filename(1.0))
        assert "Pretrained" not in json.dumps(cfg.to_dict(), default=str)
        backbone = cfg.model.backbone
        assert backbone.depth == 18 and backbone.base_channels == backbone.stem_channels == 16
        assert backbone.type == ("ResNet_CIFAR" if family.task == "cifar10" else "ResNet")
        assert cfg.model.head.in_channels == 128 and "init_cfg" not in backbone
        for split in SPLITS:
            loader = cfg[f"{split}_dataloader"]
            assert loader.num_workers == 0 and loader.persistent_workers is False
        assert cfg.train_cfg.max_iters == family.full_iters  # the base's own train_cfg
    cfg = Config.fromfile(CONFIGS / RESNET18_IMAGENET_TOY.filename(1.0))
    assert cfg.model.head.num_classes == cfg.data_preprocessor.num_classes == len(IMAGENET_WNIDS)


@pytest.mark.unit
def test_the_module_doctests_pass() -> None:
    from budgeted.toys import compat  # ToyCIFAR10's home

    results = [doctest.testmod(m, optionflags=doctest.ELLIPSIS) for m in (toy_mmpretrain, compat)]
    assert sum(r.failed for r in results) == 0 and sum(r.attempted for r in results) >= 8


@pytest.mark.unit
def test_toy_cifar10_is_read_by_the_stock_reader_without_checksums(toy_cifar, tmp_path) -> None:
    assert (toy_cifar / RESNET18_CIFAR10_TOY.toy_data.marker).is_file()
    cfg = Config.fromfile(CONFIGS / RESNET18_CIFAR10_TOY.filename(0.1))
    for split, count in (("train", 100), ("test", 20)):
        loader = cfg["train_dataloader" if split == "train" else "test_dataloader"]
        with DefaultScope.overwrite_default_scope("mmpretrain"):  # the pipeline's transforms
            dataset = DATASETS.build({**loader.dataset, "data_root": str(toy_cifar)})
            item = dataset[0]
        assert type(dataset) is ToyCIFAR10 and isinstance(dataset, CIFAR10)
        assert len(dataset) == count and item["inputs"].shape == (3, 32, 32)
        name = "data_batch_1" if split == "train" else "test_batch"
        raw = pickle.loads((toy_cifar / BASE_FOLDER / name).read_bytes(), encoding="bytes")
        assert dataset.get_data_info(0)["gt_label"] == raw[b"labels"][0]
    # the stock class refuses the toy set (md5 of the real archive); so does ours, unmarked
    with pytest.raises(RuntimeError, match="Cannot find CIFAR10 dataset"):
        CIFAR10(data_root=str(toy_cifar), split="test", download=False)
    unmarked = tmp_path / "unmarked"
    shutil.copytree(toy_cifar, unmarked)
    (unmarked / BASE_FOLDER / TOY_MARKER).unlink()
    with pytest.raises(RuntimeError, match="Cannot find ToyCIFAR10 dataset"):
        ToyCIFAR10(data_root=str(unmarked), split="test")
    (unmarked / BASE_FOLDER / TOY_MARKER).write_text("{}\n")  # marked, a batch missing
    (unmarked / BASE_FOLDER / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError) as err:
        ToyCIFAR10(data_root=str(unmarked), split="test")
    folder = unmarked / BASE_FOLDER
    assert str(err.value) == (
        f"toy CIFAR-10 {folder} lacks data_batch_3; remove {folder} and write it again "
        "(tools/make_toy_cifar10.py --root DATA_ROOT)"
    )
    with pytest.raises(FileExistsError, match="already exists"):
        write_cifar10(toy_cifar)


@pytest.mark.unit
def test_toy_imagenet_is_written_in_the_layout_the_stock_imagenet_reads(tmp_path) -> None:
    root = write_imagenet(tmp_path / "toy_imagenet", train_per_class=2, val_per_class=1, size=72)
    assert (root / RESNET18_IMAGENET_TOY.toy_data.marker).is_file()
    assert sorted(p.name for p in (root / "train").iterdir()) == list(IMAGENET_WNIDS)
    assert len(list((root / "val").glob("ILSVRC2012_val_*.JPEG"))) == 10
    again = write_imagenet(tmp_path / "again", train_per_class=2, val_per_class=1, size=72)
    assert snapshot(again) == snapshot(root)  # the same arguments, the same bytes
    with pytest.raises(FileExistsError, match="already exists"):
        write_imagenet(root)
    with pytest.raises(ValueError, match=r"^val_per_class=0 is invalid; allowed: a whole number"):
        write_imagenet(tmp_path / "bad", val_per_class=0)
    assert not (tmp_path / "bad").exists()
    cfg = Config.fromfile(CONFIGS / RESNET18_IMAGENET_TOY.filename(0.1))
    for split, count in (("train", 20), ("val", 10)):
        with DefaultScope.overwrite_default_scope("mmpretrain"):
            loader = cfg[f"{split}_dataloader"]
            dataset = DATASETS.build({**loader.dataset, "data_root": str(root)})
            item = dataset[0]  # through the config's pipeline: 64 px crops
        assert type(dataset) is ImageNet and len(dataset) == count
        assert item["inputs"].shape == (3, 64, 64)
        labels = [dataset.get_data_info(i)["gt_label"] for i in range(count)]
        assert sorted(labels) == sorted(list(range(10)) * (count // 10))
        assert dataset.metainfo["classes"][0].startswith("tench")  # label 0 is ImageNet's 0
    tool = load_tool("make_toy_imagenet")
    assert (
        tool.main(
            [
                "--root",
                str(tmp_path / "cli"),
                "--train-per-class",
                "1",
                "--val-per-class",
                "1",
                "--size",
                "32",
            ]
        )
        == 0
    )
    assert (tmp_path / "cli/meta/train.txt").read_text().count("\n") == 10


@pytest.mark.e2e
def test_mmpretrain_train_py_trains_a_toy_budget_with_the_core_lr(toy_cifar, tmp_path) -> None:
    fraction, schedule = 0.05, "step"
    budget = CONFIGS / RESNET18_CIFAR10_TOY.filename(fraction, schedule)
    config = tmp_path / "toy_budget.py"
    config.write_text(
        f'_base_ = "{budget}"\n'
        f"custom_imports = dict(imports={[*TOY_IMPORTS, 'budget_lr_recorder']!r}, "
        "allow_failed_imports=False)\n"
        f'custom_hooks = [dict(type="RecordLRHook", out_dir="{tmp_path}")]\n'
    )
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={toy_cifar}" for split in SPLITS]
    cmd = [
        sys.executable,
        str(MIM / "tools/train.py"),
        str(config),
        "--work-dir",
        str(work_dir),
        "--cfg-options",
        *options,
        "default_hooks.logger.interval=1",
    ]
    env = child_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")  # 2 threads on a busy 2-core box
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    family = RESNET18_CIFAR10_TOY
    iters, warmup, base_lr = family.iters(fraction), family.warmup, 0.1
    assert (iters, warmup) == (20, 3)
    expected = {
        it: base_lr
        * budgeted.lr_multiplier(schedule, it, iters, warmup_iters=warmup, milestones=(0.5, 0.75))
        for it in range(iters)
    }
    assert recorded_lrs(tmp_path) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    lrs = logged(work_dir, "lr")  # MMEngine logs iteration it (1-based) with the LR it trained at
    assert lrs == pytest.approx({it + 1: lr for it, lr in expected.items()}, rel=1e-12)
    top1 = logged(work_dir, "accuracy/top1")
    assert list(top1) == [iters] and 0.0 <= top1[iters] <= 100.0
    metrics = final_metrics(work_dir)  # what sweeps and reports read
    assert metrics == {"accuracy/top1": top1[iters]}
    assert (work_dir / f"iter_{iters}.pth").is_file()


@pytest.mark.unit
def test_our_tool_refuses_a_missing_toy_set_in_one_line_and_writes_nothing(
    tmp_path, cli, capsys, monkeypatch
) -> None:
    name = Path(RESNET18_IMAGENET_TOY.filename(0.1)).stem  # a bare shipped name
    monkeypatch.chdir(tmp_path)  # the toy data root is relative: datasets/toy_imagenet
    assert cli.main([name, "--work-dir", "work"]) == 2  # what tools/train_seg.py runs
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "train_seg: error: train_dataloader: datasets/toy_imagenet does not exist; set "
        "train_dataloader.dataset.data_root (--cfg-options) or create the data "
        "(tools/make_toy_cifar10.py or tools/make_toy_imagenet.py for the toy sets; "
        "docs/mmpretrain.md for CIFAR-10 and ImageNet)"
    )
    assert snapshot(tmp_path) == {}  # no work dir, no logs

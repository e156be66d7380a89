"""MMAction2 I3D on Kinetics-400 raw frames (configs/mmaction, real and toy): the budget configs,
the mmaction2 1.2.0 import shim, the toy raw-frame writer, and a toy run through the stock
runner (what MMAction2's own ``tools/train.py`` does) with the LR compared to the core."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from mmengine.config import Config
from mmseg_testutils import (
    REPO,
    check_budget_config,
    child_env,
    load_tool,
    logged,
    recorded_lrs,
    without_scope,
)

from budgeted import lr_multiplier
from budgeted.experiments.families import I3D, I3D_TOY
from budgeted.mmengine import mmaction_compat
from budgeted.runs.mmengine import final_metrics
from budgeted.toys.kinetics import CLASSES, write

CONFIGS = REPO / "configs"
STOCK = "recognition/i3d/i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb.py"
IMPORTS = [
    "budgeted.mmengine",
    "budgeted.mmengine.safe_checkpoints",
    "budgeted.mmengine.mmaction_compat",
]
SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def toy_kinetics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small toy raw-frame set: 4 classes x (3 train, 2 val) clips of 18 frames."""
    root = tmp_path_factory.mktemp("toy") / "toy_kinetics400"
    return write(root, train_per_class=3, val_per_class=2, frames=18)


def datasets(cfg: Config) -> list[dict]:
    return [cfg[f"{split}_dataloader"].dataset for split in SPLITS]


def names_pretrained(node: object) -> bool:
    """Whether a config node loads weights (a ``Pretrained`` init or a ``pretrained`` name)."""
    if isinstance(node, dict):
        if node.get("type") == "Pretrained" or node.get("pretrained"):
            return True
        return any(names_pretrained(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(names_pretrained(v) for v in node)
    return False


@pytest.mark.unit
def test_the_generated_configs_are_current_and_the_bases_hand_written():
    gen = load_tool("gen_mmengine_configs")
    assert [p for p in gen.stale_files() if p.startswith("mmaction")] == []
    for family in (I3D, I3D_TOY):
        path = CONFIGS / gen.model_base_path(family)
        assert "Generated" not in path.read_text(), path


@pytest.mark.unit
@pytest.mark.parametrize(
    ("family", "fraction"),
    [pytest.param(f, x, id=f"{f.name}-{x}") for f in (I3D, I3D_TOY) for x in f.fractions],
)
def test_every_budget_config_loads_with_its_budget_and_schedule(family, fraction):
    iters = family.iters(fraction)
    for schedule in ("linear", "step"):
        cfg = Config.fromfile(CONFIGS / family.filename(fraction, schedule))
        scheduler = check_budget_config(cfg, family, fraction, schedule, "mmaction", IMPORTS)
        assert iters > family.warmup  # the runner fills end with max_iters: a decay is left
        if schedule == "step":  # the paper's Kinetics baseline: x0.1 at 1/2 and 5/6
            assert list(scheduler.milestones) == pytest.approx([1 / 2, 5 / 6])
        assert cfg.train_dataloader.sampler == dict(type="InfiniteSampler", shuffle=True)
        for split, dataset in zip(SPLITS, datasets(cfg)):
            assert dataset.type == "RawframeDataset" and "data_root" in dataset
            kind = "train" if split == "train" else "val"
            assert dataset.ann_file == f"kinetics400_{kind}_list_rawframes.txt"
            assert dataset.data_prefix == dict(img=f"rawframes_{kind}")
        assert cfg.val_evaluator.type == "AccMetric" and cfg.val_cfg.type == "ValLoop"
        assert cfg.test_cfg.type == "TestLoop"


@pytest.mark.unit
def test_the_real_base_is_mmaction2_i3d_read_from_raw_frames_on_4_gpus():
    ours = Config.fromfile(CONFIGS / I3D.filename(1.0))
    mim = Path(importlib.util.find_spec("mmaction").origin).parent / ".mim/configs"
    stock = Config.fromfile(mim / STOCK)
    assert ours.train_cfg.max_iters == I3D.full_iters == 300000
    assert without_scope(ours.model.to_dict()) == stock.model.to_dict()  # pretrained init kept
    assert ours.model.backbone.pretrained == "torchvision://resnet50"
    # 4 GPUs x 8 clips (the stock's per-GPU batch) = 32; LR by the linear rule from 0.01 at 64
    assert ours.train_dataloader.batch_size == stock.train_dataloader.batch_size == 8
    assert stock.auto_scale_lr.base_batch_size == 64 and ours.auto_scale_lr.base_batch_size == 32
    assert ours.optim_wrapper.optimizer.lr == 0.005 == stock.optim_wrapper.optimizer.lr * 32 / 64
    rest = without_scope(ours.optim_wrapper.to_dict())
    assert rest["optimizer"].pop("lr") == 0.005 and stock.optim_wrapper.optimizer.pop("lr") == 0.01
    assert rest == stock.optim_wrapper.to_dict()  # SGD 0.9, 1e-4, clipping at 40
    assert all(d.data_root == "data/kinetics400" for d in datasets(ours))
    for split in SPLITS:  # the stock clip sampling and augmentation, decoded from frames
        pipeline = ours[f"{split}_dataloader"].dataset.pipeline
        assert pipeline == raw_frames(stock[f"{split}_dataloader"].dataset.pipeline), split
    assert pipeline[0] == dict(
        type="SampleFrames", clip_len=32, frame_interval=2, num_clips=10, test_mode=True
    )
    assert not names_pretrained(Config.fromfile(CONFIGS / I3D_TOY.filename(1.0)).to_dict())


def raw_frames(pipeline: list[dict]) -> list[dict]:
    """A stock video pipeline as raw frames: no ``DecordInit``, ``RawFrameDecode`` for
    ``DecordDecode``."""
    out = []
    for step in pipeline:
        if step["type"] == "DecordInit":
            continue
        if step["type"] == "DecordDecode":
            step = dict(type="RawFrameDecode", io_backend="disk")
        out.append(step)
    return out


@pytest.mark.unit
def test_the_toy_base_is_small_self_initialized_and_on_the_toy_set():
    cfg = Config.fromfile(CONFIGS / I3D_TOY.filename(0.1))
    assert cfg.train_cfg.max_iters == 40 and cfg.full_schedule_iters == 400
    backbone = cfg.model.backbone
    assert backbone.type == "ResNet3d" and backbone.depth == 18 and backbone.base_channels == 8
    assert backbone.pretrained is None and backbone.pretrained2d is False
    assert cfg.model.cls_head.num_classes == len(CLASSES)
    assert not names_pretrained(cfg.to_dict())
    assert cfg.train_dataloader.dataset.pipeline[0] == dict(
        type="SampleFrames", clip_len=8, frame_interval=2, num_clips=1
    )
    for split, dataset in zip(SPLITS, datasets(cfg)):
        loader = cfg[f"{split}_dataloader"]
        assert loader.num_workers == 0 and loader.persistent_workers is False
        assert dataset.data_root == I3D_TOY.toy_data.root == "datasets/toy_kinetics400"
    assert (Path("/x") / I3D_TOY.toy_data.marker).name == "kinetics400_val_list_rawframes.txt"


@pytest.mark.e2e
def test_the_shim_makes_mmaction_models_import_in_a_fresh_process():
    if not mmaction_compat.needs_stand_in():
        pytest.skip("the installed mmaction ships localizers/drn: nothing to stand in for")
    bare = subprocess.run(
        [sys.executable, "-c", "import mmaction.models"], capture_output=True, text=True
    )
    assert bare.returncode == 1
    assert "No module named 'mmaction.models.localizers.drn'" in bare.stderr
    code = (
        "import budgeted.mmengine.mmaction_compat as compat\n"
        "import mmaction.models\n"
        "from mmaction.registry import MODELS\n"
        "assert MODELS.get('Recognizer3D').__module__.startswith('mmaction.models')\n"
        "assert MODELS.get('DRN') is compat.DRNUnavailable\n"
        "try:\n"
        "    MODELS.build(dict(type='DRN'))\n"
        "except ModuleNotFoundError as err:\n"
        "    print(err)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith(mmaction_compat.MISSING_DRN)
    assert "\n" not in proc.stdout.strip()


def fake_mmaction(root: Path, *, with_drn: bool) -> Path:
    """An ``mmaction`` package whose ``localizers/__init__.py`` imports ``drn.drn`` as 1.2.0's
    does; ``with_drn``: the module is there (a folder without ``__init__.py``, as in the source
    tree)."""
    localizers = root / "mmaction/models/localizers"
    localizers.mkdir(parents=True)
    (root / "mmaction/__init__.py").write_text("")
    (root / "mmaction/models/__init__.py").write_text("from .localizers import DRN\n")
    (localizers / "__init__.py").write_text("from .drn.drn import DRN\n")
    if with_drn:
        (localizers / "drn").mkdir()
        (localizers / "drn/drn.py").write_text("class DRN:\n    real = True\n")
    return root


@pytest.mark.e2e
def test_the_shim_does_nothing_on_an_mmaction_that_has_the_module(tmp_path):
    ships = fake_mmaction(tmp_path / "ships", with_drn=True)
    lacks = fake_mmaction(tmp_path / "lacks", with_drn=False)
    assert mmaction_compat.needs_stand_in([lacks / "mmaction"]) is True
    assert mmaction_compat.needs_stand_in([ships / "mmaction"]) is False
    assert mmaction_compat.needs_stand_in([tmp_path / "nothing"]) is False
    code = (
        "import sys\n"
        "import budgeted.mmengine.mmaction_compat as compat\n"
        "assert compat.install() is False\n"
        "assert not any(name.startswith('mmaction.models') for name in sys.modules)\n"
        "import mmaction.models\n"
        "assert mmaction.models.DRN.real\n"
    )
    env = child_env(PYTHONPATH=f"{ships}:{REPO / 'plugins'}")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.unit
def test_the_toy_set_is_read_by_mmaction_rawframe_dataset(toy_kinetics, tmp_path):
    from mmaction.registry import DATASETS
    from mmengine.registry import init_default_scope

    init_default_scope("mmaction")
    cfg = Config.fromfile(CONFIGS / "mmaction/toy/i3d-toy_kinetics400_base.py")
    sizes = {"train": 3, "val": 2, "test": 2}
    for split, dataset in zip(SPLITS, datasets(cfg)):
        dataset.data_root = str(toy_kinetics)
        built = DATASETS.build(dataset)
        assert type(built).__name__ == "RawframeDataset" and len(built) == 4 * sizes[split]
        info = built.get_data_info(0)
        kind = "train" if split == "train" else "val"
        assert info["frame_dir"] == str(toy_kinetics / f"rawframes_{kind}/red_falling/{kind}_0000")
        assert info["total_frames"] == 18 and info["filename_tmpl"] == "img_{:05}.jpg"
        assert sorted(built.get_data_info(i)["label"] for i in range(4)) == [0, 1, 2, 3]
        sample = built[0]  # through the toy pipeline: the JPEG frames decode
        views = 6 if split == "test" else 1  # 2 clips x ThreeCrop
        size = 36 if split == "test" else 32
        assert tuple(sample["inputs"].shape) == (views, 3, 8, size, size)
        assert sample["data_samples"].gt_label.tolist() == [0]
    assert (toy_kinetics / "label_map.txt").read_text().split() == list(CLASSES)
    # deterministic, and an existing set is kept unless overwrite=True
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        write(root, train_per_class=1, val_per_class=1, frames=3, seed=5)
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert len(files) == 4 * 2 * 3 + 3
    assert all((one / f).read_bytes() == (two / f).read_bytes() for f in files)
    with pytest.raises(ValueError, match="already holds a dataset; pass --overwrite"):
        write(one, train_per_class=1, val_per_class=1, frames=3)
    write(one, train_per_class=1, val_per_class=1, frames=4, overwrite=True)
    assert (
        "red_falling/train_0000 4 0" in (one / "kinetics400_train_list_rawframes.txt").read_text()
    )
    make = load_tool("make_toy_kinetics")
    assert make.main([str(one), "--frames", "0", "--overwrite"]) == 2


@pytest.mark.e2e
def test_a_toy_budget_trains_with_the_stock_runner_and_the_core_lr(toy_kinetics, tmp_path):
    from mmengine.runner import Runner

    family, fraction, schedule = I3D_TOY, 0.05, "step"  # 20 iterations, warmup 3
    iters = family.iters(fraction)
    config = tmp_path / "toy_step.py"
    config.write_text(
        f'_base_ = "{CONFIGS / family.filename(fraction, schedule)}"\n'
        f"custom_imports = dict(imports={[*IMPORTS, 'budget_lr_recorder']!r}, "
        "allow_failed_imports=False)\n"
        f'custom_hooks = [dict(type="RecordLRHook", out_dir="{tmp_path}")]\n'
    )
    cfg = Config.fromfile(str(config))  # what MMAction2's tools/train.py does, then the runner
    cfg.merge_from_dict(
        {
            **{f"{split}_dataloader.dataset.data_root": str(toy_kinetics) for split in SPLITS},
            "default_hooks.logger.interval": 1,
            "experiment_name": "i3d_toy_stock",  # MMEngine keeps one visualizer per name
            "visualizer.name": "i3d_toy_stock",
        }
    )
    cfg.work_dir = str(tmp_path / "work")
    Runner.from_cfg(cfg).train()
    base_lr = cfg.optim_wrapper.optimizer.lr
    expected = {
        it: base_lr
        * lr_multiplier(
            schedule, it, iters, warmup_iters=family.warmup, milestones=(1 / 2, 5 / 6), gamma=0.1
        )
        for it in range(iters)
    }
    assert recorded_lrs(tmp_path) == pytest.approx(expected, rel=1e-12, abs=0)
    decay = sorted({round(lr / base_lr, 9) for it, lr in expected.items() if it >= family.warmup})
    assert decay == [0.01, 0.1, 1.0]  # both drops, at 1/2 and 5/6, fall inside the budget
    lrs = logged(tmp_path / "work", "lr")  # MMEngine logs iteration it (1-based)
    assert lrs == pytest.approx({it + 1: lr for it, lr in expected.items()}, rel=1e-12)
    top1 = logged(tmp_path / "work", "acc/top1")
    assert list(top1) == [iters] and 0.0 <= top1[iters] <= 1.0
    metrics = final_metrics(tmp_path / "work")  # what sweeps and reports read
    assert metrics is not None and metrics["acc/top1"] == top1[iters]
    assert {"acc/top1", "acc/top5", "acc/mean1"} <= set(metrics)
    assert (tmp_path / "work" / f"iter_{iters}.pth").is_file()


@pytest.mark.unit
def test_our_tool_refuses_a_missing_toy_set_in_one_line(tmp_path, cli, capsys, monkeypatch):
    work_dir = tmp_path / "work"
    missing = tmp_path / "no_toy_kinetics400"
    options = [f"{split}_dataloader.dataset.data_root={missing}" for split in SPLITS]
    monkeypatch.chdir(tmp_path)
    args = ["i3d-toy_kinetics400_budget10", "--work-dir", str(work_dir), "--cfg-options", *options]
    assert cli.main(args) == 2  # what tools/train_seg.py runs
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        f"train_seg: error: train_dataloader: {missing} does not exist; set "
        "train_dataloader.dataset.data_root (--cfg-options) or create the data "
        "(tools/make_toy_kinetics.py for the toy set; docs/mmaction.md for Kinetics-400 raw "
        "frames)"
    )
    assert not work_dir.exists() and sorted(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_the_module_examples_run():
    import doctest

    from budgeted.mmengine import toy_mmaction

    for module in (mmaction_compat, toy_mmaction):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__

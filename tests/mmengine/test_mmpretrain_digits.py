"""MMPretrain LeNet-5 on the UCI digits (configs/mmpretrain/digits): the budget configs, the
stock ``CustomDataset`` reading the written set, one budget trained to its end by MMPretrain's
own ``tools/train.py`` (LR compared to the core, accuracy logged) and the same budget by
``examples/digits_budget.py`` (the same model, batch for batch), and one by our
``tools/train_seg.py``; the same for a 1 % cell of MNIST-5k (configs/mmpretrain/mnist5k).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import mmpretrain
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpretrain.datasets import CustomDataset
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
from budgeted.experiments.families import LENET5_MNIST5K, ConfigFamily, ToyData
from budgeted.mmengine.cli import check_budget_schedulers
from budgeted.runs.mmengine import final_metrics
from budgeted.toys.digits import CLASSES, MEAN, STD, digits_split, write_digits
from budgeted.toys.mnist5k import write_mnist5k

CONFIGS = REPO / "configs"
MIM = Path(mmpretrain.__file__).parent / ".mim"
IMPORTS = ["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"]
SPLITS = ("train", "val", "test")
FAMILY = ConfigFamily(  # the entry proposed for budgeted/families.py (LENET5_DIGITS)
    name="lenet5_digits",
    framework="mmpretrain",
    folder="mmpretrain/digits",
    prefix="lenet5_digits_budget",
    ext=".py",
    full_iters=1720,  # 40 epochs x floor(1400 / 32) = 43 iterations (397 images held out)
    warmup=0,
    schedules={"linear": "", "step": "_step"},
    step_milestones=(1 / 2, 3 / 4),
    title="MMPretrain LeNet-5, UCI digits (scikit-learn) at 32x32, batch 32",
    paper="40 epochs at batch 32, SGD 0.9 / 1e-4 (MMPretrain's lenet5_mnist); step x0.1 at 1/2 "
    "and 3/4 (the paper's CIFAR-10 setting)",
    fractions=(0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
    toy_data=ToyData("datasets/digits", "meta/val.txt", "budgeted.toys.digits:write_digits"),
    task="digits",
)
BUDGETS = [(x, s) for x in FAMILY.fractions for s in FAMILY.schedules]


@pytest.fixture(scope="module")
def digits_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


@pytest.fixture(scope="module")
def mnist5k_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_mnist5k(tmp_path_factory.mktemp("data") / "mnist5k")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "digits_budget", REPO / "examples/digits_budget.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_the_committed_configs_are_the_generators_for_the_family() -> None:
    """What tools/gen_mmengine_configs.py writes for :data:`FAMILY`, byte for byte (once the
    family is in budgeted.experiments.families, the generator's own --check covers this)."""
    gen = load_tool("gen_mmengine_configs")
    expected = {
        gen.schedule_base_path(FAMILY, s): gen.schedule_base(FAMILY, s) for s in FAMILY.schedules
    }
    for fraction, schedule in BUDGETS:
        text = gen.budget_config(FAMILY, fraction, schedule)
        expected[Path(FAMILY.filename(fraction, schedule))] = text
    for rel, text in expected.items():
        assert (CONFIGS / rel).read_text() == text, rel
    present = {p.relative_to(CONFIGS) for p in (CONFIGS / FAMILY.folder).rglob("*.py")}
    assert present == {Path(p) for p in expected} | {Path(gen.model_base_path(FAMILY))}


@pytest.mark.unit
@pytest.mark.parametrize(("fraction", "schedule"), BUDGETS, ids=[f"{x}-{s}" for x, s in BUDGETS])
def test_budget_configs_load_with_the_family_budget(fraction: float, schedule: str) -> None:
    cfg = Config.fromfile(CONFIGS / FAMILY.filename(fraction, schedule))
    check_budget_config(cfg, FAMILY, fraction, schedule, "mmpretrain", IMPORTS)
    assert without_scope(cfg.train_dataloader.sampler) == dict(type="InfiniteSampler", shuffle=True)
    assert cfg.train_dataloader.batch_size == 32 and cfg.val_dataloader.batch_size == 100
    assert 397 % cfg.val_dataloader.batch_size != 1  # LeNet5.forward squeezes a batch of one
    for split in SPLITS:
        dataset = cfg[f"{split}_dataloader"].dataset
        assert dataset.type == "CustomDataset" and dataset.data_root == "datasets/digits"
        held_out = split != "train"
        assert dataset.data_prefix == ("val" if held_out else "train")
        assert dataset.ann_file == f"meta/{'val' if held_out else 'train'}.txt"
    assert without_scope(cfg.val_evaluator) == dict(type="Accuracy", topk=(1,))  # accuracy/top1
    optimizer = dict(type="SGD", lr=0.1, momentum=0.9, weight_decay=1e-4)
    assert without_scope(cfg.optim_wrapper.optimizer) == optimizer
    assert FAMILY.iters(fraction) > FAMILY.warmup
    check_budget_schedulers(cfg)  # builds: the budget leaves a decay after the warmup


@pytest.mark.unit
def test_the_base_is_the_stock_lenet5_on_the_digits() -> None:
    ours = Config.fromfile(CONFIGS / FAMILY.filename(1.0))
    stock = Config.fromfile(MIM / "configs/lenet/lenet5_mnist.py")
    assert without_scope(ours.model.to_dict()) == stock.model.to_dict()  # LeNet5 + ClsHead
    assert ours.model.backbone == dict(type="LeNet5", num_classes=10)
    assert ours.data_preprocessor == dict(mean=[MEAN], std=[STD], num_classes=10)
    assert ours.train_cfg.max_iters == FAMILY.full_iters == 1720
    assert "Pretrained" not in json.dumps(ours.to_dict(), default=str)


@pytest.mark.unit
def test_the_stock_custom_dataset_reads_the_split_pixel_for_pixel(digits_root) -> None:
    cfg = Config.fromfile(CONFIGS / FAMILY.filename(0.1, "step"))
    split = digits_split()
    for name, images, labels in (
        ("train", split.train_images, split.train_labels),
        ("val", split.val_images, split.val_labels),
    ):
        loader = cfg[f"{name}_dataloader"]
        with DefaultScope.overwrite_default_scope("mmpretrain"):  # the pipeline's transforms
            dataset = DATASETS.build({**loader.dataset, "data_root": str(digits_root)})
            items = [dataset[k] for k in (0, len(dataset) - 1)]
        assert type(dataset) is CustomDataset and len(dataset) == len(labels)
        assert dataset.metainfo["classes"] == CLASSES
        assert [dataset.get_data_info(i)["gt_label"] for i in range(len(dataset))] == list(labels)
        for item, k in zip(items, (0, len(labels) - 1)):
            assert item["inputs"].shape == (1, 32, 32)
            assert np.array_equal(item["inputs"][0].numpy(), images[k])


# set: (its family, budget, schedule, base LR, iterations); digits 5 % step-BAC: 86 iterations,
# drops at 43 and 65, the sampler's second shuffle from iteration 44; MNIST-5k: a 1 % cell
TRAINED = {
    "digits": (FAMILY, 0.05, "step", 0.2, 86),
    "mnist5k": (LENET5_MNIST5K, 0.01, "linear", 0.1, 12),
}


@pytest.mark.e2e
@pytest.mark.parametrize("data", list(TRAINED))
def test_mmpretrain_train_py_trains_a_budget_as_the_example_does(
    data, request, example, tmp_path
) -> None:
    """A budget through MMPretrain's own tools/train.py: the LR of every iteration is the
    core's, accuracy/top1 is logged at the end, and the example (``--data``) trains the same
    model: the same LRs, logged losses and final accuracy."""
    family, fraction, schedule, lr, iters = TRAINED[data]
    data_root = request.getfixturevalue(f"{data}_root")
    budget = CONFIGS / family.filename(fraction, schedule)
    config = tmp_path / "digits_budget.py"
    config.write_text(
        f'_base_ = "{budget}"\n'
        f"custom_imports = dict(imports={[*IMPORTS, 'budget_lr_recorder']!r}, "
        "allow_failed_imports=False)\n"
        f'custom_hooks = [dict(type="RecordLRHook", out_dir="{tmp_path}")]\n'
    )
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={data_root}" for split in SPLITS]
    cmd = [
        sys.executable, str(MIM / "tools/train.py"), str(config), "--work-dir", str(work_dir),
        "--cfg-options", *options, f"optim_wrapper.optimizer.lr={lr}",
        "default_hooks.logger.interval=1",
    ]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    assert (family.iters(fraction), family.warmup) == (iters, 0)
    params = {"milestones": (0.5, 0.75)} if schedule == "step" else {}
    expected = {
        it: lr * budgeted.lr_multiplier(schedule, it, iters, warmup_iters=0, **params)
        for it in range(iters)
    }
    assert recorded_lrs(tmp_path) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    lrs = logged(work_dir, "lr")  # MMEngine logs iteration it (1-based) with the LR it trained at
    assert lrs == pytest.approx({it + 1: v for it, v in expected.items()}, rel=1e-12)
    top1 = logged(work_dir, "accuracy/top1")
    assert list(top1) == [iters] and 20.0 < top1[iters] <= 100.0
    assert final_metrics(work_dir) == {"accuracy/top1": top1[iters]}  # what sweeps read

    out = tmp_path / "example"
    flags = ["--data", data, "--budget", str(fraction), "--schedule", schedule, "--lr", str(lr)]
    assert example.main([*flags, "--out", str(out)]) == 0
    *records, final = [
        json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["lr"] for r in records] == pytest.approx(list(expected.values()), rel=1e-12)
    assert final["val_accuracy"] * 100 == pytest.approx(top1[iters], abs=1e-4)
    losses = [r["loss"] for r in records]  # MMEngine logs the mean of the last 10 iterations
    smoothed = {it: np.mean(losses[max(0, it - 10) : it]) for it in range(1, iters + 1)}
    assert logged(work_dir, "loss") == pytest.approx(smoothed, rel=1e-4)


@pytest.mark.e2e
def test_our_train_seg_trains_a_digits_budget(digits_root, tmp_path, cli) -> None:
    budget = CONFIGS / FAMILY.filename(0.01)
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={digits_root}" for split in SPLITS]
    assert cli.main([str(budget), "--work-dir", str(work_dir), "--cfg-options", *options]) == 0
    metrics = final_metrics(work_dir)
    assert list(metrics) == ["accuracy/top1"] and 0.0 <= metrics["accuracy/top1"] <= 100.0
    assert (work_dir / "iter_17.pth").is_file()


TRAIN_TXT, VAL_TXT = "meta/train.txt", "meta/val.txt"


def edit_line(path: Path, number: int, edit) -> None:
    """Line ``number`` (1-based) of ``path`` becomes ``edit(line)``, as a hand would change it."""
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1] = edit(lines[number - 1].rstrip("\n")) + "\n"
    path.write_text("".join(lines))


def cut(path: Path) -> None:
    """``path`` cut short in the middle of a line, as a write that stopped leaves it."""
    path.write_bytes(path.read_bytes()[:5000])


def image_of_line(root: Path, name: str, number: int) -> str:
    return (root / name).read_text().splitlines()[number - 1].rsplit(" ", 1)[0]


# name: (the damage, the line's end after "train_seg: error: ")
DAMAGED = {
    "cut short": (
        lambda root: cut(root / TRAIN_TXT),
        "train_dataloader: {root}/meta/train.txt line 417: '00538.pn' has no label (a cut or "
        "damaged line); allowed: '<image> <label>' lines, the image a path relative to "
        "data_prefix {root}/train that exists inside it, the label in 0..9 (the 10 classes of "
        "its metainfo)",
    ),
    "label abc": (
        lambda root: edit_line(root / TRAIN_TXT, 7, lambda line: line.split()[0] + " abc"),
        "train_dataloader: {root}/meta/train.txt line 7: label 'abc' is not an integer; "
        "allowed: a label in 0..9 (the 10 classes of its metainfo)",
    ),
    "label 42": (
        lambda root: edit_line(root / TRAIN_TXT, 7, lambda line: line.split()[0] + " 42"),
        "train_dataloader: {root}/meta/train.txt line 7: label 42 is out of range; allowed: a "
        "label in 0..9 (the 10 classes of its metainfo)",
    ),
    "a held-out label -1": (
        lambda root: edit_line(root / VAL_TXT, 397, lambda line: line.split()[0] + " -1"),
        "val_dataloader: {root}/meta/val.txt line 397: label -1 is out of range; allowed: a "
        "label in 0..9 (the 10 classes of its metainfo)",
    ),
    "a missing image": (
        lambda root: (root / "train" / image_of_line(root, TRAIN_TXT, 7)).unlink(),
        "train_dataloader: {root}/meta/train.txt line 7: image '00008.png' does not exist in "
        "data_prefix {root}/train; allowed: a path relative to data_prefix that exists inside it",
    ),
    "../../etc/passwd": (
        lambda root: edit_line(root / TRAIN_TXT, 7, lambda line: "../../etc/passwd 8"),
        "train_dataloader: {root}/meta/train.txt line 7: image '../../etc/passwd' is outside "
        "data_prefix {root}/train; allowed: a path relative to data_prefix that exists inside it",
    ),
    "/etc/passwd": (
        lambda root: edit_line(root / TRAIN_TXT, 1, lambda line: "/etc/passwd 0"),
        "train_dataloader: {root}/meta/train.txt line 1: image '/etc/passwd' is outside "
        "data_prefix {root}/train; allowed: a path relative to data_prefix that exists inside it",
    ),
    "an empty line": (
        lambda root: edit_line(root / TRAIN_TXT, 3, lambda line: ""),
        "train_dataloader: {root}/meta/train.txt line 3 is empty; allowed: '<image> <label>' "
        "lines, the image a path relative to data_prefix {root}/train that exists inside it, "
        "the label in 0..9 (the 10 classes of its metainfo)",
    ),
    "an empty file": (
        lambda root: (root / TRAIN_TXT).write_text(""),
        "train_dataloader: annotation file {root}/meta/train.txt holds no lines: the training "
        "split is empty; allowed: one '<image> <label>' line per image",
    ),
    "no annotation file": (
        lambda root: (root / VAL_TXT).unlink(),
        "val_dataloader: annotation file {root}/meta/val.txt does not exist; set "
        "val_dataloader.dataset.ann_file (relative to data_root) or create the data "
        "(tools/make_toy_cifar10.py or tools/make_toy_imagenet.py for the toy sets; "
        "docs/mmpretrain.md for CIFAR-10 and ImageNet)",
    ),
    "not UTF-8": (
        lambda root: (root / TRAIN_TXT).write_bytes(b"00000.png 0\n\xff\xfe.png 1\n"),
        "train_dataloader: annotation file {root}/meta/train.txt cannot be read "
        "(UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 12: invalid start "
        "byte); allowed: a UTF-8 text file, one '<image> <label>' line per image",
    ),
}


def damaged_copy(digits_root: Path, tmp_path: Path, case: str) -> Path:
    root = Path(shutil.copytree(digits_root, tmp_path / "digits"))
    DAMAGED[case][0](root)
    return root


@pytest.mark.unit
@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_annotation_file_is_one_line_before_anything_is_written(
    case, digits_root, tmp_path, cli, capsys
) -> None:
    """Issue 40/22: each damaged ``meta/*.txt`` is one line naming the file, the line, the value
    and what is allowed, before MMEngine's runner writes its timestamp folder and config dump;
    the data and the work dir's folder are left as they were."""
    root = damaged_copy(digits_root, tmp_path, case)
    data = snapshot(root)
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={root}" for split in SPLITS]
    budget = CONFIGS / FAMILY.filename(0.01)
    assert cli.main([str(budget), "--work-dir", str(work_dir), "--cfg-options", *options]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"train_seg: error: {DAMAGED[case][1].format(root=root)}"]
    assert snapshot(root) == data and not work_dir.exists()


@pytest.mark.unit
def test_any_custom_dataset_a_config_names_is_checked_through_its_wrappers(
    digits_root, tmp_path, cli, capsys
) -> None:
    """Not only the digits family: a user's config whose training set is MMPretrain's
    ``ImageNet`` (a ``CustomDataset`` reading the same lines; its ``split=`` finds
    ``meta/train.txt``) inside a ``RepeatDataset``, with 1,000 ImageNet classes in its metainfo
    and a LeNet-5 of 10 outputs: a label of 42 is out of the model's range."""
    root = damaged_copy(digits_root, tmp_path, "label 42")
    config = tmp_path / "user.py"
    config.write_text(
        f'_base_ = "{CONFIGS / FAMILY.filename(0.01)}"\n'
        "train_dataloader = dict(dataset=dict(_delete_=True, type='RepeatDataset', times=2, "
        f"dataset=dict(type='ImageNet', data_root='{root}', split='train', "
        "pipeline={{_base_.pipeline}})))\n"
    )
    data = snapshot(root)
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={root}" for split in ("val", "test")]
    assert cli.main([str(config), "--work-dir", str(work_dir), "--cfg-options", *options]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"train_seg: error: train_dataloader: {root}/meta/train.txt line 7: label 42 is out of "
        "range; allowed: a label in 0..9 (model.backbone.num_classes=10)"
    ]
    assert snapshot(root) == data and not work_dir.exists()


@pytest.mark.e2e
@pytest.mark.parametrize("case", ["no data", "label abc"])
def test_train_seg_refuses_a_digits_config_in_exactly_one_stderr_line(
    case, digits_root, tmp_path
) -> None:
    """Issue 40/26: ``tools/train_seg.py`` on an MMPretrain config in a fresh process: stderr is
    the refusal alone, without the ``torch.jit.script`` FutureWarning that importing
    MMPretrain's models (through MMDetection, Detectron2 and fvcore) prints."""
    if case == "no data":
        root = tmp_path / "missing"
        expected = (
            f"train_dataloader: {root} does not exist; set train_dataloader.dataset.data_root "
            "(--cfg-options) or create the data (tools/make_toy_cifar10.py or "
            "tools/make_toy_imagenet.py for the toy sets; docs/mmpretrain.md for CIFAR-10 and "
            "ImageNet)"
        )
    else:
        root = damaged_copy(digits_root, tmp_path, case)
        expected = DAMAGED[case][1].format(root=root)
    work_dir = tmp_path / "work"
    options = [f"{split}_dataloader.dataset.data_root={root}" for split in SPLITS]
    budget = CONFIGS / FAMILY.filename(0.01)
    cmd = [
        sys.executable, str(REPO / "tools/train_seg.py"), str(budget), "--work-dir",
        str(work_dir), "--cfg-options", *options,
    ]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [f"train_seg: error: {expected}"]
    assert not work_dir.exists()

"""budgeted.mmengine.arms and .subset: ``budgeted-train-seg --optimizer``, ``--schedule-free``,
``--subset`` and ``--validate-every`` on the LeNet-5 digits family (configs/mmpretrain/digits);
the schedule-free runs themselves are in test_mmengine_schedule_free.py."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest
from mmengine.registry import DefaultScope
from mmpretrain.registry import DATASETS
from mmseg_testutils import REPO
from test_mmpretrain_digits import SPLITS

from budgeted.mmengine import arms, subset
from budgeted.mmengine.preflight import preflight
from budgeted.toys.digits import CLASSES, write_digits

BUDGET1 = REPO / "configs/mmpretrain/digits/lenet5_digits_budget1.py"  # 17 iterations


@pytest.fixture(scope="module")
def digits_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


def flags(root: Path, work_dir: Path, *extra: str, config: Path = BUDGET1) -> list[str]:
    options = [f"{split}_dataloader.dataset.data_root={root}" for split in SPLITS]
    return [str(config), "--work-dir", str(work_dir), *extra, "--cfg-options", *options]


@pytest.mark.unit
def test_the_examples_in_the_docstrings_run() -> None:
    for module in (arms, subset):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


@pytest.mark.unit
def test_subset_draws_a_seeded_sorted_share_that_differs_by_seed(
    digits_root, tmp_path, cli
) -> None:
    """--subset 0.05 of the 1,400 training images: 70, sorted, the metainfo passed through; the
    draw follows randomness.seed (the sweep's seed), the same seed the same images."""
    drawn = {}
    for seed in (0, 1, 0):
        args = cli.parse_args(
            [*flags(digits_root, tmp_path / "work", "--subset", "0.05"), f"randomness.seed={seed}"]
        )
        cfg = preflight(args)
        wrapped = cfg.train_dataloader.dataset
        assert (wrapped.type, wrapped.fraction, wrapped.seed) == ("RandomSubsetDataset", 0.05, seed)
        with DefaultScope.overwrite_default_scope("mmpretrain"):
            dataset = DATASETS.build(wrapped)
        assert len(dataset) == 70 and len(dataset.dataset) == 1400
        assert dataset.metainfo["classes"] == CLASSES
        assert dataset.indices == sorted(set(dataset.indices))
        paths = [dataset.get_data_info(i)["img_path"] for i in range(len(dataset))]
        assert paths[0] == dataset.dataset.get_data_info(dataset.indices[0])["img_path"]
        drawn.setdefault(seed, paths)
        assert drawn[seed] == paths
    assert drawn[0] != drawn[1]
    assert subset.subset_indices(1400, 0.0001, seed=3) == subset.subset_indices(1400, 1e-9, 3)
    assert len(subset.subset_indices(1400, 0.0001, seed=3)) == 1  # max(1, round(0.14))


@pytest.mark.integration
def test_subset_and_adamw_in_the_runner(digits_root, tmp_path, cli, monkeypatch) -> None:
    """``--subset 0.05 --optimizer adamw``: the runner trains on 70 images with
    torch.optim.AdamW at the config's lr 0.1 and weight_decay 1e-4 (SGD's momentum dropped)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    config = tmp_path / "user.py"
    config.write_text(
        f'_base_ = "{BUDGET1}"\n'
        'custom_imports = dict(imports=["budgeted.mmengine", "schedule_free_recorder"], '
        "allow_failed_imports=False)\n"
        f"custom_hooks = [dict(type='RecordScheduleFreeHook', out_dir='{tmp_path}')]\n"
    )
    argv = flags(digits_root, tmp_path / "work", "--subset", "0.05", "--optimizer", "adamw")
    argv[0] = str(config)
    assert cli.main(argv) == 0
    seen = json.loads((tmp_path / "record.json").read_text())
    assert seen["train_size"] == 70
    assert seen["optimizer"] == "torch.optim.adamw.AdamW"
    assert seen["defaults"] == {"lr": 0.1, "weight_decay": 1e-4}


@pytest.mark.unit
def test_validate_every_and_the_optimizer_swap_in_the_config(digits_root, tmp_path, cli) -> None:
    args = cli.parse_args(
        flags(digits_root, tmp_path / "w", "--validate-every", "5", "--optimizer", "amsgrad")
    )
    cfg = preflight(args)
    assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == (17, 5)
    optimizer = dict(type="Adam", lr=0.1, weight_decay=1e-4, amsgrad=True)
    assert cfg.optim_wrapper.optimizer == optimizer
    assert [e.type for e in cfg.param_scheduler] == ["BudgetLinearLR"]  # kept
    args = cli.parse_args(
        [*flags(digits_root, tmp_path / "w", "--schedule-free"), "param_scheduler.0.warmup_iters=3"]
    )
    cfg = preflight(args)
    sgd = dict(type="SGDScheduleFree", lr=0.1, weight_decay=1e-4, momentum=0.9, warmup_steps=3)
    assert cfg.optim_wrapper.optimizer == sgd and cfg.param_scheduler == []
    assert cfg.train_cfg.max_iters == 17  # the budget kept
    assert "ScheduleFreeHook" in [h.type for h in cfg.custom_hooks]


EPOCHS = 'train_cfg = dict(_delete_=True, type="EpochBasedTrainLoop", max_epochs=2)\n'
REFUSED = {  # flags, extra config line: the line after "train_seg: error: "
    "amsgrad schedule-free": (
        ["--schedule-free", "--optimizer", "amsgrad"],
        "--schedule-free: optimizer 'amsgrad' has no schedule-free form; allowed: --optimizer "
        "sgd or adamw",
    ),
    "two schedules": (
        ["--schedule-free", "--schedule", "linear"],
        "--schedule linear and --schedule-free are two LR schedules; allowed: one of them",
    ),
    "Adam schedule-free": (
        ["--schedule-free", "--cfg-options", "optim_wrapper.optimizer.type=Adam"],
        "--schedule-free: the config's optimizer Adam has no schedule-free form; allowed: "
        "--optimizer sgd or adamw, or a config with SGD or AdamW",
    ),
    "momentum 0": (
        ["--schedule-free", "--cfg-options", "optim_wrapper.optimizer.momentum=0"],
        "--schedule-free: optimizer {'type': 'SGDScheduleFree', 'lr': 0.1, 'weight_decay': "
        "0.0001, 'momentum': 0, 'warmup_steps': 0} cannot be built: Momentum must be between 0 "
        "and 1 exclusive: 0",
    ),
    "epochs": (
        ["--validate-every", "5", "--cfg-options", "train_cfg.type=EpochBasedTrainLoop"],
        "--validate-every 5 needs an iteration-based train loop; train_cfg.type is "
        "EpochBasedTrainLoop; allowed: IterBasedTrainLoop or TimeBudgetTrainLoop (--schedule "
        "makes an epoch-based config iteration-based)",
    ),
    "subset 0": (
        ["--subset", "0"],
        "argument --subset: '0' is invalid; allowed: a fraction in (0, 1] of the training set "
        "(see train_seg --help)",
    ),
    "subset 1.5": (
        ["--subset", "1.5"],
        "argument --subset: '1.5' is invalid; allowed: a fraction in (0, 1] of the training "
        "set (see train_seg --help)",
    ),
    "validate every 0": (
        ["--validate-every", "0"],
        "argument --validate-every: '0' is invalid; allowed: a whole number >= 1 (see "
        "train_seg --help)",
    ),
    "rmsprop": (
        ["--optimizer", "rmsprop"],
        "argument --optimizer: optimizer 'rmsprop' is not a known optimizer; allowed: sgd, "
        "adamw, amsgrad (see train_seg --help)",
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_value_or_combination_is_one_line(case, digits_root, tmp_path, cli, capsys):
    extra, line = REFUSED[case]
    work_dir = tmp_path / "work"
    argv = [str(BUDGET1), "--work-dir", str(work_dir), *extra]
    if "--cfg-options" not in extra:
        argv += ["--cfg-options"]
    argv += [f"{split}_dataloader.dataset.data_root={digits_root}" for split in SPLITS]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [f"train_seg: error: {line}"]
    assert not work_dir.exists()


@pytest.mark.unit
def test_schedule_free_on_an_own_epoch_config_is_a_sweep_cell(digits_root, tmp_path, cli):
    """What ``budgeted-sweep --config`` runs for the ``schedulefree`` arm (no ``--schedule``): a
    user's epoch-based config with a LinearLR warmup and MultiStepLR becomes iteration-based
    over its budget, with no LR scheduler and the warmup as ``warmup_steps``."""
    from own_configs import digits_config

    schedule = (
        '[dict(type="LinearLR", start_factor=0.1, by_epoch=False, begin=0, end=5), '
        'dict(type="MultiStepLR", by_epoch=True, milestones=[1], gamma=0.1)]'
    )
    config = digits_config(tmp_path, digits_root, schedule)
    argv = [str(config), "--work-dir", str(tmp_path / "w"), "--budget", "0.5"]
    cfg = preflight(cli.parse_args([*argv, "--schedule-free", "--optimizer", "adamw"]))
    assert cfg.train_cfg == dict(type="IterBasedTrainLoop", max_iters=44, val_interval=44)
    stated = preflight(cli.parse_args([*argv, "--full-iters", "88", "--schedule-free"]))
    assert stated.train_cfg == cfg.train_cfg  # the sweep's cell states the full schedule too
    assert cfg.budget_fraction == 0.5  # of 2 epochs x ceil(1400 / 32) = 88 iterations
    assert cfg.param_scheduler == []
    adamw = dict(type="AdamWScheduleFree", lr=0.1, weight_decay=1e-4, warmup_steps=5)
    assert cfg.optim_wrapper.optimizer == adamw

"""A resumed checkpoint whose base LRs are not the config's is refused (issue 40, items 15 and 25),
on the digits family (configs/mmpretrain/digits) where the issue measured it: edited
``base_values`` and ``initial_lr`` (x10, NaN), a config whose LR or ``bias_lr_mult`` changed; per
param group (``paramwise_cfg.bias_lr_mult=2``: biases at twice the LR), so an unchanged config
resumes exactly. Real runs of ``tools/train_seg.py`` (its ``main`` in this process), the stock
runner; a diverged run names the base LR it trained at, not the config's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner
from mmseg_testutils import REPO, logged, snapshot

from budgeted.mmengine.checkpoint import load_mmengine_checkpoint
from budgeted.mmengine.hooks import Diverged
from budgeted.schedules import BudgetMismatchError
from budgeted.toys.digits import write_digits

CONFIG = REPO / "configs/mmpretrain/digits/lenet5_digits_budget1.py"  # 17 iterations
SPLITS = ("train", "val", "test")
BIAS = "optim_wrapper.paramwise_cfg.bias_lr_mult=2.0"
NAN = float("nan")


@pytest.fixture(scope="module")
def digits_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


def options(root: Path, *extra: str) -> list[str]:
    return [
        *(f"{split}_dataloader.dataset.data_root={root}" for split in SPLITS),
        "default_hooks.checkpoint.interval=8",
        "default_hooks.logger.interval=1",
        BIAS,
        *extra,
    ]


def args(work_dir: Path, root: Path, *extra: str) -> list[str]:
    return [str(CONFIG), "--work-dir", str(work_dir), "--cfg-options", *options(root, *extra)]


@pytest.fixture(scope="module")
def full_run(digits_root: Path, tmp_path_factory: pytest.TempPathFactory, cli) -> Path:
    """The uninterrupted 17-iteration budget, checkpoints after 8 and 16 (and 17)."""
    work = tmp_path_factory.mktemp("digits") / "full"
    assert cli.main(args(work, digits_root)) == 0
    return work


def stopped_at_8(full: Path, folder: Path, scale_schedulers=None, scale_optimizer=None) -> Path:
    """``folder`` as if the run stopped after iteration 8: its ``iter_8.pth`` (each scheduler's
    ``base_values`` and each param group's ``initial_lr`` mapped, as a hand would edit them)
    named by ``last_checkpoint``."""
    folder.mkdir()
    checkpoint = load_mmengine_checkpoint(full / "iter_8.pth")
    if scale_schedulers is not None:
        for state in checkpoint["param_schedulers"]:
            state["base_values"] = [scale_schedulers(v) for v in state["base_values"]]
    if scale_optimizer is not None:
        for group in checkpoint["optimizer"]["param_groups"]:
            group["initial_lr"] = scale_optimizer(group["initial_lr"])
    torch.save(checkpoint, folder / "iter_8.pth")
    (folder / "last_checkpoint").write_text(str(folder / "iter_8.pth"))
    return folder


FIX = "start a new run from its weights with --cfg-options load_from={path} (without --resume)"
REFUSALS = {  # name: (base_values, initial_lr, --cfg-options, the line's start, its end)
    "base_values and initial_lr x10": (
        lambda v: v * 10,
        lambda v: v * 10,
        [],
        "train_seg: error: cannot resume from {path}: its param_scheduler[0] has base LR 1 in "
        "param group 0 of 11 (base_values), where the config gives 0.1 "
        "(optim_wrapper.optimizer.lr=0.1): resuming it would train every remaining iteration at "
        "other LRs than the run it continues (the file was edited, or the config's LR changed "
        "since); every group's base LR is 10 x the config's, as if the run was planned with "
        "optim_wrapper.optimizer.lr=1: resume with that",
        FIX,
    ),
    "initial_lr x10": (
        None,
        lambda v: v * 10,
        [],
        "train_seg: error: cannot resume from {path}: its optimizer has base LR 1 in param group "
        "0 of 10 (param groups' initial_lr), where the config gives 0.1 "
        "(optim_wrapper.optimizer.lr=0.1)",
        FIX,
    ),
    "base LR nan": (
        lambda v: NAN,
        lambda v: NAN,
        [],
        "train_seg: error: cannot resume from {path}: its param_scheduler[0] has base LR nan in "
        "param group 0 of 11 (base_values), where the config gives 0.1 "
        "(optim_wrapper.optimizer.lr=0.1): not a finite number >= 0, the file was damaged or "
        "edited; resume from another checkpoint",
        FIX,
    ),
    "the config's lr changed": (
        None,
        None,
        ["optim_wrapper.optimizer.lr=0.2"],
        "train_seg: error: cannot resume from {path}: its param_scheduler[0] has base LR 0.1 in "
        "param group 0 of 11 (base_values), where the config gives 0.2 "
        "(optim_wrapper.optimizer.lr=0.2)",
        "as if the run was planned with optim_wrapper.optimizer.lr=0.1: resume with that, or "
        + FIX,
    ),
    "the config's bias_lr_mult changed": (
        None,
        None,
        ["optim_wrapper.paramwise_cfg.bias_lr_mult=3.0"],
        "train_seg: error: cannot resume from {path}: its param_scheduler[0] has base LR 0.2 in "
        "param group 1 of 11 (base_values), where the config gives 0.3 "
        "(optim_wrapper.optimizer.lr=0.1 with that group's multiplier)",
        "the groups' base LRs are not one multiple of the config's (the file was edited); "
        "resume from another checkpoint, or " + FIX,
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(REFUSALS))
def test_other_base_lrs_are_refused_in_one_line_and_nothing_is_written(
    case, full_run, digits_root, tmp_path, cli, capsys
) -> None:
    schedulers, optimizer, extra, start, end = REFUSALS[case]
    folder = stopped_at_8(full_run, tmp_path / "work", schedulers, optimizer)
    path = folder / "iter_8.pth"
    before = snapshot(folder)
    capsys.readouterr()
    assert cli.main([*args(folder, digits_root, *extra), "--resume"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith(start.format(path=path)), err[0]
    assert err[0].endswith(end.format(path=path)), err[0]
    assert snapshot(folder) == before  # not a byte, not a folder: no timestamp, no dump


@pytest.mark.integration
def test_an_unchanged_config_with_per_group_multipliers_resumes_exactly(
    full_run, digits_root, tmp_path, cli
) -> None:
    """Biases at twice the LR (11 scheduler groups: MMEngine's base settings too): resumed after
    iteration 8, iterations 9-17 train at the uninterrupted run's LRs, to the same accuracy."""
    folder = stopped_at_8(full_run, tmp_path / "work")
    assert cli.main([*args(folder, digits_root), "--resume"]) == 0
    full = logged(full_run, "lr")
    resumed = logged(folder, "lr")
    assert sorted(resumed) == list(range(9, 18))
    assert resumed == pytest.approx({it: full[it] for it in resumed}, rel=1e-12)
    assert logged(folder, "accuracy/top1") == logged(full_run, "accuracy/top1")


def stock_config(root: Path, work_dir: Path, **changes) -> Config:
    """The digits budget as MMPretrain's own tools/train.py runs it: ``Config.fromfile``, the
    overrides merged, nothing of our tool in between."""
    cfg = Config.fromfile(str(CONFIG))
    cfg.merge_from_dict(
        {
            **{f"{split}_dataloader.dataset.data_root": str(root) for split in SPLITS},
            "default_hooks.checkpoint.interval": 8,
            "optim_wrapper.paramwise_cfg.bias_lr_mult": 2.0,
            "work_dir": str(work_dir),
            "experiment_name": work_dir.name,
        }
    )
    cfg.merge_from_dict(changes)
    return cfg


@pytest.mark.integration
def test_the_stock_runner_refuses_other_base_values_when_it_resumes(
    full_run, digits_root, tmp_path
) -> None:
    """MMEngine's own ``Runner`` with the budget scheduler: the scheduler refuses the edited
    state when the runner loads it."""
    folder = stopped_at_8(full_run, tmp_path / "work", lambda v: v * 10, lambda v: v * 10)
    cfg = stock_config(digits_root, folder, resume=True, load_from=str(folder / "iter_8.pth"))
    with pytest.raises(BudgetMismatchError) as err:
        Runner.from_cfg(cfg).train()
    assert str(err.value).startswith(
        "cannot resume: the checkpoint's BudgetLinearLR has base LR 1 in param group 0 of 11 "
        "(base_values), where the config gives 0.1 (optim_wrapper.optimizer.lr): "
    ), err.value


@pytest.mark.integration
def test_a_diverged_line_names_the_base_lr_in_use_not_the_configs(digits_root, tmp_path) -> None:
    """The base config (no scheduler) resumed by the stock runner from a checkpoint whose LR is
    NaN: the run diverges at once, and the line says base LR nan (the config says 0.1)."""
    first = tmp_path / "first"
    base = dict(train_cfg=dict(max_iters=2, val_interval=100), param_scheduler=[],
                default_hooks=dict(checkpoint=dict(interval=2)))  # fmt: skip
    Runner.from_cfg(stock_config(digits_root, first, **base)).train()
    checkpoint = load_mmengine_checkpoint(first / "iter_2.pth")
    for group in checkpoint["optimizer"]["param_groups"]:
        group["lr"] = NAN
    second = tmp_path / "second"
    second.mkdir()
    torch.save(checkpoint, second / "iter_2.pth")
    more = dict(base, train_cfg=dict(max_iters=6, val_interval=100))
    cfg = stock_config(digits_root, second, resume=True, load_from=str(second / "iter_2.pth"),
                       custom_hooks=[dict(type="DivergenceHook")], **more)  # fmt: skip
    with pytest.raises(Diverged) as stop:
        Runner.from_cfg(cfg).train()
    assert re.search(r"at iteration [3-6] \(base LR nan\); ", stop.value.message), stop.value

"""budgeted.detectron2.lazy and tools/lazyconfig_train_net.py (lazy_cli)."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from d2_testutils import (
    REPO,
    detectron2_tool,
    edited_checkpoint,
    folder_hashes,
    last_line,
    logged_lrs,
    read_metrics,
)
from detectron2.config import LazyConfig, instantiate
from detectron2.solver import LRMultiplier

from budgeted.detectron2 import BudgetConfigError, BudgetLRScheduler
from budgeted.detectron2.cli import argument_parser
from budgeted.detectron2.lazy import BudgetLRMultiplier, build_lazy_lr_scheduler
from budgeted.detectron2.lazy_cli import load, run
from budgeted.detectron2.preflight import setup
from budgeted.detectron2.toy import make_toy_coco
from budgeted.safety import save_weights_subset
from budgeted.schedules import BudgetSchedule

LAZY = "configs/detectron2/lazy/mask_rcnn_R_50_FPN_budget10.py"
LAZY_TOY = "configs/detectron2/lazy/mask_rcnn_toy_budget10.py"


@pytest.mark.unit
@pytest.mark.parametrize("schedule,params", [("linear", {}), ("step", {"gamma": 0.5}),
                                             ("cosine", {"eta": 0.1})])  # fmt: skip
def test_lr_multiplier_through_detectron2s_lrmultiplier_matches_the_core(schedule, params) -> None:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    mult = BudgetLRMultiplier(schedule, 90, warmup_iters=10, warmup_factor=0.01, **params)
    sched = LRMultiplier(opt, mult, max_iter=90)  # what hooks.LRScheduler builds from it
    core = BudgetSchedule(schedule, 90, 10, 0.01, params=params)
    lrs = []
    for _ in range(90):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.5 * core(t) for t in range(90)], rel=1e-9)


@pytest.mark.unit
def test_lazy_budget_config_loads_with_the_budget() -> None:
    cfg = LazyConfig.load(LAZY)
    assert cfg.train.max_iter == 9000 and cfg.train.eval_period == 0
    mult = instantiate(cfg.lr_multiplier)
    assert isinstance(mult, BudgetLRMultiplier)
    assert mult.budget == BudgetSchedule("linear", 9000, 500, 0.001)
    cfg = LazyConfig.apply_overrides(cfg, ["train.max_iter=22500"])
    assert instantiate(cfg.lr_multiplier).budget.total == 22500  # follows train.max_iter


@pytest.mark.unit
def test_the_trained_scheduler_is_checkpointed_and_must_match_max_iter() -> None:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    sched = build_lazy_lr_scheduler(opt, BudgetLRMultiplier("linear", 40, warmup_iters=3), 40)
    assert isinstance(sched, BudgetLRScheduler)
    with pytest.raises(BudgetConfigError, match=r"total_iters=40 differs from train\.max_iter=50"):
        build_lazy_lr_scheduler(opt, BudgetLRMultiplier("linear", 40, warmup_iters=3), 50)


@pytest.mark.unit
def test_a_total_iters_other_than_max_iter_is_refused_before_anything_is_written(
    toy_root, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["--config", "mask_rcnn_toy_budget10.py", "train.max_iter=4",
            "lr_multiplier.total_iters=100", f"train.output_dir={out}"]  # fmt: skip
    with pytest.raises(SystemExit, match=r"total_iters=100 differs from train\.max_iter=4"):
        run(args)
    assert not out.exists()


@pytest.mark.integration
def test_lazyconfig_train_net_trains_the_toy_budget(toy_root, tmp_path: Path, capsys) -> None:
    tiny = ["train.max_iter=6", "train.log_period=1", "lr_multiplier.warmup_iters=2",
            "dataloader.test.dataset.names=toy_coco_val",
            "model.roi_heads.box_predictor.test_score_thresh=0.0",  # keep every detection
            f"train.output_dir={tmp_path}"]  # fmt: skip
    assert run(["--config", "mask_rcnn_toy_budget10.py", *tiny]) == 0  # a bare name
    core = BudgetSchedule("linear", 6, 2, 0.001)
    lrs = logged_lrs(tmp_path)
    assert [lrs[t] for t in range(6)] == pytest.approx([0.01 * core(t) for t in range(6)], rel=1e-9)
    with pytest.raises(SystemExit, match=r"train\.max_iter=6.*train\.max_iter=8"):
        run(["--config-file", LAZY_TOY, "--resume", *tiny, "train.max_iter=8"])
    # --resume of the finished run: one line, exit status 0, not one byte written
    before = folder_hashes(tmp_path)
    with pytest.raises(SystemExit) as finished:
        run(["--config-file", LAZY_TOY, "--resume", *tiny])
    assert finished.value.code == 0 and folder_hashes(tmp_path) == before
    assert last_line(capsys.readouterr().err).startswith(
        f"lazyconfig_train_net: the run in {tmp_path} has finished (all 6 iterations were "
        "trained) and nothing is left to do: nothing was written; to train it longer, start a new "
        f"run from its weights: train.init_checkpoint={tmp_path / 'model_final.pth'}"
    )
    # a checkpoint whose LR scheduler disagrees with its iteration, and weights only: refused
    other = tmp_path.parent / f"{tmp_path.name}_files"
    other.mkdir()
    edited = edited_checkpoint(tmp_path / "model_final.pth", other / "edited.pth", last_epoch=15)
    weights = other / "weights.pth"
    save_weights_subset(tmp_path / "model_final.pth", weights, prefix="")
    for path, refusal in [
        (edited, "edited.pth' is inconsistent: its iteration is 5, its trainer's 5 and its LR "
                 "scheduler has stepped 15 times"),
        (weights, "weights.pth' holds weights only (no iteration, LR scheduler or optimizer "
                  "state, as tools/extract_weights.py writes), so it cannot be resumed; a weights "
                  f"file starts a new run: train.init_checkpoint={weights}"),
    ]:  # fmt: skip
        with pytest.raises(SystemExit) as err:
            run(["--config-file", LAZY_TOY, "--resume-from", str(path), *tiny])
        assert refusal in str(err.value.code) and "\n" not in str(err.value.code)
    assert folder_hashes(tmp_path) == before
    # --eval-only of the final weights logs the figures of the training's final evaluation in
    # its own output folder's metrics.json, at the iteration the weights were saved at (the
    # last, 5; training logs its final evaluation after it, at train.max_iter)
    trained = [r for r in read_metrics(tmp_path) if "bbox/AP" in r][-1]
    evaluated = tmp_path / "evaluated"
    weights = f"train.init_checkpoint={tmp_path / 'model_final.pth'}"
    assert run(["--config-file", LAZY_TOY, "--eval-only", *tiny[:-1], weights,
                f"train.output_dir={evaluated}"]) == 0  # fmt: skip
    line = read_metrics(evaluated)[-1]
    assert (line["iteration"], trained["iteration"]) == (5, 6)
    keys = [k for k in trained if k.startswith(("bbox/", "segm/"))]
    assert {k: line[k] for k in keys} == pytest.approx(
        {k: trained[k] for k in keys}, abs=1e-9, nan_ok=True
    )  # a 6-iteration model: some may be NaN (a class not detected), the same in both
    assert any(math.isfinite(trained[k]) for k in keys)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"total_iters": 0}, "lr_multiplier.total_iters=0 is invalid; allowed: a number > 0"),
        (
            {"total_iters": 40, "warmup_iters": 40},
            "lr_multiplier.warmup_iters=40 is not shorter than the budget "
            "lr_multiplier.total_iters=40",
        ),
    ],
)
def test_bad_budget_values_name_the_lazyconfig_keys(kwargs, message):
    with pytest.raises(BudgetConfigError) as err:
        BudgetLRMultiplier("linear", **kwargs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.unit
def test_a_bare_name_is_the_lazyconfig_for_the_lazyconfig_tool_and_the_yaml_for_train_net(
    toy_root,
) -> None:
    """docs/detectron2.md: both tools take bare names; ``mask_rcnn_toy_budget10`` is the stem of
    the toy yaml and of the toy LazyConfig: each tool takes the file of its own kind."""
    args = argument_parser().parse_args(["--config", "mask_rcnn_toy_budget10"])
    cfg = load(args)
    assert Path(args.config_file) == REPO / LAZY_TOY
    assert cfg.train.max_iter == 40 and instantiate(cfg.lr_multiplier).budget.total == 40
    args = argument_parser().parse_args(["--config", "mask_rcnn_toy_budget10"])
    assert setup(args).SOLVER.MAX_ITER == 40
    assert Path(args.config_file) == REPO / "configs/detectron2/toy/mask_rcnn_toy_budget10.yaml"
    # a name of the other kind only: found, and refused by the tool in one line naming the kind
    with pytest.raises(ValueError, match=r"mask_rcnn_budget10\.yaml' is not a LazyConfig"):
        load(argparse.Namespace(config_file="mask_rcnn_budget10", opts=[]))


@pytest.mark.e2e
def test_detectron2s_own_lazyconfig_train_net_trains_the_toy_lazyconfig(tmp_path: Path) -> None:
    """docs/detectron2.md: the toy LazyConfig works with Detectron2's own
    ``tools/lazyconfig_train_net.py``, unchanged: the config registers the toy sets it names
    (from ``$DETECTRON2_DATASETS``); the budget's LRs, and the final evaluation, logged."""
    script = detectron2_tool("lazyconfig_train_net.py")
    make_toy_coco(str(tmp_path / "datasets"), num_train=4, num_val=2, size=64, seed=0)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(script), "--config-file", str(REPO / LAZY_TOY), "train.max_iter=4",
         "lr_multiplier.warmup_iters=2", "train.log_period=1",
         "model.roi_heads.box_predictor.test_score_thresh=0.0", f"train.output_dir={out}"],
        cwd=tmp_path, env={**os.environ, "DETECTRON2_DATASETS": str(tmp_path / "datasets")},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    core = BudgetSchedule("linear", 4, 2, 0.001)
    lrs = logged_lrs(out)
    assert [lrs[t] for t in range(4)] == pytest.approx([0.01 * core(t) for t in range(4)], rel=1e-9)
    assert any("bbox/AP" in row for row in read_metrics(out))  # evaluated after the budget

"""budgeted.detectron2.config: budget keys, load_config, the committed yaml files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from d2_testutils import REPO
from detectron2.config import get_cfg

from budgeted.budget import BUDGET_FRACTIONS
from budgeted.core import schedule_params
from budgeted.detectron2 import add_budget_config, load_config

CONFIGS = REPO / "configs" / "detectron2"


def test_add_budget_config_defaults_come_from_the_core() -> None:
    cfg = add_budget_config(get_cfg())
    b = cfg.SOLVER.BUDGET
    assert schedule_params("poly")["power"] == b.POLY_POWER
    assert (
        schedule_params("htd")["lower"],
        schedule_params("htd")["upper"],
    ) == (b.HTD_LOWER, b.HTD_UPPER)
    assert tuple(schedule_params("step")["milestones"]) == b.STEP_MILESTONES
    assert schedule_params("exp")["end_factor"] == b.EXP_END_FACTOR
    assert add_budget_config(cfg) is cfg  # idempotent
    assert cfg.SOLVER.MAX_ITER == get_cfg().SOLVER.MAX_ITER  # existing keys untouched


@pytest.mark.parametrize("fraction", BUDGET_FRACTIONS)
@pytest.mark.parametrize("suffix,scheduler", [("", "BudgetLinear"), ("_step", "BudgetStep")])
def test_committed_configs_load_with_the_right_budget(fraction, suffix, scheduler) -> None:
    pct = round(fraction * 100)
    cfg = load_config(str(CONFIGS / f"mask_rcnn_budget{pct}{suffix}.yaml"))
    assert round(fraction * 90000) == cfg.SOLVER.MAX_ITER
    assert scheduler == cfg.SOLVER.LR_SCHEDULER_NAME
    assert cfg.SOLVER.WARMUP_ITERS == 500
    assert cfg.TEST.EVAL_PERIOD == 0
    # the model zoo's Mask R-CNN R50-FPN 1x, resolved from the installed Detectron2
    assert cfg.MODEL.MASK_ON and cfg.MODEL.RESNETS.DEPTH == 50
    assert cfg.MODEL.META_ARCHITECTURE == "GeneralizedRCNN"
    assert cfg.SOLVER.IMS_PER_BATCH == 16 and cfg.SOLVER.BASE_LR == 0.02
    toy = load_config(str(CONFIGS / "toy" / f"mask_rcnn_toy_budget{pct}{suffix}.yaml"))
    assert round(fraction * 400) == toy.SOLVER.MAX_ITER
    assert toy.SOLVER.WARMUP_ITERS < toy.SOLVER.MAX_ITER
    assert toy.MODEL.RESNETS.NORM == "BN" and toy.MODEL.BACKBONE.FREEZE_AT == 0


def test_generated_configs_match_their_source() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_detectron2_configs.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_generator_check_detects_a_stale_file(tmp_path: Path) -> None:
    gen = [
        sys.executable,
        str(REPO / "tools" / "gen_detectron2_configs.py"),
        "--out",
        str(tmp_path),
    ]
    subprocess.run(gen, check=True, capture_output=True)
    (tmp_path / "mask_rcnn_budget10.yaml").write_text("SOLVER: {}\n")
    out = subprocess.run([*gen, "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 1 and "mask_rcnn_budget10.yaml" in out.stdout


def test_overrides_restate_the_budget() -> None:
    path = str(CONFIGS / "mask_rcnn_budget10.yaml")
    assert load_config(path, ["SOLVER.BUDGET.FRACTION", "0.25"]).SOLVER.MAX_ITER == 22500
    cfg = load_config(path, ["SOLVER.MAX_ITER", "4500"])
    assert cfg.SOLVER.MAX_ITER == 4500 and pytest.approx(0.05) == cfg.SOLVER.BUDGET.FRACTION


@pytest.mark.parametrize(
    "opts,message",
    [
        (["SOLVER.BUDGET.FRACTION", "0"], "SOLVER.BUDGET.FRACTION=0"),
        (["SOLVER.BUDGET.FRACTION", "-0.1"], "allowed: a number > 0"),
        (["SOLVER.BUDGET.FULL_ITERS", "-5"], "SOLVER.BUDGET.FULL_ITERS=-5"),
        (["SOLVER.BUDGET.NOPE", "1"], "SOLVER.BUDGET.NOPE"),
        (["SOLVER.MAX_ITER", "100", "SOLVER.BUDGET.FRACTION", "0.5"], "state the budget once"),
        (["SOLVER.MAX_ITER"], "KEY VALUE"),
    ],
)
def test_bad_budget_values_fail_with_one_line(opts, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        load_config(str(CONFIGS / "mask_rcnn_budget10.yaml"), opts)
    assert "\n" not in str(err.value)


def test_a_file_stating_max_iter_against_its_fraction_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f'_BASE_: "{CONFIGS / "mask_rcnn_budget10.yaml"}"\nSOLVER:\n  MAX_ITER: 1234\n')
    with pytest.raises(ValueError, match="MAX_ITER=1234 but"):
        load_config(str(bad))
    (tmp_path / "ok.yaml").write_text(
        f'_BASE_: "{CONFIGS / "mask_rcnn_budget10.yaml"}"\nSOLVER:\n  MAX_ITER: 1234\n'
        "  BUDGET:\n    FULL_ITERS: 0\n    FRACTION: 1.0\n"
    )
    assert load_config(str(tmp_path / "ok.yaml")).SOLVER.MAX_ITER == 1234


def test_missing_files_and_unknown_zoo_configs_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_config(str(tmp_path / "nope.yaml"))
    zoo = tmp_path / "zoo.yaml"
    zoo.write_text('_BASE_: "model-zoo://COCO-InstanceSegmentation/nope.yaml"\n')
    with pytest.raises(ValueError, match="not in the installed Detectron2 model zoo"):
        load_config(str(zoo))

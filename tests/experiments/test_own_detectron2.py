"""``budgeted-sweep --config`` on users' own Detectron2 configs written here (none of configs/): a
Mask R-CNN yaml on datasets its own module registers (``--import my_data``) and a LazyConfig with
Detectron2's stock ``WarmupParamScheduler``, each swept over 2 schedules x 2 budgets by the real
console scripts; every cell's logged LR is the core's over the budget of the config's own full
schedule with its warmup; the step baseline drops at the yaml's own STEPS; the report prints the
table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from own_configs import d2_yaml, lazy_config
from own_sweeps import check_cell_lrs, report_ok, sweep_ok


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small COCO-format set (8 train, 4 val images) under ``toy_coco/``."""
    from budgeted.toys.coco import make_toy_coco

    root = tmp_path_factory.mktemp("shapes")
    make_toy_coco(str(root), num_train=8, num_val=4)
    return root


EVERY_ITERATION = ["SOLVER.BUDGET.WRITER_PERIOD", "1"]


@pytest.mark.e2e
def test_an_own_yaml_sweeps_with_its_datasets_registered_by_import(tmp_path, shapes):
    config = d2_yaml(tmp_path)  # 20 iterations, warmup 2 at 0.01, STEPS 14, 18
    out = tmp_path / "sweep"
    printed = sweep_ok("--config", config, "--import", "my_data", "--schedules", "linear",
                       "step", "--budgets", "0.25", "0.5", "--seeds", "0", "--out", out, "--",
                       *EVERY_ITERATION, cwd=tmp_path, env={"SHAPES": str(shapes)})  # fmt: skip
    assert printed.count(": box AP ") == 4, printed
    assert (
        check_cell_lrs(
            out,
            "detectron2",
            20,
            2,
            0.01,
            dict.fromkeys(["linear", "step"], 0.01),
            {"step": {"milestones": (0.7, 0.9)}},
        )
        == 4
    )
    cell = json.loads((out / "step_budget50_seed0" / "sweep_cell.json").read_text())
    assert "import my_data" in cell["command"][2]  # rerun by hand: the exact command
    assert cell["command"][-6:] == ["SOLVER.BUDGET.STEP_MILESTONES", "(0.7, 0.9)", "SEED", "0",
                                    "OUTPUT_DIR", str(out / "step_budget50_seed0")]  # fmt: skip
    trained = (out / "step_budget50_seed0" / "config.yaml").read_text()
    assert "my_shapes_train" in trained and "MOMENTUM: 0.8" in trained
    table = report_ok(out)
    assert "### box AP: detectron2 " + str(config) in table
    # the report's evaluations: the final weights on another set, my_data imported again
    from budgeted.toys.coco import make_toy_coco

    other = tmp_path / "other"
    make_toy_coco(str(other), num_train=2, num_val=4, seed=7)
    evaluated = tmp_path / "evaluated"
    printed = sweep_ok("--config", config, "--import", "my_data", "--schedules", "linear", "step",
                       "--budgets", "0.5", "--seeds", "0", "--evaluate-from", out, "--out",
                       evaluated, cwd=tmp_path, env={"SHAPES": str(other)})  # fmt: skip
    assert printed.count(": box AP ") == 2, printed
    record = json.loads((evaluated / "linear_budget50_seed0" / "sweep_cell.json").read_text())
    assert record["evaluated_from"] == str(out / "linear_budget50_seed0")
    assert "--eval-only" in record["command"] and "import my_data" in record["command"][2]


@pytest.mark.e2e
def test_an_own_lazyconfig_sweeps_with_the_core_lr(tmp_path, shapes):
    config = lazy_config(tmp_path)  # 40 iterations, stock warmup 4/40 at 0.01, optimizer.lr 0.02
    out = tmp_path / "sweep"
    env = {"DETECTRON2_DATASETS": str(shapes)}
    sweep_ok("--config", config, "--schedules", "linear", "cosine", "--budgets", "0.125", "0.25",
             "--out", out, "--", "train.log_period=1", cwd=tmp_path, env=env)  # fmt: skip
    assert (
        check_cell_lrs(out, "detectron2", 40, 4, 0.01, dict.fromkeys(["linear", "cosine"], 0.02))
        == 4
    )
    assert "### box AP: detectron2 " + str(config) in report_ok(out)

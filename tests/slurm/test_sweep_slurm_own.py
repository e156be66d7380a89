"""``budgeted-sweep --config --import --executor slurm`` (issue 41): a user's own Detectron2 yaml
whose datasets its own module registers, as a real Slurm job through submitit: the job imports
the module before it builds the config, trains the core's LR at every iteration, and the
report and ``--status`` read the sweep as a local one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from slurm_testutils import job_env

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
for helpers in (REPO / "tests", REPO / "tests" / "experiments"):
    if str(helpers) not in sys.path:
        sys.path.insert(0, str(helpers))

from own_configs import d2_yaml  # noqa: E402
from own_sweeps import check_cell_lrs, report_ok, sweep_ok, tool  # noqa: E402


def test_an_own_yaml_with_its_import_trains_as_a_slurm_job(slurm_cluster, tmp_path):
    from budgeted.toys.coco import make_toy_coco

    make_toy_coco(str(tmp_path), num_train=8, num_val=4)
    config = d2_yaml(tmp_path)  # 20 iterations, warmup 2; my_data.py registers the datasets
    env = {**job_env(slurm_cluster), "SHAPES": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    out = tmp_path / "sweep"
    printed = sweep_ok("--config", config, "--import", "my_data", "--schedules", "linear",
                       "--budgets", "0.5", "--seeds", "0", "--executor", "slurm", "--out", out,
                       "--", "SOLVER.BUDGET.WRITER_PERIOD", "1", cwd=tmp_path, env=env)  # fmt: skip
    record = json.loads((out / "linear_budget50_seed0" / "sweep_cell.json").read_text())
    assert record["status"] == "finished", printed
    assert record["slurm"]["state"] == "COMPLETED"
    assert "import my_data" in record["command"][2]
    assert check_cell_lrs(out, "detectron2", 20, 2, 0.01, {"linear": 0.01}) == 1
    assert "### box AP: detectron2 " + str(config) in report_ok(out)
    status = tool("budgeted-sweep", "--status", out, cwd=tmp_path, env=env)
    assert status.returncode == 0 and "linear_budget50_seed0" in status.stdout, status.stderr
    assert " done " in status.stdout, status.stdout

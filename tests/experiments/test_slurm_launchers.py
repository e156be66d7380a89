"""The launcher a Slurm cell job puts in front of its training command: the framework's own, across
the job's GPUs and nodes (issue 32). Only the commands are checked here: this machine has no GPU,
so the multi-GPU paths never run in the tests (tests/slurm/ runs one process per job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from budgeted.experiments.families import family
from budgeted.experiments.sweep.plan import Plan, committed_configs
from budgeted.experiments.sweep.slurm import cell_jobs
from budgeted.experiments.sweep.slurm_job import CellJob
from budgeted.experiments.sweep.slurm_options import SlurmOptions

pytestmark = pytest.mark.unit


def job(framework: str, nodes: int, gpus: int, tmp_path: Path) -> CellJob:
    fam = family(framework, True, None)
    plan = Plan(fam, "linear", 0.01, 0.02, 0, tmp_path / "cell", {}, [], "run")
    options = SlurmOptions(nodes=nodes, gpus_per_node=gpus)
    return CellJob(plan, tmp_path / "config", None, [], {}, options)


def test_one_process_needs_no_launcher(tmp_path):
    assert job("detectron2", 1, 1, tmp_path).launcher(["node0"], 0) == []
    assert job("mmseg", 1, 0, tmp_path).launcher(["node0"], 0) == []


def test_detectron2_launches_its_gpus_on_every_node_with_the_first_as_the_address(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    cell = job("detectron2", 2, 8, tmp_path)
    assert cell.launcher(["node0", "node1"], 1) == [
        "--num-gpus", "8", "--num-machines", "2", "--machine-rank", "1",
        "--dist-url", "tcp://node0:29623",
    ]  # fmt: skip
    command = cell.command(["node0", "node1"], 1)
    assert command[command.index("--num-gpus") + 1] == "8" and "--resume" not in command


def test_mmengine_takes_slurms_own_launcher(tmp_path):
    assert job("mmseg", 1, 4, tmp_path).launcher(["node0"], 0) == ["--launcher", "slurm"]
    assert job("mmseg", 2, 8, tmp_path).launcher(["node0", "node1"], 1) == ["--launcher", "slurm"]


def test_a_cell_of_a_schedule_without_configs_trains_from_the_linear_one_with_its_name(tmp_path):
    """As the local executor does (tests/experiments/test_sweep_schedules.py)."""
    fam = family("detectron2", True, None)
    configs = committed_configs(fam)
    plans = [Plan(fam, s, 0.1, 0.02, 0, tmp_path / s, {}, [], "run") for s in ("rex", "step")]
    rex, step = cell_jobs(plans, configs, None, ["SOLVER.IMS_PER_BATCH", "2"], {}, SlurmOptions())
    rex_command, step_command = rex.command(["node0"], 0), step.command(["node0"], 0)
    config = rex_command.index("--config-file") + 1
    assert rex_command[config] == str(configs["linear", 0.1])
    assert rex_command[config + 1 : config + 5] == [
        "SOLVER.IMS_PER_BATCH", "2", "SOLVER.LR_SCHEDULER_NAME", "BudgetRex"
    ]  # fmt: skip
    assert step_command[config] == str(configs["step", 0.1])
    assert "SOLVER.LR_SCHEDULER_NAME" not in step_command

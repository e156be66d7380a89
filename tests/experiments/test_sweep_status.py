"""budgeted.experiments.sweep.status: cell records with several writers (no lost updates), and
``budgeted-sweep --status`` / ``budgeted-report`` on a partial sweep, read from records only."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
from run_folders import _mmseg_run

from budgeted.experiments.families import PSPNET_TOY
from budgeted.experiments.sweep.records import CELL_FILE, SWEEP_FILE
from budgeted.experiments.sweep.status import update_cell_record

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
FAMILY = "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget"


def _append_tries(run_dir: str, writer: int, count: int) -> None:
    for i in range(count):
        update_cell_record(
            Path(run_dir),
            lambda r, i=i: r.setdefault("tries", []).append({"action": f"{writer}.{i}"}),
        )


def test_writers_in_several_processes_lose_no_update(tmp_path):
    """4 processes (a controller and jobs on other nodes, say) each add 25 entries to one record
    at once: all 100 are there, and the file is a whole JSON object at every moment."""
    cell = tmp_path / "linear_budget1"
    update_cell_record(cell, lambda r: r.update(schedule="linear", budget=0.01))
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_append_tries, args=(str(cell), w, 25)) for w in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=300)
        assert w.exitcode == 0
    record = json.loads((cell / CELL_FILE).read_text())
    assert sorted(t["action"] for t in record["tries"]) == sorted(
        f"{w}.{i}" for w in range(4) for i in range(25)
    )


def _sweep_folder(out: Path) -> None:
    cells = [["linear", 0.01, 0.01, 0], ["step", 0.01, 0.01, 0], ["linear", 0.05, 0.01, 0],
             ["step", 0.05, 0.01, 0]]  # fmt: skip
    out.mkdir()
    (out / SWEEP_FILE).write_text(json.dumps({"framework": "mmseg", "family": FAMILY,
                                              "cells": cells}))  # fmt: skip
    base = {"framework": "mmseg", "lr": 0.01, "seed": 0}
    records = {
        "linear_budget1_lr0.01_seed0": {"schedule": "linear", "budget": 0.01, "status": "finished",
            "metrics": {"mIoU": 4.5}, "tries": [{"action": "run", "wall_s": 61.0, "exit": 0}],
            "slurm": {"job_id": "12_0", "state": "COMPLETED"}},
        "step_budget1_lr0.01_seed0": {"schedule": "step", "budget": 0.01, "status": "interrupted",
            "tries": [{"action": "run", "wall_s": 20.0, "exit": 75, "signal": "SIGTERM"}],
            "slurm": {"job_id": "12_1", "state": "CANCELLED"}},
        # a job id that is not one (a hand-edited record): shown as none, never passed on
        "linear_budget5_lr0.01_seed0": {"schedule": "linear", "budget": 0.05,
            "slurm": {"job_id": "12; touch /tmp/owned", "state": "PENDING"}},
    }  # fmt: skip
    for name, fields in records.items():
        (out / name).mkdir()
        (out / name / CELL_FILE).write_text(json.dumps({**base, **fields}))


def test_status_prints_the_grid_from_the_records_without_slurm(tmp_path):
    out = tmp_path / "sweep"
    _sweep_folder(out)
    # the done cell's run, as the report reads it (a record alone is no result: issue 40/20)
    _mmseg_run(out / "linear_budget1_lr0.01_seed0", PSPNET_TOY.iters(0.01), 4.5, (2.0, 1.5))
    done = subprocess.run(
        [sys.executable, "-m", "budgeted.experiments.sweep", "--status", str(out)],
        capture_output=True, text=True, cwd=REPO, env={"PATH": str(tmp_path / "no-slurm")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:-1]}
    assert rows["linear_budget1_lr0.01_seed0"][1:6] == ["done", "12_0", "1", "1m01s", "mIoU"]
    assert rows["step_budget1_lr0.01_seed0"][1:5] == ["cancelled", "12_1", "1", "0m20s"]
    assert rows["linear_budget5_lr0.01_seed0"][1:3] == ["missing", "-"]
    assert rows["step_budget5_lr0.01_seed0"][1:3] == ["missing", "-"]
    assert done.stdout.splitlines()[-1] == "[status] 4 cells: 1 done, 1 cancelled, 2 missing"
    assert not Path("/tmp/owned").exists()


def test_status_of_a_folder_that_is_not_a_sweep_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "budgeted.experiments.sweep", "--status", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"sweep: error: {tmp_path} is not a sweep folder (no {SWEEP_FILE}); allowed: a folder "
        "written by budgeted-sweep --out\n"
    )


def test_report_on_a_partial_sweep_says_how_many_cells_are_missing(tmp_path):
    out = tmp_path / "sweep"
    _sweep_folder(out)
    done = subprocess.run(
        [sys.executable, "-m", "budgeted.experiments.report", str(out)],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"report: note: {out} is partial: 4 of 4 cells have no result yet "
        "(linear_budget1_lr0.01_seed0, step_budget1_lr0.01_seed0, linear_budget5_lr0.01_seed0, "
        f"step_budget5_lr0.01_seed0); budgeted-sweep --status {out} shows where they are\n"
    )

"""``budgeted-sweep --executor slurm`` against the local Slurm cluster (issue 32, items 1-6): each
cell a real Slurm job submitted through submitit, running the real ``budgeted-train-seg`` on the
toy PSPNet (CPU, 160 iterations at the 5 % budget, the LR logged at every iteration).

- the same toy grid run locally and through Slurm ends with the same records and report;
- a running cell preempted by a job in the ``high`` partition (twice) saves, is requeued and
  resumes with exactly the LR trace of the uninterrupted run;
- ``scancel`` of a running cell is recorded as cancelled; the same sweep command resumes it
  and completes it (and a second controller meanwhile is refused, as locally);
- bad input is one line and writes nothing.

Every wait is on an observable event (a checkpoint file, a record, the queue) with a deadline of
minutes. Timings are printed (``pytest -s``); docs/sweeps.md records them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_testutils import job_env, slurm, wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.experiments.sweep"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]
GRID = ["mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.05", "--lrs", "0.01",
        "--seeds", "0"]  # fmt: skip
CELL = ["mmseg", "--toy", "--schedules", "linear", "--budgets", "0.05", "--lrs", "0.01",
        "--seeds", "0"]  # fmt: skip
"""The preempted / cancelled cell: the grid's linear cell."""
OVERRIDES = ["--", "default_hooks.logger.interval=1", "default_hooks.checkpoint.interval=16"]
"""The LR logged at each of the 160 iterations; a checkpoint every 16."""
NAME = "linear_budget5_lr0.01_seed0"
ITERS = 160


def run(args: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*map(str, args)], capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout
    )


def record(out: Path, name: str = NAME) -> dict:
    path = out / name / "sweep_cell.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def lr_trace(run_dir: Path) -> list[tuple[float, float]]:
    """(iteration, LR) of every logged iteration, in the order the log folders hold them."""
    from budgeted.runs import reader

    return [(p["iteration"], p["lr"]) for p in reader("mmseg").train_curve(run_dir)]


def report_rows(out: Path, tmp: Path) -> list[dict[str, str]]:
    """The report's CSV rows of a sweep, without what differs from run to run (wall time, the
    folder)."""
    import csv

    path = tmp / f"{out.name}.csv"
    done = run([*REPORT, out, "--csv", path], os.environ.copy())
    assert done.returncode == 0, done.stderr
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if k not in ("wall_s", "folder", "run_dir")} for r in rows]


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def records(out: Path) -> dict[str, str]:
    """The digests of a sweep folder's records and submitit's files (not the training's)."""
    kept = ("sweep_cell.json", ".slurm/")
    return {k: v for k, v in digests(out).items() if "/" not in k or k.endswith(kept[0])
            or k.startswith(kept[1])}  # fmt: skip


@pytest.fixture(scope="module")
def env(slurm_cluster: dict[str, str]) -> dict[str, str]:
    """The controller's environment: the cluster's, one compute thread (jobs inherit it)."""
    return {**job_env(slurm_cluster), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def grids(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The toy grid run locally, then through Slurm: their folders, outputs and wall times."""
    tmp = tmp_path_factory.mktemp("grids")
    data = tmp / "toy_cityscapes"
    found: dict[str, object] = {"data": data, "tmp": tmp}
    for executor in ("local", "slurm"):
        out = tmp / executor
        began = time.monotonic()
        done = run([*SWEEP, *GRID, "--data", data, "--out", out, "--executor", executor,
                    *OVERRIDES], env)  # fmt: skip
        found[f"{executor}_s"] = time.monotonic() - began
        assert done.returncode == 0, f"{executor}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        found[executor], found[f"{executor}_stdout"] = out, done.stdout
    print(f"\ntoy grid (2 cells, 160 iterations each): local {found['local_s']:.1f} s, "
          f"Slurm {found['slurm_s']:.1f} s")  # fmt: skip
    return found


@pytest.fixture
def submitted(env: dict[str, str]) -> Iterator[list[str]]:
    """Job ids a test submits itself (appended): cancelled afterwards if still queued."""
    jobs: list[str] = []
    yield jobs
    if jobs:
        subprocess.run(["scancel", *jobs], env=env, timeout=60)


def test_a_toy_grid_through_slurm_ends_with_the_records_and_report_of_the_local_run(grids, env):
    local, slurm_out, tmp = grids["local"], grids["slurm"], grids["tmp"]
    assert re.search(r"submitted 2 cell\(s\) as Slurm job\(s\) \d+_\[0-1\]", grids["slurm_stdout"])
    for name in (NAME, "step_budget5_lr0.01_seed0"):
        here, there = record(local, name), record(slurm_out, name)
        assert here["status"] == there["status"] == "finished"
        assert here["metrics"] == there["metrics"]  # the same seed, the same figures
        same = [t.replace(str(slurm_out), str(local)) for t in there["command"]]
        assert here["command"] == same  # the same training command, but for its folder
        assert lr_trace(local / name) == lr_trace(slurm_out / name)
        assert [p[0] for p in lr_trace(local / name)] == [float(i) for i in range(1, ITERS + 1)]
        # the job id it ran as, in the record (a job array of the two cells)
        assert re.fullmatch(r"\d+_[01]", there["slurm"]["job_id"])
        assert there["slurm"]["state"] == "COMPLETED"
        assert [t["job_id"] for t in there["tries"]] == [there["slurm"]["job_id"]]
    assert report_rows(local, tmp) == report_rows(slurm_out, tmp)
    status = run([*SWEEP, "--status", slurm_out], env)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].split() == ["cell", "state", "job", "tries", "elapsed", "result"]
    assert lines[-1] == "[status] 2 cells: 2 done"
    row = next(line.split() for line in lines if line.startswith(NAME))
    assert row[1:3] == ["done", record(slurm_out)["slurm"]["job_id"]]
    # rerun: every cell skipped, nothing submitted
    again = run([*SWEEP, *GRID, "--data", grids["data"], "--out", slurm_out, "--executor",
                 "slurm", *OVERRIDES], env)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("skipped, already finished") == 2 and "submitted" not in again.stdout


def _checkpoint_after(run_dir: Path, iteration: int):
    """The event: the run's last checkpoint is past ``iteration``."""

    def saved() -> int | None:
        marker = run_dir / "last_checkpoint"
        if not marker.is_file():
            return None
        match = re.search(r"iter_(\d+)\.pth", marker.read_text())
        return int(match.group(1)) if match and int(match.group(1)) > iteration else None

    return saved


def _tries(out: Path) -> list[dict]:
    return record(out).get("tries") or []


def test_a_preempted_cell_is_requeued_and_resumes_with_the_exact_lr_trace(
    grids, env, tmp_path, submitted
):
    out = tmp_path / "sweep"
    args = [*SWEEP, *CELL, "--data", grids["data"], "--out", out, "--executor", "slurm",
            *OVERRIDES]  # fmt: skip
    first = run([*args[: -len(OVERRIDES)], "--detach", *OVERRIDES], env)
    assert first.returncode == 0, first.stderr
    assert "detached: 1 job(s) queued or running" in first.stdout
    job = record(out)["slurm"]["job_id"]
    saved, preemptions = 0, []
    for round_ in (1, 2):  # two preemptions in a row, each resumed from its checkpoint
        saved = wait_for(f"a checkpoint after iteration {saved}", _checkpoint_after(out / NAME,
                         saved))  # fmt: skip
        began = time.monotonic()
        # a job of the high partition asking the whole node: Slurm preempts the cell's job
        submitted.append(slurm(["sbatch", "--parsable", "-p", "high", "-c", "2", "-o",
                                "/dev/null", "--wrap", "sleep 1"], env).strip())  # fmt: skip
        wait_for("the preempted try recorded", lambda n=round_: len(
            [t for t in _tries(out) if t.get("exit") == 75]) == n)  # fmt: skip
        stopped = time.monotonic() - began
        # where it saved: the next preemption comes after the resumed run's next checkpoint
        saved = int(re.search(r"iter_(\d+)", (out / NAME / "last_checkpoint").read_text())[1])
        wait_for("the requeued job running again",
                 lambda n=round_: len(_tries(out)) == n + 1)  # fmt: skip
        preemptions.append((stopped, time.monotonic() - began))
    # the controller, rerun: the job is queued or running, so it waits for it, resubmits nothing
    again = run(args, env)
    assert again.returncode == 0, f"{again.stdout}\n{again.stderr}"
    assert f"as Slurm job {job}, not resubmitted" in again.stdout and "submitted" not in \
        again.stdout.replace("not resubmitted", "")  # fmt: skip
    cell = record(out)
    assert cell["status"] == "finished"
    tries = [(t["action"], t["exit"], t.get("signal"), t["job_id"], t["restart"])
             for t in cell["tries"]]  # fmt: skip
    assert tries == [("run", 75, "SIGUSR2", job, 0), ("resume", 75, "SIGUSR2", job, 1),
                     ("resume", 0, None, job, 2)]  # fmt: skip
    # every iteration logged once, each at exactly the LR of the uninterrupted run
    assert lr_trace(out / NAME) == lr_trace(grids["local"] / NAME)
    print(f"\npreempted twice: signal to saved-and-recorded / to running again (s): "
          f"{[(round(a, 1), round(b, 1)) for a, b in preemptions]}")  # fmt: skip


def test_a_cancelled_cell_is_recorded_so_and_the_same_command_resumes_it(
    grids, env, tmp_path, submitted
):
    out = tmp_path / "sweep"
    args = [*SWEEP, *CELL, "--data", grids["data"], "--out", out, "--executor", "slurm",
            *OVERRIDES]  # fmt: skip
    controller = subprocess.Popen(
        [*map(str, args)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_for("a first checkpoint", _checkpoint_after(out / NAME, 0))
        # a second controller on the same folder is refused, as locally, and writes nothing
        before = records(out)
        second = run(args, env)
        assert second.returncode == 2 and len(second.stderr.splitlines()) == 1, second.stderr
        assert "is in use" in second.stderr and records(out) == before
        job = record(out)["slurm"]["job_id"]
        slurm(["scancel", job], env)
        stdout, stderr = controller.communicate(timeout=600)
    finally:
        if controller.poll() is None:
            controller.kill()
    assert controller.returncode == 1, stderr
    assert f"job {job} CANCELLED; rerun the same command to resume it" in stdout
    cell = record(out)
    assert cell["slurm"]["state"] == "CANCELLED" and cell["status"] == "interrupted"
    assert [(t["exit"], t.get("signal")) for t in cell["tries"]] == [(75, "SIGTERM")]
    status = run([*SWEEP, "--status", out], env)
    assert f"{NAME}  cancelled  {job}" in re.sub(r" +", "  ", status.stdout), status.stdout
    again = run(args, env)
    assert again.returncode == 0, f"{again.stdout}\n{again.stderr}"
    assert f"{NAME}: cancelled; resubmitting (resume)" in again.stdout
    cell = record(out)
    assert cell["status"] == "finished" and cell["slurm"]["history"] == [
        {"job_id": job, "state": "CANCELLED"}
    ]
    assert [t["action"] for t in cell["tries"]] == ["run", "resume"]
    assert lr_trace(out / NAME) == lr_trace(grids["local"] / NAME)


BAD = [
    (["--partition", "gpu-a100"], "--partition 'gpu-a100' is not a partition of this cluster; "
     "allowed: low, high"),
    (["--slurm-option", "frobnicate=1"], "unknown Slurm option 'frobnicate'"),
    (["--slurm-option", "partition=high"], "sets partition, which the sweep has a flag for; "
     "allowed: --partition high"),
    (["--slurm-option", "constraint"], "is not KEY=VALUE"),
    (["--gpus-per-node", "3"], "--gpus-per-node 3: each cell would ask 3 GPUs per node, and the "
     "nodes of partition low have at most 2; allowed: --gpus-per-node 0 to 2"),
    (["--nodes", "2"], "--nodes 2: partition low has 1 node(s)"),
    (["--time", "soon"], "--time 'soon' is not a time limit"),
    ("no sbatch", "--executor slurm: sbatch is not on PATH"),
    ("no controller", "--executor slurm: no Slurm controller answers (SLURM_CONF="),
]  # fmt: skip


@pytest.mark.parametrize(("case", "message"), BAD, ids=[str(c) for c, _ in BAD])
def test_bad_input_is_one_line_and_writes_nothing(case, message, env, tmp_path):
    from budgeted.experiments.sweep.records import SWEEP_FILE

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / SWEEP_FILE).write_text(json.dumps({
        "framework": "mmseg", "family": "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget",
        "cells": [["linear", 0.01, 0.01, 0]]}))  # fmt: skip
    before = digests(existing)
    bad_env = dict(env)
    extra = case if isinstance(case, list) else []
    if case == "no sbatch":
        bad_env["PATH"] = str(tmp_path / "empty")
    elif case == "no controller":
        (tmp_path / "slurm.conf").write_text(
            "ClusterName=gone\nSlurmctldHost=nowhere(127.0.0.1)\nSlurmctldPort=9\n"
        )
        bad_env["SLURM_CONF"] = str(tmp_path / "slurm.conf")
    for out in (tmp_path / "new", existing):
        done = run([*SWEEP, *CELL, "--data", tmp_path / "data", "--out", out, "--executor",
                    "slurm", *extra], bad_env, timeout=300)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("sweep: error: "), \
            done.stderr  # fmt: skip
        assert message in done.stderr, done.stderr
    assert not (tmp_path / "new").exists() and not (tmp_path / "data").exists()
    assert digests(existing) == before


def test_slurm_options_without_the_slurm_executor_are_one_line(tmp_path):
    done = run([*SWEEP, *CELL, "--out", tmp_path / "out", "--partition", "low"], os.environ.copy())
    assert done.returncode == 2 and done.stderr == (
        "sweep: error: --partition is for --executor slurm; allowed: --executor slurm "
        "--partition ..., or leave it out\n"
    )
    assert not (tmp_path / "out").exists()

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
from datetime import datetime
from pathlib import Path

import pytest
from slurm_testutils import ENDED, job_env, job_info, slurm, wait_for

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
    """The digests of a sweep folder's records and submitit's files (not the training's); a
    running try's wall time left out (not yet its own)."""
    kept = ("sweep_cell.json", ".slurm/")
    found = {k: v for k, v in digests(out).items() if "/" not in k or k.endswith(kept[0])
             or k.startswith(kept[1])}  # fmt: skip
    for name in [k for k in found if k.endswith(kept[0])]:
        cell = json.loads((out / name).read_text())
        for attempt in cell.get("tries") or []:
            if attempt.get("exit") is None:
                attempt["wall_s"] = None
        found[name] = hashlib.sha256(json.dumps(cell, sort_keys=True).encode()).hexdigest()
    return found


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


# --- issue 40: the digits family on Slurm, --status while jobs run and end, a silent Slurm ------

DIGITS = ["pytorch", "--task", "digits", "--schedules", "linear", "rex", "--budgets", "0.01",
          "--lrs", "0.3", "--seeds", "0"]  # fmt: skip
"""A tiny digits grid: 2 cells of 17 iterations (seconds each)."""
LONG = ["pytorch", "--task", "digits", "--schedules", "linear", "--budgets", "1", "--lrs", "0.3",
        "--seeds", "0"]  # fmt: skip
"""One digits cell of 1720 iterations (about 45 s on an idle core): long enough to act on."""
LONG_NAME = "linear_budget100_lr0.3_seed0"


def status_rows(out: Path, env: dict[str, str]) -> dict[str, list[str]]:
    done = run([*SWEEP, "--status", out], env)
    assert done.returncode == 0, done.stderr
    return {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:-1]}


def seconds(elapsed: str) -> int:
    minutes, secs = re.fullmatch(r"(\d+)m(\d+)s", elapsed).groups()
    return 60 * int(minutes) + int(secs)


def _open_try(out: Path, count: int):
    """The event: the cell's ``count``-th try has started and not ended."""
    return lambda: len(_tries_of(out)) == count and _tries_of(out)[-1].get("exit") is None


def _tries_of(out: Path) -> list[dict]:
    return record(out, LONG_NAME).get("tries") or []


def test_a_digits_grid_through_slurm_ends_with_the_records_and_report_of_the_local_run(
    env, tmp_path
):
    """issue 40/16: ``--task digits --executor slurm`` ended in ``KeyError: ('linear', 0.01)``
    after writing sweep.json and the lock."""
    found = {}
    for executor in ("local", "slurm"):
        out = tmp_path / executor
        done = run([*SWEEP, *DIGITS, "--out", out, "--executor", executor], env)
        assert done.returncode == 0, f"{executor}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        found[executor] = out
    local, slurm_out = found["local"], found["slurm"]
    for name in ("linear_budget1_lr0.3_seed0", "rex_budget1_lr0.3_seed0"):
        here, there = record(local, name), record(slurm_out, name)
        assert here["status"] == there["status"] == "finished"
        assert here["metrics"] == there["metrics"] and 10 < here["metrics"]["top-1"] <= 100
        assert here["command"] == [t.replace(str(slurm_out), str(local)) for t in there["command"]]
        assert there["slurm"]["state"] == "COMPLETED"
    assert report_rows(local, tmp_path) == report_rows(slurm_out, tmp_path)
    assert {row[1] for row in status_rows(slurm_out, env).values()} == {"done"}


ARMS = ["pytorch", "--task", "digits", "--schedules", "wsd:decay=sqrt", "sgdr:restarts=1",
        "schedulefree", "subset", "--optimizers", "sgd", "adamw", "--budgets", "0.01", "--lrs",
        "0.3", "--lrs-for", "adamw=0.003", "--seeds", "0", "--validate-every", "5"]  # fmt: skip
"""Every arm of issue 43 by two optimizers, validated every 5 iterations: 8 cells of 17
iterations."""


def test_every_new_arm_runs_as_slurm_cells_as_it_runs_locally(env, tmp_path):
    """issue 43: schedule variants, schedule-free, subset and the optimizer axis, each cell a
    Slurm job, end with the records, periodic evaluations and report of the local run."""
    from budgeted.runs import reader

    found = {}
    for executor in ("local", "slurm"):
        out = tmp_path / executor
        done = run([*SWEEP, *ARMS, "--out", out, "--executor", executor], env)
        assert done.returncode == 0, f"{executor}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        found[executor] = out
    local, slurm_out = found["local"], found["slurm"]
    names = sorted(p.parent.name for p in local.glob("*/sweep_cell.json"))
    assert len(names) == 8 and "schedulefree-adamw_budget1_lr0.003_seed0" in names
    for name in names:
        here, there = record(local, name), record(slurm_out, name)
        assert here["status"] == there["status"] == "finished", name
        assert here["metrics"] == there["metrics"] and there["slurm"]["state"] == "COMPLETED"
        evaluated = reader("pytorch").evaluations(slurm_out / name)
        assert [at for at, _ in evaluated] == [5, 10, 15, 17], name
    assert report_rows(local, tmp_path) == report_rows(slurm_out, tmp_path)


def test_status_follows_a_requeued_and_a_cancelled_job_and_keeps_every_tries_time(
    env, tmp_path, submitted
):
    """issue 40/20: after ``scontrol requeue`` the running try's time was not counted; after
    ``scancel`` the record stayed RUNNING and ``--status`` said ``failed`` or ``lost``."""
    out = tmp_path / "sweep"
    first = run([*SWEEP, *LONG, "--out", out, "--executor", "slurm", "--detach"], env)
    assert first.returncode == 0, first.stderr
    job = record(out, LONG_NAME)["slurm"]["job_id"]
    submitted.append(job)
    wait_for("the first try running", _open_try(out, 1))
    assert status_rows(out, env)[LONG_NAME][1:3] == ["running", job]
    slurm(["scontrol", "requeue", job], env)
    wait_for("the requeued job's try running", _open_try(out, 2))
    before = _tries_of(out)[0]
    assert before["exit"] in (75, -15) and before["wall_s"] > 0
    began = datetime.strptime(_tries_of(out)[1]["started"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
    wait_for("5 s of the second try", lambda: time.time() - began >= 5)
    row = status_rows(out, env)[LONG_NAME]
    assert row[1:4] == ["running", job, "2"], row
    assert seconds(row[4]) >= before["wall_s"] + 4, (row, before)  # both tries, the running one
    slurm(["scancel", job], env)
    wait_for("the cancelled try recorded", lambda: _tries_of(out)[-1].get("exit") is not None)
    wait_for("the job out of the queue", lambda: job_info(job, env).get("JobState") in ENDED)
    row = status_rows(out, env)[LONG_NAME]  # no controller runs: --status asks Slurm
    cell = record(out, LONG_NAME)
    assert cell["slurm"]["state"] == "CANCELLED" and cell["status"] == "interrupted", cell
    assert cell["wall_s"] == pytest.approx(sum(t["wall_s"] for t in cell["tries"]), abs=0.01)
    assert row[1:4] == ["cancelled", job, "2"] and abs(seconds(row[4]) - cell["wall_s"]) <= 1


class _Lines:
    """A process's stdout lines as they come (a thread reads them), with when each came."""

    def __init__(self, process: subprocess.Popen) -> None:
        import threading

        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.lines.append((time.monotonic(), line))

    def seen(self, text: str) -> float | None:
        return next((t for t, line in self.lines if text in line), None)


def test_a_controller_says_when_slurm_does_not_answer_and_gives_up_after_its_patience(
    env, tmp_path, submitted
):
    """issue 40/21: with slurmctld gone the controller waited about 3 minutes printing nothing.
    Slurm "goes away" for this controller alone: its SLURM_CONF, a copy, names a closed port
    (squeue then fails as with slurmctld down), and the cluster runs on for the other tests."""
    conf = tmp_path / "slurm.conf"
    real = Path(env["SLURM_CONF"]).read_text()
    conf.write_text(real)
    broken = re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=9", real)
    assert broken != real
    here = {**env, "SLURM_CONF": str(conf), "BUDGETED_SLURM_PATIENCE_S": "30"}
    out = tmp_path / "sweep"
    args = [*SWEEP, *LONG, "--out", out, "--executor", "slurm"]
    controller = subprocess.Popen([*map(str, args)], cwd=REPO, env=here, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        lines = _Lines(controller)
        wait_for("the try running", _open_try(out, 1))  # its srun read the conf: now break it
        submitted.append(record(out, LONG_NAME)["slurm"]["job_id"])
        conf.write_text(broken)
        broke = time.monotonic()
        said = wait_for(
            "the controller's line", lambda: lines.seen("[sweep] Slurm does not answer")
        )
        print(f"\nSlurm gone: the controller said so after {said - broke:.1f} s")
        assert any("up to 30 s (the jobs go on meanwhile)" in line for _, line in lines.lines)
        conf.write_text(real)
        wait_for("the controller's next line", lambda: lines.seen("[sweep] Slurm answers again"))
        conf.write_text(broken)  # and again, for good: it gives up after its patience
        _, stderr = controller.communicate(timeout=600)
    finally:
        conf.write_text(real)
        if controller.poll() is None:
            controller.kill()
    assert controller.returncode == 75, stderr
    assert stderr.count("\n") == 1 and stderr.startswith(
        "sweep: error: Slurm has not answered for 30 s (squeue: "
    ), stderr
    assert "rerun the same command once it answers to collect them" in stderr
    again = run(args, {**here, "BUDGETED_SLURM_PATIENCE_S": ""})  # Slurm answers: collected
    assert again.returncode == 0, f"{again.stdout}\n{again.stderr}"
    assert record(out, LONG_NAME)["status"] == "finished"

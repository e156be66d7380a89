"""budgeted.experiments.sweep and budgeted.experiments.report (``budgeted-sweep``,
``budgeted-report``, tools/sweep.py, tools/report.py): real toy sweeps, skipping, resuming, tables
vs the logs."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budgeted.safety.preemption import restore_default_signals

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.experiments.sweep"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]


def _d2_tiny() -> list[str]:
    """The Detectron2 tests' TINY overrides (tests/detectron2/d2_testutils.py)."""
    path = REPO / "tests" / "detectron2" / "d2_testutils.py"
    spec = importlib.util.spec_from_file_location("_sweep_d2_testutils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.TINY)


def cli(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=REPO, check=False
    )


def mmseg_logged_miou(run_dir: Path) -> tuple[int, float]:
    """(step, mIoU) of the last validation in MMEngine's scalars.json, read directly."""
    records = [
        json.loads(line)
        for path in sorted(run_dir.glob("*/vis_data/scalars.json"))
        for line in path.read_text().splitlines()
    ]
    last = [r for r in records if "mIoU" in r][-1]
    return last["step"], last["mIoU"]


def table(text: str, title: str) -> dict[str, dict[str, str]]:
    """``{budget: {column: cell}}`` of the Markdown table under the heading containing title."""
    lines = text.split(title, 1)[1].split("\n\n", 2)[1].splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0]: dict(zip(head[1:], row[1:])) for row in rows}


def files_and_mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


@pytest.fixture(scope="module")
def mmseg_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A real toy MMSeg sweep: linear and step at 1 % (32 iterations each)."""
    tmp = tmp_path_factory.mktemp("mmseg_sweep")
    data, out = tmp / "toy_cityscapes", tmp / "sweep"
    run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.01",
              "--data", data, "--out", out)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return data, out, run.stdout


@pytest.mark.e2e
def test_mmseg_sweep_runs_each_cell_and_reports_the_logged_miou(mmseg_sweep, tmp_path):
    data, out, stdout = mmseg_sweep
    assert f"writing the toy set in {data}" in stdout and (data / "gtFine").is_dir()
    lines = [line for line in stdout.splitlines() if line.startswith("[")]
    for i, name in enumerate(("linear_budget1", "step_budget1"), 1):
        line = next(ln for ln in lines if ln.startswith(f"[{i}/2] {name}: running"))
        assert f"--work-dir {out / name}" in line and " s: mIoU " in line
        assert f"toy/pspnet_r18-toy_cityscapes_budget1{'' if i == 1 else '_step'}.py" in line
    report = cli(REPORT, out, "--csv", tmp_path / "r.csv", "--plot", tmp_path / "r.png")
    assert report.returncode == 0, report.stderr
    rows = table(report.stdout, "### mIoU: mmseg")
    assert list(rows) == ["0.01"]
    logged = {}
    for schedule in ("linear", "step"):
        step, miou = mmseg_logged_miou(out / f"{schedule}_budget1")
        assert step == 32  # the validation after the 32nd (last) iteration
        logged[schedule] = miou
        assert rows["0.01"][schedule] == f"{miou:.2f}"
        assert f"{schedule}_budget1: running" in stdout and f"mIoU {miou:.2f}" in stdout
    assert rows["0.01"]["iterations"] == "32"
    with (tmp_path / "r.csv").open() as f:
        values = {r["schedule"]: float(r["mIoU"]) for r in csv.DictReader(f)}
    assert values == pytest.approx(logged)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = cli(REPORT, out, "--plot", tmp_path / "r.png")  # its own figures: replaced
    assert again.returncode == 0, again.stderr
    assert {p.name for p in tmp_path.glob("r*.png")} == {"r.png", "r_lr.png", "r_loss.png"}


def write_results(sweeps: str, stem: Path) -> subprocess.CompletedProcess:
    """tools/results.sh's ``write_results SWEEPS STEM LINE`` (as tools/evidence.sh calls it)."""
    script = 'source tools/results.sh && write_results "$1" "$2" "# header"'
    return subprocess.run(["bash", "-c", script, "bash", sweeps, str(stem)], cwd=REPO,
                          env={**os.environ, "PY": sys.executable}, capture_output=True,
                          text=True, check=False)  # fmt: skip


@pytest.mark.e2e
def test_results_sh_reports_several_sweep_folders_as_one_grid_and_keeps_its_files_on_error(
    mmseg_sweep, tmp_path
):
    """tools/evidence.sh reports a sweep and its widened LRs together (``a:b``); a report that
    fails (a cell finished in both folders) leaves the tables, CSV and plot as they were."""
    _, out, _ = mmseg_sweep
    record = json.loads((out / "sweep.json").read_text())
    folders = {}
    for schedule in ("linear", "step"):  # the real sweep split in two folders, one schedule each
        folder = tmp_path / schedule
        folder.mkdir()
        shutil.copytree(out / f"{schedule}_budget1", folder / f"{schedule}_budget1")
        cells = [c for c in record["cells"] if c[0] == schedule]
        (folder / "sweep.json").write_text(json.dumps({**record, "cells": cells}))
        folders[schedule] = folder
    stem = tmp_path / "results" / "toy"
    stem.parent.mkdir()
    done = write_results(f"{folders['linear']}:{folders['step']}", stem)
    assert done.returncode == 0, done.stderr
    text = stem.with_suffix(".md").read_text()
    assert text.startswith("# header\n\n### mIoU: mmseg")
    row = table(text, "### mIoU: mmseg")["0.01"]
    for schedule in ("linear", "step"):
        assert row[schedule] == f"{mmseg_logged_miou(out / f'{schedule}_budget1')[1]:.2f}"
    with stem.with_suffix(".csv").open() as f:
        assert sorted(r["schedule"] for r in csv.DictReader(f)) == ["linear", "step"]
    written = {p.name: p.read_bytes() for p in stem.parent.iterdir()}
    assert {"toy.md", "toy.csv", "toy.png"} <= set(written)
    twice = tmp_path / "linear_again"
    shutil.copytree(folders["linear"], twice)
    failed = write_results(f"{folders['linear']}:{twice}", stem)
    err = failed.stderr.strip()
    assert failed.returncode == 2 and err.startswith("report: error: ") and "\n" not in err, err
    assert "cell linear_budget1 is finished in both" in err
    assert {p.name: p.read_bytes() for p in stem.parent.iterdir()} == written


@pytest.mark.e2e
def test_second_run_skips_finished_cells_without_touching_them(mmseg_sweep):
    data, out, _ = mmseg_sweep
    before = {name: files_and_mtimes(out / name) for name in ("linear_budget1", "step_budget1")}
    again = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.01",
                "--data", data, "--out", out)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("skipped, already finished: mIoU") == 2
    assert "running" not in again.stdout and "0 run, 0 resumed, 2 skipped" in again.stdout
    assert {name: files_and_mtimes(out / name) for name in before} == before


@pytest.mark.e2e
def test_dry_run_lists_commands_and_runs_nothing(mmseg_sweep):
    data, out, _ = mmseg_sweep
    before = files_and_mtimes(out)
    dry = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.01",
              "0.05", "--data", data, "--out", out, "--dry-run", "--",
              "train_dataloader.batch_size=2")  # fmt: skip
    # the finished cells ran without that override: a new setting must not mix into the table
    assert dry.returncode == 2 and "holds a finished run with other settings" in dry.stderr
    dry = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.01",
              "0.05", "--data", data, "--out", out, "--dry-run")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    estimate, *lines = dry.stdout.splitlines()
    # the two finished 32-iteration runs time the two 160-iteration ones still to run
    assert estimate.startswith(
        "[sweep] grid: 4 runs (2 finished, 2 to run or resume, 320 iterations); estimated "
    )
    assert estimate.endswith("(from finished runs; resumed runs cost less)")
    assert lines[:2] == [
        "linear_budget1: skip (finished: mIoU " + lines[0].split("mIoU ")[1],
        "step_budget1: skip (finished: mIoU " + lines[1].split("mIoU ")[1],
    ]
    assert lines[2].startswith("linear_budget5: budgeted-train-seg configs/mmseg/toy/")
    assert "toy/pspnet_r18-toy_cityscapes_budget5_step.py --work-dir" in lines[3]
    assert f"data_root={data}" in lines[3] and len(lines) == 4
    assert files_and_mtimes(out) == before
    assert not (out / "linear_budget5").exists()


@pytest.mark.e2e
def test_failing_run_stops_the_sweep_and_shows_as_dash(mmseg_sweep, tmp_path):
    data, _, _ = mmseg_sweep
    out = tmp_path / "sweep"
    run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01", "0.05",
              "--data", data, "--out", out, "--",
              "train_dataloader.dataset.data_root=/no/such/dir")  # fmt: skip
    assert run.returncode == 1
    err = run.stderr.strip()
    assert err.startswith("sweep: error: linear_budget1 failed (exit 2): ") and "\n" not in err
    assert "/no/such/dir" in err and "rerun the sweep to resume it" in err
    assert "[1/2] linear_budget1: running" in run.stdout and "[2/2]" not in run.stdout
    assert not (out / "linear_budget5").exists()
    report = cli(REPORT, out)
    assert report.returncode == 0, report.stderr
    assert "0/2 runs finished" in report.stdout
    assert table(report.stdout, "### mIoU") == {
        "0.01": {"iterations": "-", "linear": "-"},
        "0.05": {"iterations": "-", "linear": "-"},
    }


def _ignore_sigint() -> None:
    """As a command started in the background by a non-interactive shell: SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _wait_for(folder: Path, pattern: str, proc: subprocess.Popen, seconds: float = 300) -> Path:
    """The first file matching ``pattern`` under ``folder``, once there (a deadline of minutes:
    the machine may be busy)."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        found = next(folder.glob(pattern), None) if folder.is_dir() else None
        if found is not None and found.stat().st_size > 0:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {pattern} in {folder}: {proc.communicate()[1][-2000:]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.e2e
def test_interrupted_cell_is_resumed_from_its_checkpoint(mmseg_sweep, tmp_path):
    """Ctrl-C to the sweep's process group, with SIGINT inherited as ignored (the background of a
    non-interactive shell, where the flaky ``assert 0 == 130`` came from): the sweep forwards it,
    the training run saves its iteration, the sweep exits 130; the rerun resumes."""
    data, _, _ = mmseg_sweep
    out = tmp_path / "sweep"
    args = [*SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
            "--data", str(data), "--out", str(out), "--",
            "default_hooks.checkpoint.interval=8"]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_ignore_sigint,
    )  # fmt: skip
    marker = _wait_for(out / "linear_budget1", "last_checkpoint", proc)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-2000:]
    assert "sweep: interrupted by SIGINT (training stopped with exit status 75); rerun the " \
        "same command to resume linear_budget1" in stderr  # fmt: skip
    names = {p.name for p in marker.parent.iterdir()}
    assert "iter_32.pth" not in names
    saved = int((marker.parent / marker.read_text().strip()).stem.split("_")[1])
    assert 8 <= saved < 32  # the iteration it was at, not only the periodic checkpoint
    first = json.loads((marker.parent / "sweep_cell.json").read_text())
    assert [(t["action"], t["exit"], t["signal"]) for t in first["tries"]] == [
        ("run", 75, "SIGINT")
    ]
    assert first["wall_s"] == first["tries"][0]["wall_s"] > 0
    again = cli(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[1/1] linear_budget1: resuming " in again.stdout and " --resume " in again.stdout
    runs = sorted(p for p in marker.parent.iterdir() if p.is_dir())
    assert len(runs) == 2  # MMEngine's timestamped log folders: the first try and the resumed one
    resumed = [json.loads(line) for line in (runs[1] / "vis_data/scalars.json").open()]
    assert min(r["step"] for r in resumed) > saved  # not from scratch
    step, miou = mmseg_logged_miou(marker.parent)
    assert step == 32
    assert again.stdout.rstrip().splitlines()[-2].endswith(f"s: mIoU {miou:.2f}")
    cell = json.loads((marker.parent / "sweep_cell.json").read_text())
    tries = cell["tries"]
    assert [(t["action"], t["exit"]) for t in tries] == [("run", 75), ("resume", 0)]
    # the interrupted try's wall time counts: the report's wall_s is the sum of both tries
    assert cell["wall_s"] == pytest.approx(tries[0]["wall_s"] + tries[1]["wall_s"], abs=0.01)
    report = cli(REPORT, out, "--csv", tmp_path / "r.csv")
    assert table(report.stdout, "### mIoU")["0.01"] == {
        "iterations": "32",
        "linear": f"{miou:.2f}",
    }
    with (tmp_path / "r.csv").open() as f:
        (row,) = csv.DictReader(f)
    assert float(row["wall_s"]) == pytest.approx(cell["wall_s"], abs=0.06)


@pytest.mark.e2e
def test_a_second_sweep_is_refused_and_sigterm_stops_the_sweep_and_its_run(mmseg_sweep, tmp_path):
    """Two sweeps on one --out: the second is refused in one line naming the first's PID and
    writes nothing. SIGTERM to the sweep process alone (Slurm, ``kill``): forwarded to the
    training run, which saves and exits 75; the sweep waits for it and exits 75; no training
    process is left behind."""
    data, _, _ = mmseg_sweep
    out = tmp_path / "sweep"
    args = [*SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.25",
            "--data", str(data), "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=restore_default_signals,
    )  # fmt: skip
    cell = out / "linear_budget25"  # 800 iterations: still training when SIGTERM comes
    _wait_for(cell, "*/vis_data/scalars.json", proc)  # a logged iteration: it is training
    trainer = int((cell / ".train_seg.lock").read_text())
    records = [out / "sweep.json", out / ".sweep.lock", cell / "sweep_cell.json"]
    before = {p: p.read_bytes() for p in records}
    second = cli(args)
    assert second.returncode == 2
    assert second.stderr == (
        f"sweep: error: --out {out} is in use: pid {proc.pid} is running a sweep there (it "
        f"holds {out / '.sweep.lock'}); wait for it to end, stop it, or choose another --out "
        "(nothing was written)\n"
    )
    assert {p: p.read_bytes() for p in before} == before
    dry = cli([*args, "--dry-run"])
    assert dry.returncode == 0 and f"pid {proc.pid} is running a sweep" in dry.stdout
    os.kill(proc.pid, signal.SIGTERM)  # the sweep alone, not its group
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 75, stderr[-2000:]
    assert "sweep: interrupted by SIGTERM (training stopped with exit status 75)" in stderr
    assert not _alive(trainer)
    log = (cell / "sweep.log").read_text()
    assert "train_seg: preempted by SIGTERM at iteration" in log
    record = json.loads((cell / "sweep_cell.json").read_text())
    assert record["tries"][-1]["signal"] == "SIGTERM" and record["tries"][-1]["exit"] == 75


@pytest.mark.e2e
def test_a_killed_sweep_leaves_no_training_run_behind(mmseg_sweep, tmp_path):
    """SIGKILL to the sweep (nothing can be forwarded): the kernel sends its training run
    SIGTERM (PR_SET_PDEATHSIG), which saves its iteration and ends, releasing the work dir."""
    from budgeted.runs.mmengine import WorkDirBusyError, WorkDirLock

    data, _, _ = mmseg_sweep
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [*SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.05", "--data",
         str(data), "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=restore_default_signals,
    )  # fmt: skip
    cell = out / "linear_budget5"
    _wait_for(cell, "*/vis_data/scalars.json", proc)  # a logged iteration: it is training
    with pytest.raises(WorkDirBusyError):
        WorkDirLock(cell).check()  # the training run holds its work dir
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline, log = time.monotonic() + 300, cell / "sweep.log"
    while time.monotonic() < deadline:
        try:
            WorkDirLock(cell).check()
        except WorkDirBusyError:
            time.sleep(0.2)
            continue
        break  # the lock is gone with its process
    WorkDirLock(cell).check()
    assert "train_seg: preempted by SIGTERM at iteration" in log.read_text()
    saved = (cell / "last_checkpoint").read_text().strip()
    assert Path(saved).name != "iter_160.pth" and (cell / Path(saved).name).is_file()


@pytest.mark.e2e
def test_a_stale_lock_from_a_dead_sweep_is_taken_over(tmp_path):
    """A lock file whose holder died (however: here it exits at once) is no obstacle."""
    from budgeted.experiments.sweep import SWEEP_LOCK

    out = tmp_path / "sweep"
    code = (
        "import sys; from pathlib import Path; from budgeted.experiments.sweep import sweep_lock; "
        "sweep_lock(Path(sys.argv[1])).acquire(); import os; os._exit(9)"
    )
    dead = subprocess.run([sys.executable, "-c", code, str(out)], check=False)
    assert dead.returncode == 9 and (out / SWEEP_LOCK).read_text().strip().isdigit()
    run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
              "--data", tmp_path / "no_data", "--out", out, "--",
              "train_dataloader.dataset.data_root=/no/such/dir")  # fmt: skip
    # it got past the lock: the cell ran (and failed on the bad data root, as asked)
    assert run.returncode == 1, run.stderr
    assert "[1/1] linear_budget1: running" in run.stdout and "/no/such/dir" in run.stderr


@pytest.mark.e2e
def test_detectron2_toy_cell_reports_box_and_mask_ap(tmp_path):
    data, out = tmp_path / "datasets", tmp_path / "sweep"
    run = cli(SWEEP, "detectron2", "--toy", "--schedules", "linear", "--budgets", "0.01",
              "--data", data, "--out", out, "--", *_d2_tiny(),
              "SOLVER.BUDGET.GRAD_NORM_PERIOD", "2",
              "SOLVER.BUDGET.WRITER_PERIOD", "1")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"writing the toy set in {data}" in run.stdout
    assert (data / "toy_coco/annotations/instances_val.json").is_file()
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("[1/1] linear_budget1"))
    assert "--config-file configs/detectron2/toy/mask_rcnn_toy_budget1.yaml" in line
    assert f"OUTPUT_DIR {out / 'linear_budget1'}" in line and "box AP" in line
    rows = (out / "linear_budget1/metrics.json").read_text().splitlines()
    final = next(r for r in map(json.loads, reversed(rows)) if "bbox/AP" in r)
    assert final["iteration"] >= 3  # 1 % of 400 iterations: the evaluation after the last one
    report = cli(REPORT, out, "--plot", tmp_path / "d2.svg")
    assert report.returncode == 0, report.stderr
    # the diagnostics hook's norm, logged beside the LR, is read back and plotted against it
    from budgeted.runs.detectron2 import train_curve

    logged = [p for p in train_curve(out / "linear_budget1") if "grad_norm" in p]
    assert [p["iteration"] for p in logged] == [1.0, 3.0] and all(
        p["grad_norm"] > 0 for p in logged
    )
    for suffix in ("", "_lr", "_loss", "_grad_norm"):
        assert (tmp_path / f"d2{suffix}.svg").read_text().lstrip().startswith("<?xml")
    for title, key in (("### box AP", "bbox/AP"), ("### mask AP", "segm/AP")):
        assert table(report.stdout, title) == {
            "0.01": {"iterations": "4", "linear": f"{final[key]:.2f}"}
        }
    # another framework's sweep cannot reuse this folder
    other = cli(SWEEP, "mmseg", "--toy", "--out", out, "--dry-run")
    assert other.returncode == 2
    assert other.stderr.strip() == (
        f"sweep: error: --out {out} holds a detectron2 sweep of "
        "configs/detectron2/toy/mask_rcnn_toy_budget; allowed: a new folder, or a sweep of "
        "mmseg configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget"
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["caffe", "--toy"],
            "unknown framework 'caffe'; allowed: detectron2, mmseg, mmdet, mmpretrain, mmaction",
        ),
        (
            ["mmpretrain", "--toy"],
            "mmpretrain has several tasks; pick one: cifar10, imagenet",
        ),
        (["mmpretrain", "--task", "cifar"], "mmpretrain has no task 'cifar'; allowed: cifar10"),
        (["mmdet", "--task", "coco"], "mmdet has no task 'coco'; allowed: none (leave it out)"),
        (
            ["detectron2", "--toy", "--schedules", "linear", "Rex", "--budgets", "0.1"],
            "schedule 'Rex' is not a registered schedule or arm; allowed: linear, cosine, poly, ",
        ),
        (
            ["mmseg", "--toy", "--budgets", "0.05", "0.2"],
            "budget 0.2 is not a committed budget fraction; allowed: 0.01, 0.05, 0.1, 0.25, 0.5, 1",
        ),
        (["mmseg", "--budgets", "five"], "budget 'five' is not a number; allowed: 0.01"),
        (["mmseg", "--toy", "--out", "{file}"], "--out {file} is a file; allowed: a new folder"),
        (["mmseg", "--toy", "--out", "{tmp}"], "--out {tmp} is a folder holding other files"),
        (["mmseg", "--toy", "--", "--work-dir", "x"], "override '--work-dir' after -- is set by"),
        (
            ["detectron2", "--toy", "--", "SOLVER.MAX_ITER", "9"],
            "override 'SOLVER.MAX_ITER' after -- is set by the sweep per cell; allowed: any "
            "override but OUTPUT_DIR",
        ),
        (["mmseg", "--data", "x"], "--data is for --toy runs"),
        (
            ["mmseg", "--toy", "--lrs", "0.1", "fast"],
            "--lrs value 'fast' is not a positive number; allowed: e.g. 0.01 0.03",
        ),
        (["mmseg", "--toy", "--lrs", "-0.1"], "--lrs value '-0.1' is not a positive number"),
        (["mmseg", "--toy", "--lrs", "nan"], "--lrs value 'nan' is not a positive number"),
        (
            ["mmseg", "--toy", "--seeds", "0", "1.5"],
            "--seeds value '1.5' is not an integer >= 0; allowed: e.g. 0 1 2",
        ),
        (
            ["mmseg", "--toy", "--lrs", "0.1", "--", "optim_wrapper.optimizer.lr=0.3"],
            "override 'optim_wrapper.optimizer.lr=0.3' after -- is set by the sweep per cell",
        ),
        (
            ["detectron2", "--toy", "--seeds", "0", "--", "SEED", "3"],
            "override 'SEED' after -- is set by the sweep per cell; allowed: any override but "
            "OUTPUT_DIR",
        ),
        (["mmseg", "--toy", "--seeds", "²"], "--seeds value '²' is not an integer >= 0"),
        (["mmseg", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path):
    (tmp_path / "a_file").write_text("not a sweep")
    fill = {"file": str(tmp_path / "a_file"), "tmp": str(tmp_path)}
    args = [a.format(**fill) for a in args]
    if "--out" not in args:
        args = [*args[:1], "--out", str(tmp_path / "new"), *args[1:]]
    cut = args.index("--") if "--" in args else len(args)
    run = cli(SWEEP, *args[:cut], "--dry-run", *args[cut:])
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith("sweep: error: ") and "\n" not in err, err
    assert message.format(**fill) in err
    assert not (tmp_path / "new").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["mmpretrain", "--toy", "--task", "digits"],
            "mmpretrain --task digits has no toy family; allowed: leave out --toy, or --toy "
            "--task cifar10 or imagenet",
        ),
        (
            ["pytorch", "--toy", "--task", "digits"],
            "pytorch --task digits has no toy family; allowed: leave out --toy",
        ),
        (["mmpretrain", "--task", "mnist"], "mmpretrain has no task 'mnist'; allowed: "),
    ],
)
def test_a_task_without_a_toy_family_says_so_in_one_line(args, message, tmp_path, capsys):
    """issue 40/18: ``mmpretrain --toy --task digits`` said there was no task ``digits``."""
    from budgeted.experiments.sweep import main

    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as stop:
        main([*args, "--out", str(tmp_path / "new")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sweep: error: {message}") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


@pytest.mark.e2e
def test_report_refuses_a_folder_that_is_not_a_sweep(tmp_path):
    run = cli(REPORT, tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"report: error: {tmp_path} is not a sweep folder (no sweep.json); allowed: a folder "
        "written by budgeted-sweep --out"
    )


@pytest.mark.e2e
def test_tools_wrappers_run_the_package(tmp_path):
    """tools/sweep.py, report.py and rank.py are thin wrappers over budgeted.experiments.sweep /
    .report / .rank."""
    for tool, package, args in (
        ("sweep.py", SWEEP, ["caffe", "--out", str(tmp_path / "new"), "--dry-run"]),
        ("report.py", REPORT, [str(tmp_path)]),
        ("rank.py", [sys.executable, "-m", "budgeted.experiments.rank"], ["a=x", "b=y"]),
    ):
        wrapped = cli([sys.executable, str(REPO / "tools" / tool)], *args)
        direct = cli(package, *args)
        assert wrapped.returncode == direct.returncode == 2
        assert wrapped.stderr == direct.stderr and wrapped.stderr.count("\n") == 1


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "config"),
    [
        (["mmdet"], "configs/mmdet/mask-rcnn_r50_fpn_coco_budget"),
        (["mmdet", "--toy"], "configs/mmdet/toy/mask-rcnn_r18-toy_coco_budget"),
        (["mmpretrain", "--task", "cifar10"], "configs/mmpretrain/resnet18_cifar10_budget"),
        (["mmpretrain", "--toy", "--task", "imagenet"], "configs/mmpretrain/toy/resnet18-toy_"),
        (["mmaction", "--toy"], "configs/mmaction/toy/i3d-toy_kinetics400_budget"),
    ],
)
def test_the_other_mmengine_codebases_sweep_with_the_same_tool_and_keys(args, config, tmp_path):
    out = tmp_path / "grid"
    run = cli(SWEEP, *args, "--schedules", "linear", "step", "--budgets", "0.05",
              "--lrs", "0.1", "--seeds", "3", "--out", out, "--dry-run")  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("[sweep] grid: 2 runs (0 finished, 2 to run")
    cells = [line for line in lines if line.startswith(("linear_", "step_"))]
    assert len(cells) == 2 and all(f"budgeted-train-seg {config}" in c for c in cells), cells
    assert all("optim_wrapper.optimizer.lr=0.1 randomness.seed=3" in c for c in cells), cells
    assert not out.exists()


@pytest.mark.e2e
def test_sweep_and_report_import_no_framework():
    """``budgeted-sweep --dry-run`` planning and ``budgeted-report --help`` need no framework."""
    code = (
        "import sys, budgeted.experiments.sweep, budgeted.experiments.report\n"
        "import budgeted.experiments.rank, budgeted.experiments.branch\n"
        "try:\n    budgeted.experiments.report.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({'torch', 'detectron2', 'mmengine', 'mmseg', 'mmcv', 'yaml', 'numpy'}"
        " & set(sys.modules)))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[-1] == "[]"
    assert "usage: budgeted-report" in run.stdout


@pytest.mark.unit
def test_cells_and_committed_configs_follow_the_families():
    """Every shipped config of every family is a sweep cell under the families' file-name rule."""
    from budgeted.config_files import config_root
    from budgeted.experiments.families import FAMILIES
    from budgeted.experiments.report import cell_name, family_label
    from budgeted.experiments.sweep import committed_configs

    for fam in FAMILIES.values():
        expected = {
            (schedule, fraction): config_root() / fam.filename(fraction, schedule)
            for fraction in fam.fractions
            for schedule in fam.schedules
        }
        assert committed_configs(fam) == expected, fam.name
        # a script family: its script and the arguments that pick the family's task
        script = " ".join([fam.script, *fam.script_args]) if fam.script else None
        label = script or f"configs/{fam.folder}/{fam.prefix}"
        assert family_label(fam) == label
    assert cell_name("linear", 0.05) == "linear_budget5"
    assert cell_name("step", 0.005) == "step_budget0p5"  # not "0.5": the families' budget tag
    assert cell_name("poly", 1.0) == "poly_budget100"


@pytest.mark.e2e
def test_detectron2_key_value_overrides_are_checked_too(tmp_path):
    run = cli(SWEEP, "detectron2", "--toy", "--out", tmp_path / "new", "--dry-run", "--",
              "SOLVER.MAX_ITER=9")  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith("sweep: error: override 'SOLVER.MAX_ITER=9' after -- is set by")


@pytest.fixture
def finished_looking_sweep(tmp_path: Path) -> Path:
    """A sweep folder as budgeted-sweep writes it before any cell ran (no framework needed)."""
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({
        "framework": "mmseg",
        "family": "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget",
        "cells": [["linear", 0.01]],
    }))  # fmt: skip
    return out


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("corrupt sweep.json", "sweep.json is not a sweep record: not valid JSON (line 1, column"),
        ("sweep.json of another kind", "sweep.json is not a sweep record: no family, cells"),
        ("corrupt sweep_cell.json", "sweep_cell.json is not a sweep record: not valid JSON"),
        (
            "sweep_cell.json of budget 'abc'",
            "sweep_cell.json is not a sweep record: its budget 'abc'",
        ),
        (
            'sweep_cell.json with "tries": "garbage"',
            "sweep_cell.json is not a sweep record: its tries 'garbage' is not a list of tries",
        ),
        (
            'sweep_cell.json with "wall_s": NaN',
            "its wall_s nan is not a number of seconds >= 0 or null; allowed: a JSON object",
        ),
        (
            'sweep_cell.json with "metrics": [41.2]',
            "its metrics [41.2] is not an object of metric: number",
        ),
        ('sweep.json with "cells": 5', "sweep.json is not a sweep record: its cells are not"),
        ("--plot x.txt", "x.txt has no image file type matplotlib writes; allowed: a file ending"),
        ("--plot someone's photo.png", "photo.png, which budgeted-report did not write; allowed"),
        ("--plot beside someone's photo_lr.png", "photo_lr.png, which budgeted-report did not"),
        ("--csv sweep.json", "sweep.json does not end in .csv; allowed: a FILE.csv path"),
        ("--csv someone's data.csv", "data.csv exists and is not a CSV written by budgeted-report"),
        ("--csv inside a run folder", "lies inside a run folder of the sweep"),
    ],
)
def test_report_bad_input_is_one_line_and_overwrites_nothing(
    case, message, finished_looking_sweep, tmp_path
):
    out = finished_looking_sweep
    extra: list[str | Path] = []
    if case == "corrupt sweep.json":
        (out / "sweep.json").write_text('{"framework": "mmseg", "cells": [[')
    elif case == "sweep.json of another kind":
        (out / "sweep.json").write_text('{"framework": "mmseg"}')
    elif case == "corrupt sweep_cell.json":
        (out / "linear_budget1").mkdir()
        (out / "linear_budget1" / "sweep_cell.json").write_bytes(b"\x00\x01garbage")
    elif case == "sweep_cell.json of budget 'abc'":
        (out / "linear_budget1").mkdir()
        cell = '{"schedule": "linear", "budget": "abc"}'
        (out / "linear_budget1" / "sweep_cell.json").write_text(cell)
    elif case.startswith("sweep_cell.json with "):  # a field of the wrong type
        (out / "linear_budget1").mkdir()
        cell = f'{{"schedule": "linear", "budget": 0.01, {case.split(" with ")[1]}}}'
        (out / "linear_budget1" / "sweep_cell.json").write_text(cell)
    elif case.startswith("sweep.json with "):
        (out / "sweep.json").write_text('{"framework": "mmseg", "family": "f", "cells": 5}')
    elif case == "--plot x.txt":
        extra = ["--plot", tmp_path / "x.txt"]
    elif case.startswith("--plot"):  # a matplotlib figure, not one of the report's
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure

        name = case.split("someone's ")[1]
        Figure().savefig(tmp_path / name)
        extra = ["--plot", tmp_path / "photo.png"]
    elif case == "--csv sweep.json":
        extra = ["--csv", out / "sweep.json"]
    elif case == "--csv someone's data.csv":
        (tmp_path / "data.csv").write_text("a,b\n1,2\n")
        extra = ["--csv", tmp_path / "data.csv"]
    else:
        (out / "linear_budget1").mkdir()
        extra = ["--csv", out / "linear_budget1" / "r.csv"]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run = cli(REPORT, out, *extra)
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith("report: error: ") and "\n" not in err, err
    assert message in err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    if case.startswith(("corrupt", "sweep_cell.json ", "sweep.json with")):  # the same words
        sweep = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
                    "--out", out, "--dry-run")  # fmt: skip
        assert sweep.returncode == 2, sweep.stdout
        assert sweep.stderr.strip() == err.replace("report: error: ", "sweep: error: ")


@pytest.mark.e2e
def test_runs_at_the_configs_seed_and_at_seeds_are_not_mixed(finished_looking_sweep, tmp_path):
    """A folder of runs at the config's own seed takes no --seeds runs, nor the reverse, and the
    report refuses to pair sweeps of both kinds: such runs have no seed to pair by."""
    unseeded = finished_looking_sweep
    seeded = tmp_path / "seeded"
    seeded.mkdir()
    record = json.loads((unseeded / "sweep.json").read_text())
    (seeded / "sweep.json").write_text(json.dumps({**record, "cells": [["linear", 0.01, None, 0]]}))
    before = files_and_mtimes(tmp_path)
    for out, axes, message in (
        (unseeded, ["--seeds", "0"], "holds runs at the configs' own seed, which the report cannot "
         "pair with runs at --seeds; allowed: no --seeds, as before, or a new folder"),
        (seeded, [], "holds runs at --seeds, which the report cannot pair with runs without "
         "--seeds; allowed: --seeds, as before, or a new folder"),
    ):  # fmt: skip
        run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01", *axes,
                  "--out", out, "--dry-run")  # fmt: skip
        err = run.stderr.strip()
        assert run.returncode == 2 and "\n" not in err and message in err, err
    for cells in ([["linear", 0.01], ["linear", 0.01, None, 0]], [["linear", 0.01, 0.03, None]]):
        (seeded / "sweep.json").write_text(json.dumps({**record, "cells": cells}))
        run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
                  "--seeds", "1", "--out", seeded, "--dry-run")  # fmt: skip
        assert run.returncode == 2 and "holds runs at the configs' own seed" in run.stderr
    assert files_and_mtimes(unseeded) == {k[6:]: v for k, v in before.items() if k[:6] == "sweep/"}
    (seeded / "sweep.json").write_text(json.dumps({**record, "cells": [["linear", 0.01, None, 0]]}))
    before = files_and_mtimes(tmp_path)
    report = cli(REPORT, unseeded, seeded)
    err = report.stderr.strip()
    assert report.returncode == 2 and "\n" not in err, err
    assert "mix runs at the config's seed (linear_budget1, ...) with runs at --seeds " in err
    assert "(linear_budget1_seed0, ...): they cannot be paired seed by seed" in err
    assert files_and_mtimes(tmp_path) == before


@pytest.mark.e2e
def test_base_lrs_reach_the_training_tool_exactly(tmp_path):
    """Two LRs that agree to 6 digits are two cells, each trained at its own LR (not at
    ``f"{lr:g}"``); the usual ones keep their short names."""
    run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
              "--lrs", "0.03", "0.030000001", "0.12345678", "--out", tmp_path / "s",
              "--dry-run")  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = {ln.split(":")[0]: ln for ln in run.stdout.splitlines() if ln.startswith("linear_")}
    assert sorted(lines) == [
        "linear_budget1_lr0.03", "linear_budget1_lr0.030000001", "linear_budget1_lr0.12345678"
    ]  # fmt: skip
    assert "optim_wrapper.optimizer.lr=0.030000001" in lines["linear_budget1_lr0.030000001"]
    assert "optim_wrapper.optimizer.lr=0.12345678" in lines["linear_budget1_lr0.12345678"]
    assert "optim_wrapper.optimizer.lr=0.03 " in lines["linear_budget1_lr0.03"] + " "


@pytest.mark.e2e
def test_report_replaces_its_own_csv(finished_looking_sweep, tmp_path):
    out = finished_looking_sweep
    for _ in range(2):  # the second run replaces the first's CSV
        run = cli(REPORT, out, "--csv", tmp_path / "r.csv")
        assert run.returncode == 0, run.stderr
    with (tmp_path / "r.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["schedule"], r["budget"], r["mIoU"]) for r in rows] == [("linear", "0.01", "")]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def _group(values: dict[tuple[str, float, float, int], float]) -> object:
    """A report group of finished MMSeg runs with the given final mIoU (no files needed)."""
    from budgeted.experiments.report import Cell, CellKey, Final, Group

    group = Group("mmseg", "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget")
    for (schedule, budget, lr, seed), miou in values.items():
        key = CellKey(schedule, budget, lr, seed)
        final = None if math.isnan(miou) else Final(int(budget * 3200), {"mIoU": miou})
        group.cells[key] = Cell(key, Path(f"/runs/{schedule}{budget}{lr}{seed}"), final, 10.0)
    return group


@pytest.mark.unit
def test_report_tables_follow_the_papers_protocol():
    """Best LR by mean, flagged at the grid's edge; paired differences at those LRs; normalized
    by the largest budget's best; an unfinished run is left out of its mean (n says so)."""
    from budgeted.experiments.report import markdown

    values = {}
    for seed, noise in enumerate((0.0, 1.0, -1.0)):
        values["linear", 0.05, 0.01, seed] = 30 + noise
        values["linear", 0.05, 0.1, seed] = 40 + noise  # best, at the edge of the grid
        values["step", 0.05, 0.01, seed] = 36 + noise * 2  # best for step
        values["step", 0.05, 0.1, seed] = 20 + noise
        values["linear", 0.1, 0.01, seed] = 50 + noise
        values["linear", 0.1, 0.1, seed] = 45 + noise
        values["step", 0.1, 0.01, seed] = 49 + noise * 0.5
        values["step", 0.1, 0.1, seed] = 44 + noise
    values["step", 0.1, 0.1, 2] = math.nan  # did not finish
    text = markdown(_group(values))
    assert "23/24 runs finished" in text
    cells = table(text, "### mIoU: mmseg")
    assert cells["0.05"]["linear lr=0.1"] == "40.00 ± 1.00 (3)"
    assert cells["0.1"]["step lr=0.1"] == "44.50 ± 0.71 (2)"
    best = table(text, "#### mIoU at the best base LR")
    assert best["0.05"] == {
        "linear": "40.00 ± 1.00 (3) @ 0.1 (edge)",
        "step": "36.00 ± 2.00 (3) @ 0.01 (edge)",
    }
    assert best["0.1"]["step"] == "49.00 ± 0.50 (3) @ 0.01 (edge)"
    diffs = table(text, "#### mIoU: paired differences")
    # 0.05: linear@0.1 - step@0.01 per seed = 4, 3, 5 -> mean 4, sd 1, t(2) 4.303 / sqrt(3)
    assert diffs["0.05"] == {"linear − step": "+4.00 [+1.52, +6.48] (3)", "verdict": "linear ahead"}
    # 0.1: linear@0.01 - step@0.01 = 1, 1.5, 0.5 -> mean 1, sd 0.5: [-0.24, +2.24]
    assert diffs["0.1"] == {"linear − step": "+1.00 [-0.24, +2.24] (3)", "verdict": "within noise"}
    normalized = table(text, "#### mIoU normalized")
    assert "budget 0.1, the largest run (50.00)" in text
    assert normalized["0.05"] == {"linear": "0.800", "step": "0.720"}
    assert normalized["0.1"] == {"linear": "1.000", "step": "0.980"}


@pytest.mark.e2e
def test_a_grid_of_lrs_and_seeds_sets_the_framework_keys_and_reports_means(mmseg_sweep, tmp_path):
    """--lrs and --seeds reach MMSeg's own keys: the logged LR scales with the base LR, seeds
    give different runs; the report's means and the CSV are those of the logs."""
    data, _, _ = mmseg_sweep
    out = tmp_path / "grid"
    run = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01",
              "--lrs", "0.01", "0.03", "--seeds", "0", "1", "--data", data, "--out", out,
              "--", "default_hooks.logger.interval=1")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    names = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert names == [f"linear_budget1_lr{lr}_seed{s}" for lr in ("0.01", "0.03") for s in (0, 1)]
    from budgeted.runs.mmengine import train_curve

    curves = {name: train_curve(out / name) for name in names}
    for seed in (0, 1):
        low, high = (curves[f"linear_budget1_lr{lr}_seed{seed}"] for lr in ("0.01", "0.03"))
        assert [p["iteration"] for p in low] == list(map(float, range(1, 33)))
        for a, b in zip(low, high):  # the same multiplier of a 3x base LR
            assert b["lr"] == pytest.approx(3 * a["lr"], rel=1e-6)
    assert curves[names[0]][5]["loss"] != curves[names[1]][5]["loss"]  # seed 0 vs 1
    logged = {name: mmseg_logged_miou(out / name)[1] for name in names}
    report = cli(REPORT, out, "--csv", tmp_path / "g.csv", "--plot", tmp_path / "g.png")
    assert report.returncode == 0, report.stderr
    from budgeted.experiments.stats import summarize

    cells = table(report.stdout, "### mIoU: mmseg")
    for lr in ("0.01", "0.03"):
        expected = summarize([logged[f"linear_budget1_lr{lr}_seed{s}"] for s in (0, 1)]).text()
        assert cells["0.01"][f"linear lr={lr}"] == expected
    with (tmp_path / "g.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["lr"], r["seed"]): float(r["mIoU"]) for r in rows} == {
        (lr, str(s)): pytest.approx(logged[f"linear_budget1_lr{lr}_seed{s}"])
        for lr in ("0.01", "0.03") for s in (0, 1)
    }  # fmt: skip
    for suffix in ("", "_lr", "_loss"):
        assert (tmp_path / f"g{suffix}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.unit
def test_a_run_that_predicted_nothing_counts_as_zero_and_is_named(tmp_path):
    """Detectron2's COCOEvaluator logs NaN box AP (and no mask AP) when the model predicted
    nothing: the report counts 0 for both, the COCO AP of no detections, and names the run."""
    from budgeted.experiments.families import MASK_RCNN_TOY
    from budgeted.experiments.report import Cell, CellKey, Group, markdown, read_final

    group = Group("detectron2", "configs/detectron2/toy/mask_rcnn_toy_budget")
    for seed, box in enumerate((float("nan"), 20.0)):
        run_dir = tmp_path / f"linear_budget10_seed{seed}"
        run_dir.mkdir()
        (run_dir / "model_final.pth").write_bytes(b"")
        evaluation = {"bbox/AP": box, "bbox/AP50": box, "iteration": 39}
        if not math.isnan(box):
            evaluation["segm/AP"] = 10.0
        rows = [{"iteration": 39, "total_loss": 2.9, "lr": 0.001}, evaluation]
        (run_dir / "metrics.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        final = read_final(MASK_RCNN_TOY, 0.1, run_dir)
        key = CellKey("linear", 0.1, None, seed)
        group.cells[key] = Cell(key, run_dir, final, 1.0)
    first = group.cells[CellKey("linear", 0.1, None, 0)].final
    assert first.metrics == {"box AP": 0.0, "mask AP": 0.0}
    assert first.no_predictions == ("box AP", "mask AP")
    text = markdown(group)
    assert table(text, "### box AP: detectron2")["0.1"]["linear"] == "10.00 ± 14.14 (2)"
    assert table(text, "### mask AP: detectron2")["0.1"]["linear"] == "5.00 ± 7.07 (2)"
    assert (
        text.count(
            "1 finished run(s) predicted nothing at the final evaluation (box AP logged as NaN): "
            "counted as box AP 0: linear_budget10_seed0."
        )
        == 1
    )


@pytest.mark.unit
def test_an_mmdet_run_that_predicted_nothing_counts_as_zero_and_an_mmseg_one_is_unfinished(
    tmp_path,
):
    """MMDetection's CocoMetric logs no metric at all when the model predicted nothing: the final
    validation record holds only times and the step. The report counts 0 for both APs and names
    the run; for MMSegmentation, whose IoUMetric always logs, such a record is no result."""
    from budgeted.experiments.families import MMDET_MASK_RCNN_TOY, PSPNET_TOY
    from budgeted.experiments.report import Cell, CellKey, Group, markdown, read_final

    def mmengine_run(run_dir, iters, final):
        logs = run_dir / "20260101_000000/vis_data"
        logs.mkdir(parents=True)
        (run_dir / "cfg.py").write_text(f"train_cfg = dict(max_iters={iters})\n")
        train = {"lr": 0.001, "loss": 2.0, "iter": iters, "step": iters}
        rows = [train, {"data_time": 0.1, "time": 0.2, "step": iters, **final}]
        (logs / "scalars.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    iters = MMDET_MASK_RCNN_TOY.iters(0.1)
    group = Group("mmdet", "configs/mmdet/toy/mask-rcnn_r18-toy_coco_budget")
    for seed, final in enumerate(({}, {"coco/bbox_mAP": 0.2, "coco/segm_mAP": 0.1})):
        run_dir = tmp_path / f"linear_budget10_seed{seed}"
        mmengine_run(run_dir, iters, final)
        key = CellKey("linear", 0.1, None, seed)
        group.cells[key] = Cell(key, run_dir, read_final(MMDET_MASK_RCNN_TOY, 0.1, run_dir), 1.0)
    first = group.cells[CellKey("linear", 0.1, None, 0)].final
    assert first.metrics == {"box AP": 0.0, "mask AP": 0.0}
    assert first.no_predictions == ("box AP", "mask AP")
    text = markdown(group)
    assert "counted as box AP 0: linear_budget10_seed0." in text
    assert "predicted nothing at the final evaluation (box AP not logged)" in text
    second = group.cells[CellKey("linear", 0.1, None, 1)].final
    assert second.metrics == {"box AP": 20.0, "mask AP": 10.0}  # logged 0.2, 0.1: in percent
    mmseg_run = tmp_path / "mmseg_linear_budget10"
    mmengine_run(mmseg_run, PSPNET_TOY.iters(0.1), {})
    assert read_final(PSPNET_TOY, 0.1, mmseg_run) is None

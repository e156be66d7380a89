"""budgeted.sweep and budgeted.report (``budgeted-sweep``, ``budgeted-report``, tools/sweep.py,
tools/report.py): real toy sweeps, skipping, resuming, tables vs the logs."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.sweep"]
REPORT = [sys.executable, "-m", "budgeted.report"]


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


@pytest.mark.slow
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
        values = {r["schedule"]: float(r["value"]) for r in csv.DictReader(f)}
    assert values == pytest.approx(logged)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_second_run_skips_finished_cells_without_touching_them(mmseg_sweep):
    data, out, _ = mmseg_sweep
    before = {name: files_and_mtimes(out / name) for name in ("linear_budget1", "step_budget1")}
    again = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "step", "--budgets", "0.01",
                "--data", data, "--out", out)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("skipped, already finished: mIoU") == 2
    assert "running" not in again.stdout and "0 run, 0 resumed, 2 skipped" in again.stdout
    assert {name: files_and_mtimes(out / name) for name in before} == before


@pytest.mark.slow
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
    lines = dry.stdout.splitlines()
    assert lines[:2] == [
        "linear_budget1: skip (finished: mIoU " + lines[0].split("mIoU ")[1],
        "step_budget1: skip (finished: mIoU " + lines[1].split("mIoU ")[1],
    ]
    assert lines[2].startswith("linear_budget5: budgeted-train-seg configs/mmseg/toy/")
    assert "toy/pspnet_r18-toy_cityscapes_budget5_step.py --work-dir" in lines[3]
    assert f"data_root={data}" in lines[3] and len(lines) == 4
    assert files_and_mtimes(out) == before
    assert not (out / "linear_budget5").exists()


@pytest.mark.slow
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
    assert "0/2 cells finished" in report.stdout
    assert table(report.stdout, "### mIoU") == {
        "0.01": {"iterations": "-", "linear": "-"},
        "0.05": {"iterations": "-", "linear": "-"},
    }


@pytest.mark.slow
def test_interrupted_cell_is_resumed_from_its_checkpoint(mmseg_sweep, tmp_path):
    data, _, _ = mmseg_sweep
    out = tmp_path / "sweep"
    args = [*SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.05",
            "--data", str(data), "--out", str(out), "--",
            "default_hooks.checkpoint.interval=16"]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    marker = out / "linear_budget5" / "last_checkpoint"
    deadline = time.monotonic() + 40
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None and marker.exists(), proc.communicate()[1][-2000:]
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the sweep and its training run
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr[-2000:]
    assert "rerun the same command to resume linear_budget5" in stderr
    assert "iter_160.pth" not in {p.name for p in marker.parent.iterdir()}
    again = cli(args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "[1/1] linear_budget5: resuming " in again.stdout and " --resume " in again.stdout
    runs = sorted(p for p in marker.parent.iterdir() if p.is_dir())
    assert len(runs) == 2  # MMEngine's timestamped log folders: the first try and the resumed one
    resumed = [json.loads(line) for line in (runs[1] / "vis_data/scalars.json").open()]
    assert min(r["step"] for r in resumed) > 10  # logging every 10 iterations: not from scratch
    step, miou = mmseg_logged_miou(marker.parent)
    assert step == 160
    assert again.stdout.rstrip().splitlines()[-2].endswith(f"s: mIoU {miou:.2f}")
    report = cli(REPORT, out)
    assert table(report.stdout, "### mIoU")["0.05"] == {
        "iterations": "160",
        "linear": f"{miou:.2f}",
    }


@pytest.mark.slow
def test_detectron2_toy_cell_reports_box_and_mask_ap(tmp_path):
    data, out = tmp_path / "datasets", tmp_path / "sweep"
    run = cli(SWEEP, "detectron2", "--toy", "--schedules", "linear", "--budgets", "0.01",
              "--data", data, "--out", out, "--", *_d2_tiny())  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"writing the toy set in {data}" in run.stdout
    assert (data / "toy_coco/annotations/instances_val.json").is_file()
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("[1/1] linear_budget1"))
    assert "--config-file configs/detectron2/toy/mask_rcnn_toy_budget1.yaml" in line
    assert f"OUTPUT_DIR {out / 'linear_budget1'}" in line and "box AP" in line
    rows = (out / "linear_budget1/metrics.json").read_text().splitlines()
    final = next(r for r in map(json.loads, reversed(rows)) if "bbox/AP" in r)
    assert final["iteration"] >= 3  # 1 % of 400 iterations: the evaluation after the last one
    report = cli(REPORT, out)
    assert report.returncode == 0, report.stderr
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["caffe", "--toy"], "unknown framework 'caffe'; allowed: detectron2, mmseg"),
        (
            ["detectron2", "--toy", "--schedules", "poly", "--budgets", "0.1"],
            "no committed config for schedule 'poly' at budget 0.1 (the mask_rcnn_toy family "
            "ships no 'poly' configs); "
            "committed: linear (0.01 0.05 0.1 0.25 0.5 1), step (0.01 0.05 0.1 0.25 0.5 1)",
        ),
        (
            ["mmseg", "--schedules", "cosine"],
            "no committed config for schedule 'cosine' at budget 0.01",
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


def test_report_refuses_a_folder_that_is_not_a_sweep(tmp_path):
    run = cli(REPORT, tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"report: error: {tmp_path} is not a sweep folder (no sweep.json); allowed: a folder "
        "written by budgeted-sweep --out"
    )


def test_tools_wrappers_run_the_package(tmp_path):
    """tools/sweep.py and tools/report.py are thin wrappers over budgeted.sweep / .report."""
    for tool, package, args in (
        ("sweep.py", SWEEP, ["caffe", "--out", str(tmp_path / "new"), "--dry-run"]),
        ("report.py", REPORT, [str(tmp_path)]),
    ):
        wrapped = cli([sys.executable, str(REPO / "tools" / tool)], *args)
        direct = cli(package, *args)
        assert wrapped.returncode == direct.returncode == 2
        assert wrapped.stderr == direct.stderr and wrapped.stderr.count("\n") == 1


def test_sweep_and_report_import_no_framework():
    """``budgeted-sweep --dry-run`` planning and ``budgeted-report --help`` need no framework."""
    code = (
        "import sys, budgeted.sweep, budgeted.report\n"
        "try:\n    budgeted.report.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({'torch', 'detectron2', 'mmengine', 'mmseg', 'mmcv', 'yaml', 'numpy'}"
        " & set(sys.modules)))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[-1] == "[]"
    assert "usage: budgeted-report" in run.stdout


def test_cells_and_committed_configs_follow_the_families():
    """Every shipped config of every family is a sweep cell under the families' file-name rule."""
    from budgeted.config_files import config_root
    from budgeted.families import FAMILIES
    from budgeted.report import cell_name, family_label
    from budgeted.sweep import committed_configs

    for fam in FAMILIES.values():
        expected = {
            (schedule, fraction): config_root() / fam.filename(fraction, schedule)
            for fraction in fam.fractions
            for schedule in fam.schedules
        }
        assert committed_configs(fam) == expected, fam.name
        assert family_label(fam) == f"configs/{fam.folder}/{fam.prefix}"
    assert cell_name("linear", 0.05) == "linear_budget5"
    assert cell_name("step", 0.005) == "step_budget0p5"  # not "0.5": the families' budget tag
    assert cell_name("poly", 1.0) == "poly_budget100"


def test_detectron2_key_value_overrides_are_checked_too(tmp_path):
    run = cli(SWEEP, "detectron2", "--toy", "--out", tmp_path / "new", "--dry-run", "--",
              "SOLVER.MAX_ITER=9")  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.startswith("sweep: error: override 'SOLVER.MAX_ITER=9' after -- is set by")

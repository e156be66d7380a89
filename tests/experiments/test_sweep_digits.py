"""The plain-PyTorch digits family (issue 33) and ``--jobs`` (the local executor's parallelism):
``budgeted-sweep pytorch --task digits`` runs ``examples/digits_budget.py`` per cell with any
registered schedule, reads its run folders (``budgeted.runs.pytorch``), records a diverged LR
as diverged, and gives the same records with two cells at a time as with one."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from budgeted.experiments.sweep import main

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.experiments.sweep"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]
DIVERGES = "1e10"
"""A base LR at which LeNet-5's loss is NaN within 7 iterations (1e6 only saturates tanh)."""
GRID = ["pytorch", "--task", "digits", "--schedules", "linear", "rex", "--budgets", "0.01",
        "--lrs", "0.3", DIVERGES, "--seeds", "0", "1", "--keep-going"]  # fmt: skip
"""2 schedules x the 1 % budget (17 iterations) x 2 LRs x 2 seeds: 8 cells of a few seconds."""
SEED_0 = [*GRID[: GRID.index("--seeds")], "--seeds", "0", "--keep-going"]
"""The grid's seed-0 cells: 2 schedules x 2 LRs."""


def cli(cmd: list[str], *args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=kwargs.pop("cwd", REPO),
        check=False, **kwargs,
    )  # fmt: skip


def records(out: Path) -> dict[str, tuple]:
    """cell -> (status, exit status, metrics) of every ``sweep_cell.json`` in ``out``."""
    found = {}
    for path in sorted(out.glob("*/sweep_cell.json")):
        record = json.loads(path.read_text())
        found[path.parent.name] = (record["status"], record["exit"], record["metrics"])
    return found


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The report's CSV rows without what differs run to run (wall time, folder)."""
    rows = list(csv.DictReader(path.open(newline="")))
    return [{k: v for k, v in r.items() if k not in ("wall_s", "run_dir")} for r in rows]


@pytest.fixture(scope="module")
def digits_sweeps(tmp_path_factory) -> dict[int, tuple[Path, subprocess.CompletedProcess]]:
    """The tiny grid one cell at a time, and its seed-0 half (4 cells) two at a time."""
    root = tmp_path_factory.mktemp("digits")
    done = {}
    for jobs, grid in ((1, GRID), (2, SEED_0)):
        out = root / f"jobs{jobs}"
        done[jobs] = out, cli(SWEEP, *grid, "--jobs", jobs, "--out", out)
    return done


def test_a_tiny_digits_sweep_records_every_cell_and_reports_them(digits_sweeps):
    out, run = digits_sweeps[1]
    assert run.returncode == 3, run.stderr  # a diverged LR: a result, named at the end
    assert "[sweep] 8 run, 0 resumed, 0 skipped in" in run.stdout
    found = records(out)
    assert len(found) == 8
    for name, (status, code, metrics) in found.items():
        if "_lr1e+10_" in name:
            assert (status, code, metrics) == ("diverged", 3, None), name
            written = sorted(p.name for p in (out / name).iterdir())
            assert written == ["sweep.log", "sweep_cell.json"]  # the example wrote nothing
        else:
            assert (status, code) == ("finished", 0), name
            assert 0.1 < metrics["top-1"] / 100 <= 1  # val_accuracy, shown in percent
            summary = json.loads((out / name / "results.json").read_text())
            assert metrics["top-1"] == pytest.approx(100 * summary["val_accuracy"])
            assert summary["budget_iters"] == 17 and summary["schedule"] in ("linear", "rex")
    sweep = json.loads((out / "sweep.json").read_text())
    assert (sweep["framework"], sweep["family"]) == ("pytorch", "examples/digits_budget.py")

    report = cli(REPORT, out, "--csv", out / "runs.csv")
    assert report.returncode == 0, report.stderr
    assert "### top-1: pytorch examples/digits_budget.py (" in report.stdout
    assert "| 0.01 | 17 | " in report.stdout and "| diverged |" in report.stdout
    best = report.stdout.split("at the best base LR per budget", 1)[1].split("\n\n", 2)[1]
    assert best.count("@ 0.3") == 2 and "1e+10" not in best  # a diverged LR is never the best
    assert "| budget | rex − linear | verdict |" in report.stdout
    rows = csv_rows(out / "runs.csv")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"finished", "diverged"}
    assert all(r["top-1"] == "" for r in rows if r["status"] == "diverged")

    again = cli(SWEEP, *GRID, "--out", out, "--dry-run")  # nothing is trained again
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("[sweep] grid: 8 runs (4 finished, 4 diverged, 0 to run")


def test_two_cells_at_a_time_give_the_same_records_as_one(digits_sweeps):
    (one, run1), (two, run2) = digits_sweeps[1], digits_sweeps[2]
    assert run2.returncode == run1.returncode == 3, run2.stderr
    assert "[sweep] 2 runs at a time, " in run2.stdout
    seed_0 = {name: found for name, found in records(one).items() if name.endswith("_seed0")}
    assert len(seed_0) == 4 and records(two) == seed_0  # deterministic on its one thread
    for out in (one, two):
        assert cli(REPORT, out, "--csv", out / "runs.csv").returncode == 0
    rows = [r for r in csv_rows(one / "runs.csv") if r["seed"] == "0"]
    assert csv_rows(two / "runs.csv") == rows


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_jobs_below_one_is_one_line_and_writes_nothing(jobs, tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = _digests(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["pytorch", "--task", "digits", "--jobs", jobs, "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"sweep: error: --jobs {jobs} is invalid; allowed: a whole number >= 1 (cells at once "
        "on this machine)\n"
    )
    assert _digests(tmp_path) == before


def test_any_registered_schedule_is_a_digits_cell_and_others_are_one_line(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(REPO)
    out = tmp_path / "sweep"
    args = [
        "pytorch",
        "--task",
        "digits",
        "--budgets",
        "0.01",
        "--out",
        str(out),
        "--dry-run",
        "--schedules",
    ]
    assert main([*args, "rex", "wsd", "cosine"]) == 0
    shown = capsys.readouterr().out
    for schedule in ("rex", "wsd", "cosine"):
        assert f"{schedule}_budget1: python examples/digits_budget.py --budget 0.01 --schedule " \
            f"{schedule} --full-iters 1720 --out " in shown  # fmt: skip
    assert main([*args, "nosuch"]) == 2
    assert capsys.readouterr().err.startswith(
        "sweep: error: schedule 'nosuch' is not a registered schedule or arm; allowed: linear, "
    )
    assert main([*args, "linear", "--", "--out", "elsewhere"]) == 2
    assert "override '--out' after -- is set by the sweep per cell" in capsys.readouterr().err
    assert not out.exists()


def test_without_the_example_the_digits_family_is_one_line_and_writes_nothing(tmp_path):
    """An installed package (here: a copy of it outside the checkout) has no examples/."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "plugins" / "budgeted", site / "budgeted")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = cli(SWEEP, "pytorch", "--task", "digits", "--out", work / "sweep", cwd=work, env=env)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(
        "sweep: error: the pytorch digits family runs examples/digits_budget.py, which is in "
        f"none of {work}, {tmp_path}; allowed: run budgeted-sweep in a checkout"
    )
    assert list(work.iterdir()) == []


def _running_examples(parent: int) -> int:
    """How many children of ``parent`` run the digits example (exec'd: its command line)."""
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            line = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        count += ppid == parent and b"digits_budget.py" in line
    return count


def test_sigterm_stops_every_running_cell_of_jobs_2(tmp_path):
    """SIGTERM to the sweep (Slurm, ``kill``) reaches both running cells; each try is recorded
    as interrupted by SIGTERM, and the sweep exits 75 starting no other cell."""
    out = tmp_path / "sweep"
    proc = subprocess.Popen(
        [*SWEEP, "pytorch", "--task", "digits", "--schedules", "linear", "step",
         "--budgets", "1", "0.25", "--jobs", "2", "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    started = []
    deadline = time.monotonic() + 300
    while len(started) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if ": running python examples/digits_budget.py" in line:
            started.append(line.split(":", 1)[0].split()[-1])
    while _running_examples(proc.pid) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # both processes started: two 430-iteration cells, seconds from the end
    assert len(started) == 2 and _running_examples(proc.pid) == 2
    os.kill(proc.pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 75, stderr
    assert stderr.count("sweep: interrupted by SIGTERM") == 2
    cells = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/sweep_cell.json")}
    assert set(cells) == set(started)  # no other cell started
    for record in cells.values():
        assert record["status"] == "interrupted"
        assert (record["tries"][-1]["signal"], record["tries"][-1]["exit"]) == ("SIGTERM", -15)


def test_the_digits_table_is_the_reports_best_lrs_and_verdicts(digits_sweeps):
    """tools/digits_table.py (the README's results): each schedule at its best LR, mean ± std
    over the seeds, and the paired rex − linear verdict, from the same figures as the report."""
    from budgeted.experiments.stats import paired_difference, summarize

    out, _ = digits_sweeps[1]
    run = cli([sys.executable, str(REPO / "tools/digits_table.py")], out)
    assert run.returncode == 0, run.stderr
    head, rule, row = run.stdout.splitlines()
    assert rule.startswith("| ---: | ---: |")
    assert head == (
        "| budget | linear | step | cosine | poly | rex | linear − step | rex − linear |"
    )
    top1 = {name: metrics["top-1"] for name, (_, _, metrics) in records(out).items() if metrics}
    at = {s: {k: top1[f"{s}_budget1_lr0.3_seed{k}"] for k in (0, 1)} for s in ("linear", "rex")}
    shown = {s: summarize(list(at[s].values())) for s in at}
    interval = paired_difference(at["rex"], at["linear"])
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == [
        "1 %",
        f"{shown['linear'].mean:.2f} ± {shown['linear'].std:.2f} @ 0.3 (edge)",
        "-",
        "-",
        "-",
        f"{shown['rex'].mean:.2f} ± {shown['rex'].std:.2f} @ 0.3 (edge)",
    ]  # fmt: skip  (the grid 0.3, 1e10: its best LR is at the edge)
    assert cells[6] == "-" and cells[7].startswith(f"{interval.mean:+.2f} [{interval.low:+.2f}, ")
    missing = cli([sys.executable, str(REPO / "tools/digits_table.py")], out / "nowhere")
    assert missing.returncode == 2 and missing.stderr.startswith("digits_table: error: ")
    assert missing.stderr.count("\n") == 1


def _status_row(out: Path, name: str) -> list[str]:
    done = cli(SWEEP, "--status", out)
    assert done.returncode == 0, done.stderr
    return next(line.split() for line in done.stdout.splitlines() if line.startswith(name))


def test_status_shows_a_running_local_cell_as_running_and_a_killed_sweeps_as_interrupted(
    tmp_path,
):
    """issue 40/20: ``--status`` beside a running local sweep said ``missing (not started)``."""
    out, name = tmp_path / "sweep", "linear_budget100"
    proc = subprocess.Popen(
        [*SWEEP, "pytorch", "--task", "digits", "--schedules", "linear", "--budgets", "1",
         "--out", str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _running_examples(proc.pid) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # the cell's training process has started
        assert _running_examples(proc.pid) == 1, proc.stderr.read() if proc.poll() else ""
        while time.monotonic() < deadline and (row := _status_row(out, name))[1] == "running" \
                and row[4] == "0m00s":  # fmt: skip
            time.sleep(0.1)  # until its time so far shows
        assert row[1:4] == ["running", "-", "1"] and row[4] != "0m00s", row
        os.kill(proc.pid, signal.SIGKILL)  # the sweep dies; its child gets SIGTERM (pdeathsig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    row = _status_row(out, name)
    assert row[1:4] == ["interrupted", "-", "1"], row
    assert " ".join(row[5:]) == "(its sweep stopped during the try; rerun the sweep to resume it)"

"""``make paper`` (tools/paper/run.py, report.py, tables.py) on a tiny grid of the real digits:
every block of the doc it writes is what the report functions make of the sweeps it ran, the
figure and per-run CSVs are written, the prose around the blocks survives a second report, and a
doc with a broken or unknown block is one line and left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(REPO / "tools/paper/run.py")]
sys.path.insert(0, str(REPO / "tools" / "paper"))
import report  # noqa: E402  # tools/paper/report.py
import run  # noqa: E402  # tools/paper/run.py

TINY = """\
budgets = [0.02, 0.05]
seeds = [0, 1]
jobs = 2
preload = ["torch", "torch._dynamo", "budgeted.toys.digits"]

[sets.digits]
title = "UCI digits"
task = "digits"
full_iters = 1720

[[sweeps]]
name = "arms"
schedules = ["linear", "step", "subset"]
lrs = [0.1]
validate_every = 0.02

[[sweeps]]
name = "optimizers"
schedules = ["linear", "step"]
optimizers = ["adamw"]
lrs = [0.003]

[[sweeps]]
name = "batch128"
schedules = ["linear", "step"]
batch_size = 128
lrs = [0.3]
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The tiny grid run by tools/paper/run.py: (grid file, sweeps folder, doc)."""
    root = tmp_path_factory.mktemp("paper")
    grid, out, doc = root / "grid.toml", root / "out", root / "docs" / "paper.md"
    grid.write_text(TINY)
    done = subprocess.run(
        [sys.executable, str(REPO / "tools/paper/run.py"), "--grid", str(grid), "--out", str(out),
         "--doc", str(doc)], capture_output=True, text=True, cwd=root, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return grid, out, doc


@pytest.mark.e2e
def test_the_docs_blocks_are_the_report_functions_of_the_sweeps(made) -> None:
    grid_file, out, doc = made
    texts = report.blocks(run.load_grid(grid_file), out, Path("paper"))
    text = doc.read_text()
    for name, block in texts.items():
        assert f"<!-- paper:{name} -->\n{block}\n<!-- /paper:{name} -->" in text, name
    arms = texts["digits-arms"]
    assert "| `subset` |" in arms and "| 2 % (34 it.) | 5 % (86 it.) |" in arms
    assert "@ 0.1" in arms and "*not run yet*" not in text
    assert "linear, AdamW" in texts["digits-optimizers"] and "step, 128" in texts["digits-batch"]
    assert "| digits/arms | 12 |" in texts["cost"]  # 3 arms x 2 budgets x 2 seeds
    best = texts["digits-best"].splitlines()[2]  # linear: a periodic evaluation at 34 of 86
    assert best.startswith("| `linear` | 1.00 / +0.00 |") and best.count(" / ") == 2
    assert (doc.parent / "paper" / "digits.png").stat().st_size > 10_000
    for sweep in ("arms", "optimizers", "batch128"):
        assert (doc.parent / "paper" / f"digits_{sweep}.csv").read_text().startswith("framework,")


@pytest.mark.e2e
def test_prose_around_the_blocks_survives_and_a_broken_doc_is_one_line(made, capsys) -> None:
    grid_file, out, doc = made
    argv = ["--grid", str(grid_file), "--out", str(out), "--doc", str(doc)]
    prose = "Written by a person.\n\n" + doc.read_text() + "\nWhat it shows: ...\n"
    doc.write_text(prose)
    assert report.main(argv) == 0
    assert doc.read_text() == prose
    for broken, line in (
        (prose.replace("<!-- /paper:cost -->", ""), "has no matching"),
        (prose + "<!-- paper:mine -->\n<!-- /paper:mine -->\n", "block 'mine' is not one"),
    ):
        doc.write_text(broken)
        capsys.readouterr()
        assert report.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and line in err and "nothing was written" in err
        assert doc.read_text() == broken


@pytest.mark.unit
def test_a_grid_with_an_unknown_key_is_one_line(tmp_path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(TINY.replace("jobs = 2", "jobz = 2"))
    with pytest.raises(ValueError, match=r"unknown keys \['jobz'\]"):
        run.load_grid(grid)


@pytest.mark.unit
@pytest.mark.parametrize("data", ["digits", "mnist5k"])
def test_the_committed_tables_are_the_report_functions_of_the_committed_runs(data) -> None:
    """docs/paper.md's Table 2, optimizer and batch blocks, recomputed from the per-run CSVs
    committed beside it (docs/paper/<set>_<sweep>.csv, read back as sweeps), figure for figure.
    (The best-checkpoint block reads the runs' periodic evaluations, which the CSVs do not hold:
    the tiny grid above checks it.)"""
    import tables

    from budgeted.experiments.report import group_sweeps
    from budgeted.experiments.report.model import load_report_csv

    grid = run.load_grid(REPO / "tools" / "paper" / "grid.toml")
    runs = REPO / "docs" / "paper"
    groups = {s["name"]: group_sweeps([load_report_csv(runs / f"{data}_{s['name']}.csv")])[0]
              for s in grid["sweeps"]}  # fmt: skip
    doc = (REPO / "docs" / "paper.md").read_text()
    expected = {
        "arms": tables.arms_table(groups["arms"], report.arm_order(grid)),
        "optimizers": tables.optimizers_table(groups["arms"], groups["optimizers"]),
        "batch": tables.batch_table(groups["arms"], groups["batch128"]),
    }
    for name, text in expected.items():
        block = doc.split(f"<!-- paper:{data}-{name} -->\n", 1)[1].split("\n<!-- /paper:", 1)[0]
        assert block.split("\n\n![")[0] == text, name


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (folders as empty)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


def refused(argv: list, root: Path, capsys, tool=run) -> str:
    """The one line ``tool.main(argv)`` refuses with (exit 2); nothing under ``root`` changed."""
    before = digests(root)
    code = tool.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert (code, err.count("\n")) == (2, 1) and err.startswith("paper: error: "), (code, out, err)
    assert digests(root) == before
    return err.strip()


@pytest.mark.unit
@pytest.mark.parametrize("dry_run", [["--dry-run"], []], ids=["dry run", "run"])
@pytest.mark.parametrize(
    ("text", "words"),
    [('{"digits/arms": 12.5', "is unreadable (JSONDecodeError)"),
     ('{"digits/arms": "12"}', "is not an object of seconds"), ("[]", "is not an object")],
    ids=["cut short", "a text", "a list"],
)  # fmt: skip
def test_a_damaged_timing_file_is_one_line_and_left_as_it_was(tmp_path, capsys, dry_run, text,
                                                              words) -> None:  # fmt: skip
    """Issue 52/16: a timing.json cut short was a traceback, --dry-run included (and the
    report's too)."""
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    grid.write_text(TINY)
    out.mkdir()
    (out / "timing.json").write_text(text)
    line = refused(["--grid", grid, "--out", out, *dry_run], tmp_path, capsys)
    assert f"{out / 'timing.json'} {words}" in line and "remove it to time the sweeps anew" in line
    line = refused(["--grid", grid, "--out", out, "--doc", tmp_path / "paper.md"], tmp_path,
                   capsys, report)  # fmt: skip
    assert words in line and line.endswith("(nothing was written)")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("edit", "words"),
    [(("[sets.digits]", '[sets."../x"]'), "the set or sweep name '../x' is no folder name"),
     (('name = "optimizers"', 'name = "/tmp/x"'), "name '/tmp/x' is no folder name"),
     (('name = "optimizers"', 'name = "arms"'), "name 'arms' is no folder name or is given twice"),
     (('task = "digits"\n', ""), "set 'digits' needs title, task (texts) and full_iters")],
    ids=["../x", "an absolute path", "twice", "no task"],
)  # fmt: skip
def test_a_set_or_sweep_name_that_is_no_folder_name_is_refused(tmp_path, capsys, edit, words):
    """Issue 52/16: a set named ``../x`` wrote its sweeps outside ``--out``."""
    grid = tmp_path / "grid.toml"
    grid.write_text(TINY.replace(*edit))
    line = refused(["--grid", grid, "--out", tmp_path / "out", "--dry-run"], tmp_path, capsys)
    assert words in line, line


@pytest.mark.e2e
def test_ctrl_c_before_a_sweep_is_one_line_and_exit_130(tmp_path) -> None:
    """Ctrl-C while the grid is read (a named pipe held open and never written: the read waits):
    one line, exit status 130, no traceback."""
    fifo = tmp_path / "grid.toml"
    os.mkfifo(fifo)
    argv = [*RUN, "--grid", str(fifo), "--out", str(tmp_path / "out")]
    child = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    deadline, writer = time.monotonic() + 60, None
    while writer is None and time.monotonic() < deadline:
        try:  # succeeds once run.py opens the pipe to read it
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
    time.sleep(0.2)  # run.py now waits in read()
    child.send_signal(signal.SIGINT)
    err = child.communicate(timeout=60)[1]
    if writer is not None:
        os.close(writer)
    assert (child.returncode, err) == (
        130, "paper: interrupted; run the same command again to go on\n"
    )  # fmt: skip


@pytest.mark.e2e
def test_sigterm_stops_the_running_sweep_and_waits_for_it(tmp_path) -> None:
    """Issue 52/16: SIGTERM to run.py left its sweep running, orphaned. Now the sweep gets the
    signal too (it stops its cell, recorded to resume) and run.py ends after it: exit status 75,
    one line, no process of the sweep left; the wall time so far is added to timing.json, which is
    replaced whole (a new file, never rewritten in place)."""
    grid, out = tmp_path / "grid.toml", tmp_path / "out"
    head = TINY.split("[[sweeps]]")[0].replace("budgets = [0.02, 0.05]", "budgets = [1.0]")
    grid.write_text(head + '[[sweeps]]\nname = "arms"\nschedules = ["linear"]\nlrs = [0.1]\n')
    out.mkdir()
    (out / "timing.json").write_text('{"digits/arms": 1.0}\n')
    inode = (out / "timing.json").stat().st_ino
    argv = [*RUN, "--grid", str(grid), "--out", str(out)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cell = out / "digits" / "arms" / "linear_budget100_lr0.1_seed0"
    deadline = time.monotonic() + 120
    while not (cell / "sweep.log").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the cell trains (1,720 iterations: seconds)
    child.send_signal(signal.SIGTERM)
    printed, err = child.communicate(timeout=120)
    assert child.returncode == 75, printed[-2000:] + err[-2000:]
    assert err.endswith("paper: interrupted by SIGTERM: the sweep digits/arms stopped (exit 75); "
                        "run the same command again to go on\n"), err  # fmt: skip
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and str(out).encode() in
            (p / "cmdline").read_bytes()] if Path("/proc").exists() else []  # fmt: skip
    assert left == [], "a process of the sweep is still running"
    timing = json.loads((out / "timing.json").read_text())
    assert timing["digits/arms"] > 1.0 and (out / "timing.json").stat().st_ino != inode
    assert not (cell / "results.json").exists()  # stopped before its end, to run again

"""``budgeted-sweep --preload``: cells forked from a sweep that imported the modules once train
what fresh interpreters train, metric for metric, share no state (a module's attribute, the
environment), still get the sweep's signals, and a cell's own failure is its log's traceback;
a module that is not there, or ``--preload`` for Slurm, is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from own_sweeps import BIN, sweep_ok, tool

from budgeted.experiments.sweep.cli import parse_args

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "own_script.py"
GRID = ["--full-iters", "200", "--schedules", "linear", "step", "--budgets", "0.05", "0.1",
        "--lrs", "0.5", "--seeds", "0", "1", "--jobs", "2"]  # fmt: skip
LEAK = """\
import os, budgeted
print("state:", getattr(budgeted, "_cell_was_here", None), os.environ.get("CELL_WAS_HERE"))
budgeted._cell_was_here = os.environ["CELL_WAS_HERE"] = "yes"
"""


def _metrics(out: Path) -> dict[str, dict]:
    cells = sorted(p for p in out.iterdir() if (p / "sweep_cell.json").is_file())
    return {p.name: json.loads((p / "sweep_cell.json").read_text())["metrics"] for p in cells}


@pytest.mark.e2e
def test_preloaded_cells_train_what_fresh_ones_do_and_share_no_state(tmp_path):
    script = tmp_path / "leaky.py"
    script.write_text(LEAK + EXAMPLE.read_text())
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    sweep_ok("--script", script, *GRID, "--out", cold, cwd=tmp_path)
    said = sweep_ok("--script", script, *GRID, "--out", warm, "--preload", "torch", "budgeted",
                    cwd=tmp_path)  # fmt: skip
    assert "[sweep] preloaded torch budgeted in " in said, said
    assert _metrics(warm) == _metrics(cold) and len(_metrics(warm)) == 8
    assert all(m and m["top-1"] > 0 for m in _metrics(warm).values()), _metrics(warm)
    for log in warm.glob("*/sweep.log"):  # each cell started from the sweep's state, not another's
        assert "state: None None" in log.read_text(), log.read_text()


@pytest.mark.e2e
def test_a_signal_reaches_a_forked_cell_and_a_failing_cell_logs_its_traceback(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(
        "import os, sys, time\nprint('pid', os.getpid(), flush=True)\n"
        "if '0.1' in sys.argv: raise RuntimeError('the cell broke')\ntime.sleep(600)\n"
    )
    out = tmp_path / "sweep"
    args = ["--script", script, "--full-iters", "100", "--schedules", "linear", "--budgets",
            "0.05", "0.1", "--keep-going", "--jobs", "2", "--preload", "json",
            "--out", out]  # fmt: skip
    sweep = subprocess.Popen([str(BIN / "budgeted-sweep"), *map(str, args)], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    log = out / "linear_budget5" / "sweep.log"
    deadline = time.monotonic() + 300  # a loaded machine: wait for the cell, not a fixed time
    while "pid " not in (log.read_text() if log.is_file() else ""):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.2)
    pid = int(log.read_text().split("pid ")[1].split()[0])
    broken = out / "linear_budget10" / "sweep.log"
    while "the cell broke" not in (broken.read_text() if broken.is_file() else ""):
        assert time.monotonic() < deadline, broken.read_text()
        time.sleep(0.2)
    sweep.send_signal(signal.SIGTERM)
    stdout, stderr = sweep.communicate(timeout=300)
    assert sweep.returncode == 75, stdout + stderr
    assert "interrupted by SIGTERM" in stderr, stderr
    with pytest.raises(ProcessLookupError):  # the forked cell got the signal and is gone
        os.kill(pid, 0)
    record = json.loads((out / "linear_budget5" / "sweep_cell.json").read_text())
    assert record["status"] == "interrupted", record
    failed = json.loads((out / "linear_budget10" / "sweep_cell.json").read_text())
    assert (failed["status"], failed["exit"]) == ("failed", 1), failed
    text = broken.read_text()
    assert "Traceback" in text and "RuntimeError: the cell broke" in text, text


@pytest.mark.e2e
def test_a_module_not_found_is_one_line_and_nothing_is_written(tmp_path):
    out = tmp_path / "sweep"
    done = tool("budgeted-sweep", "--script", EXAMPLE, *GRID, "--out", out, "--preload", "torch",
                "no_such_module_here", cwd=tmp_path)  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "sweep: error: --preload no_such_module_here is not a module this interpreter finds; "
        "allowed: importable module names, e.g. torch torch._dynamo (nothing was run)"
    ]
    assert not out.exists()


@pytest.mark.unit
def test_preload_is_the_local_executors(capsys):
    with pytest.raises(SystemExit) as stopped:
        parse_args(["--script", str(EXAMPLE), "--full-iters", "10", "--executor", "slurm",
                    "--preload", "torch"])  # fmt: skip
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "sweep: error: --preload is the local executor's; allowed: --executor local --preload "
        "torch, or leave --preload out"
    ]


@pytest.mark.e2e
def test_an_mmengine_tool_cell_forked_trains_what_a_fresh_one_does(tmp_path):
    root = tmp_path / "datasets" / "digits"
    made = subprocess.run([str(BIN / "python"), REPO / "tools" / "make_digits.py", "--root", root],
                          capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    grid = ["mmpretrain", "--task", "digits", "--schedules", "linear", "--budgets", "0.01",
            "--lrs", "0.1", "--seeds", "0"]  # fmt: skip
    sweep_ok(*grid, "--out", tmp_path / "cold", cwd=tmp_path)
    said = sweep_ok(*grid, "--out", tmp_path / "warm", "--preload", "torch", "mmengine",
                    "mmpretrain", cwd=tmp_path)  # fmt: skip
    assert "every cell is forked from this process" in said, said
    assert _metrics(tmp_path / "warm") == _metrics(tmp_path / "cold") != {}

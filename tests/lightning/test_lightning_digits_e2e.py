"""examples/lightning_digits.py end to end, in subprocesses: SIGTERM mid-run saves and exits 75,
the rerun with --resume gives the uninterrupted run's LR trace and metrics line for line; a
resume with another budget is one line, exit 2, every file unchanged; the LightningCLI yaml
trains with the callback from its class path; ``budgeted-sweep --script`` runs a 2 x 2 grid of
it and ``budgeted-report`` reads it."""

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

import budgeted

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "lightning_digits.py"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.e2e


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], cwd=cwd, text=True,
                          capture_output=True, timeout=600)  # fmt: skip


def lines(out: Path) -> list[dict]:
    return [json.loads(t) for t in (out / "metrics.jsonl").read_text().splitlines()]


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigterm_then_resume_is_the_uninterrupted_run_and_another_budget_is_refused(tmp_path):
    flags = ["--budget", "0.05", "--schedule", "cosine", "--warmup-iters", "5"]  # 86 steps
    whole, part = tmp_path / "whole", tmp_path / "part"
    done = run(*flags, "--out", whole, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    core = [0.1 * budgeted.lr_multiplier("cosine", t, 86, warmup_iters=5) for t in range(86)]
    assert [r["lr"] for r in lines(whole)[:-1]] == core  # error 0
    proc = subprocess.Popen([sys.executable, SCRIPT, *flags, "--out", part], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while count_lines(part / "metrics.jsonl") < 20 and proc.poll() is None:  # a marker, no sleep
        assert time.monotonic() < deadline, "the run wrote no 20 metrics lines in 300 s"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 75, err[-3000:]
    line = [t for t in err.splitlines() if "preempted by SIGTERM" in t]
    assert len(line) == 1 and "saved" in line[0] and "last.ckpt" in line[0], err[-2000:]
    stopped = count_lines(part / "metrics.jsonl")
    assert 20 <= stopped < 86 and (part / "checkpoints" / "last.ckpt").is_file()
    # another budget: one line, exit 2, nothing written
    before = digest(tmp_path)
    refused = run(*flags[:1], "0.1", *flags[2:], "--out", part, "--resume", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    mine = [t for t in refused.stderr.splitlines() if t.startswith("lightning_digits: ")]
    assert len(mine) == 1 and "total_iters" in mine[0] and "Traceback" not in refused.stderr
    assert digest(tmp_path) == before
    # the same budget: goes on from the checkpoint to the uninterrupted run's trace and metrics
    resumed = run(*flags, "--out", part, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert lines(part) == lines(whole)


def test_the_lightning_cli_yaml_trains_with_the_callback_from_its_class_path(tmp_path):
    done = run("fit", "--config", ROOT / "examples/lightning_digits.yaml",
               "--trainer.max_steps", "24", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "output" / "lightning_digits_cli"
    lrs = [r["lr"] for r in lines(out) if "lr" in r]
    assert lrs == [0.1 * budgeted.lr_multiplier("cosine", t, 24, warmup_iters=0) for t in range(24)]
    assert json.loads((out / "results.json").read_text())["final_lr"] == 0.0


def test_budgeted_sweep_runs_a_grid_of_the_script_and_the_report_reads_it(tmp_path):
    out = tmp_path / "sweep"
    grid = ["--full-iters", "400", "--schedules", "linear", "step", "--budgets", "0.05", "0.1",
            "--lrs", "0.1", "--seeds", "0"]  # fmt: skip
    sweep = subprocess.run([BIN / "budgeted-sweep", "--script", SCRIPT, *grid, "--out", out],
                           cwd=tmp_path, capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    cells = sorted(p.parent.name for p in out.glob("*/results.json"))
    assert len(cells) == 4, cells
    report = subprocess.run([BIN / "budgeted-report", out], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    assert "| budget | iterations |" in report.stdout
    assert "| 0.05 | 20 |" in report.stdout and "| 0.1 | 40 |" in report.stdout, report.stdout

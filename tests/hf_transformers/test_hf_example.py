"""examples/transformers_digits.py in subprocesses: SIGTERM saves a checkpoint and exits 75, the
same command resumes to the uninterrupted run's metrics (byte for byte), another budget is
refused in one line with every file unchanged; ``budgeted-sweep --script`` runs a 2 x 2 grid of
it and ``budgeted-report`` reads it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hf_testutils import EXAMPLE_PATH, digests

from budgeted import BudgetSchedule, budget_iters

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def example(out: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLE_PATH), *flags, "--out", str(out)],
                          capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigterm_then_the_same_command_gives_the_uninterrupted_run(tmp_path):
    flags = ["--budget", "0.2", "--schedule", "cosine", "--save-steps", "100"]  # 344 steps
    whole = example(tmp_path / "whole", *flags)
    assert whole.returncode == 0, whole.stderr
    out = tmp_path / "cut"
    command = [sys.executable, str(EXAMPLE_PATH), *flags, "--out", str(out)]
    pipe = subprocess.PIPE
    run = subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, env=ENV)
    deadline = time.monotonic() + 300
    while lines(out / "metrics.jsonl") < 120 and run.poll() is None:  # past the first checkpoint
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 75, stderr
    (line,) = [x for x in stderr.splitlines() if "preempted" in x]
    step = int(line.split(" at step ")[1].split()[0])
    assert 120 <= step < 344 and (out / "checkpoints" / f"checkpoint-{step}").is_dir(), line
    assert lines(out / "metrics.jsonl") == step and not (out / "results.json").exists()
    # another budget: refused in one line, nothing written
    before = digests(out)
    refused = example(out, *flags[:1], "0.25", *flags[2:])
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "transformers_digits: cannot resume: the checkpoint's budget has total_iters=344, the "
        "config's total_iters=430; build the scheduler with the checkpoint's budget to resume, or "
        "start a new run to train with another budget"
    ]
    assert digests(out) == before
    resumed = example(out, *flags)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {out}/checkpoints/checkpoint-{step}" in resumed.stdout
    assert (out / "metrics.jsonl").read_text() == (tmp_path / "whole" / "metrics.jsonl").read_text()
    results = [json.loads((d / "results.json").read_text()) for d in (out, tmp_path / "whole")]
    assert results[0]["val_accuracy"] == results[1]["val_accuracy"]


def test_a_sweep_of_the_example_and_its_report(tmp_path):
    out = tmp_path / "sweep"
    grid = ["--full-iters", "200", "--schedules", "linear", "cosine", "--budgets", "0.1", "0.2",
            "--lrs", "0.003", "--seeds", "0"]  # fmt: skip
    done = subprocess.run([str(BIN / "budgeted-sweep"), "--script", str(EXAMPLE_PATH), *grid,
                           "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                          env=ENV, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cells = json.loads((out / "sweep.json").read_text())["cells"]
    assert len(cells) == 4
    for schedule, budget, *_ in cells:  # every step at the core's LR
        total = budget_iters(fraction=budget, full_iters=200)
        plan = BudgetSchedule(schedule, total=total, warmup=0)
        (cell,) = [
            d
            for d in out.iterdir()
            if d.name.startswith(f"{schedule}_budget{round(budget * 100)}_")
        ]
        *records, final = [json.loads(x) for x in (cell / "metrics.jsonl").read_text().splitlines()]
        assert [(r["iteration"], r["lr"]) for r in records] == [
            (t, pytest.approx(0.003 * plan(t), rel=1e-12, abs=0)) for t in range(total)
        ]
        assert final["final"] and 0 <= final["val_accuracy"] <= 1
    report = subprocess.run([str(BIN / "budgeted-report"), str(out)], capture_output=True,
                            text=True, cwd=tmp_path, env=ENV, timeout=300)  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "| budget | iterations |" in report.stdout and "| 0.2 | 40 |" in report.stdout, (
        report.stdout
    )

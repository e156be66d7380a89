"""Helpers of the tests of ``budgeted-sweep --config`` / ``--script`` (the user's own experiment):
the real console scripts in subprocesses, and what each cell must have logged."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from budgeted.experiments.sweep.records import cell_name
from budgeted.runs import reader
from budgeted.schedules import BudgetSchedule, budget_iters

BIN = Path(sys.executable).parent
FIRST_ITERATION = {"detectron2": 0, "pytorch": 0}
"""framework -> the number its log gives the first iteration (MMEngine's: 1)."""


def tool(
    name: str, *args: object, cwd: Path, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run an installed console script (``budgeted-sweep``, ``budgeted-report``, ...)."""
    return subprocess.run(
        [str(BIN / name), *map(str, args)], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, **(env or {})}, timeout=1500,
    )  # fmt: skip


def sweep_ok(*args: object, cwd: Path, env: dict | None = None) -> str:
    """``budgeted-sweep ARGS`` ran every cell; its output."""
    done = tool("budgeted-sweep", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def report_ok(out: Path, *args: object) -> str:
    """``budgeted-report OUT`` printed its tables; its output."""
    done = tool("budgeted-report", out, *args, cwd=out.parent)
    assert done.returncode == 0, done.stderr
    assert "| budget | iterations |" in done.stdout, done.stdout
    return done.stdout


def check_cell_lrs(
    out: Path, framework: str, full: int, warmup: int, factor: float, base_lrs: dict[str, float],
    params: dict[str, dict] | None = None,
) -> int:  # fmt: skip
    """Every finished cell of ``out`` logged, at every iteration of its budget, the core's LR:
    ``base_lr x BudgetSchedule(schedule, total=budget x full, warmup, factor, params)(t)``
    (``params``: a schedule's parameters the cells set, by schedule); the number of cells
    checked."""
    meta = json.loads((out / "sweep.json").read_text())
    checked = 0
    for schedule, budget, *axes in meta["cells"]:
        lr = axes[0] if axes and axes[0] is not None else base_lrs[schedule]
        run_dir = out / cell_name(schedule, budget, *axes)
        total = budget_iters(fraction=budget, full_iters=full)
        plan = BudgetSchedule(schedule, total=total, warmup=warmup, warmup_factor=factor,
                              params=(params or {}).get(schedule, {}))  # fmt: skip
        first = FIRST_ITERATION.get(framework, 1)
        logged = {
            int(p["iteration"]) - first: p["lr"] for p in reader(framework).train_curve(run_dir)
        }
        assert sorted(logged) == list(range(total)), (run_dir, sorted(logged))
        expected = {t: lr * plan(t) for t in range(total)}
        assert logged == pytest.approx(expected, rel=1e-6, abs=1e-12), run_dir
        checked += 1
    return checked


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (folders as empty)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }

"""``budgeted-sweep --status`` agrees with the sweep and the report (issue 40/20), in this process
on sweep folders as the sweep leaves them: a cell the report counts is ``done`` whatever its
record says, a cell the local sweep runs now is ``running``, a cell whose sweep was killed is
``interrupted``, and every state it prints is documented in docs/sweeps.md. (The real sweeps, the
real Slurm: tests/experiments/test_sweep_digits.py, tests/slurm/test_sweep_slurm.py.)"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from run_folders import write_sweep

from budgeted.experiments.families import LENET5_DIGITS_PYTORCH
from budgeted.experiments.report import load_sweep
from budgeted.experiments.sweep.execute import try_status
from budgeted.experiments.sweep.plan import Plan
from budgeted.experiments.sweep.records import CELL_FILE
from budgeted.experiments.sweep.status import STATES, cell_states, format_status
from budgeted.safety.locks import FolderLock

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
NAME = "linear_budget1_lr0.3_seed0"


def _digits_sweep(tmp_path: Path) -> Path:
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", {("linear", 0.01, 0.3, 0): 80.0}, tmp_path / "unused")
    return out


def _edit_record(out: Path, drop: tuple[str, ...] = (), **fields: object) -> None:
    path = out / NAME / CELL_FILE
    record = json.loads(path.read_text())
    record.update(fields)
    path.write_text(json.dumps({k: v for k, v in record.items() if k not in drop}))


def test_every_state_status_prints_is_documented():
    docs = (REPO / "docs" / "sweeps.md").read_text()
    section = docs.split("### `budgeted-sweep --status OUT`", 1)[1].split("\n### ", 1)[0]
    documented = re.findall(r"^\| `([a-z]+)` \|", section, flags=re.MULTILINE)
    assert documented == list(STATES)
    assert "lost" not in STATES


def test_a_cell_the_local_sweep_runs_now_is_running_and_after_its_sweep_died_interrupted(
    tmp_path,
):
    """A try started (``exit`` null) while the sweep holds its lock: ``running``, with its time
    so far; the same record once no sweep holds the lock (killed): ``interrupted``. Before
    issue 40 both were ``missing (not started)``."""
    out = _digits_sweep(tmp_path)
    (out / NAME / "results.json").unlink()  # the run has not ended
    lock = FolderLock(out, ".sweep.lock", "{folder} is in use")
    lock.acquire()
    try:
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime())
        attempt = {"action": "run", "started": started, "wall_s": None, "exit": None}
        _edit_record(out, ("status", "exit", "wall_s", "metrics"), tries=[attempt])
        (row,) = cell_states(out)
        assert (row.state, row.tries, row.result) == ("running", 1, "")
    finally:
        lock.release()
    (row,) = cell_states(out)
    assert row.state == "interrupted" and "rerun the sweep to resume it" in row.result
    assert load_sweep(out).cells[0].status is None  # the report: no result either


def test_a_cell_stopped_after_its_result_was_written_is_done_as_the_report_and_sweep_say(
    tmp_path,
):
    """SIGTERM after ``results.json`` was written: the record said ``interrupted`` for good
    while the sweep skipped the cell as finished and the report counted it."""
    out = _digits_sweep(tmp_path)
    _edit_record(out, status="interrupted", exit=-15, metrics=None,
                 tries=[{"action": "run", "started": "2026-01-01T00:00:00+0000", "wall_s": 7.5,
                         "exit": -15, "signal": "SIGTERM"}])  # fmt: skip
    assert load_sweep(out).cells[0].status == "finished"
    (row,) = cell_states(out)
    assert (row.state, row.elapsed_s, row.result) == ("done", 7.5, "top-1 80.00")
    assert format_status([row]).splitlines()[-1] == "[status] 1 cells: 1 done"


def test_a_try_signalled_after_its_run_wrote_its_result_is_finished(tmp_path):
    """What the sweep records for such a try: the run's result, not ``interrupted``."""
    out = _digits_sweep(tmp_path)
    run_dir = out / NAME
    (run_dir / "sweep.log").write_text("val_accuracy 0.8\n")
    plan = Plan(LENET5_DIGITS_PYTORCH, "linear", 0.01, 0.3, 0, run_dir, {}, [], "run")
    assert try_status(plan, -15, interrupted=True) == "finished"
    assert plan.final.metrics == {"top-1": pytest.approx(80.0)}
    (run_dir / "results.json").unlink()
    assert try_status(plan, -15, interrupted=True) == "interrupted"

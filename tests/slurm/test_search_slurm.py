"""``budgeted-search --executor slurm``: a search of a user's own script whose cells are real
Slurm jobs and whose Optuna study is a journal file on the shared file system; stopped by
SIGTERM while its jobs run, run again, it collects them, trains no cell twice and answers; the
study, opened with Optuna's own API, holds every cell as a trial."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from slurm_testutils import job_env

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
for helpers in (REPO / "tests", REPO / "tests" / "experiments"):
    if str(helpers) not in sys.path:
        sys.path.insert(0, str(helpers))

from own_sweeps import BIN, tool  # noqa: E402

from budgeted.experiments.search.study import STUDY_NAME, open_storage  # noqa: E402

EXAMPLE = REPO / "examples" / "own_script.py"


def test_a_search_on_slurm_resumes_after_sigterm_and_shares_its_study(slurm_cluster, tmp_path):
    out = tmp_path / "search"
    journal = tmp_path / "shared" / "study.journal"
    journal.parent.mkdir()
    argv = ["--script", EXAMPLE, "--full-iters", "200", "--budget", "0.5", "--lr-range", "0.1",
            "1", "--schedules", "linear", "--storage", journal, "--executor", "slurm",
            "--out", out]  # fmt: skip
    env = {**job_env(slurm_cluster), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([str(BIN / "budgeted-search"), *map(str, argv)], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**__import__("os").environ, **env})  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if list(out.glob("*/sweep_cell.json")):  # the first rung is submitted
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 75, stdout[-2000:] + stderr[-2000:]
    done = tool("budgeted-search", *argv, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/sweep_cell.json")}
    assert all(r["status"] == "finished" for r in records.values()), records
    assert all(sum(t.get("exit") == 0 for t in r["tries"]) == 1 for r in records.values())
    study = optuna.load_study(study_name=STUDY_NAME, storage=open_storage(str(journal), False))
    trials = study.get_trials()
    assert {t.user_attrs["cell"] for t in trials} == set(records) and len(trials) == len(records)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    answer = json.loads((out / "search_answer.json").read_text())
    assert answer["choice"] is not None and answer["spent_runs"] <= 4


def test_a_search_of_an_own_mmengine_config_runs_its_cells_as_slurm_jobs(slurm_cluster, tmp_path):
    """Issue 53: the user's own MMEngine config (LeNet-5 on the digits, 88 iterations, written
    here) searched with ``--executor slurm`` and a journal study on the shared file system: every
    cell is a finished Slurm job of ``budgeted-train-seg``, every cell a complete trial."""
    from own_configs import digits_config

    from budgeted.toys.digits import write_digits

    config = digits_config(tmp_path, write_digits(tmp_path / "digits"))
    out, journal = tmp_path / "search", tmp_path / "shared" / "study.journal"
    journal.parent.mkdir()
    done = tool("budgeted-search", "--config", config, "--budget", "1", "--lr-range", "0.03",
                "0.3", "--schedules", "linear", "--storage", journal, "--executor", "slurm",
                "--out", out, cwd=tmp_path, env=job_env(slurm_cluster))  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/sweep_cell.json")}
    assert records and all(r["status"] == "finished" for r in records.values()), records
    assert all(r["slurm"]["job_id"] for r in records.values()), records
    study = optuna.load_study(study_name=STUDY_NAME, storage=open_storage(str(journal), False))
    trials = study.get_trials()
    assert {t.user_attrs["cell"] for t in trials} == set(records)
    assert {round(t.params["budget"] * 88) for t in trials} == {22, 88}
    answer = json.loads((out / "search_answer.json").read_text())
    assert answer["target_iters"] == 88 and "budgeted-train-seg" in answer["choice"]["command"]

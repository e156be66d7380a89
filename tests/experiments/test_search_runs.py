"""``budgeted-search`` end to end on the user's own experiment, by the real console scripts: a
ladder search of an own script answers with a run at the target budget and spends at most its
budget; its study is Optuna's (read back with Optuna's API: every trial with its budget, LR,
schedule and value); ``budgeted-report`` reads the search folder as a sweep; a search stopped by
SIGTERM resumes and trains no cell twice; an own MMEngine config is searched the same way."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pytest
from own_sweeps import BIN, report_ok, tool

from budgeted.experiments.report.plots import written_by_report
from budgeted.experiments.search.study import JOURNAL, STUDY_NAME, open_storage

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "own_script.py"
SEARCH = ["--script", EXAMPLE, "--full-iters", "200", "--budget", "0.5", "--lr-range", "0.1", "1",
          "--schedules", "linear", "cosine"]  # fmt: skip


def study_trials(out: Path) -> list[optuna.trial.FrozenTrial]:
    storage = open_storage(str(out / JOURNAL), create=False)
    return optuna.load_study(study_name=STUDY_NAME, storage=storage).get_trials()


def tries(out: Path) -> dict[str, list[dict]]:
    return {
        p.parent.name: json.loads(p.read_text())["tries"] for p in out.glob("*/sweep_cell.json")
    }


@pytest.mark.e2e
def test_a_ladder_search_of_an_own_script_answers_and_its_study_is_optunas(tmp_path):
    out, figure = tmp_path / "search", tmp_path / "search.png"
    done = tool("budgeted-search", *SEARCH, "--out", out, "--plot", figure, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert written_by_report(figure)  # the report's marked figure: the same command replaces it
    answer = json.loads((out / "search_answer.json").read_text())
    assert answer["choice"]["schedule"] in ("linear", "cosine")
    assert Path(answer["choice"]["run"]).parent == out
    assert answer["spent_runs"] <= 4.0 and answer["spent_iters"] == sum(
        t.user_attrs and round(t.params["budget"] * 200) for t in study_trials(out)
    )
    assert "[search] answer: " in done.stdout and "its command: " in done.stdout
    trials = study_trials(out)
    cells = {p.parent.name for p in out.glob("*/sweep_cell.json")}
    assert {t.user_attrs["cell"] for t in trials} == cells and len(trials) == len(cells)
    for t in trials:
        assert t.state == optuna.trial.TrialState.COMPLETE, t
        assert set(t.params) == {"schedule", "lr", "budget"} and t.value is not None
        record = json.loads((out / t.user_attrs["cell"] / "sweep_cell.json").read_text())
        assert record["metrics"]["top-1"] == pytest.approx(t.value)
        assert (record["schedule"], record["budget"], record["lr"]) == (
            t.params["schedule"],
            t.params["budget"],
            t.user_attrs["lr"],
        )
    assert {t.params["budget"] for t in trials} == {0.125, 0.5}  # the ladder's two rungs
    assert "| budget | iterations |" in report_ok(out)
    again = tool("budgeted-search", *SEARCH, "--out", out, "--plot", figure, cwd=tmp_path)
    assert again.returncode == 0 and "running" not in again.stdout, again.stdout
    assert len(study_trials(out)) == len(trials)


@pytest.mark.e2e
def test_a_search_stopped_by_sigterm_resumes_and_trains_no_cell_twice(tmp_path):
    out = tmp_path / "search"
    argv = [str(BIN / "budgeted-search"), *map(str, SEARCH), "--out", str(out)]
    process = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        finished = [t for ts in tries(out).values() for t in ts if t.get("exit") == 0]
        if len(finished) >= 2:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 75, stdout[-2000:] + stderr[-2000:]
    assert "run the same command to go on" in stderr
    before = tries(out)
    done = tool("budgeted-search", *SEARCH, "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = tries(out)
    for cell, old in before.items():
        if any(t.get("exit") == 0 for t in old):  # finished before SIGTERM: not trained again
            assert after[cell] == old, cell
    assert all(sum(t.get("exit") == 0 for t in ts) == 1 for ts in after.values()), after
    trials = study_trials(out)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert len({t.user_attrs["cell"] for t in trials}) == len(trials) == len(after)


@pytest.mark.e2e
def test_an_own_mmengine_config_is_searched_the_same_way(tmp_path):
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from own_configs import digits_config

    from budgeted.toys.digits import write_digits

    root = write_digits(tmp_path / "digits")
    config = digits_config(tmp_path, root)  # LeNet-5, 2 epochs = 88 iterations, MultiStepLR
    out = tmp_path / "search"
    done = tool("budgeted-search", "--config", config, "--budget", "1", "--lr-range", "0.03",
                "0.3", "--schedules", "linear", "--out", out, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    answer = json.loads((out / "search_answer.json").read_text())
    assert answer["target_iters"] == 88 and answer["choice"]["schedule"] == "linear"
    assert (
        "budgeted-train-seg" in answer["choice"]["command"]
        or "train_seg" in (answer["choice"]["command"])
    )
    trials = study_trials(out)
    assert {round(t.params["budget"] * 88) for t in trials} == {22, 88}
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert "### top-1: mmpretrain" in report_ok(out)


@pytest.mark.e2e
def test_asha_prunes_runs_from_their_live_validations_and_spends_at_most_its_budget(tmp_path):
    out = tmp_path / "search"
    done = tool("budgeted-search", "pytorch", "--task", "digits", "--budget", "0.05",
                "--lr-range", "0.01", "3", "--schedules", "linear", "--method", "asha",
                "--search-budget", "4x", "--out", out, "--preload", "torch", "budgeted",
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = study_trials(out)
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert pruned and complete, [t.state for t in trials]
    for t in pruned:  # stopped at a validation before the end, its cell recorded as stopped
        stop = max(t.intermediate_values)
        assert 0 < stop < 86 and stop % 5 == 0, t.intermediate_values
        record = json.loads((out / t.user_attrs["cell"] / "sweep_cell.json").read_text())
        assert record["status"] == "stopped" and record["metrics"] is None
        assert not (out / t.user_attrs["cell"] / "results.json").exists()
    answer = json.loads((out / "search_answer.json").read_text())
    spent = sum(max(t.intermediate_values) for t in pruned) + 86 * len(complete)
    assert answer["spent_iters"] == spent <= 4 * 86
    assert answer["pruned"] == len(pruned)
    assert answer["choice"]["lr"] in [t.user_attrs["lr"] for t in complete]

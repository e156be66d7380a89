"""``budgeted-sweep --script``: the plain-PyTorch script contract (docs/sweeps.md, "Your own
script") with its 30-line example, examples/own_script.py: 2 schedules x 2 budgets x 2 seeds by
the real console scripts, every logged LR the core's, the report's table and paired verdicts; a
script that exits without its metrics file fails its cell in one line; budgeted-rank ranks
three users' scripts as architectures (each swept with --jobs 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from own_sweeps import check_cell_lrs, digests, report_ok, sweep_ok, tool

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "own_script.py"
GRID = ["--full-iters", "200", "--schedules", "linear", "cosine", "--budgets", "0.05", "0.1",
        "--lrs", "0.5", "--seeds", "0", "1"]  # fmt: skip


@pytest.mark.e2e
def test_the_example_script_sweeps_and_reports(tmp_path):
    out = tmp_path / "sweep"
    sweep_ok("--script", EXAMPLE, *GRID, "--out", out, cwd=tmp_path)
    assert check_cell_lrs(out, "pytorch", 200, 0, 1.0, {}) == 8
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["family"] == str(EXAMPLE) and meta["experiment"]["full_iters"] == 200
    table = report_ok(out)
    assert f"### top-1: pytorch {EXAMPLE}" in table
    assert "| 0.05 | 10 |" in table and "| 0.1 | 20 |" in table
    # any key the runs logged, as logged; a key they did not log is one line naming theirs
    assert "### val_accuracy: pytorch" in report_ok(out, "--metric", "val_accuracy")
    unknown = tool("budgeted-report", out, "--metric", "val_loss", cwd=tmp_path)
    assert (unknown.returncode, unknown.stdout) == (2, ""), unknown.stdout
    assert unknown.stderr.splitlines() == [
        f"report: error: --metric 'val_loss' is not logged by the run in {out}/"
        "linear_budget5_lr0.5_seed0; allowed: a key its final evaluation logged (val_accuracy)"
    ]
    # the same sweep again: every cell finished, nothing trained
    again = sweep_ok("--script", EXAMPLE, *GRID, "--out", out, cwd=tmp_path)
    assert "8 skipped" in again, again


@pytest.mark.e2e
def test_a_script_that_writes_no_metrics_fails_its_cell_in_one_line(tmp_path):
    script = tmp_path / "forgets.py"
    script.write_text("import sys\nprint('trained', sys.argv[1:])\n")  # exits 0, writes nothing
    out = tmp_path / "sweep"
    done = tool("budgeted-sweep", "--script", script, "--full-iters", "100", "--schedules",
                "linear", "--budgets", "0.1", "--out", out, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "linear_budget10 exited 0 but wrote no results.json" in line, line
    assert "docs/sweeps.md" in line
    assert json.loads((out / "linear_budget10" / "sweep_cell.json").read_text())["metrics"] is None


@pytest.mark.e2e
def test_rank_takes_own_scripts_as_architectures(tmp_path):
    text = EXAMPLE.read_text()
    assert "model = torch.nn.Linear(8, 2)" in text
    archs = {"linear_model": EXAMPLE}
    for width in (4, 16):  # other architectures: the same contract, a hidden layer
        archs[f"mlp{width}"] = tmp_path / f"mlp{width}.py"
        hidden = f"torch.nn.Linear(8, {width}), torch.nn.ReLU(), torch.nn.Linear({width}, 2)"
        archs[f"mlp{width}"].write_text(
            text.replace("torch.nn.Linear(8, 2)", f"torch.nn.Sequential({hidden})")
        )
    grid = [*GRID[:6], "0.1", "--lrs", "0.5", "--seeds", "0"]
    for name, script in archs.items():  # two cells at once on this machine
        sweep_ok("--script", script, *grid, "--jobs", "2", "--out", tmp_path / name, cwd=tmp_path)
    done = tool("budgeted-rank", *(f"{n}={tmp_path / n}" for n in archs), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in archs) and "top-1" in done.stdout, done.stdout


BAD_FINAL = """\
import argparse, json, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--out")
out = pathlib.Path(parser.parse_known_args()[0].out)
out.mkdir(parents=True, exist_ok=True)
lines = [{{"iteration": 0, "lr": 0.1, "loss": 1.0}},
         {{"iteration": 10, "val_accuracy": {value}, "val_loss": 0.3, "final": True}}]
(out / "metrics.jsonl").write_text("".join(json.dumps(line) + "\\n" for line in lines))
(out / "results.json").write_text("{{}}")
"""


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("value", "shown"), [('"0.9"', "'0.9'"), ("10**400", "1" + "0" * 56 + "...")],
    ids=["string", "10**400"],
)  # fmt: skip
def test_a_final_metric_that_is_no_number_fails_its_cell_in_one_line(value, shown, tmp_path):
    """Issue 52, item 2: a script whose final ``val_accuracy`` was ``"0.9"`` or ``10**400``
    beside a numeric ``val_loss`` was recorded as a finished run with no result, skipped by
    every later sweep. Its cell fails in one line naming the value and its range; the same
    command again refuses the folder in one line, nothing changed."""
    script = tmp_path / "bad_final.py"
    script.write_text(BAD_FINAL.format(value=value))
    out = tmp_path / "sweep"
    argv = ["--script", script, "--full-iters", "100", "--schedules", "linear", "--budgets",
            "0.1", "--out", out]  # fmt: skip
    done = tool("budgeted-sweep", *argv, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    log = out / "linear_budget10" / "metrics.jsonl"
    result = (
        f"{log}: its final val_accuracy {shown} is not a result; allowed: a number in [0, 1] "
        "(pytorch logs val_accuracy as a fraction; move the cell's folder away to train it again)"
    )
    assert done.stderr.splitlines() == [
        f"sweep: error: linear_budget10 exited 0 but its final metric cannot be read: {result} "
        f"(log: {out}/linear_budget10/sweep.log)"
    ]
    record = json.loads((out / "linear_budget10" / "sweep_cell.json").read_text())
    assert (record["status"], record["metrics"]) == ("failed", None)
    before = digests(tmp_path)
    again = tool("budgeted-sweep", *argv, cwd=tmp_path)
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr.splitlines() == [f"sweep: error: {result}"]
    assert digests(tmp_path) == before

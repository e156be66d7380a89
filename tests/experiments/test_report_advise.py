"""``budgeted-report --predict / --target / --holdout / --curve`` (the budget advisor) and a
report's CSV read back as a sweep: the fit recovers a curve sampled with known noise, the
predictions and the hold-out check on committed evidence and on a tiny real sweep, each refusal
one line, the figure written."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from own_sweeps import sweep_ok, tool

from budgeted.experiments.report import main
from budgeted.experiments.report.advise import CURVES, fit_curve

REPO = Path(__file__).resolve().parents[2]
HEAD = ["framework", "family", "schedule", "budget", "lr", "seed", "iterations", "top-1",
        "wall_s", "run_dir", "status"]  # fmt: skip
BUDGETS = [0.01, 0.02, 0.05, 0.1, 0.25, 1.0]


def write_csv(path: Path, curve=lambda b: 97.0 - 0.9 * b**-0.6, budgets=BUDGETS, seeds=5,
              noise=0.3, diverged=()) -> Path:  # fmt: skip
    """A report CSV of one schedule ``linear`` at one LR: ``curve(B)`` plus seeded noise."""
    rng = np.random.default_rng(0)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEAD)
        for b in budgets:
            for s in range(seeds):
                bad = b in diverged
                value = "" if bad else f"{curve(b) + rng.normal(0, noise):.4f}"
                status = "diverged" if bad else "finished"
                writer.writerow(["pytorch", "mine.py", "linear", b, 0.1, s, round(1000 * b),
                                 value, 1.0, f"r/{b}_{s}", status])  # fmt: skip
    return path


@pytest.mark.unit
def test_the_fit_recovers_a_curve_sampled_with_known_noise() -> None:
    rng = np.random.default_rng(1)
    xs = np.repeat(BUDGETS, 5)
    ys = CURVES["power"].f(xs, 97.0, 0.9, 0.6) + rng.normal(0, 0.2, len(xs))
    a, b, c = fit_curve("power", xs, ys)
    assert abs(a - 97.0) < 0.4 and abs(b - 0.9) < 0.2 and abs(c - 0.6) < 0.1, (a, b, c)
    slope = fit_curve("log", xs, 90 + 2.0 * np.log(xs) + rng.normal(0, 0.2, len(xs)))
    assert abs(slope[1] - 2.0) < 0.1


@pytest.mark.unit
def test_predict_target_and_holdout_on_a_known_curve(tmp_path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv", noise=0.1)
    assert main([str(data), "--predict", "1", "2", "--target", "0.99"]) == 0
    out = capsys.readouterr().out
    row = next(
        line for line in out.splitlines() if line.startswith("| `linear` | ") and "[" in line
    )
    at_1 = float(row.split("|")[2].split()[0])
    assert abs(at_1 - (97.0 - 0.9)) < 0.3, row  # the curve's value at B = 1
    assert "for 95." in row  # 0.99 of the predicted full-schedule metric
    assert main([str(data), "--holdout"]) == 0
    out = capsys.readouterr().out
    assert "the largest budget, 1, predicted from 0.01, 0.02, 0.05, 0.1, 0.25" in out
    line = next(ln for ln in out.splitlines()
                if ln.startswith("| `linear` | ") and ln.endswith((" yes |", " no |")))  # fmt: skip
    predicted, measured, error = (float(line.split("|")[i].strip()) for i in (2, 4, 5))
    assert error == pytest.approx(predicted - measured, abs=0.011) and abs(error) < 0.5


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"budgets": [0.1, 0.25]}, "linear: 2 budget(s) with results; the power fit needs"),
        ({"curve": lambda b: 90 - b}, "linear: top-1 does not grow with the budget"),
        ({"diverged": (0.05,)}, "linear: every run at budget 0.05 diverged"),
    ],
)  # fmt: skip
def test_a_schedule_the_data_cannot_support_is_one_line(kwargs, says, tmp_path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv", **kwargs)
    assert main([str(data), "--predict", "1"]) == 0
    refused = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("- cannot")]
    assert len(refused) == 1 and says in refused[0], refused


@pytest.mark.unit
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--predict", "-1"], "report: error: --predict -1 is invalid; allowed: budgets > 0"),
        (["--predict", "1", "--target", "0"], "report: error: --target 0 is invalid"),
        (["--target", "0.9"], "report: error: --target is --predict's"),
        (
            ["--holdout", "--curve", "cubic"],
            "report: error: --curve cubic is not a curve; allowed: power, log",
        ),
        (["--curve", "log"], "report: error: --curve log is the advisor's; allowed: with"),
    ],
)
def test_a_bad_advisor_value_is_one_line(argv, says, tmp_path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv")
    with pytest.raises(SystemExit) as stopped:
        main([str(data), *argv])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and len(err.splitlines()) == 1 and err.startswith(says), err


@pytest.mark.unit
def test_a_csv_not_written_by_a_report_is_one_line(tmp_path, capsys) -> None:
    other = tmp_path / "mine.csv"
    other.write_text("a,b\n1,2\n")
    assert main([str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"report: error: {other} is not a CSV written by budgeted-report")
    assert len(err.splitlines()) == 1


@pytest.mark.unit
def test_the_committed_evidence_reads_back_as_its_report(capsys) -> None:
    assert main([str(REPO / "docs/results/mmseg_toy.csv")]) == 0
    out = capsys.readouterr().out
    committed = (REPO / "docs/results/mmseg_toy.md").read_text()
    row = next(ln for ln in committed.splitlines() if ln.startswith("| 0.05 | 160 |"))
    ours = next(ln for ln in out.splitlines() if ln.startswith("| 0.05 | 160 |"))
    assert sorted(row.split("|")) == sorted(ours.split("|"))  # the same cells (column order: CSV)
    assert main([str(REPO / "docs/results/wsd_mmseg_toy.csv"), "--holdout"]) == 0
    assert "| `wsd` |" in capsys.readouterr().out


@pytest.mark.unit
def test_the_plot_is_written(tmp_path, capsys) -> None:
    data = write_csv(tmp_path / "runs.csv")
    figure = tmp_path / "advice.png"
    assert main([str(data), "--predict", "1", "--plot", str(figure)]) == 0
    assert figure.stat().st_size > 10_000 and f"plot: {figure}" in capsys.readouterr().out


@pytest.mark.e2e
def test_holdout_on_a_tiny_real_sweep(tmp_path) -> None:
    out = tmp_path / "sweep"
    sweep_ok("--script", REPO / "examples/own_script.py", "--full-iters", "200", "--schedules",
             "linear", "--budgets", "0.05", "0.1", "0.25", "0.5", "--lrs", "0.5", "--seeds", "0",
             "1", "--jobs", "2", "--preload", "torch", "--out", out, cwd=tmp_path)  # fmt: skip
    done = tool("budgeted-report", out, "--holdout", "--predict", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the largest budget, 0.5, predicted from 0.05, 0.1, 0.25" in done.stdout, done.stdout
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("| `linear` |", "- cannot"))]
    assert len(lines) == 2, done.stdout  # a row (or its one-line refusal) per table

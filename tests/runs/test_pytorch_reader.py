"""budgeted.runs.pytorch: the run folder of a plain-PyTorch script (examples/digits_budget.py),
read as untrusted data: its periodic and final evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from budgeted.runs import pytorch as reader

pytestmark = pytest.mark.unit


def folder(tmp_path: Path, lines: list, finished: bool = True) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    (tmp_path / "metrics.jsonl").write_text(text + "\n")
    if finished:
        (tmp_path / "results.json").write_text('{"val_accuracy": 0.9, "budget_iters": 4}')
    return tmp_path


TRAINED = [{"iteration": t, "lr": 0.1, "loss": 2.0 - t / 10} for t in range(4)]


def test_every_periodic_evaluation_then_the_final_one(tmp_path):
    lines = [*TRAINED[:2], {"iteration": 2, "val_accuracy": 0.5}, *TRAINED[2:],
             {"iteration": 4, "val_accuracy": 0.9, "final": True}]  # fmt: skip
    run = folder(tmp_path, lines)
    assert reader.evaluations(run) == [(2, {"val_accuracy": 0.5}), (4, {"val_accuracy": 0.9})]
    assert reader.final_metrics(run) == {"val_accuracy": 0.9}
    assert [p["iteration"] for p in reader.train_curve(run)] == [0, 1, 2, 3]  # no evaluation


def test_an_unfinished_run_has_no_evaluations(tmp_path):
    run = folder(tmp_path, [*TRAINED, {"iteration": 2, "val_accuracy": 0.5}], finished=False)
    assert reader.evaluations(run) == [] and reader.final_metrics(run) is None


@pytest.mark.parametrize(
    "line",
    [
        {"iteration": "2", "val_accuracy": 0.5},  # not a number
        {"iteration": True, "val_accuracy": 0.5},
        {"iteration": -2, "val_accuracy": 0.5},
        {"iteration": 2.5, "val_accuracy": 0.5},
        {"iteration": 2, "val_accuracy": "0.5"},  # no numeric metric
        {"iteration": 2, "lr": 0.1, "val_accuracy": 0.5},  # a training record
        '{"iteration": 2, "val_accuracy": 0.',  # cut short
        "[2, 0.5]",
    ],
)
def test_a_line_no_run_writes_is_not_an_evaluation(tmp_path, line):
    final = {"iteration": 4, "val_accuracy": 0.9, "final": True}
    run = folder(tmp_path, [*TRAINED, line, final])
    assert reader.evaluations(run) == [(4, {"val_accuracy": 0.9})]

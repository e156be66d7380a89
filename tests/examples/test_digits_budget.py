"""examples/digits_budget.py: LeNet-5 trained for a budget on the UCI digits, in plain PyTorch."""

from __future__ import annotations

import doctest
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import budgeted
from budgeted.safety.preemption import DIVERGED_EXIT_CODE

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("digits_budget", ROOT / "examples/digits_budget.py")
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

RESULT_KEYS = {  # examples/cifar10_budget.py's results.json keys (less its data flags) and ours
    "budget", "batch_size", "lr", "schedule", "warmup_iters", "seed", "out", "val_accuracy",
    "test_accuracy", "iterations", "budget_iters", "iters_per_epoch", "train_images", "momentum",
    "weight_decay", "final_lr", "train_seconds", "full_iters", "threads", "schedule_params",
    "val_images", "optimizer", "schedule_free", "subset", "validate_every", "train_indices",
    "optimizer_class", "optimizer_kwargs", "data",
}  # fmt: skip


def read_trace(out: Path) -> list[float]:
    """The learning rates of ``lr_trace.csv``, checking that the iterations are 0, 1, ..."""
    header, *rows = (out / "lr_trace.csv").read_text().splitlines()
    assert header == "iteration,lr"
    assert [int(row.split(",")[0]) for row in rows] == list(range(len(rows)))
    return [float(row.split(",")[1]) for row in rows]


def read_metrics(out: Path) -> tuple[list[dict], dict]:
    """(the per-iteration records, the final record) of ``metrics.jsonl``."""
    *records, final = [
        json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["iteration"] for r in records] == list(range(len(records)))
    return records, final


def run(tmp_path: Path, name: str, *flags: str) -> Path:
    out = tmp_path / name
    assert example.main([*flags, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory) -> Path:
    """5 % of the full schedule: round(0.05 x 1720) = 86 iterations, two passes of the stream."""
    return run(tmp_path_factory.mktemp("runs"), "linear", "--budget", "0.05", "--lr", "0.2")


def test_every_iteration_trains_at_the_core_multiplier(linear_run):
    trace = read_trace(linear_run)
    expected = [0.2 * budgeted.lr_multiplier("linear", t, 86, warmup_iters=0) for t in range(86)]
    assert trace == expected  # exactly: the CSV holds each float's repr
    records, _ = read_metrics(linear_run)
    assert [r["lr"] for r in records] == expected and trace[0] == 0.2
    assert all(isinstance(r["loss"], float) for r in records)
    assert records[-1]["loss"] < records[0]["loss"]  # it learns


def test_the_run_ends_at_the_budget_and_records_the_held_out_accuracy(linear_run):
    results = json.loads((linear_run / "results.json").read_text())
    assert set(results) == RESULT_KEYS
    assert results["iterations"] == results["budget_iters"] == 86 and results["full_iters"] == 1720
    assert (results["train_images"], results["val_images"]) == (1400, 397)
    assert results["iters_per_epoch"] == 43.75 and results["test_accuracy"] is None
    assert results["warmup_iters"] == 0 and results["schedule"] == "linear"
    assert results["final_lr"] == 0.0  # the scheduler stepped past the last iteration
    assert (results["momentum"], results["weight_decay"]) == (0.9, 1e-4)
    _, final = read_metrics(linear_run)
    assert final == {"iteration": 86, "val_accuracy": results["val_accuracy"], "final": True}
    assert 0.5 < results["val_accuracy"] <= 1.0  # 397 held-out images; chance is 0.1
    assert round(results["val_accuracy"] * 397) == pytest.approx(results["val_accuracy"] * 397)


@pytest.mark.parametrize("schedule", ["rex", "step", "cosine", "poly"])
def test_any_registered_schedule_trains_at_its_formula(tmp_path, schedule):
    """1 % of a 1,000-iteration schedule (10 iterations) with a 2-iteration warmup; step-BAC
    drops at 1/2 and 3/4 of the decay."""
    flags = ["--budget", "0.01", "--full-iters", "1000", "--warmup-iters", "2"]
    out = run(tmp_path, schedule, *flags, "--schedule", schedule)
    params = {"milestones": (0.5, 0.75)} if schedule == "step" else {}
    expected = [
        0.1 * budgeted.lr_multiplier(schedule, t, 10, warmup_iters=2, **params) for t in range(10)
    ]
    assert read_trace(out) == expected
    results = json.loads((out / "results.json").read_text())
    assert results["schedule_params"] == {k: list(v) for k, v in params.items()}
    if schedule == "rex":  # (1 - p) / (1 - p / 2) after the warmup: above linear until the end
        p = [(t - 2) / 8 for t in range(2, 10)]
        assert expected[2:] == pytest.approx([0.1 * (1 - q) / (1 - q / 2) for q in p], rel=1e-12)
    if schedule == "step":  # 0.1 for 4 decay iterations, 0.01 for 2, 0.001 for 2
        assert expected[2:] == pytest.approx([0.1] * 4 + [0.01] * 2 + [0.001] * 2, rel=1e-12)


def test_a_test_registered_schedule_works_too(tmp_path, sqrt_schedule):
    out = run(tmp_path, "sqrt", "--budget", "0.01", "--schedule", sqrt_schedule)  # 17 iterations
    expected = [
        0.1 * budgeted.lr_multiplier(sqrt_schedule, t, 17, warmup_iters=0) for t in range(17)
    ]
    assert read_trace(out) == expected


def test_the_same_seed_trains_the_same_model_and_another_does_not(tmp_path):
    flags = ["--budget", "0.02", "--lr", "0.3"]  # 34 iterations
    first, again = run(tmp_path, "a", *flags), run(tmp_path, "b", *flags)
    other = run(tmp_path, "c", *flags, "--seed", "1")
    assert read_metrics(first) == read_metrics(again)
    assert read_metrics(first)[0] != read_metrics(other)[0]


def test_the_docstring_examples_pass():
    result = doctest.testmod(example)
    assert result.failed == 0 and result.attempted >= 1


def test_the_batches_are_the_infinite_samplers_stream():
    """MMEngine's ``InfiniteSampler`` (seed s, shuffled): shuffle after shuffle of the indices
    from one generator, in one stream; a loader of batch b cuts it into b's."""
    from mmengine.dataset import InfiniteSampler

    sampler = iter(InfiniteSampler(list(range(10)), shuffle=True, seed=3))
    stream = [next(sampler) for _ in range(4 * 7)]
    ours = [b.tolist() for b in example.batches(10, 7, seed=3, count=4)]
    assert ours == [stream[k : k + 7] for k in range(0, 28, 7)]


def fails(capsys, args: list[str]) -> str:
    """Run the example; assert exit status 2 and one line on stderr; that line."""
    with pytest.raises(SystemExit) as exit_:
        example.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("digits_budget: error: ") and err.count("\n") == 1
    return err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--budget", "0"], "--budget 0.0 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "1.5"], "--budget 1.5 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "nan"], "--budget nan is invalid"),
        (["--schedule", "linaer"], "--schedule 'linaer' is invalid; allowed: one of linear, cos"),
        (["--lr", "-0.1"], "--lr -0.1 is invalid; allowed: a number > 0"),
        (["--lr", "inf"], "--lr inf is invalid; allowed: a number > 0"),
        (["--seed", "-1"], "--seed -1 is invalid; allowed: a whole number >= 0"),
        (["--threads", "0"], "--threads 0 is invalid; allowed: a whole number >= 1"),
        (["--batch-size", "0"], "--batch-size 0 is invalid; allowed: a whole number in [1, 1400]"),
        (["--warmup-iters", "-1"], "--warmup-iters -1 is invalid; allowed: a whole number >= 0"),
        (["--warmup-iters", "17"], "--budget 0.01 is 17 iterations; allowed: a budget of more "),
        (["--full-iters", "10"], "--budget 0.01 of --full-iters 10: the budget fraction=0.01 is"),
        (["--budget", "half"], "argument --budget: invalid float value: 'half'"),
        # issue 52/6 and 52/5: a traceback (OverflowError), a NaN LR blamed on the base LR
        (["--schedule", "sgdr:restarts=1" + "0" * 400], "--schedule 'sgdr:restarts=100000000000"
         "000000000000000000000000000000...: sgdr schedule: restarts=1000000000000000000000000000"
         "00000000000000000000000000000... is invalid; allowed: a whole number >= 0 and below "
         "1000000\n"),
        (["--schedule", "htd:lower=-1e308,upper=1e308"], "give the multiplier nan at progress 0"),
        # a cooldown or periods shorter than one of the budget's 17 iterations: nothing decays
        (["--schedule", "wsd:cooldown=0.05"], "--schedule 'wsd:cooldown=0.05' at 17 iterations: "
         "wsd schedule: cooldown=0.05 is invalid for a decay of 17 steps; allowed: a cooldown of "
         "more than one step, cooldown > 1/17\n"),
        (["--schedule", "sgdr:restarts=16"], "periods of more than one step each, restarts + 1 "
         "< 17\n"),
        (["--schedule", "wsd:decay=sqrt,decay=linear"], "gives decay 2 times"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    base = ["--budget", "0.01", "--out", str(out)]
    assert message in fails(capsys, [*base, *flags])
    assert not out.exists()


def test_finished_results_are_not_overwritten(linear_run, capsys):
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in linear_run.iterdir()}
    args = ["--budget", "0.01", "--out", str(linear_run)]
    assert "already holds results.json" in fails(capsys, args)
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in linear_run.iterdir()}
    assert after == before and set(before) == {"results.json", "metrics.jsonl", "lr_trace.csv"}


def test_a_missing_scikit_learn_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # importlib.util.find_spec -> None
    err = fails(capsys, ["--budget", "0.01", "--out", str(tmp_path / "out")])
    assert err == (
        "digits_budget: error: budgeted.toys.digits needs 'sklearn', which is not installed; "
        'install it with pip install "budgeted-training[digits]"\n'
    )
    assert not (tmp_path / "out").exists()


def test_a_diverged_run_is_one_line_exit_3_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--budget", "1", "--full-iters", "5", "--lr", "1e35", "--out", str(out)]
    assert example.main(args) == DIVERGED_EXIT_CODE == 3
    err = capsys.readouterr().err
    assert err == (
        "digits_budget: diverged: the loss is nan at iteration 3 (base LR 1e+35); lower --lr or "
        "lengthen --warmup-iters; nothing was written, the run is not a result (exit status 3)\n"
    )
    assert not out.exists()


def test_the_model_is_mmpretrains_lenet5():
    """The same layers, shapes and parameter order as MMPretrain's ``LeNet5(num_classes=10)``,
    so the same seed initialises both alike."""
    from mmpretrain.models.backbones import LeNet5

    torch.manual_seed(0)
    ours = [p.detach().clone() for p in example.lenet5().parameters()]
    torch.manual_seed(0)
    stock = list(LeNet5(num_classes=10).parameters())
    assert [p.shape for p in ours] == [p.shape for p in stock]
    assert all(torch.equal(a, b) for a, b in zip(ours, stock))

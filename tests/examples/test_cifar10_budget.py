"""examples/cifar10_budget.py: a ResNet-18 trained for a budget on the toy CIFAR-10, on CPU."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import schedulefree
import torch

import budgeted
from budgeted.toys.cifar10 import BASE_FOLDER, TOY_MARKER, make_toy_cifar10

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "cifar10_budget", ROOT / "examples/cifar10_budget.py"
)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

# 60 training images, the last 20 held out: 40 / batch 8 = 5 iterations per epoch; a "full"
# schedule of 2 epochs is 10 iterations.
TOY = ["--epochs-full", "2", "--batch-size", "8", "--holdout", "20", "--workers", "0"]


def read_trace(out: Path) -> list[float]:
    """The learning rates of ``lr_trace.csv``, checking that the iterations are 0, 1, ..."""
    header, *rows = (out / "lr_trace.csv").read_text().splitlines()
    assert header == "iteration,lr"
    assert [int(row.split(",")[0]) for row in rows] == list(range(len(rows)))
    return [float(row.split(",")[1]) for row in rows]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cifar")
    make_toy_cifar10(root, num_train=60, num_test=20)
    return root


@pytest.fixture(scope="module")
def linear_run(data, tmp_path_factory) -> Path:
    """The whole toy schedule (10 iterations) with the linear schedule, warmup 2."""
    out = tmp_path_factory.mktemp("runs") / "linear"
    args = ["--data", str(data), "--budget", "1", *TOY, "--warmup-iters", "2", "--out", str(out)]
    assert example.main(args) == 0
    return out


def test_every_iteration_trains_at_the_core_multiplier(linear_run):
    trace = read_trace(linear_run)
    assert len(trace) == 10
    for t, lr in enumerate(trace):  # exactly: the CSV holds each float's repr
        assert lr == 0.1 * budgeted.lr_multiplier("linear", t, 10, warmup_iters=2)
    assert trace[0] == pytest.approx(0.1 * 0.001) and trace[2] == 0.1


def test_the_run_ends_at_the_budget_and_reports_accuracies(linear_run):
    results = json.loads((linear_run / "results.json").read_text())
    assert results["iterations"] == results["budget_iters"] == 10
    assert results["iters_per_epoch"] == 5 and results["train_images"] == 40
    assert results["warmup_iters"] == 2 and results["schedule"] == "linear"
    assert results["final_lr"] == 0.0  # the scheduler stepped past the last iteration
    for key in ("val_accuracy", "test_accuracy"):
        assert isinstance(results[key], float) and 0.0 <= results[key] <= 1.0
    assert (results["momentum"], results["weight_decay"]) == (0.9, 5e-4)


def test_a_registered_schedule_and_the_clamped_default_warmup(
    data, tmp_path, sqrt_schedule, capsys
):
    """A quarter of the toy schedule: ceil(0.25 x 2 x 5) = 3 iterations; the default warmup (50)
    is clamped to a tenth of them, 0; ``sqrt`` is registered by the tests, not built in."""
    args = ["--data", str(data), "--budget", "0.25", *TOY, "--schedule", sqrt_schedule]
    assert example.main([*args, "--out", str(tmp_path)]) == 0
    assert "the default 50 iterations clamped to 0" in capsys.readouterr().out
    expected = [0.1 * budgeted.lr_multiplier(sqrt_schedule, t, 3, warmup_iters=0) for t in range(3)]
    assert read_trace(tmp_path) == expected
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["iterations"] == results["budget_iters"] == 3 and results["warmup_iters"] == 0


def fails(capsys, args: list[str]) -> str:
    """Run the example; assert exit status 2 and one line on stderr; that line."""
    with pytest.raises(SystemExit) as exit_:
        example.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("cifar10_budget: error: ") and err.count("\n") == 1
    return err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--budget", "0"], "--budget 0.0 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "1.5"], "--budget 1.5 is invalid; allowed: a fraction in (0, 1]"),
        (["--budget", "nan"], "--budget nan is invalid"),
        (["--holdout", "60"], "--holdout 60 is invalid; allowed: 0 <= holdout < 60"),
        (["--schedule", "linaer"], "--schedule 'linaer' is invalid; allowed: one of linear, cos"),
        (["--warmup-iters", "10"], "--warmup-iters 10 is invalid; allowed: 0 <= W < 10"),
        (["--batch-size", "0"], "--batch-size 0 is invalid; allowed: a whole number >= 1"),
        (["--lr", "-0.1"], "--lr -0.1 is invalid; allowed: a number > 0"),
        (["--budget", "half"], "argument --budget: invalid float value: 'half'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(data, tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    base = ["--data", str(data), "--budget", "1", *TOY, "--out", str(out)]
    assert message in fails(capsys, [*base, *flags])
    assert not out.exists()


def test_cuda_is_refused_where_there_is_none(data, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    args = ["--data", str(data), "--budget", "1", "--device", "cuda", "--out", str(tmp_path)]
    assert "--device 'cuda' is invalid; allowed: cpu (no CUDA)" in fails(capsys, args)


def test_finished_results_are_not_overwritten(data, linear_run, capsys):
    before = (linear_run / "results.json").read_bytes()
    args = ["--data", str(data), "--budget", "1", *TOY, "--out", str(linear_run)]
    assert "already holds results.json" in fails(capsys, args)
    assert (linear_run / "results.json").read_bytes() == before


def test_a_set_without_the_toy_marker_is_read_by_the_stock_class(data, tmp_path, capsys):
    """Files that are not the real archive's (by md5) and not marked as a toy set are refused by
    ``torchvision.datasets.CIFAR10`` itself: the real data keeps its checksums."""
    shutil.copytree(data / BASE_FOLDER, tmp_path / BASE_FOLDER)
    (tmp_path / BASE_FOLDER / TOY_MARKER).unlink()
    args = ["--data", str(tmp_path), "--budget", "1", *TOY, "--out", str(tmp_path / "out")]
    assert "Dataset not found or corrupted" in fails(capsys, args)
    assert "Dataset not found" in fails(capsys, [*args[:1], str(tmp_path / "none"), *args[2:]])


def test_a_schedule_with_parameters_and_another_optimizer(data, tmp_path, monkeypatch):
    """The sweep's arms: ``wsd:decay=sqrt`` at the core's multiplier, with AMSGrad keeping the
    base LR and weight decay (its class recorded as built)."""
    built = []
    build = example.build_optimizer
    monkeypatch.setattr(
        example, "build_optimizer", lambda *a, **k: built.append(build(*a, **k)) or built[-1]
    )
    flags = ["--schedule", "wsd:decay=sqrt", "--optimizer", "amsgrad", "--warmup-iters", "2"]
    assert (
        example.main(["--data", str(data), "--budget", "0.5", *TOY, *flags, "--out", str(tmp_path)])
        == 0
    )
    (optimizer,) = built
    assert type(optimizer) is torch.optim.Adam and optimizer.defaults["amsgrad"] is True
    expected = [
        0.1 * budgeted.lr_multiplier("wsd", t, 5, warmup_iters=2, decay="sqrt") for t in range(5)
    ]
    assert read_trace(tmp_path) == expected
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["optimizer_kwargs"] == {"lr": 0.1, "weight_decay": 5e-4, "amsgrad": True}
    assert results["momentum"] is None and results["schedule"] == "wsd:decay=sqrt"


def test_schedule_free_evaluates_at_its_average_with_batchnorm_recalibrated(
    data, tmp_path, monkeypatch
):
    """ResNet-18 has BatchNorm: before the evaluations the optimizer is in eval mode (x) and the
    statistics are recomputed from the training batches (one pass of the toy loader: 5)."""
    built, recalibrated, modes = [], [], []
    build, recalibrate, accuracy = example.build_optimizer, example.recalibrate_bn, example.accuracy
    monkeypatch.setattr(
        example, "build_optimizer", lambda *a, **k: built.append(build(*a, **k)) or built[-1]
    )
    monkeypatch.setattr(
        example, "recalibrate_bn", lambda m, b: recalibrated.append(recalibrate(m, b))
    )

    def spy_accuracy(model, *args):
        modes.append(built[0].param_groups[0]["train_mode"])
        return accuracy(model, *args)

    monkeypatch.setattr(example, "accuracy", spy_accuracy)
    flags = ["--schedule-free", "--optimizer", "adamw", "--warmup-iters", "2", "--lr", "0.01"]
    assert (
        example.main(["--data", str(data), "--budget", "0.5", *TOY, *flags, "--out", str(tmp_path)])
        == 0
    )
    assert (
        type(built[0]) is schedulefree.AdamWScheduleFree and built[0].defaults["warmup_steps"] == 2
    )
    assert recalibrated == [5] and modes == [False, False]  # validation and test, at x
    assert read_trace(tmp_path) == pytest.approx([0.005] + [0.01] * 4)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["schedule"] == "constant" and results["schedule_free"] is True


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--optimizer", "adam"], "--optimizer 'adam' is invalid; allowed: one of sgd, adamw, "),
        (["--schedule", "wsd:decay=fast"], "--schedule 'wsd:decay=fast': wsd schedule: decay="),
        (["--schedule-free", "--optimizer", "amsgrad"], "--optimizer 'amsgrad' has no schedule-"),
        (["--schedule-free", "--schedule", "rex"], "--schedule 'rex' with --schedule-free is inv"),
    ],
)
def test_bad_arm_flags_are_one_line(data, tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    assert message in fails(
        capsys, ["--data", str(data), "--budget", "1", *TOY, *flags, "--out", str(out)]
    )
    assert not out.exists()

"""examples/digits_budget.py's sweep arms: ``--optimizer``, ``--schedule-free``, ``--subset``,
``--validate-every`` and schedules with parameters (``wsd:decay=sqrt``), each a real run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import schedulefree
import torch
from torch import nn

import budgeted
from budgeted.runs import pytorch as reader
from budgeted.toys.digits import digits_split

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("digits_arms", ROOT / "examples/digits_budget.py")
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


def run(tmp_path: Path, name: str, *flags: str) -> Path:
    out = tmp_path / name
    assert example.main([*flags, "--out", str(out)]) == 0
    return out


def lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def trained(out: Path) -> list[dict]:
    """The per-iteration records (LR and loss) of ``metrics.jsonl``."""
    return [r for r in lines(out) if "lr" in r]


def results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


@pytest.fixture
def built(monkeypatch) -> list[torch.optim.Optimizer]:
    """Every optimizer the script builds (its own ``build_optimizer``, recorded)."""
    seen: list[torch.optim.Optimizer] = []

    def recording(*args, **kwargs):
        seen.append(example.build_optimizer.__wrapped__(*args, **kwargs))
        return seen[-1]

    recording.__wrapped__ = example.build_optimizer
    monkeypatch.setattr(example, "build_optimizer", recording)
    return seen


def test_a_default_run_trains_as_the_script_always_did(tmp_path):
    """The old loop, written out: SGD momentum 0.9, weight decay 1e-4, BudgetLR stepped once per
    iteration; the same LRs and losses to the last bit, and the same held-out accuracy."""
    out = run(tmp_path, "default", "--budget", "0.02", "--lr", "0.3")  # 34 iterations
    split = digits_split()
    x, y = example.tensors(split.train_images, split.train_labels)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = example.lenet5()
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-4)
    sched = budgeted.BudgetLR(opt, "linear", 34, warmup_iters=0)
    expected = []
    for t, batch in enumerate(example.batches(1400, 32, 0, 34)):
        lr = opt.param_groups[0]["lr"]
        loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        expected.append({"iteration": t, "lr": lr, "loss": loss.item()})
    assert trained(out) == expected
    accuracy = example.accuracy(model, *example.tensors(split.val_images, split.val_labels))
    summary = results(out)
    assert summary["val_accuracy"] == accuracy and summary["optimizer"] == "sgd"
    assert summary["optimizer_class"] == "torch.optim.SGD" and summary["train_indices"] is None
    assert (summary["momentum"], summary["weight_decay"]) == (0.9, 1e-4)
    assert not summary["schedule_free"] and summary["schedule"] == "linear"


@pytest.mark.parametrize(
    ("name", "cls", "kwargs"),
    [
        ("adamw", torch.optim.AdamW, {"lr": 0.003, "weight_decay": 1e-4}),
        ("amsgrad", torch.optim.Adam, {"lr": 0.003, "weight_decay": 1e-4, "amsgrad": True}),
    ],
)
def test_another_optimizer_keeps_the_lr_and_weight_decay(tmp_path, built, name, cls, kwargs):
    out = run(tmp_path, name, "--budget", "0.01", "--lr", "0.003", "--optimizer", name)
    (optimizer,) = built
    assert type(optimizer) is cls and optimizer.defaults["amsgrad"] == (name == "amsgrad")
    assert "momentum" not in optimizer.defaults  # SGD's, dropped
    summary = results(out)
    assert summary["optimizer"] == name and summary["optimizer_kwargs"] == kwargs
    assert summary["optimizer_class"] == f"torch.optim.{cls.__name__}"
    assert summary["momentum"] is None and summary["weight_decay"] == 1e-4
    lrs = [r["lr"] for r in trained(out)]  # the budget schedule still runs
    assert lrs == [
        0.003 * budgeted.lr_multiplier("linear", t, 17, warmup_iters=0) for t in range(17)
    ]
    assert trained(out)[-1]["loss"] < trained(out)[0]["loss"]


@pytest.mark.parametrize(
    ("name", "cls"), [("sgd", "SGDScheduleFree"), ("adamw", "AdamWScheduleFree")]
)
def test_schedule_free_evaluates_at_its_average_in_eval_mode(
    tmp_path, built, monkeypatch, name, cls
):
    """No LR schedule (the warmup, then the base LR), the optimizer in eval mode (its averaged
    weights ``x``, BatchNorm recalibrated) at every evaluation, back in train mode after."""
    at_eval, recalibrated = [], []
    accuracy, recalibrate = example.accuracy, example.recalibrate_bn

    def spy_accuracy(model, x, y):
        (optimizer,) = built
        at_eval.append(optimizer.param_groups[0]["train_mode"])
        return accuracy(model, x, y)

    def spy_recalibrate(model, batches):
        recalibrated.append(recalibrate(model, batches))
        return recalibrated[-1]

    monkeypatch.setattr(example, "accuracy", spy_accuracy)
    monkeypatch.setattr(example, "recalibrate_bn", spy_recalibrate)
    flags = ["--budget", "0.01", "--warmup-iters", "3", "--validate-every", "5", "--lr", "0.05"]
    out = run(tmp_path, "sf", *flags, "--schedule-free", "--optimizer", name)
    (optimizer,) = built
    assert type(optimizer) is getattr(schedulefree, cls)
    assert at_eval == [False] * 4 and recalibrated == [0] * 4  # 5, 10, 15, the end; no BatchNorm
    assert [r["lr"] for r in trained(out)] == pytest.approx([0.05 / 3, 0.1 / 3, 0.05] + [0.05] * 14)
    summary = results(out)
    assert summary["schedule"] == "constant" and summary["schedule_free"] is True
    assert summary["optimizer_class"] == f"schedulefree.{cls}"
    assert summary["optimizer_kwargs"]["warmup_steps"] == 3 and summary["final_lr"] == 0.05
    evaluated = [p.detach().clone() for p in optimizer.param_groups[0]["params"]]
    model = example.lenet5()  # the run's final weights, as the optimizer left them: x
    torch.nn.utils.vector_to_parameters(
        torch.nn.utils.parameters_to_vector(evaluated), model.parameters()
    )
    val = example.tensors(digits_split().val_images, digits_split().val_labels)
    assert accuracy(model, *val) == summary["val_accuracy"]
    optimizer.train()  # back to the point y it trained at: other weights
    trained_at = optimizer.param_groups[0]["params"]
    assert not all(torch.equal(a, b) for a, b in zip(evaluated, trained_at))


def test_subset_trains_the_budget_on_a_seeded_sorted_subset_only(tmp_path, monkeypatch):
    """--subset 0.05: round(0.05 x 1400) = 70 images, drawn by the seed, and every training
    batch is made of them (17 batches of 32 show each of the 70 several times)."""
    seen: list[torch.Tensor] = []
    lenet5 = example.lenet5

    def recorded_lenet5():
        model = lenet5()
        model.register_forward_pre_hook(
            lambda m, args: seen.append(args[0]) if m.training else None
        )
        return model

    monkeypatch.setattr(example, "lenet5", recorded_lenet5)
    out = run(tmp_path, "subset", "--budget", "0.01", "--subset", "0.05")
    summary = results(out)
    chosen = summary["train_indices"]
    assert summary["train_images"] == len(chosen) == 70 and summary["subset"] == 0.05
    assert chosen == sorted(set(chosen)) == example.subset_indices(1400, 0.05, seed=0).tolist()
    assert summary["iterations"] == 17 and len(trained(out)) == 17  # the budget's iterations
    split = digits_split()
    x, _ = example.tensors(split.train_images, split.train_labels)
    rows = {bytes(row.numpy().tobytes()) for row in torch.cat(seen)}
    assert len(seen) == 17 and rows == {bytes(x[i].numpy().tobytes()) for i in chosen}
    other = example.subset_indices(1400, 0.05, seed=1).tolist()
    assert other != chosen and example.subset_indices(1400, 1e-9, seed=0).numel() == 1


def test_validate_every_logs_evaluations_the_reader_returns(tmp_path):
    """--validate-every 10 over 34 iterations: evaluations after 10, 20 and 30, then the final
    one at 34; training is the run's without them, record for record."""
    plain = run(tmp_path, "plain", "--budget", "0.02", "--lr", "0.3")
    out = run(tmp_path, "every10", "--budget", "0.02", "--lr", "0.3", "--validate-every", "10")
    evals = [r for r in lines(out) if "lr" not in r]
    assert [r["iteration"] for r in evals] == [10, 20, 30, 34] and evals[-1]["final"] is True
    assert all(set(r) == {"iteration", "val_accuracy"} for r in evals[:-1])
    after = [lines(out).index(r) for r in evals[:-1]]
    assert [lines(out)[i - 1]["iteration"] for i in after] == [9, 19, 29]  # after iteration i
    assert trained(out) == trained(plain) and lines(plain)[-1] == lines(out)[-1]
    assert (out / "lr_trace.csv").read_text() == (plain / "lr_trace.csv").read_text()
    found = reader.evaluations(out)
    assert found == [(r["iteration"], {"val_accuracy": r["val_accuracy"]}) for r in evals]
    assert reader.train_curve(out) == reader.train_curve(plain)
    assert reader.final_metrics(out) == {"val_accuracy": results(out)["val_accuracy"]}
    at_end = run(tmp_path, "every34", "--budget", "0.02", "--validate-every", "34")
    assert [r for r in lines(at_end) if "lr" not in r] == [lines(at_end)[-1]]  # only the final


def test_a_schedule_with_parameters_trains_at_the_cores_multiplier(tmp_path):
    out = run(tmp_path, "wsd", "--budget", "0.02", "--schedule", "wsd:decay=sqrt")  # 34
    lrs = [r["lr"] for r in trained(out)]
    assert lrs == [
        0.1 * budgeted.lr_multiplier("wsd:decay=sqrt", t, 34, warmup_iters=0) for t in range(34)
    ]
    assert lrs == [
        0.1 * budgeted.lr_multiplier("wsd", t, 34, warmup_iters=0, decay="sqrt") for t in range(34)
    ]
    linear_cooldown = [
        0.1 * budgeted.lr_multiplier("wsd", t, 34, warmup_iters=0) for t in range(34)
    ]
    assert lrs != linear_cooldown and lrs[0] == 0.1
    summary = results(out)
    assert summary["schedule"] == "wsd:decay=sqrt" and summary["schedule_params"] == {
        "decay": "sqrt"
    }


def fails(capsys, args: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        example.main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("digits_budget: error: ") and err.count("\n") == 1
    return err


SCHEDULE_FREE_ONLY = "allowed: with --schedule-free one of sgd, adamw"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--optimizer", "adam"], "--optimizer 'adam' is invalid; allowed: one of sgd, adamw, "),
        (["--subset", "0"], "--subset 0.0 is invalid; allowed: a fraction in (0, 1]"),
        (["--subset", "1.5"], "--subset 1.5 is invalid; allowed: a fraction in (0, 1]"),
        (["--subset", "nan"], "--subset nan is invalid; allowed: a fraction in (0, 1]"),
        (["--validate-every", "0"], "--validate-every 0 is invalid; allowed: a whole number >= 1"),
        (["--validate-every", "2.5"], "argument --validate-every: invalid int value: '2.5'"),
        (["--schedule", "wsd:decay=fast"],
         "--schedule 'wsd:decay=fast': wsd schedule: decay='fast' is invalid; allowed: linear, "),
        (["--schedule", "wsd:decay"],
         "--schedule 'wsd:decay': schedule 'wsd:decay' is invalid; allowed: NAME[:KEY=VALUE"),
        (["--schedule", "wsd:speed=2"], "schedule 'wsd' has no parameter 'speed'; it takes: "),
        (["--schedule", "wds:decay=sqrt"], "--schedule 'wds:decay=sqrt' is invalid; allowed: one "),
        (["--schedule-free", "--optimizer", "amsgrad"],
         f"--optimizer 'amsgrad' has no schedule-free form; {SCHEDULE_FREE_ONLY}"),
        (["--schedule-free", "--schedule", "linear"],
         "--schedule 'linear' with --schedule-free is invalid; allowed: --schedule constant"),
    ],
)  # fmt: skip
def test_bad_arm_flags_are_one_line_and_write_nothing(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    assert message in fails(capsys, ["--budget", "0.01", "--out", str(out), *flags])
    assert not out.exists()


def test_schedule_free_without_the_package_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "schedulefree", None)  # importlib.util.find_spec -> None
    out = tmp_path / "out"
    err = fails(capsys, ["--budget", "0.01", "--schedule-free", "--out", str(out)])
    assert err == (
        "digits_budget: error: optimizer 'sgd' (schedule-free) needs 'schedulefree', which is not "
        'installed; install it with pip install "budgeted-training[schedulefree]"\n'
    )
    assert not out.exists()

"""``budgeted.lightning.BudgetCallback`` in-process: the core's LR at every optimizer step
(max_steps, max_epochs x steps with gradient accumulation, a fraction of a full schedule), time
budgets that end at LR 0 (``time=`` and the trainer's ``max_time``), the resume decision (a
changed budget refused in one line with every file unchanged, a re-plan, an exact resume), a
module's own LR scheduler refused, divergence in one line, and a preemption signal that saves
and resumes to the same LR trace. Real Lightning trainers on the UCI digits
(examples/lightning_digits.py's module)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, Timer

import budgeted
from budgeted.errors import BudgetConfigError, BudgetMismatchError
from budgeted.lightning import BudgetCallback, Diverged, Preempted

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "lightning_digits.py"
sys.path.insert(0, str(ROOT / "examples"))  # the example imports digits_budget beside it
_spec = importlib.util.spec_from_file_location("lightning_digits", ROOT / "examples" / SCRIPT)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)
# what the example imported beside it is not a module the next test file in this worker sees
# (tests/examples/test_digits_budget.py loads its own copy of digits_budget and doctests it)
sys.modules.pop("digits_budget", None)
sys.path.remove(str(ROOT / "examples"))


def trainer(*callbacks, **kwargs) -> L.Trainer:
    kwargs = {"max_epochs": None, "logger": False, "enable_progress_bar": False,
              "enable_model_summary": False, "enable_checkpointing": False,
              "num_sanity_val_steps": 0, "accelerator": "cpu", "devices": 1, **kwargs}  # fmt: skip
    return L.Trainer(callbacks=list(callbacks), **kwargs)


def lines(out: Path) -> list[dict]:
    return [json.loads(t) for t in (out / "metrics.jsonl").read_text().splitlines()]


def trace(out: Path) -> list[float]:
    return [r["lr"] for r in lines(out) if "lr" in r]


def core(schedule: str, total: int, lr: float = 0.1, **kw) -> list[float]:
    return [lr * budgeted.lr_multiplier(schedule, t, total, **kw) for t in range(total)]


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


# --- unit: arguments -------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"schedule": "nope"}, "schedule 'nope'"),
        ({"on_resume": "later"}, "on_resume"),
        ({"time": "soon"}, "time budget 'soon' is invalid"),
        ({"total_iters": 10, "time": 5}, "total_iters and time given"),
        ({"full_iters": 100}, "full_iters without fraction given"),
        ({"total_iters": 0}, "iters"),
    ],
)
def test_bad_arguments_are_one_line(kwargs, words):
    with pytest.raises(BudgetConfigError) as err:
        BudgetCallback(**kwargs)
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert str(err.value).startswith("BudgetCallback: ")


@pytest.mark.unit
def test_without_lightning_the_import_is_one_line_naming_the_extra(monkeypatch):
    from budgeted._require import MissingFrameworkError

    real = importlib.util.find_spec
    hidden = lambda name, *a: None if name == "lightning" else real(name, *a)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    monkeypatch.delitem(sys.modules, "budgeted.lightning")
    with pytest.raises(MissingFrameworkError) as err:
        importlib.import_module("budgeted.lightning")
    assert str(err.value) == (
        "budgeted.lightning needs 'lightning', which is not installed; install it with "
        'pip install "budgeted-training[lightning]"'
    )


# --- integration: the LR of every step ---------------------------------------------------------


@pytest.mark.integration
def test_max_steps_gives_the_cores_lr_at_every_step(tmp_path):
    module = example.DigitsModule(lr=0.1, out=str(tmp_path))
    params = {"milestones": [0.5, 0.75]}
    callback = BudgetCallback("step", warmup_iters=8, params=params)
    trainer(callback, max_steps=40).fit(module)
    assert trace(tmp_path) == core("step", 40, warmup_iters=8, **params)  # error 0
    assert lines(tmp_path)[-1]["final"] and callback.total == 40


class Accumulating(L.LightningModule):
    """LeNet-5 on 10 batches of digits per epoch, the LR of each optimizer step recorded."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.model, self.lrs = example.lenet5(), []
        x, y = example.DigitsModule().train_xy
        self.data = torch.utils.data.TensorDataset(x[:320], y[:320])

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.data, batch_size=32)

    def training_step(self, batch, idx):
        self.lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

    def configure_optimizers(self):
        return torch.optim.SGD(self.model.parameters(), lr=0.2, momentum=0.9)


@pytest.mark.integration
def test_max_epochs_with_gradient_accumulation_counts_optimizer_steps():
    module, callback = Accumulating(), BudgetCallback("cosine", warmup_iters=3)
    trainer(callback, max_epochs=3, accumulate_grad_batches=2).fit(module)
    assert callback.total == 15  # 3 epochs x ceil(10 batches / 2)
    assert module.lrs[::2] == module.lrs[1::2]  # one LR per optimizer step
    assert module.lrs[::2] == core("cosine", 15, lr=0.2, warmup_iters=3)


@pytest.mark.integration
def test_a_fraction_of_a_full_schedule_stops_the_trainer_there(tmp_path):
    module = example.DigitsModule(out=str(tmp_path))
    callback = BudgetCallback("linear", fraction=0.01, full_iters=1720, warmup_iters=0)
    trainer(callback, max_steps=-1, max_epochs=1).fit(module)  # an epoch of 10**9 batches
    assert trace(tmp_path) == core("linear", 17, warmup_iters=0) and callback.lr() == 0.0


@pytest.mark.integration
def test_a_module_with_its_own_scheduler_and_a_trainer_without_budget_are_one_line(tmp_path):
    class OwnScheduler(example.DigitsModule):
        def configure_optimizers(self):
            opt = super().configure_optimizers()
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, 5)]

    with pytest.raises(BudgetConfigError, match="returns an LR scheduler too") as err:
        trainer(BudgetCallback(warmup_iters=0), max_steps=5).fit(OwnScheduler())
    assert "\n" not in str(err.value)
    with pytest.raises(BudgetConfigError, match="the trainer sets no length"):
        trainer(BudgetCallback(warmup_iters=0), max_steps=-1, max_epochs=-1).fit(Accumulating())


# --- integration: time budgets -----------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("where", ["time", "max_time"])
def test_a_time_budget_ends_at_lr_zero_and_stops(tmp_path, where):
    module = example.DigitsModule(out=str(tmp_path))
    if where == "time":
        callback = BudgetCallback("linear", time=5, warmup_iters=5)
        run = trainer(callback, max_steps=-1, max_epochs=1)
    else:
        callback = BudgetCallback("linear", warmup_iters=5)
        run = trainer(callback, max_steps=-1, max_time=timedelta(seconds=5))
    run.fit(module)
    assert not any(isinstance(c, Timer) for c in run.callbacks)  # the callback keeps max_time
    assert callback.seconds == 5 and callback.lr() == 0.0 and run.should_stop
    lrs = trace(tmp_path)
    assert lrs[:5] == core("linear", 6, warmup_iters=5)[:5]  # the warmup, in steps
    assert 0 < lrs[-1] < 0.1 * 20 / len(lrs)  # the last step within a few steps of 0
    assert lrs == sorted(lrs[:5]) + sorted(lrs[5:], reverse=True)
    assert 5 <= callback.clock.elapsed < 5.5  # one step past the deadline, under load too


class StopAt(L.Callback):
    """Stops the trainer after ``steps`` optimizer steps (an interrupted run)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def on_train_batch_end(self, trainer, *args) -> None:
        trainer.should_stop = trainer.should_stop or trainer.global_step >= self.steps


@pytest.mark.integration
def test_a_time_budget_resumes_with_its_clock_and_refuses_another_deadline(tmp_path):
    saver = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=5, save_top_k=-1)
    first = BudgetCallback("linear", time=4, warmup_iters=0)
    trainer(first, StopAt(5), saver, max_steps=-1, max_epochs=1, enable_checkpointing=True).fit(
        example.DigitsModule(out=str(tmp_path)))  # fmt: skip
    ckpt, spent = tmp_path / "ckpt" / "epoch=0-step=5.ckpt", first.clock.elapsed
    assert 0 < spent < 4
    before = digest(tmp_path)
    with pytest.raises(BudgetMismatchError, match="seconds") as err:
        trainer(BudgetCallback("linear", time=8, warmup_iters=0), max_steps=-1, max_epochs=1).fit(
            example.DigitsModule(out=str(tmp_path)), ckpt_path=ckpt)  # fmt: skip
    assert "\n" not in str(err.value) and digest(tmp_path) == before
    again = BudgetCallback("linear", time=4, warmup_iters=0)
    run = trainer(again, max_steps=-1, max_epochs=1)
    run.fit(example.DigitsModule(out=str(tmp_path)), ckpt_path=ckpt)
    assert 4 <= again.clock.elapsed < 4.5 and again.lr() == 0.0  # 4 s in all, not 4 more
    lrs = trace(tmp_path)
    assert len(lrs) == run.global_step and lrs == sorted(lrs, reverse=True)


# --- integration: resume -----------------------------------------------------------------------


def saving(tmp_path: Path) -> ModelCheckpoint:
    return ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=10, save_top_k=-1)


@pytest.mark.integration
def test_resume_same_budget_exact_changed_budget_refused_replan_on_purpose(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    trainer(BudgetCallback("cosine", warmup_iters=4), max_steps=30).fit(
        example.DigitsModule(out=str(whole)))  # fmt: skip
    kw = {"enable_checkpointing": True}
    trainer(BudgetCallback("cosine", warmup_iters=4), saving(part), max_steps=30, **kw).fit(
        example.DigitsModule(out=str(part)))  # fmt: skip
    ckpt = part / "ckpt" / "epoch=0-step=10.ckpt"
    (part / "results.json").unlink()
    before = digest(tmp_path)
    # another budget: one line, before any step, every file unchanged
    with pytest.raises(BudgetMismatchError) as err:
        trainer(BudgetCallback("cosine", warmup_iters=4), max_steps=60).fit(
            example.DigitsModule(out=str(part)), ckpt_path=ckpt)  # fmt: skip
    assert "total_iters" in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert digest(tmp_path) == before
    # the same budget from step 10: the uninterrupted run's LRs and losses, line for line
    trainer(BudgetCallback("cosine", warmup_iters=4), max_steps=30).fit(
        example.DigitsModule(out=str(part)), ckpt_path=ckpt)  # fmt: skip
    assert lines(part) == lines(whole)
    # on_resume="replan": from step 10 of 30 on to 60 steps, no jump, down to 0 at step 60
    (part / "results.json").unlink()
    longer = BudgetCallback("cosine", warmup_iters=4, on_resume="replan")
    trainer(longer, max_steps=60).fit(example.DigitsModule(out=str(part)), ckpt_path=ckpt)
    lrs = trace(part)
    assert len(lrs) == 60 and lrs[:10] == trace(whole)[:10] and longer.lr() == 0.0
    assert abs(lrs[10] - lrs[9]) < 0.02 and lrs[10:] == sorted(lrs[10:], reverse=True)


# --- divergence and preemption -----------------------------------------------------------------


@pytest.mark.integration
def test_a_non_finite_loss_is_one_line_naming_the_step_and_base_lr(tmp_path, capsys):
    with pytest.raises(Diverged) as err:
        trainer(BudgetCallback(warmup_iters=0), max_steps=40).fit(
            example.DigitsModule(lr=1e9, out=str(tmp_path)))  # fmt: skip
    assert err.value.code == 3
    line = [t for t in capsys.readouterr().err.splitlines() if "diverged" in t]
    assert len(line) == 1 and line[0].startswith("BudgetCallback: diverged: the loss is ")
    assert "(base LR 1e+09)" in line[0] and f"at iteration {len(trace(tmp_path)) + 1} " in line[0]


class SignalledAt(example.DigitsModule):
    """Sends itself ``signum`` during step ``at`` (a signal while the step trains)."""

    def __init__(self, at: int, signum: int, **kw) -> None:
        super().__init__(**kw)
        self.at, self.signum = at, signum

    def training_step(self, batch, idx):
        if self.trainer.global_step == self.at:
            os.kill(os.getpid(), self.signum)
        return super().training_step(batch, idx)


@pytest.mark.e2e  # a signal to a trainer
def test_a_preemption_signal_saves_and_the_resume_has_the_same_lr_trace(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    trainer(BudgetCallback("linear", warmup_iters=3), max_steps=25).fit(
        example.DigitsModule(out=str(whole)))  # fmt: skip
    callback = BudgetCallback("linear", warmup_iters=3, checkpoint=str(part / "pre.ckpt"))
    with pytest.raises(Preempted) as err:
        trainer(callback, max_steps=25).fit(SignalledAt(12, signal.SIGUSR1, out=str(part)))
    assert err.value.code == 75 and (part / "pre.ckpt").is_file()
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # the guard is released
    trainer(BudgetCallback("linear", warmup_iters=3), max_steps=25).fit(
        example.DigitsModule(out=str(part)), ckpt_path=part / "pre.ckpt")  # fmt: skip
    assert lines(part) == lines(whole)

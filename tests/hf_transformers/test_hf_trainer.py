"""``budgeted.transformers`` in a real Hugging Face ``Trainer`` (in-process) on the UCI digits:
the core's LR at every step, the budget's stop, resume refused or re-planned, a time budget
annealing to 0 at its deadline and carried across a resume, divergence in one line, the
trainer's own schedule without a budget."""

from __future__ import annotations

import logging

import pytest
import torch
from hf_testutils import BASE_LR, LRs, digests, digits, model_of, trainer_of
from transformers import Trainer

from budgeted import lr_multiplier
from budgeted.errors import BudgetConfigError, BudgetMismatchError, Diverged
from budgeted.pytorch import BudgetLR, BudgetTimeLR
from budgeted.transformers import BudgetCallback

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def data():
    return digits()


@pytest.mark.parametrize(
    ("schedule", "budget", "params", "steps", "length"),
    [
        ("cosine", {"fraction": 0.5}, {}, 20, {}),  # half of the trainer's 40 steps: stops at 20
        ("step", {}, {"milestones": (0.5, 0.75)}, 40, {}),  # the trainer's max_steps
        ("sqrt", {"total_iters": 24}, {"floor": 0.1}, 24, {}),  # a schedule the tests register
        ("linear", {}, {}, 44, {"max_steps": -1, "num_train_epochs": 1}),  # 1 epoch of 44 steps
    ],
)
def test_every_step_trains_at_the_cores_lr(
    tmp_path, data, sqrt_schedule, schedule, budget, params, steps, length
):
    lrs = LRs()
    callback = BudgetCallback(schedule, warmup_iters=5, **budget, **params)
    trainer = trainer_of(tmp_path, data, [callback, lrs], **{"max_steps": 40, **length})
    trainer.train()
    assert trainer.state.global_step == steps
    expected = [
        (t, BASE_LR * lr_multiplier(schedule, t, steps, warmup_iters=5, **params))
        for t in range(steps)
    ]
    assert lrs.trace == expected  # error 0
    end = BASE_LR * lr_multiplier(schedule, steps, steps, warmup_iters=5, **params)
    assert set(callback.lr_scheduler.get_last_lr()) == {end}  # the budget's end


def test_resume_with_another_budget_is_refused_in_one_line_changing_no_file(tmp_path, data, caplog):
    first = trainer_of(tmp_path, data, [BudgetCallback("linear", warmup_iters=0)],
                       max_steps=12, save_strategy="steps", save_steps=6)  # fmt: skip
    first.train()
    before = digests(tmp_path)
    checkpoint = str(tmp_path / "checkpoint-6")
    longer = trainer_of(tmp_path, data, [BudgetCallback("linear", warmup_iters=0)], max_steps=20)
    with pytest.raises(BudgetMismatchError) as refused:
        longer.train(resume_from_checkpoint=checkpoint)
    assert len(str(refused.value).splitlines()) == 1
    assert "total_iters=12" in str(refused.value) and "total_iters=20" in str(refused.value)
    assert digests(tmp_path) == before
    # on_resume="replan": on purpose, one line, no jump, down to 0 at the new budget
    lrs = LRs()
    callback = BudgetCallback("linear", warmup_iters=0, on_resume="replan")
    replanned = trainer_of(tmp_path / "replan", data, [callback, lrs], max_steps=20)
    with caplog.at_level(logging.WARNING):
        replanned.train(resume_from_checkpoint=checkpoint)
    assert "re-planned" in caplog.text
    assert lrs.trace[0] == (6, pytest.approx(BASE_LR * (1 - 6 / 12)))
    assert replanned.state.global_step == 20 and set(callback.lr_scheduler.get_last_lr()) == {0.0}


def test_a_time_budget_anneals_to_zero_at_its_deadline_and_goes_on_after_a_resume(tmp_path, data):
    lrs = LRs()
    callback = BudgetCallback("linear", warmup_iters=0, time=4)
    trainer = trainer_of(tmp_path, data, [callback, lrs], max_steps=100_000,
                         save_strategy="steps", save_steps=40)  # fmt: skip
    trainer.train()
    scheduler = callback.lr_scheduler
    assert isinstance(scheduler, BudgetTimeLR)
    steps = trainer.state.global_step
    assert 40 < steps < 100_000  # the deadline stopped it
    assert 4.0 <= callback.clock.elapsed < 4.0 + 0.5  # within a few steps of the deadline
    assert set(scheduler.get_last_lr()) == {0.0}
    assert lrs.trace[-1][1] < BASE_LR * 0.1  # the last step trained decayed
    assert (
        scheduler.budget.shortfall(scheduler.last_epoch - 1, scheduler.last_trained_elapsed) is None
    )
    assert all(a[1] >= b[1] for a, b in zip(lrs.trace, lrs.trace[1:]))
    assert (tmp_path / f"checkpoint-{steps}").is_dir()  # the last step is saved
    saved = torch.load(tmp_path / "checkpoint-40" / "scheduler.pt", weights_only=True)
    # the same budget from step 40: the clock goes on from the checkpoint's seconds
    again = BudgetCallback("linear", warmup_iters=0, time=4)
    resumed = trainer_of(tmp_path / "again", data, [again], max_steps=100_000)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-40"))
    assert 0 < saved["clock"]["elapsed"] < 4.0 <= again.clock.elapsed < 4.5
    assert resumed.state.global_step > 40 and set(again.lr_scheduler.get_last_lr()) == {0.0}
    other = trainer_of(tmp_path / "other", data, [BudgetCallback(time=8, warmup_iters=0)],
                       max_steps=100_000)  # fmt: skip
    with pytest.raises(BudgetMismatchError, match=r"seconds=4\.0"):
        other.train(resume_from_checkpoint=str(tmp_path / "checkpoint-40"))


def test_a_non_finite_loss_ends_the_run_in_one_line(tmp_path, data):
    data.x[:] = float("nan")  # the module's copy: this test runs last
    trainer = trainer_of(tmp_path, data, [BudgetCallback(warmup_iters=0)])
    with pytest.raises(Diverged) as stop:
        trainer.train()
    assert stop.value.code == 3
    assert stop.value.message.startswith("diverged: the loss is nan at iteration 1 (base LR 0.003)")


@pytest.fixture()
def fresh():
    return digits()


def test_without_a_budget_the_trainers_own_schedule_runs(tmp_path, fresh):
    lrs = LRs()
    trainer = trainer_of(tmp_path, fresh, [lrs], max_steps=5, lr_scheduler_type="constant")
    trainer.train()
    assert not isinstance(trainer.lr_scheduler, BudgetLR)
    assert [lr for _, lr in lrs.trace] == [BASE_LR] * 5


def test_the_optimizers_route_and_a_trainer_without_the_mixin(tmp_path, fresh):
    callback, lrs = BudgetCallback("cosine", warmup_iters=2), LRs()
    model = model_of()
    optimizer = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
    scheduler = callback.scheduler(optimizer, 10)
    trainer = trainer_of(tmp_path, fresh, [callback, lrs], cls=Trainer, max_steps=10,
                         model=model, optimizers=(optimizer, scheduler))  # fmt: skip
    trainer.train()
    assert lrs.trace == [(t, BASE_LR * lr_multiplier("cosine", t, 10, warmup_iters=2))
                         for t in range(10)]  # fmt: skip
    plain = trainer_of(tmp_path, fresh, [BudgetCallback()], cls=Trainer, max_steps=5)
    with pytest.raises(BudgetConfigError, match="not the budget's; allowed: a Trainer with"):
        plain.train()
    warm = trainer_of(tmp_path, fresh, [BudgetCallback()], max_steps=5, warmup_steps=2)
    with pytest.raises(BudgetConfigError, match=r"warmup_steps=2 is not used under a budget"):
        warm.train()

"""``budgeted.trainer_budget.TrainerBudget``: the one check of a trainer callback's arguments, the
budget in steps for a trainer's length, the scheduler it builds and the lines of a run's ends
(what the Lightning and Hugging Face callbacks share)."""

from __future__ import annotations

import math

import pytest
import torch

import budgeted
from budgeted.errors import BudgetConfigError, Diverged
from budgeted.pytorch import BudgetLR, BudgetTimeLR
from budgeted.schedules import TrainingClock
from budgeted.trainer_budget import TrainerBudget

pytestmark = pytest.mark.unit


def optimizer(lr: float = 0.1) -> torch.optim.SGD:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


@pytest.mark.parametrize(
    ("kwargs", "steps"),
    [
        ({}, 1000),
        ({"total_iters": 300}, 300),
        ({"fraction": 0.25}, 250),
        ({"fraction": 0.1, "full_iters": 1720}, 172),
    ],
)
def test_the_budget_in_steps_for_a_trainer_of_1000(kwargs, steps):
    assert TrainerBudget("Cb", **kwargs).steps(1000, "max_steps") == steps


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"total_iters": 5, "time": 60}, "Cb: total_iters and time given; allowed: one of"),
        ({"full_iters": 100}, "Cb: full_iters without fraction given"),
        ({"schedule": "nope"}, "Cb: unknown schedule 'nope'"),
        ({"schedule": "wsd:decay=nope"}, "Cb: "),
        ({"time": "soon"}, "Cb: time budget 'soon' is invalid"),
        ({"time": 60, "on_resume": "branch"}, "Cb: on_resume='branch' is invalid"),
        ({"total_iters": 1.5}, "Cb: total_iters"),
        ({"fraction": -0.5}, "Cb: "),
        ({"params": {"milestones": (0.9, 0.1)}, "schedule": "step"}, "Cb: "),
    ],
)
def test_each_bad_argument_is_one_line_naming_the_callback(kwargs, words):
    with pytest.raises(BudgetConfigError) as bad:
        TrainerBudget("Cb", **kwargs)
    assert str(bad.value).startswith(words) and "\n" not in str(bad.value), str(bad.value)


def test_a_budget_longer_than_the_trainer_or_none_at_all_is_one_line():
    with pytest.raises(BudgetConfigError) as bad:
        TrainerBudget("Cb", total_iters=500).steps(400, "max_steps")
    assert str(bad.value) == (
        "Cb: a budget of 500 steps is longer than the trainer's 400 (max_steps); allowed: a "
        "trainer of at least 500 steps"
    )
    for kwargs in ({}, {"fraction": 0.5}):
        with pytest.raises(BudgetConfigError, match=r"^Cb: the trainer sets no length \(max_"):
            TrainerBudget("Cb", **kwargs).steps(math.inf, "max_steps")
    assert TrainerBudget("Cb", total_iters=7).steps(math.inf, "max_steps") == 7


def test_the_scheduler_gives_the_cores_lr_and_keeps_the_schedules_parameters():
    budget = TrainerBudget("Cb", "step:gamma=0.5", warmup_iters=2, params={"milestones": [0.5]})
    scheduler = budget.scheduler(optimizer(), budget.steps(10, "max_steps"))
    assert isinstance(scheduler, BudgetLR)
    lrs = []
    for _ in range(10):
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
    core = budgeted.lr_multiplier
    assert lrs == [0.1 * core("step", t, 10, warmup_iters=2, gamma=0.5, milestones=[0.5])
                   for t in range(10)]  # fmt: skip


def test_a_time_budget_reaches_its_deadline_at_lr_zero_with_its_line():
    now = iter(t / 100 for t in range(1000))  # 10 ms per step
    clock = TrainingClock(now=lambda: next(now))
    budget = TrainerBudget("Cb", time="2s", warmup_iters=0)
    scheduler = budget.scheduler(optimizer(), clock=clock)
    assert isinstance(scheduler, BudgetTimeLR)
    clock.start()
    step = 0
    while TrainerBudget.deadline_line(scheduler, step, "stops") is None:
        scheduler.step()
        step += 1
    assert scheduler.get_last_lr() == [0.0]
    assert TrainerBudget.deadline_line(scheduler, step, "stops").startswith(
        f"time budget of 2 s reached after {step} iterations"
    )
    assert TrainerBudget.undecayed_line(scheduler, "raise it") is None
    assert TrainerBudget.deadline_line(object(), step, "stops") is None


def test_a_non_finite_loss_is_one_stop_naming_the_iteration_and_base_lr():
    opt = optimizer(0.3)
    scheduler = BudgetLR(opt, "linear", 10, warmup_iters=0)
    assert TrainerBudget.diverged(torch.tensor(1.0), 3, opt, scheduler, "lower it") is None
    stop = TrainerBudget.diverged({"loss": torch.tensor(math.nan)}, 3, opt, scheduler, "lower it")
    assert isinstance(stop, Diverged) and "\n" not in stop.message
    assert "nan" in stop.message and "iteration 3" in stop.message and "0.3" in stop.message


def test_a_deadline_after_too_few_steps_is_an_undecayed_line():
    now = iter(float(t) for t in range(100))  # 1 s per step: 5 steps in a 5 s budget
    clock = TrainingClock(now=lambda: next(now))
    scheduler = TrainerBudget("Cb", time="5s", warmup_iters=0).scheduler(optimizer(), clock=clock)
    clock.start()
    while not scheduler.done():
        scheduler.step()
    line = TrainerBudget.undecayed_line(scheduler, "raise it")
    assert line.startswith("time budget of 5 s ended before the schedule decayed: ")
    assert line.endswith("; raise it") and "\n" not in line

"""Time budgets: durations, the clock every rank agrees on, and the schedule over seconds."""

from __future__ import annotations

import re

import pytest

import budgeted.core
from budgeted.clock import TimeBudget, TrainingClock, parse_duration
from budgeted.core import BudgetSchedule


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5400", 5400.0), (90, 90.0), ("6h", 21600.0), ("90m", 5400.0), ("2h30m", 9000.0),
     ("1h2m3s", 3723.0), ("45s", 45.0), ("1.5h", 5400.0), (" 10M ", 600.0)],
)  # fmt: skip
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0s", "0", "-1h", "abc", "", "h", "1d", "5m2h", True, -3, "nan"])
def test_a_bad_duration_is_refused_in_one_line(text):
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert str(err.value) == (
        f"time budget {text!r} is invalid; allowed: a duration > 0: seconds (5400), or "
        "hours/minutes/seconds such as 6h, 90m, 2h30m, 45s"
    )


class FakeTime:
    """A clock read that the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_paused_time_is_not_training_time_and_a_resumed_clock_goes_on():
    t = FakeTime()
    clock = TrainingClock(now=t)
    clock.start()
    t.now += 3.0
    assert clock.tick(1) == 3.0
    clock.pause()
    t.now += 50.0  # an evaluation
    clock.resume()
    t.now += 2.0
    assert clock.tick(2) == 5.0
    again = TrainingClock.from_state(clock.state(), now=t)  # a resumed run
    again.start()
    t.now += 1.0
    assert again.tick(3) == 6.0


def test_ranks_agree_on_every_iteration_with_rank_0s_reading():
    """Two ranks with clocks running at different speeds; rank 0's reading is shared every 4
    ticks (and at every tick until its rate is known), extrapolated in between: both compute
    the same seconds at every iteration, and those never go back."""
    times = [FakeTime(), FakeTime()]
    broadcasts: list[list[float]] = []  # what rank 0 sent, in order

    def share_rank0(values: list[float]) -> list[float]:
        broadcasts.append(list(values))
        return values

    received = iter(broadcasts)

    def share_rank1(values: list[float]) -> list[float]:
        return next(received)

    clocks = [
        TrainingClock(sync_period=4, share=share_rank0, now=times[0]),
        TrainingClock(sync_period=4, share=share_rank1, now=times[1]),
    ]
    for clock in clocks:
        clock.start()
    agreed: list[list[float]] = [[], []]
    for it in range(1, 22):
        step = 1.0 if it % 3 else 2.5  # uneven iterations: extrapolation is wrong in between
        times[0].now += step
        times[1].now += 1.7  # rank 1's own reading differs, and is never used
        agreed[0].append(clocks[0].tick(it))
        agreed[1].append(clocks[1].tick(it))
    assert agreed[0] == agreed[1]
    assert all(b >= a for a, b in zip(agreed[0], agreed[0][1:]))
    assert agreed[0][-1] >= times[0].now - 100.0 - 1e-9  # at least rank 0's reading at a sync
    assert clocks[0].syncs == clocks[1].syncs == len(broadcasts) == 6  # ticks 1, 2, 6, ..., 18


def test_with_one_process_the_clock_reads_itself_at_every_tick():
    t = FakeTime()
    clock = TrainingClock(now=t)
    clock.start()
    for it in range(1, 6):
        t.now += it
        assert clock.tick(it) == sum(range(1, it + 1))


def test_sync_period_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="sync_period=0 is invalid; allowed: an integer >= 1"):
        TrainingClock(sync_period=0)


def test_time_budget_warmup_in_iterations_then_decay_over_the_remaining_seconds():
    budget = TimeBudget("linear", seconds="100s", warmup_iters=3, warmup_factor=0.01)
    warm = BudgetSchedule("linear", 4, 3, 0.01)
    assert [budget.multiplier(i, 2.0 * i) for i in range(3)] == [warm(i) for i in range(3)]
    assert budget.multiplier(3, 6.0) == 1.0 and budget.warmup_seconds == 6.0
    assert budget.multiplier(10, 53.0) == pytest.approx(0.5)  # (53 - 6) / (100 - 6)
    assert budget.multiplier(20, 100.0) == 0.0 and budget.done(100.0)
    again = TimeBudget(**budget.state())  # the checkpointed state plans the same decay
    assert again.multiplier(10, 53.0) == budget.multiplier(10, 53.0)


def test_a_time_budget_validates_like_any_budget():
    with pytest.raises(ValueError, match="time budget '-1h' is invalid"):
        TimeBudget("linear", seconds="-1h")
    with pytest.raises(ValueError, match="unknown schedule 'lin'"):
        TimeBudget("lin", seconds=10)


def warmed(seconds: float, warmup_seconds: float = 10.0) -> TimeBudget:
    budget = TimeBudget("linear", seconds, warmup_iters=2)
    budget.multiplier(2, warmup_seconds)  # the warmup ends at 10 s
    return budget


def test_resuming_the_same_time_budget_takes_over_what_was_measured():
    saved = warmed(100).state()
    again = TimeBudget("linear", 100, warmup_iters=2)
    assert again.resume(saved, elapsed=40.0) is None
    assert again.warmup_seconds == 10.0
    assert again.multiplier(9, 55.0) == pytest.approx(0.5)


def test_a_time_budget_with_a_default_written_out_resumes_as_the_same_budget():
    saved = TimeBudget("cosine", 100, warmup_iters=0).state()
    assert TimeBudget("cosine", 100, warmup_iters=0, params={"eta": 0.0}).resume(saved, 5.0) is None
    with pytest.raises(budgeted.core.BudgetMismatchError, match=r"params=\{'eta': 0.1\}"):
        TimeBudget("cosine", 100, warmup_iters=0, params={"eta": 0.1}).resume(saved, 5.0)


def test_another_time_budget_is_refused_unless_replan_which_goes_on_without_a_jump():
    old = warmed(100)
    with pytest.raises(budgeted.core.BudgetMismatchError) as err:
        TimeBudget("linear", 200, warmup_iters=2).resume(old.state(), elapsed=40.0)
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget has seconds=100.0, the config's seconds=200.0; "
        "resume with the checkpoint's time budget, or start a new run from its weights "
        "(or re-plan it)"
    )
    new = TimeBudget("linear", 200, warmup_iters=2)
    line = new.resume(old.state(), elapsed=40.0, on_resume="replan")
    assert line.startswith("time budget re-planned at 40 s: 100 s -> 200 s")
    assert new.multiplier(9, 40.0) == pytest.approx(old.multiplier(9, 40.0))  # no jump
    assert new.multiplier(9, 120.0) == pytest.approx(old.multiplier(9, 40.0) / 2)
    assert new.multiplier(9, 200.0) == 0.0
    again = TimeBudget("linear", 200, warmup_iters=2)  # resuming the re-planned run: exact
    assert again.resume(new.state(), elapsed=150.0) is None
    assert again.multiplier(9, 150.0) == new.multiplier(9, 150.0)


@pytest.mark.parametrize(
    ("saved", "elapsed", "message"),
    [
        (None, 10.0, "the checkpoint's budget is not a time budget"),
        ({"schedule": "linear", "total": 900}, 10.0, "is not a time budget"),
        ("spent", 100.0, "time budget: cannot change the budget at 100: the budget of 100 has "
         "run out there"),
        ("warmed", 150.0, "time budget: cannot change the budget to 120.0: 150 of it has already "
         "elapsed"),
    ],
)  # fmt: skip
def test_time_budget_resumes_that_cannot_be_made_are_refused_in_one_line(saved, elapsed, message):
    if saved in ("spent", "warmed"):
        saved = warmed(100).state() if saved == "spent" else warmed(200).state()
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        TimeBudget("linear", 120, warmup_iters=2).resume(saved, elapsed, on_resume="replan")
    assert "\n" not in str(err.value)

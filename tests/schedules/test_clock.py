"""Time budgets: durations, the clock every rank agrees on, and the schedule over seconds."""

from __future__ import annotations

import re

import pytest

import budgeted.schedules
from budgeted.schedules import BudgetSchedule, TimeBudget, TrainingClock, parse_duration

pytestmark = pytest.mark.unit


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
    with pytest.raises(budgeted.schedules.BudgetMismatchError, match=r"params=\{'eta': 0.1\}"):
        TimeBudget("cosine", 100, warmup_iters=0, params={"eta": 0.1}).resume(saved, 5.0)


def test_another_time_budget_is_refused_unless_replan_which_goes_on_without_a_jump():
    old = warmed(100)
    with pytest.raises(budgeted.schedules.BudgetMismatchError) as err:
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


# --- the clock's exact arithmetic, each refusal and line in whole, shortfall (issue 35) ----------


def test_sub_second_durations_are_durations():
    assert (parse_duration("0.5s"), parse_duration(0.25)) == (0.5, 0.25)


@pytest.mark.parametrize("period", [0, 2.5, True, "4"])
def test_a_sync_period_other_than_a_positive_integer_is_refused_in_one_whole_line(period):
    with pytest.raises(ValueError) as err:
        TrainingClock(sync_period=period)
    assert str(err.value) == f"sync_period={period!r} is invalid; allowed: an integer >= 1"


def test_between_syncs_the_seconds_are_extrapolated_at_rank_0s_last_rate():
    """sync_period 4, iteration k taking k seconds: synced at ticks 1 and 2 (the rate is unknown
    until two readings), then every 4 ticks (6, 10, 14); in between, the last agreed seconds
    plus the rate measured over the last period. When no more time passes, the agreed seconds
    stay where the extrapolation took them: they never go back."""
    t = FakeTime()
    clock = TrainingClock(sync_period=4, share=lambda values: values, now=t)
    clock.start()
    agreed = []
    for it in range(1, 11):
        t.now += it
        agreed.append(clock.tick(it))
    assert agreed == [1.0, 3.0, 5.0, 7.0, 9.0, 21.0, 25.5, 30.0, 34.5, 55.0]
    agreed = [clock.tick(it) for it in range(11, 16)]  # no time passes: rate 8.5, then 0
    assert agreed == [63.5, 72.0, 80.5, 80.5, 80.5]
    assert clock.syncs == 5


def test_the_time_spent_sharing_the_clock_is_summed_over_every_sync():
    import time

    def slow_share(values: list[float]) -> list[float]:  # a broadcast taking at least 2 ms
        start = time.perf_counter()
        while time.perf_counter() - start < 0.002:
            pass
        return values

    t = FakeTime()
    shared, alone = TrainingClock(share=slow_share, now=t), TrainingClock(now=t)
    began = time.perf_counter()
    for it in range(1, 6):
        t.now += 1.0
        shared.tick(it)
        alone.tick(it)
    assert 5 * 0.002 <= shared.sync_seconds <= time.perf_counter() - began
    assert shared.syncs == 5 and (alone.syncs, alone.sync_seconds) == (0, 0.0)


def test_a_second_tick_at_the_same_iteration_reads_the_clock_again():
    t = FakeTime()
    clock = TrainingClock(now=t)
    clock.start()
    t.now += 2.0
    assert clock.tick(1) == 2.0
    t.now += 1.0
    assert clock.tick(1) == 3.0  # no rate over zero iterations
    t.now += 1.0
    assert clock.tick(2) == 4.0


def test_a_clock_from_no_state_starts_at_zero():
    assert [TrainingClock.from_state(state).elapsed for state in (None, {})] == [0.0, 0.0]


def test_a_time_budgets_parameters_are_checked_at_once_and_shape_its_decay():
    with pytest.raises(ValueError) as err:
        TimeBudget("poly", 100, params={"power": 0})
    assert str(err.value) == "poly schedule: power=0 is invalid; allowed: a number > 0"
    budget = TimeBudget("cosine", 100, warmup_iters=0, params={"eta": 0.2})
    assert [budget.multiplier(i, s) for i, s in ((0, 0.0), (5, 50.0), (9, 100.0))] == (
        pytest.approx([1.0, 0.6, 0.2])
    )


def test_a_time_budget_plans_its_decay_only_once_the_warmup_has_ended():
    with pytest.raises(ValueError) as err:
        TimeBudget("linear", 100, warmup_iters=5).plan()
    assert str(err.value) == "the warmup has not ended yet: no decay to plan"


@pytest.mark.parametrize("seconds", [100, 0.5])
def test_a_warmup_that_outlasts_the_time_budget_ends_decayed(seconds):
    budget = TimeBudget("linear", seconds, warmup_iters=2)
    assert budget.multiplier(2, 1.5 * seconds) == 0.0 and budget.done(1.5 * seconds)


def test_a_time_budget_replanned_twice_keeps_the_multipliers_the_run_had():
    """Resumed from a state re-planned twice (100 s -> 200 s at 40 s -> 300 s at 150 s), the
    budget gives each second what the run trained with then, under the budget of that time."""
    first = warmed(100)  # the warmup ended at 10 s
    second = TimeBudget("linear", 200, warmup_iters=2)
    second.resume(first.state(), elapsed=40.0, on_resume="replan")
    third = TimeBudget("linear", 300, warmup_iters=2)
    third.resume(second.state(), elapsed=150.0, on_resume="replan")
    resumed = TimeBudget("linear", 300, warmup_iters=2)
    assert resumed.resume(third.state(), elapsed=250.0) is None
    for seconds, trained_under in [(25.0, first), (40.0, first), (100.0, second),
                                   (150.0, second), (250.0, third), (300.0, third)]:  # fmt: skip
        assert resumed.plan()(seconds) == pytest.approx(trained_under.plan()(seconds))


def test_a_time_budget_state_is_plain_values_that_survive_json_unchanged():
    import json

    state = TimeBudget("step", 100, warmup_iters=0, params={"milestones": (0.5, 0.75)}).state()
    assert json.loads(json.dumps(state)) == state
    as_list = TimeBudget("step", 100, warmup_iters=0, params={"milestones": [0.5, 0.75]})
    assert as_list.state() == state


def test_time_budget_resume_refusals_and_lines_in_whole():
    old = warmed(100)
    with pytest.raises(ValueError) as err:
        TimeBudget("linear", 100, warmup_iters=2).resume(old.state(), 40.0, on_resume="branch")
    assert str(err.value) == (
        "on_resume (a time budget)='branch' is invalid; allowed: refuse, replan"
    )
    for on_resume in ("refuse", "replan"):  # more than the length differs: never re-planned
        with pytest.raises(budgeted.schedules.BudgetMismatchError) as err:
            TimeBudget("cosine", 200, warmup_iters=2).resume(old.state(), 40.0, on_resume)
        assert str(err.value) == (
            "cannot resume: the checkpoint's budget has schedule='linear', seconds=100.0, the "
            "config's schedule='cosine', seconds=200.0; resume with the checkpoint's time "
            "budget, or start a new run from its weights"
        )
    line = TimeBudget("linear", 200, warmup_iters=2).resume(old.state(), 40.0, "replan")
    assert line == (
        "time budget re-planned at 40 s: 100 s -> 200 s; the multiplier goes on from 0.6667 to 0 "
        "over the remaining 160 s"
    )


def test_shortfall_says_where_an_undecayed_run_ended_and_nothing_for_a_decayed_one():
    """Warmup of 4 iterations, ending at 10 s; decay over the 90 s after it, decayed from
    progress 0.9 on (at 91 s)."""
    budget = TimeBudget("linear", 100, warmup_iters=4)
    assert budget.shortfall(2, 3.0) == (
        "its last iteration (3) trained inside the warmup of 4 iterations, LR multiplier 0.5005"
    )
    assert budget.shortfall(4, 10.0) == (
        "its last iteration (5) trained at 0 % of the decay, LR multiplier 1"
    )
    assert budget.shortfall(30, 85.0) == (
        "its last iteration (31) trained at 83 % of the decay, LR multiplier 0.1667"
    )
    assert budget.shortfall(31, 91.0) is None and budget.shortfall(40, 99.0) is None


def test_time_budget_reached_ends_the_process_with_status_0_past_except_exception():
    from budgeted.schedules.clock import TimeBudgetReached

    with pytest.raises(SystemExit) as err:
        try:
            raise TimeBudgetReached("time budget of 10 s reached")
        except Exception:  # a training loop's own handler lets it through
            pytest.fail("TimeBudgetReached was caught as an Exception")
    assert err.value.code == 0 and err.value.message == "time budget of 10 s reached"

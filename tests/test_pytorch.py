"""BudgetLR in a plain PyTorch loop."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from budgeted import SCHEDULES, BudgetLR, BudgetMismatchError, lr_multiplier
from budgeted.schedules import BudgetSchedule

pytestmark = pytest.mark.unit


def make_optimizer(lrs=(0.1,)):
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in lrs]
    return torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)], momentum=0.9)


def run(scheduler, optimizer, steps):
    """The LRs used by ``steps`` iterations of a training loop."""
    lrs = []
    for _ in range(steps):
        lrs.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    return lrs


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_iteration_uses_the_core_multiplier(schedule):
    optimizer = make_optimizer((0.1, 0.02))
    scheduler = BudgetLR(optimizer, schedule, 60, warmup_iters=10)
    used = run(scheduler, optimizer, 62)
    for t, lrs in enumerate(used):
        m = lr_multiplier(schedule, t, 60, warmup_iters=10)
        assert lrs == pytest.approx([0.1 * m, 0.02 * m], abs=1e-15)
    assert scheduler.get_last_lr() == [group["lr"] for group in optimizer.param_groups]


def test_wsd_cooldown_shapes_and_sgdr_restarts_follow_their_formulas(schedule_variant):
    schedule, params, formula = schedule_variant
    optimizer = make_optimizer()
    used = run(BudgetLR(optimizer, schedule, 80, warmup_iters=0, **params), optimizer, 80)
    assert [lrs[0] for lrs in used] == pytest.approx([0.1 * formula(t / 80) for t in range(80)])
    text = ",".join(f"{k}={v}" for k, v in params.items())  # the same, as one word
    again = make_optimizer()
    assert run(BudgetLR(again, f"{schedule}:{text}", 80, warmup_iters=0), again, 80) == used


def test_is_a_torch_lr_scheduler_and_refuses_an_epoch_argument():
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, "linear", 10, warmup_iters=0)
    assert isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler)
    with pytest.raises(ValueError, match="takes no epoch"):
        scheduler.step(3)


def test_bad_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="unknown schedule 'linaer'"):
        BudgetLR(make_optimizer(), "linaer", 100)
    with pytest.raises(ValueError, match="warmup=500 is not shorter than the budget total=300"):
        BudgetLR(make_optimizer(), "linear", 300)


@settings(max_examples=25, deadline=None)
@given(
    schedule=st.sampled_from(SCHEDULES),
    total=st.integers(2, 80),
    data=st.data(),
)
def test_state_round_trip_resumes_to_the_same_sequence(schedule, total, data, tmp_path_factory):
    warmup = data.draw(st.integers(0, total - 1))
    stop = data.draw(st.integers(0, total))
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, schedule, total, warmup_iters=warmup)
    uninterrupted = run(scheduler, optimizer, total + 1)

    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, schedule, total, warmup_iters=warmup)
    before = run(scheduler, optimizer, stop)
    path = tmp_path_factory.mktemp("ckpt") / "state.pt"
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, path)

    checkpoint = torch.load(path)  # weights_only: the state holds plain values only
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, schedule, total, warmup_iters=warmup)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    after = run(scheduler, optimizer, total + 1 - stop)
    assert before + after == uninterrupted


def test_resuming_with_another_budget_is_refused():
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, "linear", 100, warmup_iters=10)
    run(scheduler, optimizer, 5)
    state = scheduler.state_dict()
    other = BudgetLR(make_optimizer(), "linear", 200, warmup_iters=10)
    with pytest.raises(BudgetMismatchError) as err:
        other.load_state_dict(state)
    assert "\n" not in str(err.value)
    assert "checkpoint's budget has total_iters=100, the config's total_iters=200" in str(err.value)


def test_a_tensor_lr_is_set_in_place_and_never_aliased():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=torch.tensor(0.01))
    lr = optimizer.param_groups[0]["lr"]
    scheduler = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    run(scheduler, optimizer, 10)
    assert optimizer.param_groups[0]["lr"] is lr  # as torch's own schedulers keep it
    assert float(lr) == pytest.approx(0.01 * 0.9)
    assert scheduler.get_last_lr()[0] is not lr


def test_from_schedule_keeps_a_replanned_budget():
    budget = BudgetSchedule("linear", 1000, 0).replan(2000, at=500)
    scheduler = BudgetLR.from_schedule(make_optimizer(), budget)
    assert scheduler.budget == budget
    assert scheduler.budget(1250) == 0.25


def test_a_param_group_added_after_the_scheduler_is_refused_in_one_line():
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.5})
    with pytest.raises(ValueError) as err:
        scheduler.step()
    assert str(err.value) == (
        "the optimizer has 2 param groups, the scheduler was built for 1; allowed: build the "
        "scheduler after the last add_param_group()"
    )


def test_resuming_with_a_default_written_out_is_the_same_budget():
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, "cosine", 100, warmup_iters=10)
    run(scheduler, optimizer, 30)
    resumed = BudgetLR(make_optimizer(), "cosine", 100, warmup_iters=10, eta=0.0)
    resumed.load_state_dict(scheduler.state_dict())
    assert resumed.get_last_lr() == scheduler.get_last_lr()


class SteppedClock:
    """A clock read that the test advances: ``now()`` is the seconds set last."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def timed_run(scheduler, optimizer, clock_read, steps, seconds_per_step=1.0):
    """The LRs of ``steps`` iterations of ``seconds_per_step`` each on ``clock_read``."""
    lrs = []
    for _ in range(steps):
        scheduler.clock.resume()
        lrs.append(optimizer.param_groups[0]["lr"])
        clock_read.seconds += seconds_per_step
        optimizer.step()
        scheduler.clock.pause()
        scheduler.step()
    return lrs


def test_a_time_budget_resumes_its_clock_and_goes_on_with_the_same_lrs(tmp_path):
    """Issue 35: a resumed time budget must go on from the checkpoint's training seconds (a
    fresh clock reading 0 would send the LR back up to the start of the decay)."""
    from budgeted import BudgetTimeLR
    from budgeted.safety import atomic_save, load_checkpoint
    from budgeted.schedules.clock import TimeBudget, TrainingClock

    def fresh():
        read = SteppedClock()
        optimizer = make_optimizer()
        budget = TimeBudget("linear", seconds=20, warmup_iters=2)
        return read, optimizer, BudgetTimeLR(optimizer, budget, TrainingClock(now=read))

    read, optimizer, scheduler = fresh()
    uninterrupted = timed_run(scheduler, optimizer, read, 20)

    read, optimizer, scheduler = fresh()
    before = timed_run(scheduler, optimizer, read, 12)
    atomic_save({"scheduler": scheduler.state_dict()}, tmp_path / "state.pth")
    saved_seconds = scheduler.clock.elapsed
    assert saved_seconds == 12.0

    read, optimizer, resumed = fresh()
    read.seconds = 1000.0  # another process: its clock reads something else entirely
    resumed.load_state_dict(load_checkpoint(tmp_path / "state.pth")["scheduler"])
    assert resumed.clock.elapsed == saved_seconds
    assert resumed.get_last_lr() == [optimizer.param_groups[0]["lr"]] == [uninterrupted[12]]
    after = timed_run(resumed, optimizer, read, 8)
    assert before + after == uninterrupted
    assert all(b <= a for a, b in zip(after, after[1:]))  # the LR never rises after the resume
    assert resumed.done() and after[-1] == pytest.approx(0.1 / 18)


# --- params, last_epoch, torch's bookkeeping, each refusal and line in whole, resumes that
# re-plan or branch (issue 35: mutation check) -------------------------------------------------


def timed_scheduler(seconds=10, warmup_iters=0, on_resume="refuse"):
    """A linear time budget of ``seconds`` on a clock the test steps: (clock read, optimizer,
    scheduler)."""
    from budgeted import BudgetTimeLR
    from budgeted.schedules.clock import TimeBudget, TrainingClock

    read, optimizer = SteppedClock(), make_optimizer()
    budget = TimeBudget("linear", seconds=seconds, warmup_iters=warmup_iters)
    clock = TrainingClock(now=read)
    return read, optimizer, BudgetTimeLR(optimizer, budget, clock, on_resume=on_resume)


def test_keyword_params_reach_the_schedule():
    optimizer = make_optimizer()
    scheduler = BudgetLR(optimizer, "cosine", 10, warmup_iters=0, eta=0.5)
    assert run(scheduler, optimizer, 11)[-1] == [pytest.approx(0.1 * 0.5)]


def test_an_unknown_resume_policy_is_refused_in_one_whole_line():
    with pytest.raises(ValueError) as err:
        BudgetLR(make_optimizer(), "linear", 100, warmup_iters=0, on_resume="extend")
    assert str(err.value) == "on_resume='extend' is invalid; allowed: refuse, replan, branch"


def test_a_scheduler_built_with_last_epoch_goes_on_from_there_as_torchs_do():
    optimizer = make_optimizer()
    stepped = BudgetLR(optimizer, "linear", 100, warmup_iters=10)
    run(stepped, optimizer, 30)
    again = BudgetLR(optimizer, "linear", 100, warmup_iters=10, last_epoch=29)
    assert again.last_epoch == 30 and again.get_last_lr() == stepped.get_last_lr()


def test_the_lean_step_keeps_torchs_bookkeeping():
    """``BudgetLR.step`` skips ``LRScheduler.step``'s per-step work, not what torch's schedulers
    keep: the state of a ``LambdaLR`` over the same multipliers, stepped alike."""
    optimizer, twin_optimizer = make_optimizer(), make_optimizer()
    scheduler = BudgetLR(optimizer, "linear", 20, warmup_iters=5)
    twin = torch.optim.lr_scheduler.LambdaLR(twin_optimizer, scheduler.budget)
    assert run(scheduler, optimizer, 12) == run(twin, twin_optimizer, 12)
    state, twin_state = scheduler.state_dict(), twin.state_dict()
    assert [state[k] for k in ("last_epoch", "_step_count", "base_lrs", "_last_lr")] == [
        twin_state[k] for k in ("last_epoch", "_step_count", "base_lrs", "_last_lr")
    ]


def test_a_resume_into_a_longer_budget_replans_logs_one_line_and_goes_on_without_a_jump(caplog):
    import logging

    optimizer = make_optimizer()
    first = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    run(first, optimizer, 50)
    with pytest.raises(BudgetMismatchError) as err:  # by default: refused, saying what to do
        BudgetLR(make_optimizer(), "linear", 200, warmup_iters=0).load_state_dict(
            first.state_dict()
        )
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget has total_iters=100, the config's "
        "total_iters=200; build the scheduler with the checkpoint's budget to resume, or start "
        "a new run to train with another budget"
    )
    optimizer = make_optimizer()
    longer = BudgetLR(optimizer, "linear", 200, warmup_iters=0, on_resume="replan")
    with caplog.at_level(logging.WARNING, logger="budgeted.pytorch"):
        longer.load_state_dict(first.state_dict())
    assert [(r.name, r.getMessage()) for r in caplog.records] == [(
        "budgeted.pytorch", "budget re-planned at 50: total_iters 100 -> 200; the multiplier "
        "goes on from 0.5 to 0 over the remaining 150"
    )]  # fmt: skip
    assert longer.last_epoch == 50
    assert [optimizer.param_groups[0]["lr"]] == longer.get_last_lr() == [pytest.approx(0.05)]
    lrs = [lr for (lr,) in run(longer, optimizer, 151)]
    assert lrs == pytest.approx([0.05 * (200 - t) / 150 for t in range(50, 201)])
    again = BudgetLR(make_optimizer(), "linear", 200, warmup_iters=0)  # the re-plan is saved
    again.load_state_dict(longer.state_dict())
    assert again.budget == longer.budget


def test_a_branch_sets_the_next_lr_from_the_branched_budget():
    """A wsd run of 100 iterations is stable to iteration 80, one of 50 to iteration 40 only.
    Branched after 41 iterations (each trained at multiplier 1 under both), iteration 41 and
    every one after it train at the shorter budget's LRs (0.09 first), as a run of 50 would."""
    optimizer = make_optimizer()
    stable = BudgetLR(optimizer, "wsd", 100, warmup_iters=0)
    run(stable, optimizer, 41)
    branched = BudgetLR(optimizer, "wsd", 50, warmup_iters=0, on_resume="branch")
    branched.load_state_dict(stable.state_dict())
    short_optimizer = make_optimizer()
    short = BudgetLR(short_optimizer, "wsd", 50, warmup_iters=0)
    expected = run(short, short_optimizer, 51)[41:]
    assert expected[0] == [pytest.approx(0.09)]
    assert run(branched, optimizer, 10) == expected


def test_a_time_budget_starts_at_its_warmup_factor_and_reads_the_clock_at_every_step():
    _, _, warming = timed_scheduler(seconds=10, warmup_iters=2)
    assert warming.get_last_lr() == [pytest.approx(0.1 * 0.001)]
    read, optimizer, scheduler = timed_scheduler(seconds=10, warmup_iters=0)
    assert timed_run(scheduler, optimizer, read, 3) == pytest.approx([0.1, 0.09, 0.08])
    assert scheduler.get_last_lr() == [pytest.approx(0.07)]
    assert scheduler.last_trained_factor == pytest.approx(0.8)  # iteration 2's multiplier
    state = scheduler.state_dict()
    assert (state["last_epoch"], state["_step_count"], state["clock"]) == (3, 4, {"elapsed": 3.0})


def test_a_time_budget_refuses_an_epoch_and_a_param_group_added_later_in_one_line():
    _, optimizer, scheduler = timed_scheduler()
    with pytest.raises(ValueError) as err:
        scheduler.step(3)
    assert str(err.value) == "BudgetTimeLR.step() takes no epoch (got 3)"
    optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.5})
    with pytest.raises(ValueError) as err:
        scheduler.step()
    assert str(err.value) == (
        "the optimizer has 2 param groups, the scheduler was built for 1; allowed: build the "
        "scheduler after the last add_param_group()"
    )


def test_a_time_budget_refuses_an_iteration_budgets_checkpoint_in_one_line():
    optimizer = make_optimizer()
    iterations = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    run(iterations, optimizer, 5)
    _, _, scheduler = timed_scheduler(seconds=10)
    with pytest.raises(BudgetMismatchError) as err:
        scheduler.load_state_dict(iterations.state_dict())
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget is not a time budget (its scheduler counts "
        "iterations), the config's is 10 s; resume with the checkpoint's time budget, or start "
        "a new run from its weights"
    )


def test_a_time_budget_resumed_into_a_longer_one_replans_without_a_jump(caplog):
    import logging

    read, optimizer, scheduler = timed_scheduler(seconds=10)
    timed_run(scheduler, optimizer, read, 5)  # 5 s of 10: multiplier 0.5 next
    read, optimizer, longer = timed_scheduler(seconds=20, on_resume="replan")
    with caplog.at_level(logging.WARNING, logger="budgeted.pytorch"):
        longer.load_state_dict(scheduler.state_dict())
    assert [(r.name, r.getMessage()) for r in caplog.records] == [(
        "budgeted.pytorch", "time budget re-planned at 5 s: 10 s -> 20 s; the multiplier goes "
        "on from 0.5 to 0 over the remaining 15 s"
    )]  # fmt: skip
    lrs = timed_run(longer, optimizer, read, 15)
    assert lrs == pytest.approx([0.05 * (20 - s) / 15 for s in range(5, 20)])
    assert longer.done() and longer.get_last_lr() == [0.0]


# --- issue 40, items 13 and 17: a loaded state is checked key by key, a budget of steps is a
# whole number ------------------------------------------------------------------------------

STATE_FIX = "resume from another checkpoint, or start a new run from its weights"


def stepped_state(kind):
    """A scheduler of ``kind`` ("iterations" or "time") stepped 5 times, and its state."""
    if kind == "iterations":
        optimizer = make_optimizer()
        scheduler = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
        run(scheduler, optimizer, 5)
    else:
        read, optimizer, scheduler = timed_scheduler(seconds=10)
        timed_run(scheduler, optimizer, read, 5)
    return scheduler.state_dict()


def fresh_scheduler(kind):
    """(optimizer, scheduler) of ``kind``, as a resuming run builds it."""
    if kind == "iterations":
        optimizer = make_optimizer()
        return optimizer, BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    _, optimizer, scheduler = timed_scheduler(seconds=10)
    return optimizer, scheduler


def state_ids(cases):
    """Test ids: ``key=value`` (``key-missing``)."""
    return [
        f"{key}={value!r}" if value is not None else f"{key}-missing" for key, value, _ in cases
    ]


NAN = float("nan")
JUNK_STATES = [
    ("last_epoch", "abc", "has last_epoch='abc'; allowed: an integer >= 0 (the steps taken)"),
    ("last_epoch", NAN, "has last_epoch=nan; allowed: an integer >= 0 (the steps taken)"),
    ("last_epoch", -50, "has last_epoch=-50; allowed: an integer >= 0 (the steps taken)"),
    ("last_epoch", 5.5, "has last_epoch=5.5; allowed: an integer >= 0 (the steps taken)"),
    ("last_epoch", None, "has no last_epoch; allowed: an integer >= 0 (the steps taken)"),
    ("_step_count", "x", "has _step_count='x'; allowed: an integer >= 0 (the steps taken)"),
    ("base_lrs", [NAN], "has base_lrs=[nan]; allowed: a list of 1 finite number >= 0 (a base "
     "LR per param group)"),
    ("base_lrs", [-1.0], "has base_lrs=[-1.0]; allowed: a list of 1 finite number >= 0 (a base "
     "LR per param group)"),
    ("base_lrs", [0.1, 0.1], "has base_lrs=[0.1, 0.1]; allowed: a list of 1 finite number >= 0 "
     "(a base LR per param group)"),
    ("step", 5, "has a key 'step', which would replace {cls}.step; allowed: the keys "
     "{cls}.state_dict() writes"),
    ("get_lr", "x", "has a key 'get_lr', which would replace {cls}.get_lr; allowed: the keys "
     "{cls}.state_dict() writes"),
]  # fmt: skip
TIME_JUNK_STATES = [
    ("clock", {"elapsed": -5}, "has clock.elapsed=-5; allowed: a finite number >= 0 (the "
     "training seconds spent)"),
    ("clock", {"elapsed": NAN}, "has clock.elapsed=nan; allowed: a finite number >= 0 (the "
     "training seconds spent)"),
    ("clock", {"elapsed": "3"}, "has clock.elapsed='3'; allowed: a finite number >= 0 (the "
     "training seconds spent)"),
    ("clock", None, "has no clock.elapsed; allowed: a finite number >= 0 (the training seconds "
     "spent)"),
    ("last_trained_factor", -1.0, "has last_trained_factor=-1.0; allowed: a finite number >= 0 "
     "(a multiplier)"),
]  # fmt: skip


@pytest.mark.parametrize("kind", ["iterations", "time"])
@pytest.mark.parametrize(("key", "value", "line"), JUNK_STATES, ids=state_ids(JUNK_STATES))
def test_a_junk_value_in_a_loaded_state_is_refused_in_one_line_naming_the_key(
    kind, key, value, line
):
    """Issue 40, item 13: ``load_state_dict`` took any value over (a NaN step count trained at
    the LR of another step, a negative base LR, a ``step`` key that replaced the method). Each is
    refused in one line naming the key, and the scheduler and its optimizer are left as built."""
    from budgeted.errors import BudgetConfigError, BudgetMismatchError

    state = stepped_state(kind)
    if value is None:
        del state[key]
    else:
        state[key] = value
    optimizer, scheduler = fresh_scheduler(kind)
    before, lrs = scheduler.state_dict(), [g["lr"] for g in optimizer.param_groups]
    with pytest.raises(ValueError) as err:
        scheduler.load_state_dict(state)
    assert isinstance(err.value, BudgetMismatchError) and isinstance(err.value, BudgetConfigError)
    cls = type(scheduler).__name__
    assert str(err.value) == (
        f"cannot resume: the checkpoint's {cls} state {line.format(cls=cls)}; {STATE_FIX}"
    )
    assert scheduler.state_dict() == before and [g["lr"] for g in optimizer.param_groups] == lrs


@pytest.mark.parametrize(
    ("key", "value", "line"), TIME_JUNK_STATES, ids=state_ids(TIME_JUNK_STATES)
)
def test_a_time_budgets_clock_that_runs_back_or_is_missing_is_refused_in_one_line(key, value, line):
    """Issue 40, item 13: a clock's elapsed -5 made the LR climb back (time granted again), a
    state without its clock restarted the whole budget. Both are refused in one line."""
    state = stepped_state("time")
    if value is None:
        del state[key]
    else:
        state[key] = value
    optimizer, scheduler = fresh_scheduler("time")
    before, lrs = scheduler.state_dict(), [g["lr"] for g in optimizer.param_groups]
    with pytest.raises(ValueError) as err:
        scheduler.load_state_dict(state)
    assert (
        str(err.value) == f"cannot resume: the checkpoint's BudgetTimeLR state {line}; {STATE_FIX}"
    )
    assert scheduler.state_dict() == before and [g["lr"] for g in optimizer.param_groups] == lrs


def test_a_tensor_lrs_state_still_resumes():
    """The state checks take a tensor LR's base LRs (0-d tensors) as the numbers they are."""
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], lr=torch.tensor(0.01))
    scheduler = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    run(scheduler, optimizer, 10)
    again = BudgetLR(optimizer, "linear", 100, warmup_iters=0)
    again.load_state_dict(scheduler.state_dict())
    assert again.last_epoch == 10 and again.get_last_lr() == scheduler.get_last_lr()


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"total_iters": 1.5, "warmup_iters": 0}, "BudgetLR counts steps: total_iters=1.5 is "
         "invalid; allowed: a whole number > 0"),
        ({"total_iters": 1000, "warmup_iters": 0.5}, "BudgetLR counts steps: warmup_iters=0.5 is "
         "invalid; allowed: a whole number >= 0"),
        ({"total_iters": 100, "warmup_iters": 2.5}, "BudgetLR counts steps: warmup_iters=2.5 is "
         "invalid; allowed: a whole number >= 0"),
    ],
)  # fmt: skip
def test_a_budget_of_a_fraction_of_a_step_is_refused_in_one_line(kwargs, line):
    """Issue 40, item 17: ``BudgetLR(total_iters=1.5)`` was accepted (its LR reached 0 between
    two steps). A budget that counts steps is a whole number of them."""
    from budgeted.errors import BudgetConfigError

    with pytest.raises(BudgetConfigError) as err:
        BudgetLR(make_optimizer(), "linear", **kwargs)
    assert str(err.value) == line
    whole = BudgetLR(make_optimizer(), "linear", 100.0, warmup_iters=10.0)  # whole: taken
    assert (whole.budget.total, whole.budget.warmup) == (100, 10)
    assert type(whole.budget.total) is int


def test_a_time_budgets_warmup_is_a_whole_number_of_iterations():
    """Issue 40, item 17: the warmup of a time budget counts iterations."""
    from budgeted.errors import BudgetConfigError
    from budgeted.schedules.clock import TimeBudget

    with pytest.raises(BudgetConfigError) as err:
        TimeBudget("linear", seconds=10, warmup_iters=2.5)
    assert str(err.value) == "warmup_iters=2.5 is invalid; allowed: a whole number >= 0"

"""The schedule math, checked at the paper's reference points and by properties."""

from __future__ import annotations

import math
import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

import budgeted
from budgeted.schedules import (
    BudgetMismatchError,
    BudgetSchedule,
    lr_multiplier,
    on_schedule_registered,
    register_schedule,
    schedule_info,
    schedule_names,
    schedule_params,
)

pytestmark = pytest.mark.unit

SCHEDULE_PARAMS = {
    "linear": {},
    "cosine": {"eta": 0.1},
    "poly": {"power": 0.9},
    "htd": {"lower": -6.0, "upper": 3.0},
    "step": {"milestones": [2 / 3, 8 / 9], "gamma": 0.1},
    "exp": {"end_factor": 0.01},
    "constant": {},
    "wsd": {"cooldown": 0.3},
}


def test_public_schedule_names():
    assert budgeted.SCHEDULES == (
        "linear",
        "cosine",
        "poly",
        "htd",
        "step",
        "exp",
        "constant",
        "wsd",
        "rex",
        "sgdr",
    )


@pytest.mark.parametrize(
    ("schedule", "params", "p", "expected"),
    [
        ("linear", {}, 0.0, 1.0),
        ("linear", {}, 0.25, 0.75),
        ("linear", {}, 1.0, 0.0),
        ("cosine", {}, 0.5, 0.5),
        ("cosine", {}, 1.0, 0.0),
        ("cosine", {"eta": 0.2}, 1.0, 0.2),
        ("cosine", {"eta": 0.2}, 0.5, 0.6),
        ("poly", {}, 0.5, 0.5**0.9),
        ("poly", {"power": 2.0}, 0.5, 0.25),
        ("poly", {}, 1.0, 0.0),
        ("htd", {}, 0.0, (1 - math.tanh(-6)) / 2),
        ("htd", {}, 2 / 3, 0.5),  # tanh(-6 + 9 * 2/3) = tanh(0)
        ("htd", {}, 1.0, (1 - math.tanh(3)) / 2),
        ("step", {}, 0.5, 1.0),
        ("step", {}, 2 / 3, 0.1),
        ("step", {}, 0.8, 0.1),
        ("step", {}, 8 / 9, 0.1**2),
        ("step", {"milestones": [0.5], "gamma": 0.5}, 0.75, 0.5),
        ("exp", {}, 0.5, 0.1),
        ("exp", {"end_factor": 0.25}, 1.0, 0.25),
        ("constant", {}, 0.9, 1.0),
        ("wsd", {}, 0.8, 1.0),
        ("wsd", {}, 0.9, 0.5),
        ("wsd", {}, 1.0, 0.0),
        ("wsd", {"cooldown": 0.5}, 0.4, 1.0),
        ("wsd", {"cooldown": 0.5}, 0.75, 0.5),
        ("wsd", {"cooldown": 1.0}, 0.25, 0.75),  # c = 1: linear
        ("wsd", {"decay": "sqrt"}, 0.85, 1 - math.sqrt(0.25)),  # q = (0.85 - 0.8) / 0.2
        ("wsd", {"decay": "sqrt"}, 0.95, 1 - math.sqrt(0.75)),
        ("wsd", {"decay": "sqrt"}, 1.0, 0.0),
        ("wsd", {"decay": "cosine"}, 0.9, 0.5),
        ("wsd", {"decay": "cosine", "cooldown": 0.5}, 0.625, (1 + math.cos(math.pi / 4)) / 2),
        ("wsd", {"decay": "linear"}, 0.95, 0.25),
        ("sgdr", {"restarts": 0}, 0.5, 0.5),  # one period: cosine
        ("sgdr", {}, 0.25, 0.5),  # two periods of 1/2: halfway down the first
        ("sgdr", {}, 0.5, 1.0),  # the restart
        ("sgdr", {}, 0.75, 0.5),
        ("sgdr", {"restarts": 2}, 1 / 6, 0.5),
        ("sgdr", {"restarts": 2}, 0.5, 0.5),  # halfway down the second of three
        ("sgdr", {"restarts": 2}, 1.0, 0.0),
    ],
)
def test_decay_at_reference_points(schedule, params, p, expected):
    # No warmup, T = 900: iteration t is progress t / 900.
    t = p * 900
    assert lr_multiplier(schedule, t, 900, warmup_iters=0, **params) == pytest.approx(expected)


def test_each_wsd_cooldown_shape_and_sgdr_follow_their_formulas(schedule_variant):
    schedule, params, formula = schedule_variant
    for t in range(0, 901, 9):  # no warmup, T = 900: iteration t is progress t / 900
        expected = formula(t / 900)
        assert lr_multiplier(schedule, t, 900, warmup_iters=0, **params) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "wsd:decay=square",
            "wsd schedule: decay='square' is invalid; allowed: linear, sqrt, cosine",
        ),
        (
            "sgdr:restarts=1.5",
            "sgdr schedule: restarts=1.5 is invalid; allowed: a whole number >= 0",
        ),
        ("sgdr:restarts=-1", "sgdr schedule: restarts=-1 is invalid; allowed: a whole number >= 0"),
        ("wsd:shape=sqrt", "schedule 'wsd' has no parameter 'shape'; it takes: cooldown, decay"),
        ("wsd:decay", "schedule 'wsd:decay' is invalid; allowed: NAME[:KEY=VALUE[,KEY=VALUE...]]"),
        ("nope:eta=1", "unknown schedule 'nope'"),
    ],
)
def test_a_bad_variant_is_one_line(text, message):
    with pytest.raises(ValueError) as err:
        BudgetSchedule(text, 100, 0)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_variant_is_the_schedule_with_its_parameters():
    """``"wsd:decay=sqrt"`` is ``wsd`` with ``decay="sqrt"``: the same budget, state and values."""
    text = BudgetSchedule("wsd:decay=sqrt,cooldown=0.1", 1000, 50)
    named = BudgetSchedule("wsd", 1000, 50, params={"decay": "sqrt", "cooldown": 0.1})
    assert text == named and text.state() == named.state()
    assert text.state()["schedule"] == "wsd" and not text.differences(named)
    assert BudgetSchedule("sgdr:restarts=3", 100, 0, params={"restarts": 1}).params == {
        "restarts": 1
    }  # params win over the text
    assert lr_multiplier("sgdr:restarts=1", 75, 100, warmup_iters=0) == pytest.approx(0.5)


def test_warmup_is_linear_then_decay_runs_over_the_remaining_budget():
    total, warmup = 1500, 500
    assert lr_multiplier("linear", 0, total) == pytest.approx(0.001)
    assert lr_multiplier("linear", 250, total) == pytest.approx(0.001 * 0.5 + 0.5)
    assert lr_multiplier("linear", warmup, total) == 1.0
    # Decay over the 1000 remaining iterations: halfway at t = 1000, 1/(T-W) at the last one.
    assert lr_multiplier("linear", 1000, total) == pytest.approx(0.5)
    assert lr_multiplier("linear", total - 1, total) == pytest.approx(1 / (total - warmup))
    assert lr_multiplier("linear", total, total) == 0.0
    assert lr_multiplier("linear", total + 10, total) == 0.0  # clipped past the budget


def test_constant_warmup_and_milestones_of_the_decay_phase():
    assert lr_multiplier("linear", 10, 100, warmup_iters=20, warmup_method="constant") == 0.001
    # Step milestones are fractions of the decay phase [W, T), not of the whole budget.
    schedule = BudgetSchedule("step", total=1400, warmup=500)
    assert schedule(500 + 599) == 1.0
    assert schedule(500 + 600) == pytest.approx(0.1)
    assert schedule(500 + 800) == pytest.approx(0.01)


def test_paper_budgets_of_the_1x_schedule():
    """At 1 % of Mask R-CNN's 90k schedule the 500-iteration warmup leaves 400 decay iterations."""
    total = budgeted.budget_iters(fraction=0.01, full_iters=90000)
    assert total == 900
    assert lr_multiplier("linear", 700, total) == pytest.approx(0.5)
    assert lr_multiplier("step", 500 + 267, total) == pytest.approx(0.1)  # 267/400 >= 2/3


def test_elapsed_can_be_any_unit_such_as_seconds():
    """The formulas see only progress: a budget of 3600 s with a 60 s warmup works the same."""
    by_time = BudgetSchedule("cosine", total=3600.0, warmup=60.0)
    assert by_time(30.0) == pytest.approx(0.001 * 0.5 + 0.5)
    assert by_time(60.0 + 3540.0 / 2) == pytest.approx(0.5)
    assert by_time.progress(60.0 + 3540.0 / 4) == pytest.approx(0.25)


def test_a_new_schedule_is_one_function_and_one_registration():
    # registrations are for the life of the process (the adapters have seen it): no clean-up,
    # so a name of its own each time the test runs in a process
    name = f"test_square_{uuid.uuid4().hex[:8]}"

    @register_schedule(name)
    def square(p: float, power: float = 2.0) -> float:
        return (1 - p) ** power

    assert schedule_params(name) == {"power": 2.0}
    assert lr_multiplier(name, 50, 100, warmup_iters=0) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="power=-1"):
        lr_multiplier(name, 5, 100, warmup_iters=0, power=-1)
    with pytest.raises(ValueError, match="already registered"):
        register_schedule(name)(square)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule": "lineer"}, r"unknown schedule 'lineer'; valid schedules: linear, cosine"),
        ({"total_iters": 0}, r"total=0 is invalid; allowed: a number > 0"),
        ({"total_iters": -5}, r"total=-5 is invalid"),
        ({"warmup_iters": -1}, r"warmup=-1 is invalid; allowed: a number >= 0"),
        (
            {"warmup_iters": 1000},
            r"warmup=1000 is not shorter than the budget total=1000: the decay",
        ),
        ({"warmup_iters": 2000}, r"warmup=2000 is not shorter than the budget total=1000"),
        ({"warmup_factor": 0}, r"warmup_factor=0 is invalid; allowed: a number in \(0, 1\]"),
        ({"warmup_factor": 1.5}, r"warmup_factor=1.5 is invalid"),
        ({"warmup_method": "cubic"}, r"warmup_method='cubic' is invalid; allowed: linear, const"),
        (
            {"schedule": "poly", "power": 0},
            r"poly schedule: power=0 is invalid; allowed: a number > 0",
        ),
        ({"schedule": "step", "milestones": [0.5, 1.0]}, r"milestones=\[0.5, 1.0\] is invalid"),
        ({"schedule": "step", "milestones": [0.8, 0.5]}, r"an increasing list of fractions in"),
        ({"schedule": "step", "milestones": [0.0]}, r"milestones=\[0.0\] is invalid"),
        ({"schedule": "step", "gamma": 0}, r"gamma=0 is invalid; allowed: a number in \(0, 1\]"),
        ({"schedule": "step", "gamma": 1.1}, r"gamma=1.1 is invalid"),
        ({"schedule": "exp", "end_factor": 0}, r"end_factor=0 is invalid"),
        ({"schedule": "exp", "end_factor": 2}, r"end_factor=2 is invalid"),
        ({"schedule": "cosine", "eta": 1.0}, r"eta=1.0 is invalid; allowed: a number in \[0, 1\)"),
        ({"schedule": "htd", "lower": 3, "upper": -6}, r"lower=3 must be below upper=-6"),
        (
            {"schedule": "linear", "power": 2},
            r"schedule 'linear' has no parameter 'power'; it takes",
        ),
        (
            {"schedule": "poly", "gamma": 0.1},
            r"schedule 'poly' has no parameter 'gamma'; it takes: power",
        ),
    ],
)
def test_bad_input_is_one_clear_value_error(kwargs, message):
    args = {"schedule": "linear", "iteration": 0, "total_iters": 1000, **kwargs}
    with pytest.raises(ValueError, match=message) as error:
        lr_multiplier(**args)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("elapsed", [-1, float("nan"), float("inf"), "5", None])
def test_elapsed_that_is_not_a_finite_number_at_least_zero_is_refused(elapsed):
    with pytest.raises(ValueError) as error:
        lr_multiplier("linear", elapsed, 1000)
    assert str(error.value) == (f"elapsed={elapsed!r} is invalid; allowed: a finite number >= 0")


budgets = st.tuples(st.integers(1, 5000), st.integers(0, 2000)).filter(lambda tw: tw[1] < tw[0])


@given(
    schedule=st.sampled_from(sorted(SCHEDULE_PARAMS)),
    budget=budgets,
    warmup_factor=st.floats(1e-4, 1.0),
    position=st.floats(0.0, 1.2),
)
def test_multiplier_stays_in_zero_one(schedule, budget, warmup_factor, position):
    total, warmup = budget
    value = lr_multiplier(
        schedule,
        position * total,
        total,
        warmup_iters=warmup,
        warmup_factor=warmup_factor,
        **SCHEDULE_PARAMS[schedule],
    )
    assert 0.0 <= value <= 1.0


@given(
    schedule=st.sampled_from(sorted(SCHEDULE_PARAMS)), budget=budgets.filter(lambda tw: tw[1] > 0)
)
def test_continuous_at_the_end_of_warmup(schedule, budget):
    total, warmup = budget
    schedule_at = BudgetSchedule(schedule, total, warmup, params=SCHEDULE_PARAMS[schedule])
    just_before = schedule_at(warmup - 1e-9)
    assert schedule_at(warmup) == pytest.approx(just_before, abs=1e-4)  # htd(0) = 0.99999...


@given(schedule=st.sampled_from(sorted(SCHEDULE_PARAMS)), budget=budgets)
def test_non_increasing_after_warmup(schedule, budget):
    total, warmup = budget
    schedule_at = BudgetSchedule(schedule, total, warmup, params=SCHEDULE_PARAMS[schedule])
    values = [schedule_at(t) for t in range(warmup, total + 2)]
    assert all(later <= earlier + 1e-12 for earlier, later in zip(values, values[1:]))


@given(
    schedule=st.sampled_from(sorted(SCHEDULE_PARAMS)), budget=budgets.filter(lambda tw: tw[1] > 1)
)
def test_warmup_rises_from_warmup_factor_to_one(schedule, budget):
    total, warmup = budget
    schedule_at = BudgetSchedule(schedule, total, warmup, params=SCHEDULE_PARAMS[schedule])
    values = [schedule_at(t) for t in range(warmup)]
    assert values[0] == pytest.approx(0.001)
    assert all(later > earlier for earlier, later in zip(values, values[1:]))
    assert values[-1] < 1.0


def test_a_registered_schedule_needs_a_rule_for_each_parameter():
    def k_decay(p: float, k: float = 2.0) -> float:
        return (1.0 - p) ** k

    with pytest.raises(ValueError, match=r"parameter 'k' has no rule; pass rules="):
        register_schedule("k_decay_test")(k_decay)
    assert "k_decay_test" not in schedule_names()


def test_the_test_schedule_validates_its_parameter_with_its_own_rule(sqrt_schedule):
    assert BudgetSchedule(sqrt_schedule, 110, 10, params={"floor": 0.5})(60) == pytest.approx(
        0.5 + 0.5 * 0.5**0.5
    )
    with pytest.raises(ValueError, match=r"floor=1\.5 is invalid; allowed: a number in \[0, 1\)"):
        BudgetSchedule(sqrt_schedule, 110, 10, params={"floor": 1.5})
    assert schedule_info(sqrt_schedule).label == "Sqrt"
    assert schedule_info("htd").label == "HTD"


def test_listeners_see_schedules_registered_before_and_after(sqrt_schedule):
    seen: list[str] = []
    on_schedule_registered(lambda info: seen.append(info.name))
    assert seen == list(schedule_names())
    name = f"listener_test_{uuid.uuid4().hex[:8]}"  # registrations last as long as the process
    register_schedule(name)(lambda p: 1.0 - p)
    assert seen[-1] == name


def test_budget_state_round_trips_and_names_its_differences():
    budget = BudgetSchedule("step", 900, 50, params={"milestones": (0.5, 0.75)})
    state = budget.state()
    assert BudgetSchedule.from_state(state) == budget
    assert budget.differences(state) == {}
    other = BudgetSchedule("step", 90, 50, params={"milestones": (0.5, 0.75)})
    assert budget.differences(other) == {"total": (90, 900)}
    with pytest.raises(BudgetMismatchError) as err:
        budget.check_resume(other.state(), names={"total": "SOLVER.MAX_ITER"}, fix="do X")
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget has SOLVER.MAX_ITER=90, the config's "
        "SOLVER.MAX_ITER=900; do X"
    )
    with pytest.raises(BudgetMismatchError, match="the checkpoint's budget is missing"):
        budget.check_resume(None)
    with pytest.raises(ValueError, match="budget state lacks total"):
        BudgetSchedule.from_state({"schedule": "linear"})


@pytest.mark.parametrize(
    ("schedule", "written_out"),
    [
        ("cosine", {"eta": 0.0}),
        ("step", {"gamma": 0.1, "milestones": [2 / 3, 8 / 9]}),
        ("poly", {"power": 0.9}),
    ],
)
def test_a_default_written_out_is_the_same_budget(schedule, written_out):
    implicit = BudgetSchedule(schedule, 900, 50)
    explicit = BudgetSchedule(schedule, 900, 50, params=written_out)
    assert explicit.differences(implicit.state()) == {}
    assert implicit.differences(explicit.state()) == {}
    resumed, line = explicit.resume(implicit.state(), at=100)
    assert line is None and resumed(600) == explicit(600)
    changed = BudgetSchedule(schedule, 900, 50, params={next(iter(written_out)): 0.5})
    assert set(changed.differences(implicit.state())) == {"params"}


# --- changing the budget during training (replan) -------------------------------------------


@pytest.mark.parametrize("warmup", [0, 100])
def test_linear_replan_is_a_straight_line_from_the_current_multiplier_to_zero(warmup):
    old = BudgetSchedule("linear", 1000, warmup)
    at = 700
    new = old.replan(3000, at)
    m0 = old(at)
    assert new(at) == pytest.approx(m0)  # no jump
    for t in (1000, 1850, 2900):
        assert new(t) == pytest.approx(m0 * (3000 - t) / (3000 - at))
    assert new(3000) == 0.0
    shorter = old.replan(800, at)  # cutting the budget: the same rule, a steeper line
    assert shorter(750) == pytest.approx(m0 / 2)
    assert shorter(800) == 0.0


def test_step_replan_keeps_the_drops_taken_and_places_the_rest_in_what_remains():
    old = BudgetSchedule("step", 900, 0)  # drops at 600 and 800
    assert old(700) == pytest.approx(0.1)
    new = old.replan(1800, 700)  # p0 = 7/9; the drop at p = 8/9 is halfway through the rest
    assert new(700) == pytest.approx(0.1)
    assert new(1249) == pytest.approx(0.1)
    assert new(1251) == pytest.approx(0.01)
    early = old.replan(1800, 300)  # before any drop: both drops move
    assert early(300 + (1800 - 300) * 0.49) == 1.0  # p = 1/3 + 2/3 * 0.49 < 2/3
    assert early(300 + (1800 - 300) * 0.51) == pytest.approx(0.1)


@given(
    schedule=st.sampled_from(sorted(SCHEDULE_PARAMS)),
    budget=budgets,
    at_fraction=st.floats(0.0, 0.99),
    new_total=st.integers(1, 10000),
)
def test_replan_is_continuous_and_ends_where_the_schedule_ends(
    schedule, budget, at_fraction, new_total
):
    total, warmup = budget
    old = BudgetSchedule(schedule, total, warmup, params=SCHEDULE_PARAMS[schedule])
    at = at_fraction * total
    if new_total <= max(at, warmup) or old.progress(at) >= 1.0:
        with pytest.raises(ValueError, match="budget"):
            old.replan(new_total, at)
        return
    new = old.replan(new_total, at)
    assert new(at) == pytest.approx(old(at))
    assert new(new_total) == pytest.approx(old(total))
    values = [new(at + (new_total - at) * k / 50) for k in range(51)]
    if at >= warmup:
        assert all(b <= a + 1e-12 for a, b in zip(values, values[1:]))


def test_replan_state_round_trips_and_chains():
    first = BudgetSchedule("cosine", 1000, 50).replan(2000, 400)
    again = BudgetSchedule.from_state(first.state())
    assert again == first and again(1500) == first(1500)
    assert first.state()["replan"] == {"at": 400, "from_progress": pytest.approx(350 / 950)}
    second = first.replan(1500, 1200)
    assert second(1200) == pytest.approx(first(1200))
    assert second(1500) == 0.0
    # a budget never re-planned has no "replan" key: older checkpoints compare equal
    assert "replan" not in BudgetSchedule("cosine", 1000, 50).state()


def test_a_replanned_budget_keeps_the_multipliers_the_run_had_before():
    """Before the re-plan point the budget gives what the run trained with, also after a second
    re-plan (the state keeps the first as ``earlier``), not the progress frozen at ``p0``."""
    original = BudgetSchedule("linear", 1000, 100)
    once = original.replan(2000, at=550)
    twice = once.replan(1500, at=1200)
    for t in (100, 200, 400, 550):
        assert once(t) == pytest.approx(original(t)) and twice(t) == pytest.approx(original(t))
    for t in (700, 1000, 1200):
        assert twice(t) == pytest.approx(once(t))
    assert twice.state()["replan"] == {
        "at": 1200, "from_progress": pytest.approx(once.progress(1200)), "earlier": [[550, 0.5]]
    }  # fmt: skip
    assert BudgetSchedule.from_state(twice.state()) == twice
    back = twice.replan(3000, at=500)  # before both re-plans: only the original's past is left
    assert back.earlier_replans == () and back(300) == pytest.approx(original(300))
    # resuming its checkpoint restores the whole history: the LR curve from iteration 0
    resumed, line = BudgetSchedule("linear", 1500, 100).resume(twice.state(), at=1300)
    assert line is None and [resumed(t) for t in range(1501)] == [twice(t) for t in range(1501)]


@pytest.mark.parametrize(
    "earlier",
    [((50, 0.1),), ((700, 0.2),), ((300, 0.6),), ((300, 0.2), (200, 0.1)), ((300,),), "ab"],
)
def test_bad_earlier_replans_are_one_line(earlier):
    with pytest.raises(ValueError, match=r"^earlier_replans=.* is invalid; allowed: \(elapsed, "):
        BudgetSchedule("linear", 1000, 100, replanned_at=550, replanned_from=0.5,
                       earlier_replans=earlier)  # fmt: skip


def test_numpy_numbers_are_numbers_and_the_state_stays_plain():
    np = pytest.importorskip("numpy")
    budget = BudgetSchedule(
        "cosine", np.int64(9000), np.float32(500), params={"eta": np.float64(0.1)}
    )
    assert budget == BudgetSchedule("cosine", 9000, 500, params={"eta": 0.1})
    state = budget.state()
    assert type(state["total"]) is int and type(state["warmup"]) is float
    assert type(state["params"]["eta"]) is float
    assert lr_multiplier("linear", 700, np.int64(900), warmup_iters=0) == pytest.approx(2 / 9)
    with pytest.raises(ValueError, match="budget total=nan is invalid"):
        BudgetSchedule("linear", np.float64("nan"))


def test_replan_during_warmup_keeps_the_warmup():
    new = BudgetSchedule("linear", 1000, 100).replan(2000, 40)
    assert new == BudgetSchedule("linear", 2000, 100)


@pytest.mark.parametrize(
    ("total", "at", "message"),
    [
        (
            2000,
            1000,
            "the budget of 1000 has run out there .multiplier 0.; re-plan from a "
            "checkpoint saved before 1000",
        ),
        (
            600,
            700,
            "cannot change the budget to 600: 700 of it has already elapsed; allowed: "
            "a budget > 700",
        ),
        (700, 700, "allowed: a budget > 700"),
        (80, 10, "10 of it has already elapsed and the warmup is 100; allowed: a budget > 100"),
        (2000, -1, "replan at=-1 is invalid; allowed: a number >= 0"),
        (float("nan"), 10, "cannot change the budget to nan"),
    ],
)
def test_a_replan_that_cannot_be_made_is_refused_in_one_line(total, at, message):
    with pytest.raises(budgeted.schedules.BudgetReplanError, match=message) as err:
        BudgetSchedule("linear", 1000, 100).replan(total, at)
    assert "\n" not in str(err.value)


def test_resume_with_the_same_budget_keeps_the_checkpoints_replan():
    replanned = BudgetSchedule("linear", 1000, 0).replan(2000, 500)
    config = BudgetSchedule("linear", 2000, 0)  # what the config states after the replan
    budget, line = config.resume(replanned.state(), at=800)
    assert budget == replanned and line is None
    assert budget(800) != config(800)


def test_resume_with_another_length_refuses_unless_replan():
    config = BudgetSchedule("linear", 2000, 10)
    saved = BudgetSchedule("linear", 1000, 10).state()
    with pytest.raises(BudgetMismatchError, match="total=1000, the config's total=2000"):
        config.resume(saved, at=500, names={})
    budget, line = config.resume(saved, at=500, on_resume="replan", names={"total": "max_iters"})
    assert budget(500) == pytest.approx(BudgetSchedule("linear", 1000, 10)(500))
    assert budget(2000) == 0.0
    assert line.startswith("budget re-planned at 500: max_iters 1000 -> 2000; the multiplier")
    # other differences are never re-planned: only the budget's length
    other = BudgetSchedule("cosine", 1000, 10).state()
    with pytest.raises(BudgetMismatchError, match="schedule='cosine'"):
        config.resume(other, at=500, on_resume="replan")
    with pytest.raises(
        ValueError, match="on_resume='extend' is invalid; allowed: refuse, replan, branch"
    ):
        config.resume(saved, at=500, on_resume="extend")
    with pytest.raises(budgeted.schedules.BudgetReplanError, match="max_iters: cannot change"):
        config.resume(saved, at=1000, on_resume="replan", names={"total": "max_iters"})


def test_branch_goes_on_with_the_configs_budget_where_the_past_agrees():
    stable = BudgetSchedule("wsd", 1000, 0).state()  # the longest budget's stable run
    shorter = BudgetSchedule("wsd", 500, 0)  # its cooldown starts at 0.8 x 500 = 400
    budget, line = shorter.resume(stable, at=400, on_resume="branch", names={"total": "T"})
    assert budget == shorter
    assert line == "budget branched at 400: T 1000 -> 500, the same multipliers so far"
    message = (
        "cannot branch at 450: the checkpoint's budget (T 1000) and the config's (T 500) differ "
        "from iteration 401 on (multiplier 1 vs 0.99); branch from a checkpoint saved before 401"
    )
    with pytest.raises(budgeted.schedules.BudgetReplanError, match=re.escape(message)):
        shorter.resume(stable, at=450, on_resume="branch", names={"total": "T"})
    with pytest.raises(budgeted.schedules.BudgetReplanError, match="differ from iteration 1 on"):
        BudgetSchedule("linear", 500, 0).resume(
            BudgetSchedule("linear", 1000, 0).state(), at=100, on_resume="branch"
        )


# --- each refusal in its whole line; states, replans and resumes exactly (issue 35) ---------------


def unique(prefix: str) -> str:
    """A schedule name of its own: registrations last as long as the process."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_a_registration_that_cannot_be_made_is_refused_in_one_whole_line():
    name = unique("bad")

    def no_default(p: float, k: float) -> float:
        return 1.0 - p

    refusals = [
        (lambda: register_schedule("Linear-2"),
         "schedule name 'Linear-2' is invalid; allowed: lower-case [a-z0-9_]"),
        (lambda: register_schedule(3), "schedule name 3 is invalid; allowed: lower-case [a-z0-9_]"),
        (lambda: register_schedule(name)(no_default),
         f"schedule {name!r}: parameter 'k' has no default; allowed: keyword parameters with "
         "defaults after the progress p"),
        (lambda: register_schedule(name, rules={"z": (bool, "any")})(lambda p: 1.0 - p),
         f"schedule {name!r}: rules for unknown parameters ['z']"),
    ]  # fmt: skip
    for register, message in refusals:
        with pytest.raises(ValueError) as err:
            register()
        assert str(err.value) == message
    assert name not in schedule_names()


def test_a_registration_keeps_its_own_label_and_its_own_rules():
    """Its own rule wins over the shared one of the same name (``power``), and a rule of its
    own validates a parameter no built-in has; the label is the name capitalized by default."""
    plain, labelled = unique("sq"), unique("sq")

    def square(p: float, power: float = 2.0, floor: float = 0.0) -> float:
        return floor + (1 - floor) * (1 - p) ** power

    rules = {"power": (lambda v: v in (1, 2), "1 or 2"), "floor": (lambda v: 0 <= v < 1, "[0, 1)")}
    register_schedule(plain, rules=rules)(square)
    register_schedule(labelled, rules=rules, label="SQ")(square)
    assert schedule_info(plain).label == plain.capitalize()
    assert schedule_info(labelled).label == "SQ"
    assert BudgetSchedule(plain, 100, 0, params={"power": 1, "floor": 0.5})(50) == 0.75
    for params, message in [({"power": 3}, "power=3 is invalid; allowed: 1 or 2"),
                            ({"floor": 1.5}, "floor=1.5 is invalid; allowed: [0, 1)")]:  # fmt: skip
        with pytest.raises(ValueError) as err:
            BudgetSchedule(plain, 100, 0, params=params)
        assert str(err.value) == f"{plain} schedule: {message}"


@pytest.mark.parametrize(
    ("schedule", "params", "message"),
    [
        ("linear", {"power": 2}, "schedule 'linear' has no parameter 'power'; it takes: no "
         "parameters"),
        ("htd", {"x": 1}, "schedule 'htd' has no parameter 'x'; it takes: lower, upper, eta"),
        ("htd", {"lower": 3, "upper": 3}, "htd schedule: lower=3 must be below upper=3"),
        ("step", {"milestones": 0.5}, "step schedule: milestones=0.5 is invalid; allowed: an "
         "increasing list of fractions in (0, 1)"),
        ("step", {"milestones": ["a"]}, "step schedule: milestones=['a'] is invalid; allowed: an "
         "increasing list of fractions in (0, 1)"),
    ],
)  # fmt: skip
def test_each_bad_parameter_is_named_in_one_whole_line(schedule, params, message):
    with pytest.raises(ValueError) as err:
        BudgetSchedule(schedule, 100, 0, params=params)
    assert str(err.value) == message


def test_full_params_of_a_schedule_it_does_not_know_are_the_params_with_lists():
    assert budgeted.schedules.full_params("not_registered", {"m": (0.5, 0.75)}) == {
        "m": [0.5, 0.75]
    }
    assert budgeted.schedules.full_params("step", None) is None


def test_name_keys_writes_each_key_as_the_adapters_name_for_it():
    names = {"total": "SOLVER.MAX_ITER", "warmup": "SOLVER.WARMUP_ITERS"}
    message = "warmup=40 is not shorter than the budget total=40; subtotal=3, total 9, totals=1"
    assert budgeted.schedules.name_keys(message, names) == (
        "SOLVER.WARMUP_ITERS=40 is not shorter than the SOLVER.MAX_ITER=40; subtotal=3, "
        "SOLVER.MAX_ITER 9, totals=1"
    )


REPLAN_FIELDS = "invalid; allowed: 0 <= replanned_at < total=1000 and 0 <= replanned_from < 1"


@pytest.mark.parametrize(
    ("at", "progress"), [(-1, 0.5), (1000, 0.5), (float("nan"), 0.5), (500, 1.0), (500, -0.1),
                         (500, 1.5), (500, float("nan")), (500, None)],
)  # fmt: skip
def test_replan_fields_out_of_range_are_refused_in_one_whole_line(at, progress):
    with pytest.raises(ValueError) as err:
        BudgetSchedule("linear", 1000, 0, replanned_at=at, replanned_from=progress)
    assert str(err.value) == f"replanned_at={at!r}, replanned_from={progress!r} are {REPLAN_FIELDS}"


def test_replan_fields_at_their_lower_bounds_are_allowed():
    budget = BudgetSchedule("linear", 1000, 0, replanned_at=0, replanned_from=0.0)
    assert budget(500) == 0.5


@pytest.mark.parametrize(
    "earlier", [((100, 0.1),), ((300, 0.0),), ((550, 0.4),), ((300, 0.5),), ((True, 0.2),)]
)
def test_earlier_replans_must_rise_strictly_from_the_warmup_to_the_last_replan(earlier):
    """Each point strictly after the one before, in elapsed and in progress: from (W, 0) =
    (100, 0) to (replanned_at, replanned_from) = (550, 0.5); a bool is no elapsed amount."""
    warmup = 0 if earlier[0][0] is True else 100
    with pytest.raises(ValueError, match=r"^earlier_replans=.* is invalid; allowed: \(elapsed, "):
        BudgetSchedule("linear", 1000, warmup, replanned_at=550, replanned_from=0.5,
                       earlier_replans=earlier)  # fmt: skip


def test_earlier_replans_given_as_lists_are_the_same_budget_as_tuples():
    np = pytest.importorskip("numpy")
    as_lists = BudgetSchedule("linear", 1000, 100, replanned_at=550, replanned_from=0.5,
                              earlier_replans=[[300, np.float64(0.2)]])  # fmt: skip
    assert as_lists.earlier_replans == ((300, 0.2),)
    assert type(as_lists.earlier_replans[0][1]) is float
    assert as_lists == BudgetSchedule("linear", 1000, 100, replanned_at=550, replanned_from=0.5,
                                      earlier_replans=((300, 0.2),))  # fmt: skip


def test_a_budget_state_is_plain_values_that_survive_json_unchanged():
    """A step budget's milestones (a tuple inside) and a twice re-planned budget's history come
    back from JSON (records, YAML) as they were written, and rebuild the same budget."""
    import json

    for budget in (
        BudgetSchedule("step", 900, 50, params={"milestones": (0.5, 0.75)}),
        BudgetSchedule("linear", 1000, 100).replan(2000, at=550).replan(1500, at=1200),
    ):
        state = budget.state()
        assert json.loads(json.dumps(state)) == state
        assert BudgetSchedule.from_state(json.loads(json.dumps(state))) == budget


def test_a_state_lacking_keys_names_them_all():
    with pytest.raises(ValueError) as err:
        BudgetSchedule.from_state({"schedule": "linear"})
    assert str(err.value) == (
        "budget state lacks total, warmup, warmup_factor, warmup_method, params; it has "
        "['schedule']"
    )


def test_a_replan_at_the_end_of_the_warmup_is_a_fresh_budget():
    original = BudgetSchedule("linear", 1000, 100)
    assert original.replan(2000, at=100) == BudgetSchedule("linear", 2000, 100)
    assert "replan" not in original.replan(2000, at=100).state()
    with pytest.raises(budgeted.schedules.BudgetReplanError) as err:
        original.replan(80, at=100)
    assert str(err.value) == (
        "cannot change the budget to 80: 100 of it has already elapsed; allowed: a budget > 100"
    )


def test_a_replan_at_the_point_of_the_last_one_replaces_it():
    original = BudgetSchedule("linear", 1000, 100)
    assert original.replan(2000, at=550).replan(1500, at=550) == original.replan(1500, at=550)


def test_a_replanned_budget_ends_at_the_schedules_end_and_stays_there():
    for budget in (BudgetSchedule("linear", 1000, 0).replan(2000, at=500),
                   BudgetSchedule("cosine", 1000, 0).replan(600, at=500)):  # fmt: skip
        assert [budget(t) for t in (budget.total, budget.total + 1, 3 * budget.total)] == [0.0] * 3


FIX = "keep the checkpoint's budget to resume, or start a new run from its weights"


def test_a_resume_refusal_names_every_difference_and_what_to_do():
    config = BudgetSchedule("linear", 900, 50)
    saved = BudgetSchedule("cosine", 90, 50).state()
    expected = (
        "cannot resume: the checkpoint's budget has schedule='cosine', total=90, the config's "
        f"schedule='linear', total=900; {FIX}"
    )
    for refuse in (config.check_resume, lambda s: config.resume(s, at=10)):
        with pytest.raises(BudgetMismatchError) as err:
            refuse(saved)
        assert str(err.value) == expected
    with pytest.raises(BudgetMismatchError) as err:
        config.resume(saved, at=10, fix="do Y")
    assert str(err.value).endswith("; do Y")


def test_resume_lines_and_refusals_name_total_when_no_names_are_given():
    """The whole line of each: re-planned, branched, refused branch, replan that cannot be made."""
    old = BudgetSchedule("linear", 1000, 0).state()
    _, line = BudgetSchedule("linear", 2000, 0).resume(old, at=500, on_resume="replan")
    assert line == (
        "budget re-planned at 500: total 1000 -> 2000; the multiplier goes on from 0.5 to 0 "
        "over the remaining 1500"
    )
    _, line = BudgetSchedule("wsd", 500, 0).resume(
        BudgetSchedule("wsd", 1000, 0).state(), at=400, on_resume="branch"
    )
    assert line == "budget branched at 400: total 1000 -> 500, the same multipliers so far"
    with pytest.raises(budgeted.schedules.BudgetReplanError) as err:
        BudgetSchedule("linear", 500, 0).resume(old, at=2, on_resume="branch")
    assert str(err.value) == (
        "cannot branch at 2: the checkpoint's budget (total 1000) and the config's (total 500) "
        "differ from iteration 1 on (multiplier 0.999 vs 0.998); branch from a checkpoint saved "
        "before 1, or re-plan (on_resume replan)"
    )
    with pytest.raises(budgeted.schedules.BudgetReplanError) as err:
        BudgetSchedule("linear", 2000, 0).resume(old, at=1000, on_resume="replan")
    assert str(err.value) == (
        "total: cannot change the budget at 1000: the budget of 1000 has run out there "
        "(multiplier 0); re-plan from a checkpoint saved before 1000"
    )

"""What a schedule's parameters may be (issue 52/5 and its weak points): values that make the
multiplier anything but a finite number >= 0 are refused on every route (the core, an arm's text,
the sweep's cells, the plain-PyTorch adapter), as are a parameter given twice and a cooldown or
periods finer than any budget; where the budget is known, finer than one of its iterations. One
schedule has one text: its arm's name with the defaults left out, so a sweep plans it once."""

from __future__ import annotations

import pytest
import torch

import budgeted
from budgeted import sweep
from budgeted.experiments.arms import cell_texts, parse_cell
from budgeted.schedules import BudgetSchedule, arm_text, parse_arm

pytestmark = pytest.mark.unit

NAN_HTD = "htd:lower=-1e308,upper=1e308"
NAN_LINE = (
    "htd schedule: lower=-1e+308, upper=1e+308 give the multiplier nan at progress 0; allowed: "
    "parameters whose multiplier is a finite number >= 0"
)


def one_line(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        call(*args, **kwargs)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(
    "route",
    [
        lambda: BudgetSchedule("htd", 100, 0, params={"lower": -1e308, "upper": 1e308}),
        lambda: BudgetSchedule(NAN_HTD, 100, 0),
        lambda: parse_arm(NAN_HTD),
        lambda: parse_cell(NAN_HTD),
        lambda: budgeted.BudgetLR(
            torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1), "htd", 100,
            warmup_iters=0, lower=-1e308, upper=1e308,
        ),
    ],
    ids=["core", "core text", "arm", "sweep cell", "BudgetLR"],
)  # fmt: skip
def test_parameters_that_make_the_multiplier_nan_are_refused_on_every_route(route):
    """Before: accepted, the LR NaN from the first iteration (and the divergence line then
    blamed the base LR)."""
    assert one_line(route).endswith(NAN_LINE)


def test_the_sweep_refuses_them_in_one_line_before_anything_is_written(tmp_path, capsys):
    code = sweep.main(["pytorch", "--task", "digits", "--schedules", NAN_HTD, "--budgets", "0.01",
                       "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert (code, err) == (2, f"sweep: error: {NAN_LINE}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wsd:decay=sqrt,decay=linear", "schedule 'wsd:decay=sqrt,decay=linear' gives decay 2 "
         "times; allowed: each parameter once"),
        ("wsd:cooldown=1e-17", "wsd schedule: cooldown=1e-17 is invalid; allowed: a number in "
         "[1e-06, 1] (a fraction of the decay)"),
        ("sgdr:restarts=1000000000", "sgdr schedule: restarts=1000000000 is invalid; allowed: a "
         "whole number >= 0 and below 1000000"),
        ("sgdr:restarts=1" + "0" * 400, "sgdr schedule: restarts=1000000000000000000000000000000"
         "00000000000000000000000000... is invalid"),
    ],
    ids=["a key twice", "a cooldown of 1e-17", "a billion restarts", "a 401-digit restarts"],
)  # fmt: skip
def test_a_parameter_given_twice_or_finer_than_any_budget_is_one_short_line(text, message):
    """Before: the last of two values kept silently; a cooldown of 1e-17 (the LR never decays)
    and 1e9 restarts accepted; 10**400 restarts an OverflowError at the first iteration."""
    assert one_line(parse_arm, text).startswith(message)


@pytest.mark.parametrize(
    ("text", "total", "warmup", "message"),
    [
        ("wsd:cooldown=0.05", 32, 20, "wsd schedule: cooldown=0.05 is invalid for a decay of 12 "
         "steps; allowed: a cooldown of more than one step, cooldown > 1/12"),
        ("wsd", 5, 0, "wsd schedule: cooldown=0.2 is invalid for a decay of 5 steps"),  # 1 step
        ("sgdr:restarts=11", 32, 20, "sgdr schedule: restarts=11 is invalid for a decay of 12 "
         "steps; allowed: periods of more than one step each, restarts + 1 < 12"),
    ],
)  # fmt: skip
def test_a_phase_shorter_than_one_step_of_the_budget_is_refused(text, total, warmup, message):
    budget = BudgetSchedule(text, total, warmup)  # a time budget's seconds are not steps
    assert one_line(budget.check_steps).startswith(message)
    assert all(budget(t) == 1.0 for t in range(warmup, total)) or text.startswith("sgdr")


def test_a_phase_of_more_than_one_step_is_allowed():
    BudgetSchedule("wsd", 6, 0).check_steps()  # the last iteration decays: 0.5
    BudgetSchedule("sgdr:restarts=10", 32, 20).check_steps()
    BudgetSchedule("linear", 2, 1).check_steps()  # no step rules


@pytest.mark.parametrize(
    ("texts", "text"),
    [
        (["wsd", "wsd:decay=linear", "wsd:cooldown=0.2", "wsd:cooldown=2e-1,decay=linear"], "wsd"),
        (["wsd:decay=sqrt,cooldown=0.10", "wsd:cooldown=0.1,decay=sqrt"],
         "wsd:cooldown=0.1,decay=sqrt"),
        (["cosine:eta=0", "cosine"], "cosine"),
        (["wsd:cooldown=1", "wsd:cooldown=1.0", "wsd:cooldown=1e0"], "wsd:cooldown=1.0"),
        (["sgdr:restarts=1", "sgdr"], "sgdr"),
    ],
)  # fmt: skip
def test_one_schedule_is_one_text(texts, text):
    """Before: ``wsd``, ``wsd:decay=linear`` and ``wsd:cooldown=0.2`` were three cells (three
    folders, three rows) of one schedule."""
    assert {arm_text(*parse_arm(t)) for t in texts} == {text}
    assert {parse_cell(t).text for t in texts} == {text}
    assert {parse_cell(f"{t}@adamw").folder for t in texts} == {parse_cell(f"{text}@adamw").folder}
    assert cell_texts(texts, None) == [text]


def test_the_sweep_plans_one_cell_folder_for_one_schedule(tmp_path, capsys):
    code = sweep.main(["pytorch", "--task", "digits", "--schedules", "wsd", "wsd:decay=linear",
                       "wsd:cooldown=0.2", "wsd:decay=sqrt", "--budgets", "0.01", "--out",
                       str(tmp_path / "out"), "--dry-run"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    cells = [line.split(":")[0] for line in printed.splitlines() if "_budget1" in line]
    assert cells == ["wsd_budget1", "wsd-decay-sqrt_budget1"], printed

"""budgeted.control.plan: the budget's plan before training, once for both adapters.

The ``Budget<Label>`` names, a budget as the loop's length, the user's own schedule as the budget
schedule's parameters, and one budget at a time. Refusals are compared with the literal lines
the adapters printed before their checks moved here (Detectron2's ``time_budget.py``, MMEngine's
``input_checks.py``).
"""

from __future__ import annotations

import doctest

import pytest

from budgeted.control import plan
from budgeted.control.plan import (
    OwnSchedule,
    adapter_names,
    built_in_names,
    check_one_budget,
    length_agrees,
    planned_iters,
    step_params,
)
from budgeted.schedules import budget_iters, schedule_names

pytestmark = pytest.mark.unit


def test_the_examples_in_the_docstring_run() -> None:
    result = doctest.testmod(plan, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_every_schedule_is_named_once_and_a_taken_name_warns_or_raises() -> None:
    added, warned = [], []

    def taken_cosine(suffix: str):  # only cosine's name is taken: later schedules never raise
        def add(info, name: str) -> None:
            if name == f"BudgetCosine{suffix}":
                raise ValueError(f"{name} is taken")
            added.append(name)

        return add

    adapter_names("PlanTest", taken_cosine("PlanTest"), lambda i, e: warned.append((i.name, e)))
    assert added[0] == "BudgetLinearPlanTest" and len(added) == len(schedule_names()) - 1
    assert [(n, str(err)) for n, err in warned] == [("cosine", "BudgetCosinePlanTest is taken")]
    with pytest.raises(ValueError, match="BudgetCosinePlanTest2 is taken"):
        adapter_names("PlanTest2", taken_cosine("PlanTest2"))


def test_the_built_in_names_leave_out_a_plugins_schedule(sqrt_schedule) -> None:
    names = built_in_names("LR")
    assert names[:3] == ("BudgetLinearLR", "BudgetCosineLR", "BudgetPolyLR") and len(names) == 10
    assert "BudgetSqrtLR" not in names and sqrt_schedule in schedule_names()


@pytest.mark.parametrize("fraction, full", [(0.1, 90000), (0.25, 400), (1, 7), (0.5, 3)])
def test_the_planned_length_is_the_budget_at_the_loops_batch(fraction, full) -> None:
    assert planned_iters(fraction, full) == budget_iters(fraction=fraction, full_iters=full)
    assert planned_iters(fraction, full, batch=8, loop_batch=8) == planned_iters(fraction, full)
    assert planned_iters(fraction, full, batch=16, loop_batch=32) == fraction * full / 2
    with pytest.raises(ValueError):
        planned_iters(0.0, full)


def test_a_loop_agrees_with_the_rounded_plan_or_either_whole_number_around_it() -> None:
    assert length_agrees(4500, 4500.0) and length_agrees(1, None)
    assert length_agrees(6, 6.5) and length_agrees(7, 6.5) and length_agrees(7, 6.6)
    assert not length_agrees(4501, 4500.0) and not length_agrees(8, 6.5)


def test_one_budget_at_a_time_in_each_adapters_words() -> None:
    check_one_budget(None, "h", "x")
    check_one_budget(1, "h", "x")
    with pytest.raises(KeyError) as err:
        check_one_budget(0.5, "h", "x", KeyError)
    assert err.value.args == (
        "h: a time budget and a fraction of the schedule are two budgets; allowed: one of them (x)",
    )


def test_detectron2s_time_budget_with_a_fraction_is_one_line() -> None:
    pytest.importorskip("detectron2")
    from detectron2.config import get_cfg

    from budgeted.detectron2 import add_budget_config
    from budgeted.detectron2.time_budget import time_budget_seconds
    from budgeted.errors import BudgetConfigError

    cfg = add_budget_config(get_cfg())
    cfg.SOLVER.BUDGET.SECONDS = "2h"
    cfg.SOLVER.BUDGET.FRACTION = 0.1  # no FULL_ITERS: no fraction of a schedule
    assert time_budget_seconds(cfg) == 7200.0
    cfg.SOLVER.BUDGET.FULL_ITERS = 900
    with pytest.raises(BudgetConfigError) as err:
        time_budget_seconds(cfg)
    assert str(err.value) == (
        "SOLVER.BUDGET.SECONDS='2h' with SOLVER.BUDGET.FRACTION=0.1: a time budget and a "
        "fraction of the schedule are two budgets; allowed: one of them (FRACTION 1.0 with "
        "SECONDS, SOLVER.MAX_ITER then only caps the iterations)"
    )


def test_mmengines_time_budget_with_a_fraction_config_is_one_line() -> None:
    pytest.importorskip("mmengine")
    from mmengine.config import Config

    from budgeted.mmengine.input_checks import check_time_budget_pair

    check_time_budget_pair(Config(dict(budget_fraction=1.0)), "6h")
    with pytest.raises(ValueError) as err:
        check_time_budget_pair(Config(dict(budget_fraction=0.1, full_schedule_iters=3200)), "6h")
    assert str(err.value) == (
        "--budget-time 6h with a fraction config (budget_fraction=0.1 of full_schedule_iters="
        "3200): a time budget and a fraction of the schedule are two budgets; allowed: one of "
        "them (--budget-time with the full-schedule config, e.g. a _budget100 one, whose "
        "max_iters then only caps the iterations; or this config without --budget-time)"
    )


def test_a_step_schedule_keeps_its_milestones_inside_the_run_as_fractions() -> None:
    assert step_params([300, 100, 400, 0], 400, 0.5) == {"milestones": (0.25, 0.75), "gamma": 0.5}
    assert step_params([400, 500], 400, 0.1) == {} and step_params(None, 400, 0.1) == {}


def test_the_own_schedule_takes_the_configs_parameters_under_those_given() -> None:
    own = {"step": lambda: step_params([300], 400, 0.1), "poly": lambda: {"power": 2.0}}
    assert OwnSchedule.of("step", 40, 0.01, "linear", own).params == {
        "milestones": (0.75,), "gamma": 0.1
    }  # fmt: skip
    assert OwnSchedule.of("poly:power=3.0", own=own).params == {"power": 3.0}
    assert OwnSchedule.of("cosine", 5, own=own) == OwnSchedule("cosine", 5, 1.0, "linear", {})
    with pytest.raises(ValueError, match="schedule 'wsd:decay' is invalid"):
        OwnSchedule.of("wsd:decay")


def test_both_adapters_read_the_same_step_schedule_as_the_same_parameters() -> None:
    pytest.importorskip("detectron2")
    pytest.importorskip("mmengine")
    from detectron2.config import LazyCall as L
    from detectron2.solver import WarmupParamScheduler
    from fvcore.common.param_scheduler import MultiStepParamScheduler
    from mmengine.config import Config

    from budgeted.detectron2.lazy import lazy_step
    from budgeted.mmengine.own_schedule import step_milestones

    d2 = L(WarmupParamScheduler)(
        scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1, 0.01], milestones=[8, 11]),
        warmup_length=0.01,
    )
    steps = dict(type="MultiStepLR", milestones=[8, 11], gamma=0.1)
    loop = dict(type="EpochBasedTrainLoop", max_epochs=12)
    mm = Config(dict(train_cfg=loop, param_scheduler=[steps]))
    expected = step_params([8, 11], 12, 0.1)
    assert lazy_step(d2, 12) == expected == step_milestones(mm)

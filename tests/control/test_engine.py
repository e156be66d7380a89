"""The budget scheduler engine (budgeted.control.engine): its table is the plan, bit for bit, for
every registered schedule (after a re-plan and a branch too); a resume through it goes on exactly
as the run would have; every adapter that wraps it refuses in its own words, changing nothing."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

import budgeted.control.engine as engine_module
from budgeted import BudgetLR, BudgetTimeLR
from budgeted.control.engine import CHUNK, BudgetEngine, ResumeWords
from budgeted.schedules import BudgetSchedule, TimeBudget, TrainingClock, schedule_names

pytestmark = pytest.mark.unit


def test_the_examples_run() -> None:
    result = doctest.testmod(engine_module)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("schedule", schedule_names())
def test_the_table_is_the_plan_for_every_registered_schedule_and_after_a_replan(schedule) -> None:
    plan = BudgetSchedule(schedule, 300, warmup=20)
    engine = BudgetEngine(plan)
    assert [engine.lookup(t) for t in range(320)] == [plan(t) for t in range(320)]
    assert (engine.low, engine.high) == (0, 300)  # never past the total: the end repeats
    assert list(engine.table) == [plan(t) for t in range(300)]
    replanned = plan.replan(600, at=100)
    engine.replace(replanned)
    assert engine.high == engine.low  # emptied with the plan it held
    assert [engine.lookup(t) for t in range(100, 610)] == [replanned(t) for t in range(100, 610)]
    assert list(engine.table) == [replanned(t) for t in range(engine.low, engine.high)]


def test_a_branch_decided_by_the_engine_goes_on_with_the_new_plans_table() -> None:
    """A wsd run of 100 iterations branched into one of 50 after 41 (both stable so far)."""
    shorter = BudgetSchedule("wsd", 50, warmup=0)
    engine = BudgetEngine(shorter)
    assert [engine.lookup(t) for t in range(10)] == [shorter(t) for t in range(10)]
    words = ResumeWords({"total": "total_iters"}, "keep it", owner="BudgetLR")
    old = BudgetSchedule("wsd", 100, warmup=0).state()
    decided = engine.resume(old, at=41, words=words, on_resume="branch")
    assert decided.line == (
        "budget branched at 41: total_iters 100 -> 50, the same multipliers so far"
    )
    engine.adopt(decided)
    assert engine.high == engine.low and engine.plan == shorter
    assert [engine.lookup(t) for t in range(41, 60)] == [shorter(t) for t in range(41, 60)]


def test_the_table_starts_at_the_first_step_asked_and_grows_in_chunks() -> None:
    plan = BudgetSchedule("cosine", 100_000, warmup=500)
    engine = BudgetEngine(plan)
    assert engine.lookup(80_000) == plan(80_000)
    assert (engine.low, engine.high) == (80_000, 80_000 + CHUNK)  # nothing before 80k built
    assert engine.lookup(79_999) == plan(79_999)  # the chunk before, added in front
    assert (engine.low, engine.high) == (80_000 - CHUNK, 80_000 + CHUNK)
    assert list(engine.table) == [plan(t) for t in range(engine.low, engine.high)]
    assert engine.lookup(10) == plan(10) and (engine.low, engine.high) == (10, 10 + CHUNK)
    assert engine.lookup(100_000) == plan(100_000) and engine.high == 10 + CHUNK  # the end
    assert engine.lookup(7.5) == plan(7.5) and engine.lookup(20.0) == plan(20.0)  # not steps


def test_a_time_budgets_engine_runs_on_its_clock() -> None:
    seconds = [0.0]
    clock = TrainingClock(now=lambda: seconds[0])
    plan = BudgetSchedule("linear", 100, warmup=2)
    engine = BudgetEngine(plan)
    time = engine.over_seconds(10, clock)
    assert engine.time is time and time.seconds == 10.0 and time.warmup_iters == 2
    clock.start()
    assert engine.multiplier(1) == plan(1)  # the warmup: in iterations, as the plan's
    assert engine.multiplier(2, elapsed=5.0) == 1.0  # the warmup ended at 5 s
    assert engine.multiplier(3, elapsed=7.5) == 0.5  # the decay over the 5 s left
    seconds[0] = 8.0
    clock.tick(4)  # the clock's agreed reading: what the engine reads by default
    assert engine.multiplier(4) == time.multiplier(4, 8.0) == 0.4
    assert engine.state()["clock"] == {"elapsed": 8.0}


# --- a resume through each adapter is bit-identical ---------------------------------------------


def optimizer(lr: float = 0.1, groups: int = 1) -> torch.optim.SGD:
    return torch.optim.SGD(
        [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for _ in range(groups)],
        momentum=0.9,
    )


def adapter(name: str) -> Callable[..., Any]:
    """``build(total, lr=0.1, on_resume="refuse", warmup=10)`` of adapter ``name``."""
    if name == "BudgetLR":
        cls: Any = BudgetLR
    elif name == "BudgetParamScheduler":
        pytest.importorskip("mmengine")
        from budgeted.mmengine.schedulers import BudgetLinearLR

        def build(total, lr=0.1, on_resume="refuse", warmup=10, schedule="linear"):
            kind = BudgetLinearLR if schedule == "linear" else importlib.import_module(
                "budgeted.mmengine.schedulers").NAMED_SCHEDULERS[schedule]  # fmt: skip
            return kind(optimizer(lr), end=total, warmup_iters=warmup, by_epoch=False,
                        on_resume=on_resume)  # fmt: skip

        return build
    else:
        pytest.importorskip("detectron2")
        module = "lazy" if name.startswith("Lazy") else "solver"
        cls = getattr(importlib.import_module(f"budgeted.detectron2.{module}"), name)

    def build(total, lr=0.1, on_resume="refuse", warmup=10, schedule="linear"):
        return cls(optimizer(lr), schedule, total, warmup_iters=warmup, on_resume=on_resume)

    return build


def lrs(scheduler: Any, steps: int) -> list[float]:
    """The LR of each of ``steps`` iterations."""
    used = []
    for _ in range(steps):
        used.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.optimizer.step()
        scheduler.step()
    return used


ITERATION_ADAPTERS = ["BudgetLR", "BudgetLRScheduler", "LazyBudgetLRScheduler",
                      "BudgetParamScheduler"]  # fmt: skip


@pytest.mark.parametrize("name", ITERATION_ADAPTERS)
@pytest.mark.parametrize("schedule", ["cosine", "step", "wsd"])
def test_a_resume_and_a_resumed_replan_are_bit_identical(name, schedule, tmp_path) -> None:
    """300 iterations, saved at 77 and resumed from the file (the table starts again there); a
    run re-planned to 500 at 77, saved again at 200 and resumed: every LR ``==`` the
    uninterrupted run's."""
    build = adapter(name)
    whole = lrs(build(300, schedule=schedule), 300)

    def save(scheduler: Any, path: str) -> None:
        torch.save({"optimizer": scheduler.optimizer.state_dict(),
                    "scheduler": scheduler.state_dict()}, tmp_path / path)  # fmt: skip

    def load(scheduler: Any, path: str) -> Any:
        saved = torch.load(tmp_path / path)  # weights_only: plain values
        scheduler.optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        return scheduler

    first = build(300, schedule=schedule)
    before = lrs(first, 77)
    save(first, "a.pt")
    assert before + lrs(load(build(300, schedule=schedule), "a.pt"), 223) == whole

    whole_replan = lrs(load(build(500, on_resume="replan", schedule=schedule), "a.pt"), 423)
    again = load(build(500, on_resume="replan", schedule=schedule), "a.pt")
    head = lrs(again, 123)
    save(again, "b.pt")
    last = load(build(500, schedule=schedule), "b.pt")  # the re-plan is saved: no policy needed
    assert head + lrs(last, 300) == whole_replan


# --- every refusal through each adapter's words -------------------------------------------------

D2_FIX = (
    "resume with the checkpoint's budget (its SOLVER.MAX_ITER, warmup, schedule and GPU count), "
    "or start a new run from its weights: MODEL.WEIGHTS <checkpoint>, no --resume, another "
    "OUTPUT_DIR"
)
LAZY_FIX = (
    "resume with the checkpoint's budget (its train.max_iter, warmup, schedule and GPU count), "
    "or start a new run from its weights: train.init_checkpoint=<checkpoint>, no --resume, "
    "another train.output_dir"
)
MM_FIX = (
    "to resume, keep the checkpoint's budget (train_cfg.max_iters=100); to train another "
    "budget, start a new run from its weights with load_from=<checkpoint> and resume=False"
)
OTHER_LRS = (
    "resuming it would train every remaining iteration at other LRs than the run it continues "
    "(the file was edited, or the config's LR changed since); every group's base LR is 0.5 x "
    "the config's; resume with the {key} that run was planned with, or "
)
SHORTER = "cannot change the budget to 20: 30 of it has already elapsed; allowed: a budget > 30"
REFUSALS = {  # (adapter, case): (error, line); the cases of refused()
    ("BudgetLR", "total"): ("BudgetMismatchError", "cannot resume: the checkpoint's budget has "
        "total_iters=100, the config's total_iters=200; build the scheduler with the "
        "checkpoint's budget to resume, or start a new run to train with another budget"),
    ("BudgetLR", "shorter"): ("BudgetReplanError", f"total_iters: {SHORTER}"),
    ("BudgetLRScheduler", "total"): ("BudgetResumeError", "cannot resume: the checkpoint's "
        "budget has SOLVER.MAX_ITER=100, the config's SOLVER.MAX_ITER=200; " + D2_FIX),
    ("BudgetLRScheduler", "base LR"): ("BudgetResumeError", "cannot resume: the checkpoint has "
        "base LR 0.1 in param group 0 of 1 (the LR scheduler's base_lrs), where the config gives "
        "0.2 (SOLVER.BASE_LR): " + OTHER_LRS.format(key="SOLVER.BASE_LR") + D2_FIX),
    ("BudgetLRScheduler", "shorter"): ("BudgetResumeError", f"SOLVER.MAX_ITER: {SHORTER}"),
    ("LazyBudgetLRScheduler", "total"): ("BudgetResumeError", "cannot resume: the checkpoint's "
        "budget has train.max_iter=100, the config's train.max_iter=200; " + LAZY_FIX),
    ("LazyBudgetLRScheduler", "base LR"): ("BudgetResumeError", "cannot resume: the checkpoint "
        "has base LR 0.1 in param group 0 of 1 (the LR scheduler's base_lrs), where the config "
        "gives 0.2 (optimizer.lr): " + OTHER_LRS.format(key="optimizer.lr") + LAZY_FIX),
    ("LazyBudgetLRScheduler", "shorter"): ("BudgetResumeError", f"train.max_iter: {SHORTER}"),
    ("BudgetParamScheduler", "total"): ("BudgetMismatchError", "cannot resume: the checkpoint's "
        "budget has train_cfg.max_iters (end - begin)=100, the config's train_cfg.max_iters "
        "(end - begin)=200; " + MM_FIX),
    ("BudgetParamScheduler", "base LR"): ("BudgetMismatchError", "cannot resume: the "
        "checkpoint's BudgetLinearLR has base LR 0.1 in param group 0 of 1 (base_values), where "
        "the config gives 0.2 (optim_wrapper.optimizer.lr): "
        + OTHER_LRS.format(key="optim_wrapper.optimizer.lr") + "resume with the config that "
        "run was trained with, or start a new run from its weights (load_from=<checkpoint>, "
        "resume=False)"),
    ("BudgetParamScheduler", "shorter"): ("BudgetReplanError",
        f"BudgetLinearLR: train_cfg.max_iters: {SHORTER}"),
}  # fmt: skip


def refused(build: Callable[..., Any], case: str) -> Any:
    """The scheduler that case ``case`` builds to load a state of 100 iterations (30 trained)."""
    if case == "total":
        return build(200)
    if case == "base LR":
        return build(100, lr=0.2)
    return build(20, on_resume="replan")


@pytest.mark.parametrize(("name", "case"), list(REFUSALS), ids=[" ".join(k) for k in REFUSALS])
def test_each_adapter_refuses_in_its_own_words_changing_nothing(name, case) -> None:
    build = adapter(name)
    source = build(100)
    lrs(source, 30)
    scheduler = refused(build, case)
    before = scheduler.state_dict()
    groups = [dict(g, params=None) for g in scheduler.optimizer.param_groups]
    with pytest.raises(ValueError) as err:
        scheduler.load_state_dict(source.state_dict())
    assert (type(err.value).__name__, str(err.value)) == REFUSALS[name, case]
    assert scheduler.state_dict() == before
    assert [dict(g, params=None) for g in scheduler.optimizer.param_groups] == groups


@pytest.mark.parametrize("name", ["BudgetTimeLR", "TimeBudgetLRScheduler"])
def test_a_time_budgets_refusals_keep_their_words(name) -> None:
    """Another time budget, one too short to re-plan to, and (Detectron2) other base LRs."""
    if name == "BudgetTimeLR":
        cls: Any = BudgetTimeLR
    else:
        cls = pytest.importorskip("budgeted.detectron2.time_budget").TimeBudgetLRScheduler
    seconds = [0.0]

    def build(budget: float, on_resume: str = "refuse", lr: float = 0.1) -> Any:
        clock = TrainingClock(now=lambda: seconds[0])
        return cls(optimizer(lr), TimeBudget("linear", budget, warmup_iters=2), clock,
                   on_resume=on_resume)  # fmt: skip

    source = build(10)
    source.clock.start()
    for _ in range(5):
        source.clock.resume()
        seconds[0] += 1
        source.clock.pause()
        source.step()
    state = source.state_dict()
    error = "BudgetResumeError" if name != "BudgetTimeLR" else None
    cases = [
        (build(20), error or "BudgetMismatchError", "cannot resume: the checkpoint's budget has "
         "seconds=10.0, the config's seconds=20.0; resume with the checkpoint's time budget, or "
         "start a new run from its weights (or re-plan it)"),
        (build(4, "replan"), error or "BudgetReplanError", "time budget: cannot change the "
         "budget to 4.0: 5 of it has already elapsed; allowed: a budget > 5"),
    ]  # fmt: skip
    if error:
        cases.append((build(10, lr=0.3), error, "cannot resume: the checkpoint has base LR 0.1 "
            "in param group 0 of 1 (the LR scheduler's base_lrs), where the config gives 0.3 "
            "(SOLVER.BASE_LR): resuming it would train every remaining iteration at other LRs "
            "than the run it continues (the file was edited, or the config's LR changed since); "
            "every group's base LR is 0.333333 x the config's; resume with the SOLVER.BASE_LR "
            "that run was planned with, or resume with the checkpoint's time budget and base "
            "LR, or start a new run from its weights: MODEL.WEIGHTS <checkpoint>, no --resume, "
            "another OUTPUT_DIR"))  # fmt: skip
    for scheduler, kind, line in cases:
        with pytest.raises(ValueError) as err:
            scheduler.load_state_dict(state)
        assert (type(err.value).__name__, str(err.value)) == (kind, line)

"""budgeted.mmengine.schedulers: each Budget*LR follows the core and MMEngine's conventions."""

from __future__ import annotations

import math
import pickle
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mmengine.optim import OptimWrapper
from mmengine.registry import PARAM_SCHEDULERS

import budgeted.mmengine as bm
from budgeted.mmengine import schedulers
from budgeted.schedules import BudgetMismatchError, BudgetSchedule, ScheduleInfo, schedule_names

pytestmark = pytest.mark.unit

PARAMS = {  # non-default parameters, so that passing them through is tested too
    "linear": {},
    "cosine": {"eta": 0.1},
    "poly": {"power": 2.0},
    "htd": {"lower": -4.0, "upper": 2.0},
    "step": {"milestones": [0.5, 0.75], "gamma": 0.2},
    "exp": {"end_factor": 0.05},
    "constant": {},
    "wsd": {"cooldown": 0.4, "decay": "sqrt"},
    "rex": {},
    "sgdr": {"restarts": 2},
}


def make_optimizer(lrs: tuple[float, ...] = (0.1, 0.02)) -> torch.optim.SGD:
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in lrs]
    return torch.optim.SGD(groups, lr=lrs[0], momentum=0.9)


def run(scheduler, steps: int) -> list[list[float]]:
    """The values of every param group at each of ``steps`` iterations (MMEngine's order)."""
    values = []
    for _ in range(steps):
        values.append([g[scheduler.param_name] for g in scheduler.optimizer.param_groups])
        scheduler.optimizer.step()
        scheduler.step()
    return values


def test_every_core_schedule_has_a_registered_named_scheduler():
    assert set(bm.NAMED_SCHEDULERS) == set(schedule_names())
    for name in bm.scheduler_types():
        assert PARAM_SCHEDULERS.get(name) is getattr(bm, name) is getattr(schedulers, name)
    assert bm.NAMED_SCHEDULERS["htd"].__name__ == "BudgetHTDLR"  # the core's label
    assert bm.BudgetLinearLR.__module__ == "budgeted.mmengine.schedulers"
    assert pickle.loads(pickle.dumps(bm.BudgetStepLR)) is bm.BudgetStepLR
    assert "power=0.9" in bm.BudgetPolyLR.__doc__


def test_a_schedule_registered_later_becomes_a_named_scheduler(sqrt_schedule):
    cls = bm.NAMED_SCHEDULERS[sqrt_schedule]
    assert cls.__name__ == "BudgetSqrtLR" and cls.fixed_schedule == sqrt_schedule
    assert PARAM_SCHEDULERS.get("BudgetSqrtLR") is cls
    assert schedulers.BudgetSqrtLR is cls and bm.BudgetSqrtLR is cls
    assert "BudgetSqrtLR" in bm.scheduler_types() and "BudgetSqrtLR" in dir(bm)
    sched = cls(make_optimizer((1.0,)), end=20, warmup_iters=0, by_epoch=False, floor=0.2)
    core = BudgetSchedule(sqrt_schedule, 20, 0, params={"floor": 0.2})
    assert [v[0] for v in run(sched, 20)] == pytest.approx([core(t) for t in range(20)])
    with pytest.raises(ValueError, match=r"BudgetSqrtLR: sqrt schedule: floor=1\.5 is invalid"):
        cls(make_optimizer(), end=20, warmup_iters=0, by_epoch=False, floor=1.5)


def test_a_schedule_whose_class_name_is_taken_is_refused():
    info = ScheduleInfo("schedule", lambda p: 1.0, "Schedule", {}, {})  # BudgetScheduleLR
    with pytest.raises(ValueError, match="BudgetScheduleLR, which is already registered"):
        schedulers._add_named_scheduler(info)
    with pytest.raises(AttributeError, match="has no attribute 'BudgetNopeLR'"):
        bm.BudgetNopeLR  # noqa: B018


@pytest.mark.parametrize("schedule", list(PARAMS))
def test_named_scheduler_steps_through_whole_budget_like_the_core(schedule):
    begin, end, warmup = 5, 65, 10
    cls = bm.NAMED_SCHEDULERS[schedule]
    opt = make_optimizer()
    sched = PARAM_SCHEDULERS.build(
        dict(
            type=cls.__name__,
            begin=begin,
            end=end,
            warmup_iters=warmup,
            by_epoch=False,
            **PARAMS[schedule],
        ),
        default_args=dict(optimizer=opt),
    )
    core = BudgetSchedule(schedule, end - begin, warmup, 0.001, "linear", PARAMS[schedule])
    values = run(sched, end + 5)
    for it, groups in enumerate(values):
        for lr, base in zip(groups, (0.1, 0.02)):
            if it < begin:
                expected = base  # not started yet: MMEngine leaves the value alone
            elif it < end:
                expected = base * core(it - begin)
            else:
                expected = base * core(end - 1 - begin)  # after end: the last value stays
            assert lr == pytest.approx(expected, rel=1e-12, abs=1e-15), (schedule, it)


def test_wsd_cooldown_shapes_and_sgdr_restarts_follow_their_formulas(schedule_variant):
    schedule, params, formula = schedule_variant
    opt = make_optimizer((1.0,))
    sched = PARAM_SCHEDULERS.build(
        dict(type=bm.NAMED_SCHEDULERS[schedule].__name__, end=80, warmup_iters=0, by_epoch=False,
             **params),
        default_args=dict(optimizer=opt),
    )  # fmt: skip
    assert [v[0] for v in run(sched, 80)] == pytest.approx(
        [formula(t / 80) for t in range(80)], abs=1e-12
    )


def test_generic_lr_and_param_scheduler_match_the_named_ones():
    a = bm.BudgetHTDLR(make_optimizer(), end=40, warmup_iters=3, by_epoch=False)
    b = bm.BudgetScheduleLR(
        make_optimizer(), schedule="htd", end=40, warmup_iters=3, by_epoch=False
    )
    assert run(a, 45) == run(b, 45)
    opt = make_optimizer()
    m = bm.BudgetParamScheduler(
        opt, "momentum", schedule="cosine", end=20, warmup_iters=0, by_epoch=False
    )
    momenta = [v[0] for v in run(m, 20)]
    core = BudgetSchedule("cosine", 20, 0)
    assert momenta == pytest.approx([0.9 * core(t) for t in range(20)])
    assert opt.param_groups[0]["lr"] == 0.1  # only the named parameter moves


def test_works_with_an_optim_wrapper():
    wrapper = OptimWrapper(make_optimizer((0.01,)))
    sched = bm.BudgetLinearLR(wrapper, end=10, warmup_iters=2, by_epoch=False)
    assert [v[0] for v in run(sched, 10)] == pytest.approx(
        [0.01 * BudgetSchedule("linear", 10, 2)(t) for t in range(10)]
    )


def test_a_hub_left_by_a_runner_that_stopped_with_an_error_does_not_check_another_scheduler():
    """A runner stopped by an error leaves its ``MessageHub`` (the current one) in the middle of
    training: a scheduler built afterwards with an ``OptimWrapper`` (which takes that hub) is
    not that runner's, and its first step refuses nothing (full ``make test`` found this)."""
    from mmengine.logging import MessageHub

    hub = MessageHub.get_instance("a_runner_that_stopped_with_an_error")
    for key, value in (("loop_stage", "train"), ("max_iters", 6), ("iter", 5)):
        hub.update_info(key, value)
    wrapper = OptimWrapper(make_optimizer((0.01,)))
    assert wrapper.message_hub is hub
    sched = bm.BudgetLinearLR(wrapper, end=10, warmup_iters=2, by_epoch=False)
    assert [v[0] for v in run(sched, 10)] == pytest.approx(
        [0.01 * BudgetSchedule("linear", 10, 2)(t) for t in range(10)]
    )


def test_epoch_based_config_converts_to_iterations():
    sched = PARAM_SCHEDULERS.build(
        dict(type="BudgetCosineLR", begin=1, end=4, warmup_iters=5, convert_to_iter_based=True),
        default_args=dict(optimizer=make_optimizer(), epoch_length=10),
    )
    assert (sched.begin, sched.end, sched.by_epoch, sched.warmup_iters) == (10, 40, False, 5)
    assert sched.multiplier(7) == BudgetSchedule("cosine", 30, 5)(7)


@given(
    begin=st.integers(0, 50),
    warmup=st.integers(0, 50),
    length=st.integers(1, 200),
    factor=st.floats(1e-4, 1.0),
    schedule=st.sampled_from(sorted(PARAMS)),
)
@settings(max_examples=40, deadline=None)
def test_any_budget_matches_the_core(begin, warmup, length, factor, schedule):
    end = begin + warmup + length
    sched = bm.BudgetScheduleLR(
        make_optimizer((1.0,)),
        schedule=schedule,
        begin=begin,
        end=end,
        warmup_iters=warmup,
        warmup_factor=factor,
        by_epoch=False,
        **PARAMS[schedule],
    )
    core = BudgetSchedule(schedule, end - begin, warmup, factor, "linear", PARAMS[schedule])
    lrs = [v[0] for v in run(sched, end)]
    assert lrs[begin:] == pytest.approx([core(t) for t in range(end - begin)], rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            dict(end=10, warmup_iters=10),
            "warmup_iters=10 is not shorter than the budget end - begin=10",
        ),
        (
            dict(begin=5, end=12, warmup_iters=8),
            "warmup_iters=8 is not shorter than the budget end - begin=7: the decay phase would be "
            "empty; allowed: 0 <= warmup_iters < end - begin",
        ),
        (dict(end=10, warmup_iters=2, by_epoch=True), "by_epoch=True without convert"),
        (dict(warmup_iters=2), "end is not set"),
        (dict(end=10, warmup_iters=-1), "warmup_iters=-1 is invalid"),
        (
            dict(end=10, warmup_iters=2, power=2),
            "BudgetLinearLR: unknown argument 'power'; allowed: begin, end, by_epoch, "
            "warmup_iters, warmup_factor, warmup_method, on_resume, and the linear schedule "
            "takes no parameters of its own",
        ),
        (
            dict(end=10, warmup_iter=2),
            "BudgetLinearLR: unknown argument 'warmup_iter'; did you mean 'warmup_iters'?",
        ),
        (dict(end=10, warmup_iters=2, warmup_factor=0), "BudgetLinearLR: warmup_factor=0"),
        (dict(end=10, warmup_iters=2, schedule="step"), "always uses the 'linear' schedule"),
        (dict(end=10, warmup_iters=2, schedule="step"), "use BudgetScheduleLR(schedule='step')"),
    ],
)
def test_bad_arguments_fail_with_one_clear_line(kwargs, message):
    kwargs.setdefault("by_epoch", False)
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        bm.BudgetLinearLR(make_optimizer(), **kwargs)
    assert "\n" not in str(err.value)


def test_bad_schedule_parameter_value_names_the_scheduler():
    with pytest.raises(ValueError, match=r"BudgetPolyLR: poly schedule: power=-1 is invalid"):
        bm.BudgetPolyLR(make_optimizer(), end=10, warmup_iters=0, by_epoch=False, power=-1)


def test_state_dict_holds_plain_values_and_resumes_exactly():
    def build():
        return bm.BudgetStepLR(
            make_optimizer(), end=30, warmup_iters=4, by_epoch=False, milestones=[0.5], gamma=0.5
        )

    full = build()
    values = run(full, 30)
    first = build()
    run(first, 12)
    state = first.state_dict()
    assert "_plan" not in state and "optimizer" not in state
    assert state["end"] == 30
    assert state["budget"] == {
        "begin": 0,
        **BudgetSchedule("step", 30, 4, params={"milestones": [0.5], "gamma": 0.5}).state(),
    }
    assert all(isinstance(v, (int, float, str, bool, list, dict, tuple)) for v in state.values())
    second = build()
    second.optimizer.load_state_dict(first.optimizer.state_dict())
    second.load_state_dict(state)
    assert run(second, 18) == values[12:]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            dict(end=40),
            "the checkpoint's budget has train_cfg.max_iters (end - begin)=30, the config's "
            "train_cfg.max_iters (end - begin)=40; to resume, keep the checkpoint's budget "
            "(train_cfg.max_iters=30)",
        ),
        (dict(warmup_iters=5), "has warmup_iters=4, the config's warmup_iters=5"),
        (dict(schedule="cosine"), "has schedule='linear', the config's schedule='cosine'"),
        (dict(begin=2, end=32), "has begin=0, the config's begin=2"),
    ],
)
def test_resume_with_another_budget_is_refused(change, expected):
    saved = bm.BudgetScheduleLR(make_optimizer(), end=30, warmup_iters=4, by_epoch=False)
    run(saved, 5)
    kwargs = dict(end=30, warmup_iters=4, by_epoch=False) | change
    other = bm.BudgetScheduleLR(make_optimizer(), **kwargs)
    before = other.last_step
    with pytest.raises(BudgetMismatchError) as err:
        other.load_state_dict(saved.state_dict())
    message = str(err.value)
    assert message.startswith("cannot resume: ") and expected in message
    assert "load_from=<checkpoint> and resume=False" in message and "\n" not in message
    assert other.last_step == before  # nothing was loaded
    assert bm.BudgetMismatchError is BudgetMismatchError  # the core's, not a second type


def test_resume_from_a_non_budget_scheduler_is_refused():
    poly = PARAM_SCHEDULERS.build(
        dict(type="PolyLR", end=30, by_epoch=False), default_args=dict(optimizer=make_optimizer())
    )
    ours = bm.BudgetLinearLR(make_optimizer(), end=30, warmup_iters=4, by_epoch=False)
    with pytest.raises(
        BudgetMismatchError, match=r"budget is missing .its scheduler was not budget-aware"
    ):
        ours.load_state_dict(poly.state_dict())


def test_an_end_other_than_the_train_loop_is_refused_in_one_line():
    bm.schedulers.check_loop_end("BudgetLinearLR", 12, 12)
    bm.schedulers.check_loop_end("BudgetLinearLR", 12, None)
    for end, effect in ((20, "be cut short"), (8, "end before training does")):
        with pytest.raises(bm.BudgetConfigError) as err:
            bm.schedulers.check_loop_end("BudgetStepLR", end, 12)
        message = str(err.value)
        assert f"BudgetStepLR: end={end} differs from the train loop's max_iters=12" in message
        assert effect in message and f"set train_cfg.max_iters={end}" in message
        with pytest.raises(bm.BudgetConfigError) as err:  # an epoch loop has no max_iters key
            bm.schedulers.check_loop_end("BudgetStepLR", end, 12, epoch_loop=True)
        assert "train_cfg.max_iters=" not in str(err.value)
        assert "leave out end so that the runner fills it from train_cfg.max_epochs" in str(
            err.value
        )
        assert "remove end" in message and "\n" not in message
    # built outside a runner, nothing is compared: the scheduler stands alone
    bm.BudgetLinearLR(make_optimizer(), end=20, warmup_iters=2, by_epoch=False)


def test_importing_the_package_leaves_mmengines_param_scheduler_hook_alone():
    """Issue 42: ``import budgeted.mmengine`` replaces no hook of MMEngine's for other runners:
    ``ParamSchedulerHook`` is MMEngine's own class in ``HOOKS``, its hook points its own."""
    import mmengine.hooks
    from mmengine.hooks import Hook
    from mmengine.registry import HOOKS

    stock = mmengine.hooks.ParamSchedulerHook
    assert HOOKS.get("ParamSchedulerHook") is stock
    assert type(HOOKS.build(dict(type="ParamSchedulerHook"))) is stock
    assert stock.before_run is Hook.before_run and stock.before_train is Hook.before_train
    assert "before_run" not in vars(stock) and "before_train" not in vars(stock)


def test_the_budget_param_scheduler_hook_binds_the_budget_schedulers():
    """``BudgetParamSchedulerHook``, built by its own name from ``HOOKS`` (as our tools and
    configs name it), binds each budget scheduler to ``runner.train_loop`` in ``before_run`` (no
    call stack involved)."""
    from types import SimpleNamespace

    from mmengine.config import Config
    from mmengine.registry import HOOKS

    hook = HOOKS.build(dict(type="BudgetParamSchedulerHook"))
    assert type(hook) is bm.BudgetParamSchedulerHook
    sched = bm.BudgetLinearLR(make_optimizer(), end=20, warmup_iters=2, by_epoch=False)
    stock = PARAM_SCHEDULERS.build(
        dict(type="PolyLR", end=30, by_epoch=False), default_args=dict(optimizer=make_optimizer())
    )
    loop = SimpleNamespace(max_iters=12)
    runner = SimpleNamespace(param_schedulers=[stock, sched], train_loop=loop, cfg=Config())
    with pytest.raises(bm.BudgetConfigError, match=r"^BudgetLinearLR: end=20 .* max_iters=12:"):
        hook.before_run(runner)
    loop.max_iters = 20
    runner.cfg = Config(dict(budget_on_resume="replan"))
    hook.before_run(runner)
    assert sched.on_resume == "replan"


def test_multiplier_is_finite_over_the_budget():
    sched = bm.BudgetExpLR(make_optimizer(), end=100, warmup_iters=10, by_epoch=False)
    assert all(math.isfinite(sched.multiplier(t)) for t in range(100))
    assert sched.multiplier(0) == pytest.approx(0.001)


def test_docstring_examples_of_the_package_run():
    import doctest

    from budgeted.mmengine import (
        annotation_checks,
        checkpoint,
        cli,
        compat,
        config_checks,
        config_edits,
        dist_run,
        input_checks,
        launch,
        resume,
        runs,
        scheduler_checks,
        scheduler_hook,
        time_budget,
        toy,
    )

    modules = (schedulers, checkpoint, cli, dist_run, launch, resume, runs)
    modules += (config_checks, config_edits, input_checks, scheduler_checks, scheduler_hook)
    for module in (*modules, annotation_checks, compat, time_budget, toy):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0, module.__name__

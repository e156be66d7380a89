"""budgeted.detectron2.solver: the registry, the Budget* schedulers, stock names unchanged."""

from __future__ import annotations

import pytest
import torch
from detectron2.config import get_cfg
from detectron2.engine import DefaultTrainer
from detectron2.solver import build_lr_scheduler as d2_build_lr_scheduler

from budgeted.detectron2 import (
    BUDGET_SCHEDULERS,
    LR_SCHEDULER_REGISTRY,
    BudgetConfigError,
    BudgetLRScheduler,
    BudgetResumeError,
    add_budget_config,
    budget_scheduler_names,
    build_lr_scheduler,
    check_budget,
    check_max_iter,
)
from budgeted.detectron2.config import param_key
from budgeted.schedules import BudgetMismatchError, BudgetSchedule

pytestmark = pytest.mark.unit

CORE = {
    "BudgetLinear": ("linear", {}),
    "BudgetCosine": ("cosine", {"eta": 0.05}),
    "BudgetPoly": ("poly", {"power": 2.0}),
    "BudgetHTD": ("htd", {"lower": -4.0, "upper": 2.0, "eta": 0.0}),
    "BudgetStep": ("step", {"milestones": (0.5, 0.75), "gamma": 0.2}),
    "BudgetExp": ("exp", {"end_factor": 0.05}),
    "BudgetConstant": ("constant", {}),
    "BudgetWSD": ("wsd", {"cooldown": 0.4, "decay": "sqrt"}),
    "BudgetRex": ("rex", {}),
    "BudgetSGDR": ("sgdr", {"restarts": 2}),
}


def make_cfg(name: str, max_iter: int = 60, warmup: int = 7, **solver):
    cfg = add_budget_config(get_cfg())
    s = cfg.SOLVER
    s.LR_SCHEDULER_NAME, s.MAX_ITER, s.WARMUP_ITERS, s.BASE_LR = name, max_iter, warmup, 0.1
    s.WARMUP_FACTOR, s.GAMMA = 0.01, 0.2
    b = s.BUDGET
    b.COSINE_ETA, b.POLY_POWER, b.HTD_LOWER, b.HTD_UPPER = 0.05, 2.0, -4.0, 2.0
    b.STEP_MILESTONES, b.EXP_END_FACTOR, b.WSD_COOLDOWN = (0.5, 0.75), 0.05, 0.4
    b.WSD_DECAY, b.SGDR_RESTARTS = "sqrt", 2
    for k, v in solver.items():
        setattr(s, k, v)
    return cfg


def run_lrs(scheduler, optimizer, steps: int) -> list[float]:
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def sgd(lr: float = 0.1) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def test_every_core_schedule_has_a_detectron2_name() -> None:
    assert set(BUDGET_SCHEDULERS) == set(CORE)  # the built-ins
    assert set(CORE) <= set(budget_scheduler_names())  # tests may have registered more
    assert all(name in LR_SCHEDULER_REGISTRY for name in budget_scheduler_names())


def test_wsd_cooldown_shapes_and_sgdr_restarts_follow_their_formulas(schedule_variant) -> None:
    """``SOLVER.BUDGET.WSD_DECAY`` / ``SGDR_RESTARTS`` reach the multiplier (no warmup)."""
    schedule, params, formula = schedule_variant
    cfg = make_cfg(f"Budget{schedule.upper()}", max_iter=80, warmup=0)
    for param, value in params.items():
        cfg.SOLVER.BUDGET[param_key(schedule, param).rsplit(".", 1)[1]] = value
    opt = sgd()
    lrs = run_lrs(build_lr_scheduler(cfg, opt), opt, 80)
    assert lrs == pytest.approx([0.1 * formula(t / 80) for t in range(80)], abs=1e-12)


def test_a_schedule_registered_later_gets_its_name_and_keys(sqrt_schedule) -> None:
    assert "BudgetSqrt" in budget_scheduler_names() and "BudgetSqrt" in LR_SCHEDULER_REGISTRY
    cfg = make_cfg("BudgetSqrt")
    assert cfg.SOLVER.BUDGET.SQRT_FLOOR == 0.0  # added by add_budget_config, core default
    cfg.SOLVER.BUDGET.SQRT_FLOOR = 0.25
    opt = sgd()
    core = BudgetSchedule("sqrt", 60, 7, 0.01, params={"floor": 0.25})
    lrs = run_lrs(build_lr_scheduler(cfg, opt), opt, 60)
    assert lrs == pytest.approx([0.1 * core(t) for t in range(60)], rel=1e-12)
    # a config made before the schedule was registered lacks the key: the core's default
    del cfg.SOLVER.BUDGET["SQRT_FLOOR"]
    assert build_lr_scheduler(cfg, sgd()).budget.params == {"floor": 0.0}
    cfg.SOLVER.BUDGET.SQRT_FLOOR = 1.5
    with pytest.raises(BudgetConfigError) as err:
        build_lr_scheduler(cfg, sgd())
    assert str(err.value) == (
        "SOLVER.BUDGET.SQRT_FLOOR=1.5 is invalid for BudgetSqrt; allowed: a number in [0, 1)"
    )


def test_param_keys_are_derived_from_the_signature() -> None:
    assert param_key("htd", "lower") == "SOLVER.BUDGET.HTD_LOWER"
    assert param_key("exp", "end_factor") == "SOLVER.BUDGET.EXP_END_FACTOR"
    assert param_key("step", "milestones") == "SOLVER.BUDGET.STEP_MILESTONES"
    assert param_key("step", "gamma") == "SOLVER.GAMMA"  # Detectron2's own key
    cfg = make_cfg("BudgetStep")
    assert "STEP_GAMMA" not in cfg.SOLVER.BUDGET
    assert build_lr_scheduler(cfg, sgd()).budget.params == {"milestones": (0.5, 0.75), "gamma": 0.2}


@pytest.mark.parametrize("name", sorted(CORE))
def test_budget_scheduler_matches_the_core_over_the_whole_budget(name) -> None:
    cfg = make_cfg(name)
    opt = sgd()
    sched = build_lr_scheduler(cfg, opt)
    assert isinstance(sched, BudgetLRScheduler)
    assert isinstance(sched, torch.optim.lr_scheduler._LRScheduler)  # checkpointed by the hook
    core = BudgetSchedule(CORE[name][0], 60, 7, 0.01, "linear", CORE[name][1])
    assert run_lrs(sched, opt, 60) == pytest.approx([0.1 * core(t) for t in range(60)], rel=1e-12)


@pytest.mark.parametrize("name", ["WarmupMultiStepLR", "WarmupCosineLR"])
def test_stock_names_behave_exactly_as_detectron2s_builder(name) -> None:
    cfg = make_cfg(name, STEPS=(20, 40))
    ours, theirs = sgd(), sgd()
    a, b = build_lr_scheduler(cfg, ours), d2_build_lr_scheduler(cfg, theirs)
    assert type(a) is type(b)
    assert run_lrs(a, ours, 60) == run_lrs(b, theirs, 60)
    assert a.state_dict() == b.state_dict()


def test_misspelt_name_lists_the_valid_names() -> None:
    with pytest.raises(BudgetConfigError) as err:
        build_lr_scheduler(make_cfg("BudgetLinaer"), sgd())
    msg = str(err.value)
    assert "'BudgetLinaer'" in msg and "\n" not in msg
    for name in (*BUDGET_SCHEDULERS, "WarmupMultiStepLR", "WarmupCosineLR"):
        assert name in msg


def test_a_user_registers_a_scheduler_by_decorator() -> None:
    @LR_SCHEDULER_REGISTRY.register()
    def HalvingTestLR(cfg, optimizer):
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    try:
        opt = sgd(1.0)
        sched = build_lr_scheduler(make_cfg("HalvingTestLR"), opt)
        assert run_lrs(sched, opt, 3) == [1.0, 0.5, 0.25]
        with pytest.raises(BudgetConfigError, match="HalvingTestLR"):
            build_lr_scheduler(make_cfg("Nope"), sgd())
    finally:
        LR_SCHEDULER_REGISTRY._obj_map.pop("HalvingTestLR")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"warmup": 60},
            "SOLVER.WARMUP_ITERS=60 is not shorter than the budget SOLVER.MAX_ITER=60",
        ),
        (
            {"WARMUP_FACTOR": 0.0},
            r"^SOLVER.LR_SCHEDULER_NAME=BudgetLinear: SOLVER.WARMUP_FACTOR=0.0 is invalid; "
            r"allowed: a number in \(0, 1\]$",
        ),
        ({"WARMUP_METHOD": "cubic"}, "SOLVER.WARMUP_METHOD='cubic' is invalid; allowed: linear"),
    ],
)
def test_bad_budget_fails_in_one_line(kwargs, message) -> None:
    cfg = make_cfg(
        "BudgetLinear",
        **{k: v for k, v in kwargs.items() if k != "warmup"},
        **({"warmup": kwargs["warmup"]} if "warmup" in kwargs else {}),
    )
    with pytest.raises(BudgetConfigError, match=message) as err:
        build_lr_scheduler(cfg, sgd())
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "name,key,value,allowed",
    [
        ("BudgetPoly", "POLY_POWER", -1.0, "a number > 0"),
        ("BudgetCosine", "COSINE_ETA", 1.0, "a number in [0, 1)"),
        ("BudgetStep", "STEP_MILESTONES", (0.8, 0.5), "an increasing list of fractions"),
        ("BudgetExp", "EXP_END_FACTOR", 0.0, "a number in (0, 1]"),
    ],
)
def test_bad_schedule_params_name_the_key(name, key, value, allowed) -> None:
    cfg = make_cfg(name)
    cfg.SOLVER.BUDGET[key] = value
    with pytest.raises(BudgetConfigError) as err:
        build_lr_scheduler(cfg, sgd())
    msg = str(err.value)
    assert msg.startswith(
        f"SOLVER.BUDGET.{key}={value!r} is invalid for {name}; allowed: {allowed}"
    )
    assert "\n" not in msg


def test_max_iter_against_the_stated_budget_is_refused_for_any_name() -> None:
    # the docs' "own trainer" trap: FULL_ITERS and FRACTION merged, MAX_ITER left at 90000
    for name in ("BudgetLinear", "WarmupMultiStepLR"):
        cfg = make_cfg(name, max_iter=90000, STEPS=(10, 20))
        cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.FRACTION = 400, 0.1
        with pytest.raises(BudgetConfigError) as err:
            build_lr_scheduler(cfg, sgd())
        assert str(err.value) == (
            "SOLVER.MAX_ITER=90000 is not the budget the config states (SOLVER.BUDGET.FRACTION="
            "0.1 x FULL_ITERS=400 = 40 iterations); set SOLVER.MAX_ITER 40 "
            "(budgeted.detectron2.load_config does), or SOLVER.BUDGET.FULL_ITERS 0 to train "
            "SOLVER.MAX_ITER as it is"
        )
        cfg.SOLVER.MAX_ITER = 40
        build_lr_scheduler(cfg, sgd())
    check_max_iter(make_cfg("BudgetLinear", max_iter=90000))  # FULL_ITERS 0: as it is


@pytest.mark.parametrize(
    "keys,message",
    [
        (
            {"FRACTION": 0.1},
            "SOLVER.BUDGET.FRACTION=0.1 needs SOLVER.BUDGET.FULL_ITERS (the full schedule's "
            "length, e.g. 90000); allowed: set FULL_ITERS",
        ),
        ({"FULL_ITERS": 400, "IMS_PER_BATCH": -16}, "SOLVER.BUDGET.IMS_PER_BATCH=-16 is invalid"),
        ({"WRITER_PERIOD": 0}, "SOLVER.BUDGET.WRITER_PERIOD=0 is invalid"),
        ({"SAVE_AT": (0, 4)}, "SOLVER.BUDGET.SAVE_AT=(0, 4) is invalid"),
    ],
)
def test_an_own_trainers_bad_budget_keys_are_refused_by_the_builder(keys, message) -> None:
    """The own-trainer route (add_budget_config, merge, build_lr_scheduler) refuses what
    load_config refuses: no budget silently trained as MAX_ITER."""
    for name in ("BudgetLinear", "WarmupMultiStepLR"):
        cfg = make_cfg(name, max_iter=90000, STEPS=(10, 20))
        for key, value in keys.items():
            cfg.SOLVER.BUDGET[key] = value
        with pytest.raises(BudgetConfigError) as err:
            build_lr_scheduler(cfg, sgd())
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
    cfg = make_cfg("BudgetLinear", max_iter=90000)
    cfg.SOLVER.IMS_PER_BATCH = 0
    with pytest.raises(BudgetConfigError, match=r"SOLVER\.IMS_PER_BATCH=0 is invalid"):
        build_lr_scheduler(cfg, sgd())


def test_budget_batch_follows_reference_world_size_scaling() -> None:
    # 12 iterations at batch 2 (0.03 x 400) on 1 reference worker, trained on 2 workers
    cfg = make_cfg("BudgetLinear", max_iter=12, warmup=3, IMS_PER_BATCH=2, REFERENCE_WORLD_SIZE=1)
    b = cfg.SOLVER.BUDGET
    b.FULL_ITERS, b.FRACTION, b.IMS_PER_BATCH = 400, 0.03, 2
    scaled = DefaultTrainer.auto_scale_workers(cfg, 2)
    assert (scaled.SOLVER.MAX_ITER, scaled.SOLVER.IMS_PER_BATCH) == (6, 4)
    assert build_lr_scheduler(scaled, sgd()).budget.total == 6  # the same 24 images
    assert check_budget(cfg, world_size=2).SOLVER.MAX_ITER == 6
    # without SOLVER.BUDGET.IMS_PER_BATCH the scaled batch would be taken as FULL_ITERS' batch
    b.IMS_PER_BATCH = 0
    with pytest.raises(BudgetConfigError, match=r"MAX_ITER=6 .* set SOLVER.BUDGET.IMS_PER_BATCH"):
        build_lr_scheduler(DefaultTrainer.auto_scale_workers(cfg, 2), sgd())
    # a batch that differs from the counted one: MAX_ITER covers the same images
    b.IMS_PER_BATCH = 16
    cfg.SOLVER.IMS_PER_BATCH, cfg.SOLVER.REFERENCE_WORLD_SIZE, cfg.SOLVER.MAX_ITER = 8, 0, 24
    assert build_lr_scheduler(cfg, sgd()).budget.total == 24
    cfg.SOLVER.MAX_ITER = 12
    with pytest.raises(BudgetConfigError, match=r"BUDGET\.IMS_PER_BATCH=16 images, i\.e\. 24"):
        build_lr_scheduler(cfg, sgd())


def test_reference_world_size_scales_budget_and_warmup_like_detectron2() -> None:
    cfg = make_cfg("BudgetLinear", max_iter=9000, warmup=500, IMS_PER_BATCH=16,
                   REFERENCE_WORLD_SIZE=8)  # fmt: skip
    scaled = check_budget(cfg, world_size=16)
    stock = DefaultTrainer.auto_scale_workers(cfg.clone(), 16)
    assert (scaled.SOLVER.MAX_ITER, scaled.SOLVER.WARMUP_ITERS) == (4500, 250)
    assert scaled.SOLVER.MAX_ITER == stock.SOLVER.MAX_ITER
    assert scaled.SOLVER.IMS_PER_BATCH == 32 and pytest.approx(0.2) == scaled.SOLVER.BASE_LR
    opt = sgd(scaled.SOLVER.BASE_LR)
    lrs = run_lrs(build_lr_scheduler(scaled, opt), opt, 4500)
    core = BudgetSchedule("linear", 4500, 250, 0.01)
    assert lrs == pytest.approx([0.2 * core(t) for t in range(4500)], rel=1e-12)
    # the same images seen: iteration i at 16 GPUs == iteration 2i at 8 GPUs, in multiplier
    ref = BudgetSchedule("linear", 9000, 500, 0.01)
    assert core(1000) == pytest.approx(ref(2000))


def test_warmup_longer_than_the_scaled_budget_is_refused() -> None:
    # 5 / 4 and 4 / 4 both round to one iteration: no decay left
    cfg = make_cfg("BudgetLinear", max_iter=5, warmup=4, IMS_PER_BATCH=4, REFERENCE_WORLD_SIZE=1)
    check_budget(cfg, world_size=1)
    with pytest.raises(BudgetConfigError, match="after REFERENCE_WORLD_SIZE scaling to 4 workers"):
        check_budget(cfg, world_size=4)


def test_resuming_another_budget_is_refused_naming_both() -> None:
    opt = sgd()
    sched = build_lr_scheduler(make_cfg("BudgetLinear", max_iter=60), opt)
    run_lrs(sched, opt, 5)
    state = sched.state_dict()
    same = build_lr_scheduler(make_cfg("BudgetLinear", max_iter=60), sgd())
    same.load_state_dict(state)
    assert same.last_epoch == 5
    other = build_lr_scheduler(make_cfg("BudgetLinear", max_iter=80), sgd())
    with pytest.raises(BudgetResumeError) as err:
        other.load_state_dict(state)
    assert isinstance(err.value, BudgetMismatchError) and isinstance(err.value, BudgetConfigError)
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget has SOLVER.MAX_ITER=60, the config's "
        f"SOLVER.MAX_ITER=80; {BudgetLRScheduler.RESUME_FIX}"
    )
    assert "MODEL.WEIGHTS" in BudgetLRScheduler.RESUME_FIX
    stock = d2_build_lr_scheduler(make_cfg("WarmupMultiStepLR", STEPS=(20,)), sgd()).state_dict()
    with pytest.raises(BudgetResumeError, match="budget is missing"):
        other.load_state_dict(stock)

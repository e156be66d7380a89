"""budgeted.mmengine.cli: the checks tools/train_seg.py runs on a config before training."""

from __future__ import annotations

import pytest
from mmengine.config import Config

from budgeted.mmengine.cli import (
    apply_budget_fraction,
    check_budget_hooks,
    check_budget_schedulers,
    check_data_roots,
    check_scheduler_types,
    fill_budget_scheduler_defaults,
)

pytestmark = pytest.mark.unit


def cfg_with(**kwargs) -> Config:
    base = dict(
        default_scope="mmseg",
        train_cfg=dict(type="IterBasedTrainLoop", max_iters=800, val_interval=800),
        param_scheduler=[dict(type="BudgetLinearLR", warmup_iters=5)],
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=8000)),
    )
    return Config({**base, **kwargs})


def test_unknown_scheduler_type_names_ours_and_the_closest():
    cfg = cfg_with(param_scheduler=[dict(type="BudgetLinerLR")])
    with pytest.raises(ValueError) as err:
        check_scheduler_types(cfg)
    message = str(err.value)
    assert "'BudgetLinerLR'" in message and "did you mean 'BudgetLinearLR'" in message
    assert "BudgetStepLR" in message and "BudgetScheduleLR" in message and "\n" not in message
    ok = [dict(type="PolyLR"), dict(type="BudgetScheduleLR"), dict(type="PolyLRRatio")]
    check_scheduler_types(cfg_with(param_scheduler=ok))
    with pytest.raises(ValueError, match="did you mean 'BudgetScheduleLR'"):
        check_scheduler_types(cfg_with(param_scheduler=[dict(type="BudgetLR")]))  # the old name


def test_budget_schedulers_follow_the_train_loop():
    cfg = cfg_with()
    fill_budget_scheduler_defaults(cfg)
    assert cfg.param_scheduler[0].by_epoch is False
    epochs = cfg_with(train_cfg=dict(type="EpochBasedTrainLoop", max_epochs=12))
    fill_budget_scheduler_defaults(epochs)
    assert epochs.param_scheduler[0].by_epoch is True
    assert epochs.param_scheduler[0].convert_to_iter_based is True
    explicit = cfg_with(param_scheduler=[dict(type="BudgetLinearLR", by_epoch=True)])
    fill_budget_scheduler_defaults(explicit)
    assert explicit.param_scheduler[0].by_epoch is True  # never overrides what is written
    stock = cfg_with(param_scheduler=[dict(type="PolyLR")])
    fill_budget_scheduler_defaults(stock)
    assert "by_epoch" not in stock.param_scheduler[0]  # only ours


def test_a_scheduler_end_other_than_max_iters_is_refused_before_training():
    check_budget_schedulers(cfg_with(param_scheduler=[dict(type="BudgetLinearLR", by_epoch=False)]))
    fixed = [dict(type="BudgetStepLR", end=800, warmup_iters=5, by_epoch=False)]
    check_budget_schedulers(cfg_with(param_scheduler=fixed))  # end = max_iters: fine
    fixed[0]["end"] = 8000
    with pytest.raises(ValueError) as err:
        check_budget_schedulers(cfg_with(param_scheduler=fixed))
    message = str(err.value)
    assert "BudgetStepLR: end=8000 differs from the train loop's max_iters=800" in message
    assert "\n" not in message


def adamw_with(*schedulers: dict) -> Config:
    adamw = dict(type="OptimWrapper", optimizer=dict(type="AdamW", lr=1e-3, weight_decay=0.01))
    return cfg_with(optim_wrapper=adamw, param_scheduler=list(schedulers))


def test_param_name_is_checked_against_the_configs_own_optimizer():
    eps = dict(type="BudgetParamScheduler", param_name="eps", warmup_iters=0, by_epoch=False)
    check_budget_schedulers(adamw_with(eps))  # AdamW's groups have eps (SGD's do not)
    momentum = dict(eps, param_name="momentum")  # SGD's groups have it, AdamW's do not
    with pytest.raises(ValueError) as err:
        check_budget_schedulers(adamw_with(momentum))
    assert str(err.value).startswith(
        "BudgetParamScheduler: param_name='momentum' is not a key of the optimizer's param groups"
    )
    assert "eps" in str(err.value) and "betas" not in str(err.value)  # numbers only
    with pytest.raises(ValueError) as err:
        check_budget_schedulers(adamw_with(dict(eps, param_name="betas")))
    assert str(err.value).startswith(
        "BudgetParamScheduler: param_name='betas' holds (0.9, 0.999) in group 0, not one number "
        "to scale; allowed: one of "
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            dict(by_epoch=True),
            "BudgetLinearLR: by_epoch=True without convert_to_iter_based=True",
        ),
        (
            dict(by_epoch=False, end="abc"),
            "BudgetLinearLR: end='abc' is invalid; allowed: an integer >= 0 (end defaults to "
            "train_cfg.max_iters)",
        ),
    ],
)
def test_entries_the_runner_would_refuse_are_refused_before_training(entry, message):
    cfg = cfg_with(param_scheduler=[dict(type="BudgetLinearLR", warmup_iters=5, **entry)])
    with pytest.raises(ValueError) as err:
        check_budget_schedulers(cfg)
    assert str(err.value) == message or str(err.value).startswith(message + ";")


@pytest.mark.parametrize(
    ("hook", "loop", "message"),
    [
        (
            dict(type="FullGradNormHook", interval=0),
            None,
            "FullGradNormHook: interval=0 is invalid",
        ),
        (
            dict(type="FullGradNormHook", interval=2, name="lr"),
            None,
            "FullGradNormHook: name='lr' is invalid; allowed: an identifier that MMEngine does "
            "not log itself",
        ),
        (
            dict(type="CheckpointAtHook", iterations=4),
            None,
            "CheckpointAtHook: iterations=4 is invalid; allowed: a list of iteration counts > 0",
        ),
        (
            dict(type="CheckpointAtHook", iterations=[40, -8]),
            None,
            "CheckpointAtHook: iterations=[40, -8] is",
        ),
        (
            dict(type="CheckpointAtHook", iterations=["x"]),
            None,
            "CheckpointAtHook: iterations=['x'] is",
        ),
        (dict(type="PreemptionHook", interval=0), None, "PreemptionHook: interval=0 is invalid"),
        (None, dict(seconds="abc"), "TimeBudgetTrainLoop: time budget 'abc' is invalid"),
        (
            None,
            dict(seconds="2h", clock_sync_period=0),
            "TimeBudgetTrainLoop: clock_sync_period=0 is invalid; allowed: an integer >= 1",
        ),
    ],
)
def test_our_hooks_and_loop_are_checked_before_training(hook, loop, message):
    """Built (hooks) or checked (the loop) from the config alone: one line before the runner
    writes anything."""
    good = cfg_with(custom_hooks=[dict(type="CheckpointAtHook", iterations=[400, 800])])
    check_budget_hooks(good)
    cfg = cfg_with(
        custom_hooks=[hook] if hook else [],
        train_cfg=dict(type="TimeBudgetTrainLoop", max_iters=800, **loop) if loop else {},
    )
    with pytest.raises(ValueError) as err:
        check_budget_hooks(cfg)
    assert str(err.value).startswith(message.split(" is")[0]) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_budget_fraction_sets_the_budget():
    cfg = cfg_with(full_schedule_iters=80000)
    assert apply_budget_fraction(cfg, 0.05) == 4000
    assert cfg.train_cfg.max_iters == 4000 and cfg.train_cfg.val_interval == 4000
    assert cfg.default_hooks.checkpoint.interval == 4000
    assert apply_budget_fraction(cfg_with(), 0.5) == 400  # full = max_iters without the key


@pytest.mark.parametrize("fraction", [0, -0.1, float("nan"), 1.5, 1.0000001])
def test_bad_budget_fraction_is_one_line(fraction):
    with pytest.raises(ValueError) as err:
        apply_budget_fraction(cfg_with(), fraction)
    message = str(err.value)
    allowed = "allowed: a number in (0, 1]"
    assert message.startswith(f"budget fraction={fraction!r} is invalid; {allowed}")
    assert "\n" not in message


def test_budget_fraction_one_trains_the_full_schedule():
    cfg = cfg_with(full_schedule_iters=80000)
    assert apply_budget_fraction(cfg, 1.0) == 80000


def test_budget_fraction_refuses_a_scheduler_with_a_fixed_end():
    cfg = cfg_with(param_scheduler=[dict(type="PolyLR", end=80000, by_epoch=False)])
    with pytest.raises(ValueError, match="PolyLR scheduler sets end=80000 but the budget is 400"):
        apply_budget_fraction(cfg, 0.5)


def test_missing_data_root_is_one_line(tmp_path):
    (tmp_path / "leftImg8bit/train").mkdir(parents=True)
    dataset = dict(
        data_root=str(tmp_path),
        data_prefix=dict(img_path="leftImg8bit/train", seg_map_path="gtFine/train"),
    )
    with pytest.raises(ValueError, match=r"train_dataloader: .*gtFine/train does not exist"):
        check_data_roots(cfg_with(train_dataloader=dict(dataset=dataset)))
    (tmp_path / "gtFine/train/aachen").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"leftImg8bit/train holds no files: the training split"):
        check_data_roots(cfg_with(train_dataloader=dict(dataset=dataset)))
    (tmp_path / "leftImg8bit/train/x_leftImg8bit.png").touch()
    with pytest.raises(ValueError, match=r"gtFine/train holds no files"):
        check_data_roots(cfg_with(train_dataloader=dict(dataset=dataset)))
    (tmp_path / "gtFine/train/aachen/x_gtFine_labelTrainIds.png").touch()  # below a city folder
    check_data_roots(cfg_with(train_dataloader=dict(dataset=dataset)))

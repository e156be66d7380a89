"""budgeted.mmengine.launch: the checks tools/train_seg.py runs before training."""

from __future__ import annotations

import pytest
from mmengine.config import Config

import budgeted.mmengine  # noqa: F401
from budgeted.mmengine.launch import (
    apply_budget_fraction,
    check_data_roots,
    check_scheduler_types,
    check_work_dir,
    fill_budget_scheduler_defaults,
    init_cpu_distributed,
    prepare_cpu_distributed,
)


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
    assert "BudgetStepLR" in message and "\n" not in message
    ok = [dict(type="PolyLR"), dict(type="BudgetLR"), dict(type="PolyLRRatio")]  # mmseg's own
    check_scheduler_types(cfg_with(param_scheduler=ok))


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


def test_budget_fraction_sets_the_budget():
    cfg = cfg_with(full_schedule_iters=80000)
    assert apply_budget_fraction(cfg, 0.05) == 4000
    assert cfg.train_cfg.max_iters == 4000 and cfg.train_cfg.val_interval == 4000
    assert cfg.default_hooks.checkpoint.interval == 4000
    assert apply_budget_fraction(cfg_with(), 0.5) == 400  # full = max_iters without the key


@pytest.mark.parametrize("fraction", [0, -0.1, float("nan")])
def test_bad_budget_fraction_is_one_line(fraction):
    with pytest.raises(ValueError, match=r"budget fraction=.* is invalid; allowed: a number > 0"):
        apply_budget_fraction(cfg_with(), fraction)


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
    (tmp_path / "gtFine/train").mkdir(parents=True)
    check_data_roots(cfg_with(train_dataloader=dict(dataset=dataset)))


def test_work_dir_with_a_run_is_not_overwritten(tmp_path):
    check_work_dir(tmp_path / "new", resume=False)
    (tmp_path / "iter_8.pth").write_bytes(b"")
    with pytest.raises(ValueError, match=r"already holds a run .*--resume"):
        check_work_dir(tmp_path, resume=False)
    check_work_dir(tmp_path, resume=True)


def test_cpu_distributed_config_uses_gloo_bn_and_no_device_ids():
    cfg = cfg_with(
        model=dict(
            backbone=dict(norm_cfg=dict(type="SyncBN")),
            heads=[dict(norm_cfg=dict(type="SyncBN")), dict(norm_cfg=dict(type="GN"))],
        ),
        env_cfg=dict(dist_cfg=dict(backend="nccl", timeout=60)),
    )
    assert prepare_cpu_distributed(cfg) == 2
    assert cfg.model.backbone.norm_cfg.type == "BN" and cfg.model.heads[1].norm_cfg.type == "GN"
    assert cfg.env_cfg.dist_cfg == dict(backend="gloo", timeout=60)
    assert cfg.model_wrapper_cfg == dict(type="MMDistributedDataParallel", device_ids=None)


def test_launcher_without_its_environment_is_one_line(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ValueError, match="RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT are not set"):
        init_cpu_distributed("pytorch")
    with pytest.raises(ValueError, match="launcher='none' is invalid"):
        init_cpu_distributed("none")

"""configs/mmseg: generated from tools/gen_mmseg_configs.py over budgeted.families, loadable, with
the right budgets; the toy model config is hand-written."""

from __future__ import annotations

import shutil
from pathlib import Path

import mmseg
import pytest
from mmengine.config import Config
from mmseg_testutils import REPO, load_tool

from budgeted.families import PSPNET, PSPNET_TOY, budget_tag

gen = load_tool("gen_mmseg_configs")
CONFIGS = REPO / "configs"
TOY_BASE = CONFIGS / "mmseg/toy/pspnet_r18-toy_cityscapes_base.py"
IMPORTS = ["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"]


def test_committed_configs_match_the_generator():
    assert gen.stale_files() == [], "run: python tools/gen_mmseg_configs.py"


def test_generator_check_reports_an_edited_file(tmp_path):
    gen.write(tmp_path)
    assert gen.stale_files(tmp_path) == [
        "toy/pspnet_r18-toy_cityscapes_base.py (hand-written, missing)"
    ]
    shutil.copy(TOY_BASE, tmp_path / "toy")
    assert gen.main(["--check", "--out-dir", str(tmp_path)]) == 0
    edited = tmp_path / "pspnet_r50-d8_cityscapes_budget10.py"
    edited.write_text(edited.read_text().replace("max_iters=8000", "max_iters=9000"))
    (tmp_path / "stray.py").write_text("")
    assert gen.stale_files(tmp_path) == [edited.name, "stray.py (not generated)"]
    assert gen.write(tmp_path) == 1 and (tmp_path / "toy" / TOY_BASE.name).read_bytes() == (
        TOY_BASE.read_bytes()  # hand-written: never rewritten
    )


def test_the_toy_base_is_hand_written_and_states_the_family():
    text = TOY_BASE.read_text()
    assert "Generated" not in text
    base = Config.fromfile(TOY_BASE)
    assert base.full_schedule_iters == PSPNET_TOY.full_iters == base.train_cfg.max_iters
    assert base.param_scheduler[0].end == PSPNET_TOY.full_iters
    assert base.custom_imports.imports == IMPORTS


@pytest.mark.parametrize("fraction", PSPNET.fractions)
def test_pspnet_budget_configs_load_with_the_right_budget(fraction):
    iters = PSPNET.iters(fraction)
    linear = Config.fromfile(CONFIGS / PSPNET.filename(fraction, "linear"))
    # the base is MMSegmentation's own PSPNet R50-D8 Cityscapes config, from the package
    assert linear.model.backbone.depth == 50 and linear.model.decode_head.type == "PSPHead"
    assert linear.model.backbone.norm_cfg.type == "SyncBN"
    assert linear.train_dataloader.dataset.type == "CityscapesDataset"
    assert linear.optim_wrapper.optimizer.lr == 0.01
    assert linear.train_cfg.max_iters == iters and linear.train_cfg.val_interval == iters
    assert linear.default_hooks.checkpoint.interval == min(iters, 8000)
    assert linear.param_scheduler == [
        dict(type="BudgetLinearLR", warmup_iters=500, warmup_factor=0.001, by_epoch=False)
    ]
    assert linear.custom_imports.imports == IMPORTS
    assert linear.budget_fraction == fraction and linear.full_schedule_iters == 80000
    poly = Config.fromfile(CONFIGS / PSPNET.filename(fraction, "poly"))
    assert poly.param_scheduler == [
        dict(type="PolyLR", eta_min=1e-4, power=0.9, begin=0, by_epoch=False)
    ]
    assert poly.train_cfg.max_iters == iters
    step = Config.fromfile(CONFIGS / PSPNET.filename(fraction, "step"))
    assert step.param_scheduler[0].type == "BudgetStepLR"
    # the paper's Cityscapes baseline, "the same as our ImageNet experiment": x0.1 at 1/3, 2/3
    assert list(step.param_scheduler[0].milestones) == pytest.approx([1 / 3, 2 / 3])
    assert step.param_scheduler[0].gamma == 0.1 and step.param_scheduler[0].warmup_iters == 500
    assert step.train_cfg.max_iters == iters
    assert f"budget{budget_tag(fraction)}" in PSPNET.filename(fraction)


@pytest.mark.parametrize("fraction", PSPNET_TOY.fractions)
def test_toy_budget_configs_scale_the_schedule_and_warmup(fraction):
    cfg = Config.fromfile(CONFIGS / PSPNET_TOY.filename(fraction, "linear"))
    assert cfg.train_cfg.max_iters == round(3200 * fraction)
    assert cfg.param_scheduler[0].warmup_iters == 20 == 500 * 3200 // 80000
    assert cfg.model.backbone.depth == 18 and cfg.model.backbone.norm_cfg.type == "BN"
    assert cfg.model.pretrained is None
    assert cfg.train_dataloader.dataset.data_root == "datasets/toy_cityscapes/"
    step = Config.fromfile(CONFIGS / PSPNET_TOY.filename(fraction, "step"))
    assert list(step.param_scheduler[0].milestones) == pytest.approx([1 / 3, 2 / 3])
    assert step.param_scheduler[0].warmup_iters == 20


def test_stock_poly_config_at_full_budget_equals_mmseg_schedule():
    ours = Config.fromfile(CONFIGS / PSPNET.filename(1.0, "poly"))
    mim = Path(mmseg.__file__).parent / ".mim/configs"
    stock = Config.fromfile(mim / "pspnet/pspnet_r50-d8_4xb2-80k_cityscapes-512x1024.py")
    assert ours.train_cfg.max_iters == stock.train_cfg.max_iters == 80000
    stock_poly = {k: v for k, v in stock.param_scheduler[0].items() if k != "end"}
    assert ours.param_scheduler[0] == stock_poly  # end comes from max_iters = 80000
    for key in ("model", "optim_wrapper", "train_dataloader"):
        assert without_scope(ours[key].to_dict()) == stock[key].to_dict(), key


def without_scope(node):
    """``node`` without the ``_scope_`` keys that ``mmseg::`` inheritance adds."""
    if isinstance(node, dict):
        return {k: without_scope(v) for k, v in node.items() if k != "_scope_"}
    if isinstance(node, (list, tuple)):
        return type(node)(without_scope(v) for v in node)
    return node

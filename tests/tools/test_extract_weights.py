"""tools/extract_weights.py (budgeted.safety.checkpoints.save_weights_subset): a toy backbone taken
out of a real Detectron2 or MMSegmentation model starts another run, through each framework's own
loader (Detectron2's checkpointer for ``MODEL.WEIGHTS``, MMEngine's ``Pretrained`` init)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from budgeted.safety import load_checkpoint, save_weights_subset

REPO = Path(__file__).resolve().parents[2]
TOOL = [sys.executable, str(REPO / "tools" / "extract_weights.py")]
D2_TOY = str(REPO / "configs/detectron2/toy/mask_rcnn_toy_budget10.yaml")
MMSEG_TOY = str(REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget10.py")


def shifted(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights plus 0.5 (floats), so that they differ from any fresh init."""
    weights = model.state_dict().items()
    return {k: v + 0.5 if v.is_floating_point() else v.clone() for k, v in weights}


def load_tool():
    spec = importlib.util.spec_from_file_location("extract_weights", TOOL[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


extract_weights = load_tool()


def extract(*args: str | Path) -> int:
    """``tools/extract_weights.py args`` in this process (a subprocess start costs seconds)."""
    return extract_weights.main([str(arg) for arg in args])


@pytest.mark.unit
def test_a_detectron2_backbone_starts_a_fresh_model_through_its_checkpointer(tmp_path) -> None:
    from budgeted.detectron2 import BudgetTrainer, SafeCheckpointer, load_config

    cfg = load_config(D2_TOY, [])
    source = shifted(BudgetTrainer.build_model(cfg))
    torch.save({"model": source, "iteration": 400}, tmp_path / "model_final.pth")
    assert extract(tmp_path / "model_final.pth", tmp_path / "backbone.pth",
                   "--prefix", "backbone.bottom_up.") == 0  # fmt: skip
    kept = load_checkpoint(tmp_path / "backbone.pth")["model"]
    assert kept and all(k.startswith("backbone.bottom_up.") for k in kept)
    assert len(kept) == sum(k.startswith("backbone.bottom_up.") for k in source)

    fresh = BudgetTrainer.build_model(cfg)
    heads_before = {k: v.clone() for k, v in fresh.state_dict().items() if k.startswith("roi_")}
    SafeCheckpointer(fresh).load(str(tmp_path / "backbone.pth"))
    after = fresh.state_dict()
    for key in kept:
        assert torch.equal(after[key], source[key]), key
    for key, value in heads_before.items():  # the heads keep their own init
        assert torch.equal(after[key], value) and not torch.equal(after[key], source[key]), key


@pytest.mark.unit
def test_an_mmseg_backbone_starts_a_fresh_model_through_pretrained_init(tmp_path) -> None:
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    init_default_scope("mmseg")
    model_cfg = Config.fromfile(MMSEG_TOY).model
    source = shifted(MODELS.build(model_cfg))
    torch.save({"meta": {"iter": 1600}, "state_dict": source}, tmp_path / "iter_1600.pth")
    assert (
        extract(tmp_path / "iter_1600.pth", tmp_path / "backbone.pth", "--prefix", "backbone.") == 0
    )

    model_cfg.backbone.init_cfg = dict(
        type="Pretrained", checkpoint=str(tmp_path / "backbone.pth"), prefix="backbone."
    )
    fresh = MODELS.build(model_cfg)
    fresh.init_weights()
    after = fresh.state_dict()
    backbone = [k for k in source if k.startswith("backbone.")]
    assert backbone
    for key in backbone:
        assert torch.equal(after[key], source[key]), key
    head = "decode_head.conv_seg.weight"
    assert not torch.equal(after[head], source[head])  # the heads keep their own init


@pytest.mark.e2e
def test_bad_input_is_one_line_and_nothing_is_overwritten(tmp_path, capsys) -> None:
    torch.save({"model": {"backbone.w": torch.ones(2), "head.w": torch.ones(1)}},
               tmp_path / "full.pth")  # fmt: skip
    dst = tmp_path / "backbone.pth"
    assert extract(tmp_path / "full.pth", dst, "--prefix", "bakcbone.") == 2
    assert not dst.exists()
    assert capsys.readouterr().err == (
        f"extract_weights: error: prefix 'bakcbone.' names no weight in "
        f"{str(tmp_path / 'full.pth')!r}; its names start with: backbone., head.\n"
    )
    dst.write_bytes(b"earlier work")
    done = subprocess.run([*TOOL, str(tmp_path / "full.pth"), str(dst), "--prefix", "backbone."],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and dst.read_bytes() == b"earlier work"
    assert done.stderr.count("\n") == 1 and "already exists" in done.stderr
    with pytest.raises(ValueError, match="already exists"):
        save_weights_subset(tmp_path / "full.pth", dst, "backbone.")

"""budgeted.toys.cityscapes (tools/make_toy_cityscapes.py): a deterministic synthetic set in the
real Cityscapes layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_prepare_cityscapes import load

from budgeted.mmengine import toy

pytestmark = pytest.mark.unit

make = load("make_toy_cityscapes")


def test_layout_labels_and_determinism(tmp_path):
    a = toy.make_toy_cityscapes(tmp_path / "a", train_per_city=2, val_per_city=2)
    b = toy.make_toy_cityscapes(tmp_path / "b", train_per_city=2, val_per_city=2)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    stems = [f for f in files if str(f).endswith("_leftImg8bit.png")]
    assert len(stems) == 2 * 2 + 2  # two train cities, one val city
    first = a / "gtFine/train/aachen/aachen_000000_000019"
    doc = json.loads(first.with_name(first.name + "_gtFine_polygons.json").read_text())
    labels = {o["label"] for o in doc["objects"]}
    assert {"sky", "road", "sidewalk", "car", "person", "pole"} <= labels
    train_ids = np.array(Image.open(f"{first}_gtFine_labelTrainIds.png"))
    assert train_ids.shape == (128, 256)
    assert {0, 1, 10, 13} <= set(np.unique(train_ids).tolist())  # road, sidewalk, sky, car
    image = Image.open(a / "leftImg8bit/train/aachen/aachen_000000_000019_leftImg8bit.png")
    assert image.size == (256, 128) and image.mode == "RGB"
    for suffix in ("_gtFine_labelIds.png", "_gtFine_instanceIds.png"):
        assert Path(f"{first}{suffix}").is_file()


def test_existing_set_is_not_overwritten_silently(tmp_path, capsys):
    toy.make_toy_cityscapes(tmp_path, train_per_city=1, val_per_city=1)
    assert make.main([str(tmp_path), "--train-per-city", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("make_toy_cityscapes: error:") and "\n" not in err
    assert "already holds a dataset; pass --overwrite" in err
    assert make.main([str(tmp_path), "--train-per-city", "1", "--overwrite"]) == 0


def test_bad_counts_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="train_per_city=0 is invalid"):
        toy.make_toy_cityscapes(tmp_path, train_per_city=0)
    with pytest.raises(ValueError, match="val_per_city=True is invalid"):
        toy.make_toy_cityscapes(tmp_path, val_per_city=True)


def test_the_tool_is_the_package_writer():
    assert make.make_toy_cityscapes is toy.make_toy_cityscapes

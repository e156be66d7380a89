"""budgeted.toys.cityscapes_labels (tools/prepare_cityscapes.py): Cityscapes polygons -> the label
PNGs MMSegmentation reads."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.unit

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load(name: str):
    if name not in sys.modules:
        sys.path.insert(0, str(TOOLS))
        spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


prepare = load("prepare_cityscapes")


def rect(x0, y0, x1, y1):
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


@pytest.fixture
def polygon_root(tmp_path: Path) -> Path:
    """One 8x6 polygon file: sky (rows 0-2) with an ego-vehicle corner, road (3-5), a car."""
    city = tmp_path / "gtFine/val/lindau"
    city.mkdir(parents=True)
    objects = [
        {"label": "sky", "polygon": rect(0, 0, 7, 2)},
        {"label": "road", "polygon": rect(0, 3, 7, 5)},
        {"label": "car", "polygon": rect(2, 3, 4, 4)},
        {"label": "ego vehicle", "polygon": rect(6, 0, 7, 1)},
    ]
    doc = {"imgHeight": 6, "imgWidth": 8, "objects": objects}
    (city / "lindau_000000_000019_gtFine_polygons.json").write_text(json.dumps(doc))
    return tmp_path


def read(root: Path, suffix: str) -> np.ndarray:
    return np.array(Image.open(root / f"gtFine/val/lindau/lindau_000000_000019{suffix}"))


def test_train_ids_of_a_known_polygon_file(polygon_root):
    assert prepare.main([str(polygon_root)]) == 0
    expected = np.zeros((6, 8), np.uint8)  # road = trainId 0
    expected[0:3, :] = 10  # sky
    expected[0:2, 6:8] = 255  # ego vehicle: ignored
    expected[3:5, 2:5] = 13  # car, drawn over the road
    np.testing.assert_array_equal(read(polygon_root, "_gtFine_labelTrainIds.png"), expected)
    assert not (
        polygon_root / "gtFine/val/lindau/lindau_000000_000019_gtFine_labelIds.png"
    ).exists()


def test_all_ids_also_writes_label_and_instance_ids(polygon_root):
    files, written = prepare.convert(polygon_root, all_ids=True)
    assert (files, written) == (1, 3)
    ids = read(polygon_root, "_gtFine_labelIds.png")
    assert ids[0, 0] == 23 and ids[5, 0] == 7 and ids[3, 2] == 26 and ids[0, 7] == 1
    instances = read(polygon_root, "_gtFine_instanceIds.png")
    assert instances[3, 2] == 26000 and instances[0, 0] == 23  # car instance 0; sky has none


def test_existing_pngs_are_kept_unless_overwrite(polygon_root):
    assert prepare.convert(polygon_root) == (1, 1)
    target = polygon_root / "gtFine/val/lindau/lindau_000000_000019_gtFine_labelTrainIds.png"
    Image.fromarray(np.full((6, 8), 7, np.uint8)).save(target)
    assert prepare.convert(polygon_root) == (1, 0)
    assert read(polygon_root, "_gtFine_labelTrainIds.png").max() == 7  # kept
    assert prepare.convert(polygon_root, overwrite=True) == (1, 1)
    assert read(polygon_root, "_gtFine_labelTrainIds.png")[0, 0] == 10


def test_missing_gtfine_is_one_line(tmp_path, capsys):
    assert prepare.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("prepare_cityscapes: error:") and "gtFine does not exist" in err
    assert "\n" not in err


def test_the_tool_is_the_package_conversion(tmp_path):
    from budgeted.mmengine import cityscapes

    assert prepare.convert is cityscapes.convert
    with pytest.raises(ValueError, match="nproc=0 is invalid; allowed: an integer >= 1"):
        cityscapes.convert(tmp_path, nproc=0)

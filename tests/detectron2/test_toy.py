"""budgeted.detectron2.toy and tools/make_toy_coco.py: the synthetic COCO set."""

from __future__ import annotations

import hashlib
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from d2_testutils import REPO
from pycocotools.coco import COCO


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            h.update(f.relative_to(root).as_posix().encode() + f.read_bytes())
    return h.hexdigest()


@pytest.mark.unit
def test_toy_set_is_deterministic_real_coco(tmp_path: Path) -> None:
    from budgeted.detectron2.toy import make_toy_coco

    paths = make_toy_coco(str(tmp_path / "a"), num_train=3, num_val=2, size=48, seed=1)
    make_toy_coco(str(tmp_path / "b"), num_train=3, num_val=2, size=48, seed=1)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    coco = COCO(paths["toy_coco_train"])
    assert len(coco.getImgIds()) == 3
    assert [c["name"] for c in coco.loadCats(coco.getCatIds())] == ["square", "circle", "triangle"]
    for ann in coco.loadAnns(coco.getAnnIds()):
        mask = coco.annToMask(ann)
        assert mask.shape == (48, 48)
        assert abs(mask.sum() - ann["area"]) < 0.25 * ann["area"] + 10  # polygon matches its area
    with pytest.raises(FileExistsError, match="already exists"):
        make_toy_coco(str(tmp_path / "a"))


@pytest.mark.e2e
def test_make_toy_coco_cli_refuses_to_overwrite(tmp_path: Path) -> None:
    cmd = [sys.executable, str(REPO / "tools" / "make_toy_coco.py"), "--root", str(tmp_path),
           "--num-train", "2", "--num-val", "1", "--size", "32"]  # fmt: skip
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    again = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert again.returncode == 1 and "already exists" in again.stderr


@pytest.mark.unit
def test_objects_and_radius_set_the_shapes_and_the_defaults_keep_the_bytes(tmp_path: Path) -> None:
    from budgeted.toys.coco import write_toy_coco

    write_toy_coco(tmp_path / "default", num_train=4, num_val=2, size=64)
    write_toy_coco(
        tmp_path / "stated", num_train=4, num_val=2, size=64, objects=(1, 3), radius=(0.12, 0.25)
    )
    assert digest(tmp_path / "default") == digest(tmp_path / "stated")
    paths = write_toy_coco(
        tmp_path / "dense", num_train=20, num_val=2, size=64, objects=(3, 6), radius=(0.1, 0.2)
    )
    coco = COCO(paths["train"])
    per_image = [len(coco.getAnnIds(imgIds=[i])) for i in coco.getImgIds()]
    assert min(per_image) >= 3 and max(per_image) <= 6 and len(set(per_image)) > 1
    for ann in coco.loadAnns(coco.getAnnIds()):  # radius <= 0.2 x 64: a box side <= 2r
        assert max(ann["bbox"][2:]) <= 2 * 0.2 * 64 + 0.01


@pytest.mark.unit
@pytest.mark.parametrize(
    ("flag", "values", "message"),
    [
        ("--objects", ["0", "3"], "objects=(0, 3) is invalid; allowed: two whole numbers"),
        ("--objects", ["5", "2"], "objects=(5, 2) is invalid"),
        ("--radius", ["0.3", "0.2"], "radius=(0.3, 0.2) is invalid; allowed: fractions"),
        ("--radius", ["0.1", "0.6"], "radius=(0.1, 0.6) is invalid"),
    ],
)
def test_make_toy_coco_refuses_bad_shapes_in_one_line(
    tmp_path: Path, flag: str, values: list[str], message: str
) -> None:
    main = runpy.run_path(str(REPO / "tools" / "make_toy_coco.py"))["main"]  # the tool, in process
    with pytest.raises(SystemExit) as stop:
        main(["--root", str(tmp_path), "--num-train", "1", "--num-val", "1", flag, *values])
    assert message in str(stop.value) and "\n" not in str(stop.value)
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.unit
@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"objects": (3,)}, "objects=(3,) is invalid; allowed: two whole numbers"),
        ({"objects": (2.0, 4)}, "objects=(2.0, 4) is invalid"),
        ({"radius": 0.2}, "radius=0.2 is invalid; allowed: fractions"),
        ({"radius": ("0.1", "0.2")}, "radius=('0.1', '0.2') is invalid"),
        ({"radius": (0.01, 0.2)}, "radius=(0.01, 0.2) is invalid at size=64"),
    ],
)
def test_write_toy_coco_refuses_malformed_shapes_in_one_line(
    tmp_path: Path, shapes: dict, message: str
) -> None:
    from budgeted.toys.coco import write_toy_coco

    with pytest.raises(ValueError) as err:
        write_toy_coco(tmp_path / "set", num_train=1, num_val=1, size=64, **shapes)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "set").exists()  # nothing written

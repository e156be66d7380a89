"""budgeted.detectron2.toy and tools/make_toy_coco.py: the synthetic COCO set."""

from __future__ import annotations

import hashlib
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


def test_make_toy_coco_cli_refuses_to_overwrite(tmp_path: Path) -> None:
    cmd = [sys.executable, str(REPO / "tools" / "make_toy_coco.py"), "--root", str(tmp_path),
           "--num-train", "2", "--num-val", "1", "--size", "32"]  # fmt: skip
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    again = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert again.returncode == 1 and "already exists" in again.stderr

"""tools/detectron2_lite/detect.py: setup keeps a full Detectron2 and rebuilds a broken one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DETECT = Path(__file__).resolve().parents[2] / "tools" / "detectron2_lite" / "detect.py"


def kind(pythonpath: Path | None = None) -> str:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    result = subprocess.run(
        [sys.executable, str(DETECT)], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def fake_detectron2(root: Path, compiled_source: str | None) -> Path:
    package = root / "detectron2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0.6'\n")
    if compiled_source is not None:
        (package / "_C.py").write_text(compiled_source)
    return root


def test_the_installed_lite_build_is_recognised():
    stand_in = pytest.importorskip("detectron2._C")
    expected = "lite" if getattr(stand_in, "__budgeted_lite__", False) else "full"
    assert kind() == expected


def test_a_detectron2_with_its_own_compiled_ops_counts_as_full(tmp_path):
    assert kind(fake_detectron2(tmp_path, "def nms_rotated(*args): ...\n")) == "full"


def test_a_detectron2_without_compiled_ops_counts_as_broken(tmp_path):
    assert kind(fake_detectron2(tmp_path, None)) == "broken"

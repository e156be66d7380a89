"""Fixtures for the MMEngine / MMSegmentation tests: toy data, the tools as modules."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from mmseg_testutils import HERE, load_tool


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small toy Cityscapes set (4 train images per city, 3 val)."""
    make = load_tool("make_toy_cityscapes")
    return make.make_toy_cityscapes(
        tmp_path_factory.mktemp("toy") / "toy_cityscapes", train_per_city=4, val_per_city=3
    )


@pytest.fixture(scope="session")
def train_seg() -> ModuleType:
    return load_tool("train_seg")


@pytest.fixture(autouse=True)
def _hooks_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``custom_imports`` of the test hook module (budget_lr_recorder) finds it."""
    monkeypatch.syspath_prepend(str(HERE))

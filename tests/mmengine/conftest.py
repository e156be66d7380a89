"""Fixtures for the MMEngine / MMSegmentation tests: toy data, the CLI, an empty allow-list."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from mmseg_testutils import HERE, toy_args, toy_config


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small toy Cityscapes set (4 train images per city, 3 val)."""
    from budgeted.toys.cityscapes import make_toy_cityscapes

    return make_toy_cityscapes(
        tmp_path_factory.mktemp("toy") / "toy_cityscapes", train_per_city=4, val_per_city=3
    )


@pytest.fixture(scope="session")
def cli() -> ModuleType:
    """``budgeted.mmengine.cli``: what ``tools/train_seg.py`` runs."""
    from budgeted.mmengine import cli

    return cli


@pytest.fixture(scope="session")
def first_run(tmp_path_factory: pytest.TempPathFactory, toy_root: Path, cli: ModuleType):
    """One uninterrupted toy run of 12 iterations (warmup 4, checkpoints at 6 and 12, the LR
    logged every iteration), with our tool: ``(folder of its hook output, work dir)``."""
    tmp = tmp_path_factory.mktemp("first")
    work_dir = tmp / "work"
    assert cli.main(toy_args(toy_config(tmp), work_dir, toy_root)) == 0
    return tmp, work_dir


@pytest.fixture
def fresh_allow_list() -> None:
    """torch's safe globals without ours, as in a new process that only imported the package;
    ``budgeted.mmengine.safe_checkpoints`` imports afresh. Restored afterwards."""
    from budgeted.mmengine.checkpoint import MMENGINE_CHECKPOINT_GLOBALS

    saved = torch.serialization.get_safe_globals()
    ours = set(MMENGINE_CHECKPOINT_GLOBALS)
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals([g for g in saved if g not in ours])
    module = sys.modules.pop("budgeted.mmengine.safe_checkpoints", None)
    yield
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(saved)
    if module is not None:
        sys.modules["budgeted.mmengine.safe_checkpoints"] = module


@pytest.fixture(autouse=True)
def _hooks_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``custom_imports`` of the test hook module (budget_lr_recorder) finds it."""
    monkeypatch.syspath_prepend(str(HERE))

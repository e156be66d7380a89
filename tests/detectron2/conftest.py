"""Shared fixtures: a tiny toy COCO set (64 px) registered as toy_coco_{train,val}, and one
finished toy run (8 iterations, evaluated) that tests copy."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from d2_testutils import EIGHT, REPO, TINY, TOY_CONFIG

from budgeted.detectron2 import register_toy_coco
from budgeted.detectron2.cli import run
from budgeted.detectron2.toy import make_toy_coco


@pytest.fixture(scope="session", autouse=True)
def _repo_cwd() -> Iterator[None]:
    """Config paths are relative to the repository root."""
    old = os.getcwd()
    os.chdir(REPO)
    yield
    os.chdir(old)


@pytest.fixture(scope="session")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``DETECTRON2_DATASETS`` with a toy set of 8 train / 4 val images at 64 px."""
    root = tmp_path_factory.mktemp("datasets")
    make_toy_coco(str(root), num_train=8, num_val=4, size=64, seed=0)
    old = os.environ.get("DETECTRON2_DATASETS")
    os.environ["DETECTRON2_DATASETS"] = str(root)  # spawned workers register from it
    register_toy_coco(str(root), replace=True)
    yield root
    if old is None:
        os.environ.pop("DETECTRON2_DATASETS", None)
    else:
        os.environ["DETECTRON2_DATASETS"] = old
    register_toy_coco(replace=True)


@pytest.fixture(scope="session")
def toy_run(toy_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the 8-iteration toy budget (metrics every iteration, a checkpoint every
    4: model_0000003.pth, model_0000007.pth, model_final.pth; evaluated). Read it, or copy it."""
    out = tmp_path_factory.mktemp("toy_run")
    run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, "OUTPUT_DIR", str(out)])
    return out

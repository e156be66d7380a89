"""Helpers for the MMEngine / MMSegmentation tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
TOY_CONFIG = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget1.py"
HERE = Path(__file__).resolve().parent
_runs = itertools.count()


def load_tool(name: str) -> ModuleType:
    """Import ``tools/<name>.py`` as a module."""
    if name in sys.modules:
        return sys.modules[name]
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def toy_config(tmp_path: Path, *, hooks_dir: Path | None = None, extra: str = "") -> Path:
    """A config file in ``tmp_path`` inheriting the toy budget config, recording LRs per rank."""
    hooks_dir = hooks_dir or tmp_path
    text = (
        f'_base_ = "{TOY_CONFIG}"\n'
        'custom_imports = dict(imports=["budgeted.mmengine", "budget_lr_recorder"], '
        "allow_failed_imports=False)\n"
        f'custom_hooks = [dict(type="RecordLRHook", out_dir="{hooks_dir}")]\n' + extra
    )
    path = tmp_path / f"toy_{next(_runs)}.py"
    path.write_text(text)
    return path


def toy_args(
    config: Path, work_dir: Path, toy_root: Path, *options: str, iters: int = 12, warmup: int = 4
) -> list[str]:
    """``train_seg.py`` arguments for a short toy run that logs every iteration."""
    run = next(_runs)
    return [
        str(config),
        "--work-dir",
        str(work_dir),
        "--cfg-options",
        *(f"{split}_dataloader.dataset.data_root={toy_root}" for split in ("train", "val", "test")),
        f"train_cfg.max_iters={iters}",
        f"train_cfg.val_interval={iters}",
        f"param_scheduler.0.warmup_iters={warmup}",
        "default_hooks.logger.interval=1",
        f"default_hooks.checkpoint.interval={iters // 2}",
        # unique names: MMEngine keeps one visualizer/logger per name in a process
        f"experiment_name=run{run}",
        f"visualizer.name=vis{run}",
        *options,
    ]


def logged(work_dir: Path, key: str) -> dict[int, float]:
    """``{iteration: value}`` of ``key`` from MMEngine's ``vis_data/scalars.json`` logs."""
    values: dict[int, float] = {}
    for path in sorted(work_dir.glob("*/vis_data/scalars.json")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if key in record:
                values[record.get("iter", record.get("step"))] = record[key]
    return values


def recorded_lrs(out_dir: Path, rank: int = 0) -> dict[int, float]:
    """``{0-based iteration: lr}`` written by :class:`budget_lr_recorder.RecordLRHook`."""
    data = json.loads((out_dir / f"lr_rank{rank}.json").read_text())
    return {int(k): v for k, v in data.items()}

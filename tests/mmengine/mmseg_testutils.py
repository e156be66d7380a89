"""Helpers for the MMEngine / MMSegmentation tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def toy_config(
    tmp_path: Path,
    *,
    hooks_dir: Path | None = None,
    extra: str = "",
    imports: tuple[str, ...] = ("budgeted.mmengine",),
) -> Path:
    """A config file in ``tmp_path`` inheriting the toy budget config, recording LRs per rank."""
    hooks_dir = hooks_dir or tmp_path
    text = (
        f'_base_ = "{TOY_CONFIG}"\n'
        f"custom_imports = dict(imports={[*imports, 'budget_lr_recorder']!r}, "
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
    return [
        str(config),
        "--work-dir",
        str(work_dir),
        "--cfg-options",
        *(f"{key}={value}" for key, value in toy_options(toy_root, iters, warmup).items()),
        *options,
    ]


def toy_options(toy_root: Path, iters: int = 12, warmup: int = 4) -> dict[str, Any]:
    """Config overrides for a short toy run on ``toy_root`` that logs every iteration."""
    run = next(_runs)
    return {
        **{f"{split}_dataloader.dataset.data_root": str(toy_root) for split in ("train", "val")},
        "test_dataloader.dataset.data_root": str(toy_root),
        "train_cfg.max_iters": iters,
        "train_cfg.val_interval": iters,
        "param_scheduler.0.warmup_iters": warmup,
        "default_hooks.logger.interval": 1,
        "default_hooks.checkpoint.interval": iters // 2,
        # unique names: MMEngine keeps one visualizer/logger per name in a process
        "experiment_name": f"run{run}",
        "visualizer.name": f"vis{run}",
    }


def stock_config(
    tmp_path: Path,
    toy_root: Path,
    *,
    iters: int = 12,
    warmup: int = 4,
    validate: bool = True,
    imports: tuple[str, ...] = ("budgeted.mmengine",),
    **options: Any,
):
    """The toy config as MMSegmentation's own ``tools/train.py`` would run it: loaded with
    ``Config.fromfile`` (custom imports and all), overrides merged, nothing of ours in between."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(toy_config(tmp_path, imports=imports)))
    cfg.merge_from_dict(toy_options(toy_root, iters, warmup))
    cfg.work_dir = str(tmp_path / "work")
    if not validate:
        cfg.merge_from_dict({"train_cfg.val_interval": iters + 1})
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.merge_from_dict(copy.deepcopy(options))  # merging pops _delete_ keys
    return cfg


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

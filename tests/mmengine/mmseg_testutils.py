"""Helpers for the MMEngine / MMSegmentation tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
TOY_CONFIG = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget1.py"
FULL_TOY_CONFIG = REPO / "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget100.py"
"""The full toy schedule (``budget_fraction = 1.0``): what ``--budget-time`` is given with."""
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
    base: Path = TOY_CONFIG,
) -> Path:
    """A config file in ``tmp_path`` inheriting the toy budget config (``base``: another one),
    recording LRs per rank."""
    hooks_dir = hooks_dir or tmp_path
    text = (
        f'_base_ = "{base}"\n'
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


DEADLINE_S = 600.0
"""How long a test waits for an event of a real run (a busy machine can be very slow)."""


def free_port() -> int:
    """A TCP port nobody listens on now (for torchrun's rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a training subprocess: the test hooks importable, no GPU."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", **extra}


def wait_until(
    what: str,
    condition: Callable[[], bool],
    proc: subprocess.Popen | None = None,
    timeout: float = DEADLINE_S,
) -> None:
    """Poll ``condition`` until it holds; fail if ``proc`` ends first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (status {proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file (sha256) and folder under ``folder``, by relative name; {} if it is missing."""
    if not folder.exists():
        return {}
    found = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        found[name] = "folder" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def without_scope(node: Any) -> Any:
    """``node`` without the ``_scope_`` keys that ``mmseg::`` / ``mmdet::`` / ... inheritance adds.

    Example:
        >>> without_scope({"type": "SGD", "_scope_": "mmdet", "x": [{"_scope_": "mmdet"}]})
        {'type': 'SGD', 'x': [{}]}
    """
    if isinstance(node, dict):
        return {k: without_scope(v) for k, v in node.items() if k != "_scope_"}
    if isinstance(node, (list, tuple)):
        return type(node)(without_scope(v) for v in node)
    return node


def check_budget_config(
    cfg: Any, family: Any, fraction: float, schedule: str, scope: str, imports: list[str]
) -> Any:
    """Assert what every generated MMEngine budget config holds (any codebase); its scheduler.

    The budget is the train loop's length (validated once, at its end), the scheduler the
    schedule's ``Budget*LR`` with the family's warmup, ``end`` left to the runner; checkpoints
    and logs by iteration; the config's imports, scope and seed.
    """
    iters = family.iters(fraction)
    assert cfg.train_cfg == dict(type="IterBasedTrainLoop", max_iters=iters, val_interval=iters)
    assert cfg.full_schedule_iters == family.full_iters and cfg.budget_fraction == fraction
    (scheduler,) = cfg.param_scheduler
    assert scheduler.type == {"linear": "BudgetLinearLR", "step": "BudgetStepLR"}[schedule]
    assert scheduler.warmup_iters == family.warmup and scheduler.warmup_factor == 0.001
    assert scheduler.by_epoch is False and "end" not in scheduler  # end follows max_iters
    if schedule == "step":
        assert tuple(scheduler.milestones) == pytest.approx(family.step_milestones)
        assert scheduler.gamma == 0.1
    checkpoint = cfg.default_hooks.checkpoint
    assert checkpoint.by_epoch is False and checkpoint.interval == min(iters, 8000)
    assert cfg.log_processor.by_epoch is False
    assert cfg.custom_imports.imports == imports
    assert cfg.default_scope == scope and cfg.randomness.seed == 0
    return scheduler

"""Config checks and CPU-distributed set-up for ``tools/train_seg.py`` (no MMEngine edits).

Every check raises a one-line ``ValueError`` before any training starts.
"""

from __future__ import annotations

import difflib
import importlib
import os
import subprocess
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.registry import PARAM_SCHEDULERS, Registry

from ..budget import budget_iters
from .schedulers import SCHEDULER_TYPES

LAUNCHERS = ("none", "pytorch", "slurm", "mpi")


def _scheduler_entries(cfg: Config) -> list[dict]:
    entries = cfg.get("param_scheduler") or []
    if isinstance(entries, dict):
        if "type" in entries:
            return [entries]
        return [
            e for group in entries.values() for e in (group if isinstance(group, list) else [group])
        ]
    return list(entries)


def _scope_registry(cfg: Config) -> Registry:
    """``PARAM_SCHEDULERS`` of the config's default scope (``mmseg.registry``'s for MMSeg)."""
    scope = cfg.get("default_scope") or "mmengine"
    try:
        module = importlib.import_module(f"{scope}.registry")
        return module.PARAM_SCHEDULERS
    except (ImportError, AttributeError):
        return PARAM_SCHEDULERS


def check_scheduler_types(cfg: Config) -> None:
    """Every ``param_scheduler`` type must be registered; name ours and the closest match if not."""
    registry = _scope_registry(cfg)
    for entry in _scheduler_entries(cfg):
        kind = entry.get("type")
        if not isinstance(kind, str) or registry.get(kind) is not None:
            continue
        known = set(registry.module_dict) | set(PARAM_SCHEDULERS.module_dict)
        close = difflib.get_close_matches(kind, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(
            f"unknown param_scheduler type {kind!r}; {hint}budget-aware types: "
            f"{', '.join(SCHEDULER_TYPES)} (with custom_imports=dict(imports="
            "['budgeted.mmengine'])); MMEngine's own: LinearLR, PolyLR, ..."
        )


def check_budget_schedulers(cfg: Config) -> None:
    """Build each iteration-based ``Budget*`` entry on a dummy optimizer: bad arguments fail now.

    ``end`` defaults to ``train_cfg.max_iters`` as in the runner. Epoch-based entries are checked
    by the runner (their length in iterations needs the dataloader).
    """
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    registry = _scope_registry(cfg)
    for entry in _scheduler_entries(cfg):
        kind = str(entry.get("type", ""))
        if not kind.startswith("Budget") or entry.get("by_epoch", True):
            continue
        args = dict(entry)
        if max_iters is not None:
            args.setdefault("end", max_iters)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        registry.build(args, default_args=dict(optimizer=optimizer))


def fill_budget_scheduler_defaults(cfg: Config) -> None:
    """Complete ``Budget*`` entries that leave ``by_epoch`` unset, from the train loop.

    Iteration-based loop: ``by_epoch=False``; epoch-based: ``by_epoch=True`` and
    ``convert_to_iter_based=True``. (A bare MMEngine runner reads a missing ``by_epoch`` as True.)
    """
    loop = (cfg.get("train_cfg") or {}).get("type", "")
    by_epoch = "max_epochs" in (cfg.get("train_cfg") or {}) or loop == "EpochBasedTrainLoop"
    for entry in _scheduler_entries(cfg):
        if str(entry.get("type", "")).startswith("Budget") and "by_epoch" not in entry:
            entry["by_epoch"] = by_epoch
            if by_epoch:
                entry.setdefault("convert_to_iter_based", True)


def apply_budget_fraction(cfg: Config, fraction: float) -> int:
    """Train ``fraction`` of the full schedule; return the iterations.

    The full schedule is ``cfg.full_schedule_iters`` (our configs) or ``train_cfg.max_iters``.
    ``max_iters`` and ``val_interval`` become the budget; schedulers without ``end`` follow it.
    """
    train_cfg = cfg.get("train_cfg") or {}
    full = cfg.get("full_schedule_iters", train_cfg.get("max_iters"))
    if full is None:
        raise ValueError("--budget needs train_cfg.max_iters (an iteration-based config)")
    iters = budget_iters(fraction=fraction, full_iters=full)
    cfg.train_cfg.max_iters = iters
    cfg.train_cfg.val_interval = iters
    cfg.budget_fraction = fraction
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if checkpoint and checkpoint.get("interval", 0) > iters:
        checkpoint["interval"] = iters
    for entry in _scheduler_entries(cfg):
        end = entry.get("end")
        if end is not None and (str(entry.get("type", "")).startswith("Budget") or end > iters):
            raise ValueError(
                f"--budget {fraction}: the {entry.get('type')} scheduler sets end={end} but the "
                f"budget is {iters} iterations; remove its end so that it follows "
                "train_cfg.max_iters"
            )
    return iters


def check_data_roots(cfg: Config) -> None:
    """Each train/val/test dataset's image and label folders must exist."""
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        dataset = (cfg.get(loader) or {}).get("dataset") or {}
        root = dataset.get("data_root")
        if root is None:
            continue
        folders = [Path(root)]
        folders += [Path(root) / p for p in (dataset.get("data_prefix") or {}).values() if p]
        for folder in folders:
            if not folder.is_dir():
                raise ValueError(
                    f"{loader}: {folder} does not exist; set {loader}.dataset.data_root "
                    "(--cfg-options) or create the data (tools/make_toy_cityscapes.py for the toy "
                    "set, tools/prepare_cityscapes.py for Cityscapes)"
                )


def check_work_dir(work_dir: str | Path, resume: bool) -> None:
    """Refuse to train a new run over a work dir that already holds checkpoints."""
    work_dir = Path(work_dir)
    if resume or not work_dir.is_dir():
        return
    held = sorted(p.name for p in work_dir.glob("*.pth")) + (
        ["last_checkpoint"] if (work_dir / "last_checkpoint").exists() else []
    )
    if held:
        raise ValueError(
            f"work dir {work_dir} already holds a run ({', '.join(held[:3])}); pass --resume to "
            "continue it, or choose another --work-dir (nothing is overwritten)"
        )


def _replace_sync_bn(node: Any) -> int:
    count = 0
    if isinstance(node, dict):
        if node.get("type") in ("SyncBN", "MMSyncBN"):
            node["type"] = "BN"
            count += 1
        for value in node.values():
            count += _replace_sync_bn(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            count += _replace_sync_bn(value)
    return count


def prepare_cpu_distributed(cfg: Config) -> int:
    """Adapt ``cfg`` to gloo on CPUs: DDP with ``device_ids=None``, BN instead of SyncBN.

    Returns how many SyncBN layers were replaced (SyncBN needs GPUs).
    """
    cfg.env_cfg = cfg.get("env_cfg") or {}
    cfg.env_cfg.dist_cfg = {**(cfg.env_cfg.get("dist_cfg") or {}), "backend": "gloo"}
    wrapper = dict(cfg.get("model_wrapper_cfg") or {"type": "MMDistributedDataParallel"})
    wrapper["device_ids"] = None
    cfg.model_wrapper_cfg = wrapper
    cfg.pop("sync_bn", None)
    return _replace_sync_bn(cfg.model)


def _slurm_env() -> None:
    os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
    os.environ.setdefault("WORLD_SIZE", os.environ["SLURM_NTASKS"])
    os.environ.setdefault("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0"))
    if "MASTER_ADDR" not in os.environ:
        nodes = os.environ["SLURM_NODELIST"]
        out = subprocess.check_output(["scontrol", "show", "hostname", nodes], text=True)
        os.environ["MASTER_ADDR"] = out.split()[0]
    os.environ.setdefault("MASTER_PORT", "29500")


def _mpi_env() -> None:
    os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
    os.environ.setdefault("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")


def init_cpu_distributed(launcher: str) -> None:
    """Start a gloo process group for ``launcher`` (MMEngine's ``init_dist`` needs CUDA)."""
    if launcher not in LAUNCHERS or launcher == "none":
        raise ValueError(f"launcher={launcher!r} is invalid here; allowed: pytorch, slurm, mpi")
    if dist.is_initialized():
        return
    if launcher == "slurm":
        _slurm_env()
    elif launcher == "mpi":
        _mpi_env()
    missing = [
        k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ
    ]
    if missing:
        raise ValueError(
            f"--launcher {launcher}: environment variables {', '.join(missing)} are not set; "
            "start the processes with tools/dist_train.sh (torchrun) or tools/slurm_train.sh"
        )
    dist.init_process_group(backend="gloo", init_method="env://")


def needs_cpu_distributed(launcher: str) -> bool:
    """True when ``launcher`` asks for several processes and there is no GPU."""
    return launcher != "none" and not torch.cuda.is_available()

"""``tools/train_seg.py``, ``budgeted-train-seg``: MMSegmentation's train.py, with budgets.

    python tools/train_seg.py pspnet_r50-d8_cityscapes_budget10            # a shipped config's name
    python tools/train_seg.py configs/mmseg/pspnet_r50-d8_cityscapes_budget100.py --budget 0.25
    bash tools/dist_train.sh CONFIG 2                                      # torchrun; gloo on CPUs

The same arguments as MMSegmentation's tool (``config``, ``--work-dir``, ``--resume``, ``--amp``,
``--cfg-options KEY=VALUE ...``, ``--launcher``) plus ``--budget FRACTION``. Everything that can
be wrong is checked first (:func:`preflight`), each as one line and exit status 2: an unknown
config or scheduler type, bad budget scheduler arguments, a scheduler ``end`` other than the
budget, missing data, a work dir that already holds a run, a checkpoint with foreign globals. A
resume with another budget is refused in one line too. Budget schedulers without ``by_epoch``
follow the train loop; ``--launcher`` on a machine without GPUs runs gloo with BN for SyncBN.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import os.path as osp
import sys
from collections.abc import Sequence

import torch
from mmengine.config import Config, DictAction
from mmengine.logging import print_log
from mmengine.registry import PARAM_SCHEDULERS, Registry
from mmengine.runner import Runner, find_latest_checkpoint

from ..budget import budget_iters
from ..config_files import find_config
from ..core import BudgetMismatchError
from .checkpoint import allow_mmengine_checkpoints, check_checkpoint
from .launch import (
    LAUNCHERS,
    destroy_process_group,
    init_cpu_distributed,
    needs_cpu_distributed,
    prepare_cpu_distributed,
)
from .runs import check_new_run_folder
from .schedulers import BudgetConfigError, check_loop_end, scheduler_types

__all__ = [
    "apply_budget_fraction",
    "check_budget_schedulers",
    "check_data_roots",
    "check_scheduler_types",
    "fill_budget_scheduler_defaults",
    "main",
    "parse_args",
    "preflight",
    "resume_checkpoint",
]

PROG = "train_seg"
RENAMED = {"BudgetLR": "BudgetScheduleLR"}
"""Former scheduler type names -> today's."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """MMSegmentation's ``tools/train.py`` arguments plus ``--budget``.

    Args:
        argv (list[str], optional): the arguments; default ``sys.argv[1:]``.

    Example:
        >>> parse_args(["pspnet_r18-toy_cityscapes_budget10", "--budget", "0.05"]).budget
        0.05
    """
    parser = argparse.ArgumentParser(prog=PROG, description="Train a segmentor (budget-aware)")
    parser.add_argument(
        "config",
        help="train config: a path, or a shipped config's name "
        "(pspnet_r50-d8_cityscapes_budget10, with or without .py)",
    )
    parser.add_argument("--work-dir", help="the dir to save logs and models")
    parser.add_argument(
        "--resume",
        action="store_true",
        default=False,
        help="resume from the latest checkpoint in the work_dir automatically",
    )
    parser.add_argument(
        "--amp",
        action="store_true",
        default=False,
        help="enable automatic-mixed-precision training",
    )
    parser.add_argument(
        "--budget",
        type=float,
        metavar="FRACTION",
        help="train this fraction (0, 1] of the config's full schedule (full_schedule_iters, "
        "else train_cfg.max_iters)",
    )
    parser.add_argument(
        "--cfg-options",
        nargs="+",
        action=DictAction,
        help="override some settings in the used config, the key-value pair in xxx=yyy format "
        "will be merged into config file",
    )
    parser.add_argument("--launcher", choices=list(LAUNCHERS), default="none", help="job launcher")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)
    args = parser.parse_args(argv)
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    return args


def _scheduler_entries(cfg: Config) -> list[dict]:
    entries = cfg.get("param_scheduler") or []
    if isinstance(entries, dict):
        if "type" in entries:
            return [entries]
        return [
            e for group in entries.values() for e in (group if isinstance(group, list) else [group])
        ]
    return list(entries)


def _is_budget_entry(entry: dict) -> bool:
    return str(entry.get("type", "")) in scheduler_types()


def _scope_registry(cfg: Config) -> Registry:
    """``PARAM_SCHEDULERS`` of the config's default scope (``mmseg.registry``'s for MMSeg)."""
    scope = cfg.get("default_scope") or "mmengine"
    try:
        module = importlib.import_module(f"{scope}.registry")
        return module.PARAM_SCHEDULERS
    except (ImportError, AttributeError):
        return PARAM_SCHEDULERS


def check_scheduler_types(cfg: Config) -> None:
    """Every ``param_scheduler`` type must be registered; name ours and the closest match if not.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the unknown type, the closest registered one and ours.

    Example:
        >>> check_scheduler_types(Config(dict(param_scheduler=[dict(type="BudgetLinearLR")])))
    """
    registry = _scope_registry(cfg)
    for entry in _scheduler_entries(cfg):
        kind = entry.get("type")
        if not isinstance(kind, str) or registry.get(kind) is not None:
            continue
        known = set(registry.module_dict) | set(PARAM_SCHEDULERS.module_dict)
        close = difflib.get_close_matches(kind, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        if kind in RENAMED:
            hint = f"did you mean {RENAMED[kind]!r} (its new name)? "
        raise ValueError(
            f"unknown param_scheduler type {kind!r}; {hint}budget-aware types: "
            f"{', '.join(scheduler_types())} (with custom_imports=dict(imports="
            "['budgeted.mmengine'])); MMEngine's own: LinearLR, PolyLR, ..."
        )


def check_budget_schedulers(cfg: Config) -> None:
    """Build each iteration-based budget entry on a dummy optimizer: bad arguments fail now.

    ``end`` defaults to ``train_cfg.max_iters`` as in the runner, and an ``end`` that differs
    from it is refused (:func:`~budgeted.mmengine.schedulers.check_loop_end`). Epoch-based entries
    are checked by the scheduler when the runner builds it (their length needs the dataloader).

    Args:
        cfg (Config): the training config.

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.

    Example:
        >>> check_budget_schedulers(Config(dict(
        ...     train_cfg=dict(max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR", warmup_iters=5, by_epoch=False)],
        ... )))
    """
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    registry = _scope_registry(cfg)
    for entry in _scheduler_entries(cfg):
        if not _is_budget_entry(entry) or entry.get("by_epoch", True):
            continue
        args = dict(entry)
        if max_iters is not None:
            args.setdefault("end", max_iters)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        registry.build(args, default_args=dict(optimizer=optimizer))
        if isinstance(args.get("end"), int):
            check_loop_end(str(entry["type"]), args["end"], max_iters)


def fill_budget_scheduler_defaults(cfg: Config) -> None:
    """Complete budget entries that leave ``by_epoch`` unset, from the train loop.

    Iteration-based loop: ``by_epoch=False``; epoch-based: ``by_epoch=True`` and
    ``convert_to_iter_based=True``. (A bare MMEngine runner reads a missing ``by_epoch`` as True.)

    Args:
        cfg (Config): the training config (changed in place).

    Example:
        >>> cfg = Config(dict(
        ...     train_cfg=dict(type="IterBasedTrainLoop", max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR")],
        ... ))
        >>> fill_budget_scheduler_defaults(cfg)
        >>> cfg.param_scheduler[0].by_epoch
        False
    """
    loop = (cfg.get("train_cfg") or {}).get("type", "")
    by_epoch = "max_epochs" in (cfg.get("train_cfg") or {}) or loop == "EpochBasedTrainLoop"
    for entry in _scheduler_entries(cfg):
        if _is_budget_entry(entry) and "by_epoch" not in entry:
            entry["by_epoch"] = by_epoch
            if by_epoch:
                entry.setdefault("convert_to_iter_based", True)


def apply_budget_fraction(cfg: Config, fraction: float) -> int:
    """Train ``fraction`` of the full schedule; return the iterations.

    The full schedule is ``cfg.full_schedule_iters`` (our configs) or ``train_cfg.max_iters``.
    ``max_iters`` and ``val_interval`` become the budget; schedulers without ``end`` follow it.

    Args:
        cfg (Config): the training config (changed in place).
        fraction (float): the budget, in (0, 1].

    Raises:
        ValueError: one line for a bad fraction, an epoch-based config, or a scheduler whose
            fixed ``end`` would not follow the budget.

    Example:
        >>> cfg = Config(dict(full_schedule_iters=80000, train_cfg=dict(max_iters=80000)))
        >>> apply_budget_fraction(cfg, 0.1), cfg.train_cfg.val_interval
        (8000, 8000)
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
        if end is not None and (_is_budget_entry(entry) or end > iters):
            raise ValueError(
                f"--budget {fraction}: the {entry.get('type')} scheduler sets end={end} but the "
                f"budget is {iters} iterations; remove its end so that it follows "
                "train_cfg.max_iters"
            )
    return iters


def check_data_roots(cfg: Config) -> None:
    """Each train/val/test dataset's image and label folders must exist.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the missing folder and how to make or point to it.

    Example:
        >>> check_data_roots(Config(dict(train_dataloader=dict(dataset=dict()))))
    """
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        dataset = (cfg.get(loader) or {}).get("dataset") or {}
        root = dataset.get("data_root")
        if root is None:
            continue
        folders = [root]
        folders += [osp.join(root, p) for p in (dataset.get("data_prefix") or {}).values() if p]
        for folder in folders:
            if not osp.isdir(folder):
                raise ValueError(
                    f"{loader}: {folder} does not exist; set {loader}.dataset.data_root "
                    "(--cfg-options) or create the data (tools/make_toy_cityscapes.py for the toy "
                    "set, tools/prepare_cityscapes.py for Cityscapes)"
                )


def preflight(args: argparse.Namespace) -> Config:
    """The config as MMSegmentation's ``train.py`` builds it, after every check (one-line errors).

    Args:
        args (argparse.Namespace): from :func:`parse_args`.

    Returns:
        Config: ready for ``Runner.from_cfg``.

    Raises:
        ValueError, FileNotFoundError: one line saying what is wrong and what is allowed.

    Example:
        ``cfg = preflight(parse_args(["pspnet_r18-toy_cityscapes_budget10"]))``
    """
    path = find_config(args.config, "mmseg")
    cfg = Config.fromfile(str(path))
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir", None) is None:
        cfg.work_dir = osp.join("./work_dirs", path.stem)
    if args.amp:
        optim_wrapper = cfg.optim_wrapper.type
        if optim_wrapper == "AmpOptimWrapper":
            print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
        elif optim_wrapper != "OptimWrapper":
            raise ValueError(f"--amp needs optim_wrapper.type OptimWrapper, got {optim_wrapper!r}")
        else:
            cfg.optim_wrapper.type = "AmpOptimWrapper"
            cfg.optim_wrapper.loss_scale = "dynamic"
    cfg.resume = args.resume
    if args.budget is not None:
        apply_budget_fraction(cfg, args.budget)
    fill_budget_scheduler_defaults(cfg)
    check_scheduler_types(cfg)
    check_budget_schedulers(cfg)
    check_data_roots(cfg)
    check_new_run_folder(cfg.work_dir, cfg.resume)
    ckpt = resume_checkpoint(cfg)
    if ckpt is not None and "://" not in ckpt:
        check_checkpoint(ckpt)
    if needs_cpu_distributed(args.launcher):
        replaced = prepare_cpu_distributed(cfg)
        print_log(
            f"no GPU: --launcher {args.launcher} runs gloo on CPUs, DDP with device_ids=None"
            + (f", {replaced} SyncBN norm configs replaced by BN" if replaced else ""),
            "current",
            logging.WARNING,
        )
    return cfg


def resume_checkpoint(cfg: Config) -> str | None:
    """The checkpoint the runner will load: ``load_from``, or the latest one when resuming.

    Args:
        cfg (Config): the training config (``resume``, ``load_from``, ``work_dir``).

    Example:
        >>> resume_checkpoint(Config(dict(resume=False, load_from="w.pth", work_dir=".")))
        'w.pth'
    """
    if cfg.get("resume") and cfg.get("load_from") is None:
        return find_latest_checkpoint(cfg.work_dir) if osp.isdir(cfg.work_dir) else None
    return cfg.get("load_from")


def main(argv: Sequence[str] | None = None) -> int:
    """Check everything, then train with MMEngine's runner; the exit status.

    Bad input, and a budget refused while the runner starts (another budget on resume, a
    scheduler ``end`` other than the train loop's), print one line ``train_seg: error: ...``
    and return 2.

    Args:
        argv (list[str], optional): the arguments; default ``sys.argv[1:]``.

    Example:
        ``main(["pspnet_r18-toy_cityscapes_budget10", "--work-dir", "work_dirs/toy10"])``
    """
    args = parse_args(argv)
    allow_mmengine_checkpoints()
    try:
        cfg = preflight(args)
        if needs_cpu_distributed(args.launcher):
            init_cpu_distributed(args.launcher)
    except (ValueError, FileNotFoundError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    try:
        runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else _build_custom(cfg)
        runner.train()
    except (BudgetMismatchError, BudgetConfigError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    finally:
        destroy_process_group()
    return 0


def _build_custom(cfg: Config) -> Runner:
    from mmseg.registry import RUNNERS

    return RUNNERS.build(cfg)

"""Train a segmentor: MMSegmentation's ``tools/train.py`` CLI, plus budgets and CPU launchers.

    python tools/train_seg.py configs/mmseg/pspnet_r50-d8_cityscapes_budget10.py
    python tools/train_seg.py CONFIG --budget 0.25        # 25 % of the config's full schedule
    bash tools/dist_train.sh CONFIG 2                     # torchrun, gloo on CPU-only machines

Additions to MMSegmentation's tool: ``--budget FRACTION``; ``budgeted.mmengine`` is imported
(schedulers, safe checkpoint loading); Budget* schedulers without ``by_epoch`` follow the train
loop; bad input (unknown scheduler type, missing data, a work dir that already holds a run, a
checkpoint with foreign globals, resuming with a changed budget) fails with one line, exit 2,
before training; ``--launcher`` on a machine without GPUs runs gloo with BN instead of SyncBN.
"""

from __future__ import annotations

import argparse
import logging
import os
import os.path as osp
import sys
from collections.abc import Sequence

from mmengine.config import Config, DictAction
from mmengine.logging import print_log
from mmengine.runner import Runner, find_latest_checkpoint

import budgeted.mmengine  # noqa: F401  (registers the schedulers, allow-lists checkpoint globals)
from budgeted.mmengine import BudgetMismatchError, check_checkpoint
from budgeted.mmengine.launch import (
    LAUNCHERS,
    apply_budget_fraction,
    check_budget_schedulers,
    check_data_roots,
    check_scheduler_types,
    check_work_dir,
    fill_budget_scheduler_defaults,
    init_cpu_distributed,
    needs_cpu_distributed,
    prepare_cpu_distributed,
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a segmentor (budget-aware)")
    parser.add_argument("config", help="train config file path")
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


def build_config(args: argparse.Namespace) -> Config:
    """The config as MMSegmentation's train.py builds it, plus our checks (ValueError)."""
    if not osp.isfile(args.config):
        raise ValueError(f"config {args.config!r} does not exist")
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir", None) is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(args.config))[0])
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
    check_work_dir(cfg.work_dir, cfg.resume)
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
    """The checkpoint the runner will load (``load_from``, or the latest one when resuming)."""
    if cfg.get("resume") and cfg.get("load_from") is None:
        return find_latest_checkpoint(cfg.work_dir) if osp.isdir(cfg.work_dir) else None
    return cfg.get("load_from")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cfg = build_config(args)
        ckpt = resume_checkpoint(cfg)
        if ckpt is not None and "://" not in ckpt:
            check_checkpoint(ckpt)
        if needs_cpu_distributed(args.launcher):
            init_cpu_distributed(args.launcher)
    except ValueError as err:
        print(f"train_seg: error: {err}", file=sys.stderr)
        return 2
    try:
        runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else _build_custom(cfg)
        runner.train()
    except BudgetMismatchError as err:
        print(f"train_seg: error: {err}", file=sys.stderr)
        return 2
    finally:
        _destroy_process_group()
    return 0


def _build_custom(cfg: Config) -> Runner:
    from mmseg.registry import RUNNERS

    return RUNNERS.build(cfg)


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

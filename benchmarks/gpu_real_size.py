#!/usr/bin/env python
"""Real-size training iterations on synthetic data: budget schedulers vs the stock ones.

Two models, each trained for ``--iters`` iterations four times from the same initial weights,
alternating the scheduler over two rounds (budget, stock, stock, budget):

- Detectron2 Mask R-CNN R50-FPN (model zoo ``mask_rcnn_R_50_FPN_1x.yaml``, random init with BN
  and ``FREEZE_AT 0``, gradient clipping), batches of 2 images of 800x1333 with random boxes and
  polygon masks, trained by ``SimpleTrainer`` with the real ``hooks.LRScheduler``:
  ``BudgetLinear`` (``budgeted.detectron2.build_lr_scheduler``) vs ``WarmupMultiStepLR``
  (``detectron2.solver.build_lr_scheduler``);
- MMSegmentation PSPNet R50-D8 (mmseg's ``pspnet_r50-d8_4xb2-80k_cityscapes-512x1024.py``,
  SyncBN -> BN, random init), batches of 2 images of 512x1024 with random labels, trained by
  ``model.train_step`` with the config's ``OptimWrapper``: ``BudgetLinearLR`` vs the config's
  ``PolyLR``, each stepped once per iteration.

The budget is the number of iterations run (``SOLVER.MAX_ITER`` / ``end``), so the LR trace
shows the warmup and the whole decay. Timing: ``torch.cuda.synchronize()`` around each
iteration (the scheduler step included) and between the training step and the scheduler
step (so the scheduler step is also timed alone, without overlapping the GPU work), the
first iterations of each run untimed; peak memory over the timed iterations. The LR of
each iteration is read from the optimizer and compared with ``budgeted.lr_multiplier``.

    python benchmarks/gpu_real_size.py --out DIR [--device cuda|cpu] [--iters N] [--tiny]

writes ``DIR/results.json``, ``DIR/lr_trace.csv`` and (with matplotlib) ``DIR/lr_trace.png``.
``--tiny``: small images, 4 iterations, for a check on the CPU. Compatibility shims for numpy 2,
Pillow >= 10 and mmcv without compiled ops: ``benchmarks/gpu_shims.py`` (listed in the output).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import json
import logging
import math
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import gpu_shims
import numpy as np
import torch

D2_CONFIG = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"
MMSEG_CONFIG = "pspnet/pspnet_r50-d8_4xb2-80k_cityscapes-512x1024.py"
BATCH = 2  # Detectron2 and MMSeg; the other models state theirs
OBJECTS_PER_IMAGE = 5
REPO = Path(__file__).resolve().parents[1]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def peak_bytes(device: str) -> int | None:
    return int(torch.cuda.max_memory_allocated()) if device.startswith("cuda") else None


class Meter:
    """One run's per-iteration LR, time (training step + scheduler step) and peak memory.

    ``start`` before the training step, ``mark`` after it (GPU work finished), ``stop`` after
    the scheduler step: ``times`` are whole iterations, ``sched_times`` the scheduler step alone.
    The peak memory is taken over the timed iterations (it is reset when the first one starts:
    the untimed ones include cuDNN's autotuning when ``cudnn.benchmark`` is on, which tries
    algorithms with large workspaces); ``peak_mem_bytes_whole_run`` includes them.
    """

    def __init__(self, device: str, untimed: int) -> None:
        self.device, self.untimed = device, untimed
        self.lrs: list[float] = []
        self.times: list[float] = []
        self.sched_times: list[float] = []
        self.peak_untimed: int | None = None
        reset_peak(device)

    def start(self, iteration: int, lr: float) -> None:
        sync(self.device)
        if iteration == self.untimed:
            self.peak_untimed = peak_bytes(self.device)
            reset_peak(self.device)
        self.lrs.append(lr)
        self.t0 = time.perf_counter()

    def mark(self) -> None:
        sync(self.device)
        self.t1 = time.perf_counter()

    def stop(self) -> None:
        sync(self.device)
        t2 = time.perf_counter()
        self.times.append(t2 - self.t0)
        self.sched_times.append(t2 - self.t1)

    def result(self) -> dict[str, Any]:
        peak = peak_bytes(self.device)
        whole = None if peak is None else max(peak, self.peak_untimed or 0)
        return {
            "lrs": self.lrs,
            "times": self.times,
            "sched_step_times": self.sched_times,
            "peak_mem_bytes": peak,
            "peak_mem_bytes_whole_run": whole,
        }


def formula_error(lrs: list[float], base_lr: float, total: int, warmup: int, factor: float):
    """max |lr(t) - base_lr * lr_multiplier('linear', t)| over the iterations."""
    import budgeted

    return max(
        abs(
            lr
            - base_lr
            * budgeted.lr_multiplier(
                "linear", t, total_iters=total, warmup_iters=warmup, warmup_factor=factor
            )
        )
        for t, lr in enumerate(lrs)
    )


def clone_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------------------------
# Detectron2: Mask R-CNN R50-FPN


def d2_batch(height: int, width: int, num_classes: int, device: str) -> list[dict[str, Any]]:
    """Detectron2 dataset dicts after the mapper: image, size and ``Instances`` with polygons."""
    from detectron2.structures import Boxes, Instances, PolygonMasks

    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    angles = np.linspace(0.0, 2.0 * math.pi, 16, endpoint=False)
    batch = []
    for _ in range(BATCH):
        boxes, polygons = [], []
        for _ in range(OBJECTS_PER_IMAGE):
            w, h = rng.uniform(0.1, 0.5) * width, rng.uniform(0.1, 0.5) * height
            x0, y0 = rng.uniform(0, width - w), rng.uniform(0, height - h)
            boxes.append([x0, y0, x0 + w, y0 + h])
            # an ellipse inscribed in the box, as one 16-point polygon
            xs = x0 + w / 2 * (1 + np.cos(angles))
            ys = y0 + h / 2 * (1 + np.sin(angles))
            polygons.append([np.stack([xs, ys], axis=1).ravel()])
        inst = Instances((height, width))
        inst.gt_boxes = Boxes(torch.tensor(boxes, dtype=torch.float32, device=device))
        classes = rng.integers(0, num_classes, OBJECTS_PER_IMAGE)
        inst.gt_classes = torch.tensor(classes, dtype=torch.int64, device=device)
        inst.gt_masks = PolygonMasks(polygons)
        image = torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=gen)
        batch.append(
            {"image": image.to(device), "height": height, "width": width, "instances": inst}
        )
    return batch


def d2_setup(args: argparse.Namespace) -> dict[str, Any]:
    from detectron2 import model_zoo
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model
    from detectron2.utils.env import seed_all_rng

    from budgeted.detectron2 import add_budget_config

    cfg = get_cfg()
    add_budget_config(cfg)
    cfg.merge_from_file(model_zoo.get_config_file(D2_CONFIG))
    n = args.iters
    cfg.MODEL.DEVICE = args.device
    cfg.MODEL.WEIGHTS = ""
    cfg.MODEL.RESNETS.NORM = "BN"  # random init: FrozenBN would freeze random statistics
    cfg.MODEL.BACKBONE.FREEZE_AT = 0
    cfg.SOLVER.BASE_LR = 0.02
    cfg.SOLVER.IMS_PER_BATCH = BATCH
    cfg.SOLVER.CLIP_GRADIENTS.ENABLED = True
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_TYPE = "norm"
    cfg.SOLVER.CLIP_GRADIENTS.CLIP_VALUE = 1.0
    cfg.SOLVER.MAX_ITER = n
    cfg.SOLVER.WARMUP_ITERS = args.warmup_iters
    # the stock steps at 2/3 and 8/9 of the schedule, scaled to n (each < n, as fvcore requires)
    cfg.SOLVER.STEPS = tuple(sorted({min(n - 1, max(1, round(n * f))) for f in (2 / 3, 8 / 9)}))
    cfg.freeze()
    seed_all_rng(0)
    model = build_model(cfg)
    height, width = (256, 416) if args.tiny else (800, 1333)
    return {
        "cfg": cfg,
        "model": model,
        "init": clone_state(model),
        "batch": d2_batch(height, width, cfg.MODEL.ROI_HEADS.NUM_CLASSES, args.device),
        "info": {
            "config": f"detectron2 model zoo {D2_CONFIG}",
            "overrides": "MODEL.WEIGHTS '' (random init), RESNETS.NORM BN, FREEZE_AT 0, "
            "BASE_LR 0.02, CLIP_GRADIENTS norm 1.0, "
            f"MAX_ITER {n}, WARMUP_ITERS {args.warmup_iters}, STEPS {tuple(cfg.SOLVER.STEPS)}",
            "input": f"{BATCH} x 3x{height}x{width} uint8, {OBJECTS_PER_IMAGE} boxes + polygon "
            "masks per image",
            "base_lr": cfg.SOLVER.BASE_LR,
            "warmup_factor": cfg.SOLVER.WARMUP_FACTOR,
            "cudnn_benchmark": bool(cfg.CUDNN_BENCHMARK),
        },
    }


def d2_run(setup: dict[str, Any], scheduler_name: str, args: argparse.Namespace) -> dict:
    from detectron2.engine import HookBase, SimpleTrainer, hooks
    from detectron2.solver import build_lr_scheduler as d2_build_lr_scheduler
    from detectron2.solver import build_optimizer
    from detectron2.utils.env import seed_all_rng

    import budgeted.detectron2

    cfg = setup["cfg"].clone()
    cfg.defrost()
    cfg.SOLVER.LR_SCHEDULER_NAME = scheduler_name
    cfg.freeze()
    model = setup["model"]
    model.load_state_dict(setup["init"])
    model.train()
    seed_all_rng(0)
    optimizer = build_optimizer(cfg, model)
    if scheduler_name == "BudgetLinear":
        scheduler = budgeted.detectron2.build_lr_scheduler(cfg, optimizer)
    else:
        scheduler = d2_build_lr_scheduler(cfg, optimizer)
    meter = Meter(args.device, args.untimed)

    class Start(HookBase):
        def before_step(self) -> None:
            meter.start(self.trainer.iter, self.trainer.optimizer.param_groups[0]["lr"])

    class Mark(HookBase):
        def after_step(self) -> None:
            meter.mark()

    class Stop(HookBase):
        def after_step(self) -> None:
            meter.stop()

    trainer = SimpleTrainer(model, itertools.repeat(setup["batch"]), optimizer)
    # after_step runs in this order: Mark, the real LRScheduler hook (scheduler.step()), Stop
    trainer.register_hooks([Start(), Mark(), hooks.LRScheduler(optimizer, scheduler), Stop()])
    trainer.train(0, args.iters)
    loss = float(trainer.storage.history("total_loss").latest())
    return {"scheduler_class": type(scheduler).__name__, "final_loss": loss, **meter.result()}


# --------------------------------------------------------------------------------------------
# MMSegmentation: PSPNet R50-D8


def _sync_bn_to_bn(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "SyncBN":
            node["type"] = "BN"
        for value in node.values():
            _sync_bn_to_bn(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            _sync_bn_to_bn(value)


def mmseg_setup(args: argparse.Namespace) -> dict[str, Any]:
    import mmseg
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmseg.utils import register_all_modules

    import budgeted.mmengine  # noqa: F401  (registers BudgetLinearLR)

    register_all_modules(init_default_scope=True)
    # MMEngine logs every parameter's initialization at INFO: keep warnings only
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    path = Path(mmseg.__file__).parent / ".mim" / "configs" / MMSEG_CONFIG
    cfg = Config.fromfile(str(path))
    height, width = (128, 256) if args.tiny else tuple(cfg.crop_size)
    model_cfg = cfg.model
    model_cfg.pretrained = None
    model_cfg.data_preprocessor.size = (height, width)
    _sync_bn_to_bn(model_cfg)
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    model.to(args.device)
    gen = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(BATCH):
        inputs.append(
            torch.randint(0, 256, (3, height, width), dtype=torch.uint8, generator=gen).to(
                args.device
            )
        )
        label = torch.randint(0, 19, (1, height, width), dtype=torch.int64, generator=gen)
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(data=label)
        sample.set_metainfo({"img_shape": (height, width), "ori_shape": (height, width)})
        samples.append(sample.to(args.device))
    stock = dict(cfg.param_scheduler[0])
    stock.update(begin=0, end=args.iters)
    return {
        "cfg": cfg,
        "model": model,
        "init": clone_state(model),
        "batch": {"inputs": inputs, "data_samples": samples},
        "stock": stock,
        "info": {
            "config": f"mmseg {mmseg.__version__} .mim/configs/{MMSEG_CONFIG}",
            "overrides": "model.pretrained None (random init), SyncBN -> BN, "
            f"data_preprocessor.size {(height, width)}; optim_wrapper as configured "
            f"({dict(cfg.optim_wrapper.optimizer)}); stock scheduler {stock}; budget "
            f"BudgetLinearLR warmup_iters {args.warmup_iters}, end {args.iters}",
            "input": f"{BATCH} x 3x{height}x{width} uint8, random labels in [0, 19)",
            "base_lr": float(cfg.optim_wrapper.optimizer.lr),
            "warmup_factor": 0.001,
            "cudnn_benchmark": bool(cfg.env_cfg.get("cudnn_benchmark", False)),
        },
    }


def mmseg_run(setup: dict[str, Any], scheduler_name: str, args: argparse.Namespace) -> dict:
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import PARAM_SCHEDULERS

    model = setup["model"]
    model.load_state_dict(setup["init"])
    model.train()
    torch.manual_seed(0)
    optim_wrapper = build_optim_wrapper(model, setup["cfg"].optim_wrapper)
    if scheduler_name == "BudgetLinearLR":
        sched_cfg = dict(
            type="BudgetLinearLR",
            warmup_iters=args.warmup_iters,
            by_epoch=False,
            begin=0,
            end=args.iters,
        )
    else:
        sched_cfg = dict(setup["stock"])
    scheduler = PARAM_SCHEDULERS.build(sched_cfg, default_args=dict(optimizer=optim_wrapper))
    meter = Meter(args.device, args.untimed)
    log_vars: dict[str, Any] = {}
    for it in range(args.iters):
        meter.start(it, optim_wrapper.optimizer.param_groups[0]["lr"])
        log_vars = model.train_step(setup["batch"], optim_wrapper)
        meter.mark()
        scheduler.step()
        meter.stop()
    return {
        "scheduler_class": type(scheduler).__name__,
        "final_loss": float(torch.as_tensor(log_vars["loss"]).detach()),
        **meter.result(),
    }


def _mm_model(cfg: Any, registry: Any, device: str) -> Any:
    """The model of an MMEngine config, as the Runner builds it, randomly initialized."""
    model_cfg = cfg.model
    if cfg.get("data_preprocessor") is not None:  # the Runner's merge of a top-level one
        model_cfg.setdefault("data_preprocessor", cfg.data_preprocessor)
    _sync_bn_to_bn(model_cfg)
    torch.manual_seed(0)
    model = registry.build(model_cfg)
    model.init_weights()
    return model.to(device)


def _stock_multistep(iters: int, fractions: tuple[float, ...]) -> dict[str, Any]:
    """The family's step baseline as MMEngine's stock ``MultiStepLR``, per iteration."""
    milestones = [round(f * iters) for f in fractions]
    return dict(type="MultiStepLR", by_epoch=False, milestones=milestones, gamma=0.1, begin=0,
                end=iters)  # fmt: skip


def _mm_setup(
    cfg: Any, model: Any, batch: dict[str, Any], stock: dict[str, Any], info: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    """What :func:`mmseg_run` needs of an MMEngine model: the pieces, plus the shared info."""
    overrides = (
        f"{info.pop('overrides')}; optim_wrapper as configured "
        f"({dict(cfg.optim_wrapper.optimizer)}, clip_grad {cfg.optim_wrapper.get('clip_grad')}); "
        f"stock scheduler {stock}; budget BudgetLinearLR warmup_iters {args.warmup_iters}, "
        f"end {args.iters}"
    )
    return {
        "cfg": cfg,
        "model": model,
        "init": clone_state(model),
        "batch": batch,
        "stock": stock,
        "info": {
            **info,
            "overrides": overrides,
            "base_lr": float(cfg.optim_wrapper.optimizer.lr),
            "warmup_factor": 0.001,
            "cudnn_benchmark": bool(cfg.env_cfg.get("cudnn_benchmark", False)),
        },
    }


def mmpretrain_setup(args: argparse.Namespace) -> dict[str, Any]:
    """ResNet-18 of configs/mmpretrain/resnet18_imagenet_base.py: 32 images of 224 px (8x32)."""
    import mmpretrain
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    from mmpretrain.registry import MODELS
    from mmpretrain.structures import DataSample
    from mmpretrain.utils import register_all_modules

    from budgeted.experiments.families import RESNET18_IMAGENET

    register_all_modules(init_default_scope=True)
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    config = REPO / "configs" / "mmpretrain" / "resnet18_imagenet_base.py"
    cfg = Config.fromfile(str(config))
    side, batch = (64, 2) if args.tiny else (224, 32)
    model = _mm_model(cfg, MODELS, args.device)
    gen = torch.Generator().manual_seed(0)
    inputs = [
        torch.randint(0, 256, (3, side, side), dtype=torch.uint8, generator=gen).to(args.device)
        for _ in range(batch)
    ]
    labels = torch.randint(0, 1000, (batch,), generator=gen).tolist()
    samples = [DataSample().set_gt_label(label).to(args.device) for label in labels]
    stock = _stock_multistep(args.iters, RESNET18_IMAGENET.step_milestones)
    info = {
        "config": f"configs/mmpretrain/resnet18_imagenet_base.py (mmpretrain "
        f"{mmpretrain.__version__})",
        "overrides": "random init",
        "input": f"{batch} x 3x{side}x{side} uint8, random labels in [0, 1000)",
    }
    return _mm_setup(cfg, model, {"inputs": inputs, "data_samples": samples}, stock, info, args)


def mmaction_setup(args: argparse.Namespace) -> dict[str, Any]:
    """I3D R50 of configs/mmaction/i3d_r50_kinetics400_base.py: 8 clips of 32x224x224."""
    import importlib

    importlib.import_module("budgeted.mmengine.mmaction_compat")  # before any mmaction import
    import mmaction
    from mmaction.registry import MODELS
    from mmaction.structures import ActionDataSample
    from mmaction.utils import register_all_modules
    from mmengine.config import Config
    from mmengine.logging import MMLogger

    from budgeted.experiments.families import I3D

    register_all_modules(init_default_scope=True)
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    config = REPO / "configs" / "mmaction" / "i3d_r50_kinetics400_base.py"
    cfg = Config.fromfile(str(config))
    cfg.model.backbone.update(pretrained=None, pretrained2d=False)  # no ImageNet download
    frames, side, batch = (8, 64, 1) if args.tiny else (32, 224, 8)
    model = _mm_model(cfg, MODELS, args.device)
    gen = torch.Generator().manual_seed(0)
    shape = (1, 3, frames, side, side)  # one clip of C x T x H x W (the NCTHW format)
    inputs = [
        torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen).to(args.device)
        for _ in range(batch)
    ]
    labels = torch.randint(0, 400, (batch,), generator=gen).tolist()
    samples = [ActionDataSample().set_gt_label(label).to(args.device) for label in labels]
    stock = _stock_multistep(args.iters, I3D.step_milestones)
    info = {
        "config": f"configs/mmaction/i3d_r50_kinetics400_base.py (mmaction2 "
        f"{mmaction.__version__})",
        "overrides": "random init (no inflated ImageNet weights)",
        "input": f"{batch} clips x 3x{frames}x{side}x{side} uint8, random labels in [0, 400)",
    }
    return _mm_setup(cfg, model, {"inputs": inputs, "data_samples": samples}, stock, info, args)


# --------------------------------------------------------------------------------------------
# driver


# --models key -> (name, setup, run, budget scheduler, stock scheduler)
MODELS = {
    "d2": (
        "mask_rcnn_R_50_FPN (Detectron2)",
        d2_setup,
        d2_run,
        "BudgetLinear",
        "WarmupMultiStepLR",
    ),
    "mmseg": ("pspnet_r50-d8 (MMSeg)", mmseg_setup, mmseg_run, "BudgetLinearLR", "PolyLR"),
    # mmseg_run is MMEngine's train_step loop, whatever the codebase
    "mmpretrain": (
        "resnet18 ImageNet (MMPretrain)",
        mmpretrain_setup,
        mmseg_run,
        "BudgetLinearLR",
        "MultiStepLR",
    ),
    "mmaction": (
        "i3d_r50 Kinetics (MMAction2)",
        mmaction_setup,
        mmseg_run,
        "BudgetLinearLR",
        "MultiStepLR",
    ),
}


def bench_model(key: str, args: argparse.Namespace) -> dict[str, Any]:
    name, setup_fn, run_fn, budget, stock = MODELS[key]
    t0 = time.perf_counter()
    setup = setup_fn(args)
    torch.backends.cudnn.benchmark = setup["info"]["cudnn_benchmark"]
    print(f"[{name}] built in {time.perf_counter() - t0:.1f} s; {setup['info']['input']}")
    runs = []
    for round_index, order in enumerate(((budget, stock), (stock, budget))):
        for scheduler_name in order:
            t0 = time.perf_counter()
            run = run_fn(setup, scheduler_name, args)
            timed = run["times"][args.untimed :]
            run.update(
                round=round_index,
                scheduler=scheduler_name,
                s_per_iter=statistics.mean(timed),
                wall_s=time.perf_counter() - t0,
            )
            runs.append(run)
            mem = run["peak_mem_bytes"]
            sched_us = 1e6 * statistics.mean(run["sched_step_times"][args.untimed :])
            print(
                f"[{name}] round {round_index} {scheduler_name:18s} "
                f"{run['s_per_iter']:.4f} s/iter (mean of {len(timed)}), "
                f"scheduler step {sched_us:.0f} us, "
                f"final loss {run['final_loss']:.4f}, "
                f"peak mem {'-' if mem is None else f'{mem / 2**30:.2f} GiB'}, "
                f"run {run['wall_s']:.1f} s",
                flush=True,
            )
    info = setup["info"]
    summary = {}
    for scheduler_name in (budget, stock):
        mine = [r for r in runs if r["scheduler"] == scheduler_name]
        pooled = [t for r in mine for t in r["times"][args.untimed :]]
        lr_err = None
        if scheduler_name == budget:
            lr_err = max(
                formula_error(
                    r["lrs"], info["base_lr"], args.iters, args.warmup_iters, info["warmup_factor"]
                )
                for r in mine
            )
        mems = [r["peak_mem_bytes"] for r in mine if r["peak_mem_bytes"] is not None]
        whole = [r["peak_mem_bytes_whole_run"] for r in mine if r["peak_mem_bytes"] is not None]
        sched = [t for r in mine for t in r["sched_step_times"][args.untimed :]]
        summary[scheduler_name] = {
            "scheduler_class": mine[0]["scheduler_class"],
            "s_per_iter_by_round": [r["s_per_iter"] for r in mine],
            "s_per_iter_pooled": statistics.mean(pooled),
            "s_per_iter_median": statistics.median(pooled),
            "timed_iters": len(pooled),
            "sched_step_us_mean": 1e6 * statistics.mean(sched),
            "sched_step_us_median": 1e6 * statistics.median(sched),
            "max_abs_lr_minus_formula": lr_err,
            "lr_trace_same_in_both_runs": mine[0]["lrs"] == mine[1]["lrs"],
            "final_loss_by_round": [r["final_loss"] for r in mine],
            "peak_mem_bytes": max(mems) if mems else None,
            "peak_mem_bytes_whole_run": max(whole) if whole else None,
        }
    ratio = summary[budget]["s_per_iter_pooled"] / summary[stock]["s_per_iter_pooled"]
    return {
        "status": "ok",
        "info": info,
        "budget": budget,
        "stock": stock,
        "ratio_budget_over_stock": ratio,
        "ratio_by_round": [
            summary[budget]["s_per_iter_by_round"][i] / summary[stock]["s_per_iter_by_round"][i]
            for i in range(2)
        ],
        "summary": summary,
        "runs": runs,
    }


def print_table(results: dict[str, Any]) -> None:
    head = (
        f"{'model':32s} {'scheduler':18s} {'s/iter r0':>9s} {'s/iter r1':>9s} "
        f"{'pooled':>8s} {'ratio':>6s} {'sched us':>8s} {'max|LR-formula|':>15s} "
        f"{'final loss':>11s} "
        f"{'peak mem':>9s}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for name, res in results["models"].items():
        if res["status"] != "ok":
            print(f"{name:32s} FAILED: {res['error'].strip().splitlines()[-1]}")
            continue
        for scheduler_name in (res["budget"], res["stock"]):
            s = res["summary"][scheduler_name]
            r0, r1 = s["s_per_iter_by_round"]
            ratio = (
                f"{res['ratio_budget_over_stock']:.3f}" if scheduler_name == res["budget"] else ""
            )
            err = s["max_abs_lr_minus_formula"]
            err = "-" if err is None else f"{err:.2e}"
            mem = s["peak_mem_bytes"]
            mem = "-" if mem is None else f"{mem / 2**30:.2f} GiB"
            loss = "/".join(f"{v:.3f}" for v in s["final_loss_by_round"])
            print(
                f"{name:32s} {scheduler_name:18s} {r0:9.4f} {r1:9.4f} "
                f"{s['s_per_iter_pooled']:8.4f} {ratio:>6s} {s['sched_step_us_mean']:8.0f} "
                f"{err:>15s} {loss:>11s} {mem:>9s}"
            )
    print(
        "(s/iter: mean of the timed iterations of each round's run, and of both pooled; ratio = "
        "budget / stock pooled; sched us: mean time of the scheduler step alone, in "
        "microseconds; final loss of round 0 / round 1; peak mem over the timed iterations)"
    )


def write_outputs(results: dict[str, Any], out: Path) -> None:
    with open(out / "results.json", "w") as f:
        json.dump(results, f, indent=1)
    rows = []
    for name, res in results["models"].items():
        if res["status"] != "ok":
            continue
        for scheduler_name in (res["budget"], res["stock"]):
            run = next(r for r in res["runs"] if r["scheduler"] == scheduler_name)
            rows += [(t, name, scheduler_name, lr) for t, lr in enumerate(run["lrs"])]
    with open(out / "lr_trace.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("iteration", "model", "scheduler", "lr"))
        writer.writerows(rows)


def plot(results: dict[str, Any], out: Path, args: argparse.Namespace) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        return f"no plot: {err}"
    import budgeted

    ok = {k: v for k, v in results["models"].items() if v["status"] == "ok"}
    if not ok:
        return "no plot: no model ran"
    fig, axes = plt.subplots(1, len(ok), figsize=(6 * len(ok), 4), squeeze=False)
    for ax, (name, res) in zip(axes[0], ok.items()):
        for scheduler_name in (res["budget"], res["stock"]):
            run = next(r for r in res["runs"] if r["scheduler"] == scheduler_name)
            ax.plot(run["lrs"], marker=".", label=f"{scheduler_name} (optimizer LR)")
        info = res["info"]
        formula = [
            info["base_lr"]
            * budgeted.lr_multiplier(
                "linear",
                t,
                total_iters=args.iters,
                warmup_iters=args.warmup_iters,
                warmup_factor=info["warmup_factor"],
            )
            for t in range(args.iters)
        ]
        ax.plot(formula, "k--", linewidth=1, label="budgeted.lr_multiplier('linear') x base LR")
        ax.set_title(name)
        ax.set_xlabel("iteration")
        ax.set_ylabel("learning rate")
        ax.legend(fontsize=8)
    fig.suptitle(f"LR per iteration, budget = {args.iters} iterations ({results['device']})")
    fig.tight_layout()
    fig.savefig(out / "lr_trace.png", dpi=120)
    return None


def versions() -> dict[str, str]:
    found = {"python": platform.python_version(), "torch": torch.__version__}
    for module in ("numpy", "PIL", "detectron2", "fvcore", "mmengine", "mmcv", "mmseg",
                   "mmpretrain", "mmaction"):  # fmt: skip
        try:
            found[module] = __import__(module).__version__
        except Exception as err:
            found[module] = f"not importable ({type(err).__name__})"
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--iters", type=int, default=None, help="iterations per run (the budget)")
    parser.add_argument("--tiny", action="store_true", help="small images, 4 iterations (CPU)")
    parser.add_argument(
        "--models",
        default="d2,mmseg",
        help=f"comma-separated subset of {','.join(MODELS)} (default d2,mmseg)",
    )
    args = parser.parse_args()
    if args.iters is None:
        args.iters = 4 if args.tiny else 40
    args.warmup_iters = min(10, args.iters // 4)  # the LR warmup, in iterations
    args.untimed = min(5, args.iters // 4)  # first iterations of each run left out of timing
    if args.iters < 4:
        parser.error("--iters must be >= 4")
    keys = [k.strip() for k in args.models.split(",")]
    if not keys or any(k not in MODELS for k in keys):
        allowed = ",".join(MODELS)
        parser.error(f"--models {args.models!r}: allowed a comma-separated subset of {allowed}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING)

    shims = gpu_shims.apply_numpy_pillow_shims()
    try:
        shims += gpu_shims.apply_mmcv_ops_standin()
    except ImportError as err:  # no mmcv at all: the MMSeg part reports it
        shims.append(f"mmcv not importable: {err}")
    shims += gpu_shims.apply_multimodal_off()
    device_name = (
        torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({platform.processor()})"
    )
    results: dict[str, Any] = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "device": device_name,
        "versions": versions(),
        "shims": shims,
        "mmcv_ops_standin": gpu_shims.standin_in_use(),
        "iters": args.iters,
        "warmup_iters": args.warmup_iters,
        "untimed_iters": args.untimed,
        "batch": BATCH,
        "models": {},
    }
    print(f"device: {device_name}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    print(
        "shims applied (benchmarks/gpu_shims.py):"
        + "".join(f"\n  - {s}" for s in shims or ["none"])
    )
    if gpu_shims.standin_in_use():
        print("NOTE: mmcv.ops is a stand-in (no compiled ops); PSPNet calls none of them")
    print(
        f"{args.iters} iterations per run (= the budget), LR warmup {args.warmup_iters}, "
        f"first {args.untimed} iterations of each run untimed; "
        "rounds: budget, stock, stock, budget",
        flush=True,
    )
    for key in keys:
        name = MODELS[key][0]
        try:
            results["models"][name] = bench_model(key, args)
        except Exception:
            tb = traceback.format_exc()
            print(f"[{name}] FAILED:\n{tb}", flush=True)
            results["models"][name] = {"status": "failed", "error": tb}
        write_outputs(results, args.out)  # after each model: a later failure keeps these
        if args.device == "cuda":
            torch.cuda.empty_cache()
    note = plot(results, args.out, args)
    if note:
        print(note)
    write_outputs(results, args.out)
    print_table(results)
    print(f"wrote {args.out}/results.json, lr_trace.csv" + ("" if note else ", lr_trace.png"))
    return 0 if all(r["status"] == "ok" for r in results["models"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

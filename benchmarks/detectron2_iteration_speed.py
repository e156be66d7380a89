#!/usr/bin/env python
"""Toy Mask R-CNN seconds per iteration: BudgetLinear vs stock WarmupMultiStepLR, same process.

Builds one ``BudgetTrainer`` per scheduler on the toy config and times ``run_step`` plus the
LRScheduler hook, interleaving the two trainers iteration by iteration so machine load hits both
alike. Prints the median seconds per iteration of each and their ratio (target <= 1.01).
By default both train with ``SOLVER.BASE_LR 0`` from the same seeded initial weights, so the
two models, their proposals and their data stay identical and the schedulers are the only
difference; with
``--learn`` both really train, the models diverge, and the ratio mostly measures that divergence.
Needs the toy set (``tools/make_toy_coco.py``).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time

from detectron2.utils.env import seed_all_rng
from detectron2.utils.events import EventStorage

from budgeted.detectron2 import BudgetTrainer, load_config, register_toy_coco

CONFIG = "configs/detectron2/toy/mask_rcnn_toy_budget100.yaml"  # 400 iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="untimed first iterations")
    parser.add_argument("--learn", action="store_true", help="train with the configured BASE_LR")
    args = parser.parse_args()
    logging.disable(logging.INFO)
    register_toy_coco()  # the toy set under $DETECTRON2_DATASETS
    trainers, times = {}, {}
    for name in ("BudgetLinear", "WarmupMultiStepLR"):
        out = tempfile.mkdtemp(prefix="d2bench-")
        frozen = [] if args.learn else ["SOLVER.BASE_LR", "0.0", "SEED", "0"]
        cfg = load_config(CONFIG, ["SOLVER.LR_SCHEDULER_NAME", name, *frozen, "OUTPUT_DIR", out])
        total = cfg.SOLVER.MAX_ITER
        if args.warmup + args.iters > total:
            parser.error(f"--warmup + --iters = {args.warmup + args.iters} exceeds the toy "
                         f"budget of {total} iterations")  # fmt: skip
        cfg.defrost()
        cfg.SOLVER.STEPS = (round(total * 2 / 3), round(total * 8 / 9))  # the step baseline
        cfg.freeze()
        if not args.learn:
            seed_all_rng(0)  # the same initial weights and data order for both
        trainers[name], times[name] = BudgetTrainer(cfg), []
    storages = {name: EventStorage(0) for name in trainers}
    for name, t in trainers.items():
        t.storage = storages[name].__enter__()
        t.iter = t.start_iter = 0
        for h in t._hooks:
            h.before_train()
    for i in range(args.warmup + args.iters):
        order = list(trainers.items())
        for name, t in order if i % 2 else reversed(order):  # neither always goes first
            t.iter = t.storage.iter = i
            start = time.perf_counter()
            t.run_step()
            for h in t._hooks:
                if type(h).__name__ == "LRScheduler":
                    h.after_step()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(v) for name, v in times.items()}
    for name, v in med.items():
        print(f"{name:18s} {v:.4f} s/iter (median of {args.iters})")
    print(
        "ratio BudgetLinear / WarmupMultiStepLR = "
        f"{med['BudgetLinear'] / med['WarmupMultiStepLR']:.3f}"
    )


if __name__ == "__main__":
    main()

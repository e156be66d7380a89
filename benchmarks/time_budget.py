"""Wall-clock budgets on the toys: where training ends, the last LR, and what the clock costs.

For each framework (toy Mask R-CNN through ``tools/train_net.py``, toy PSPNet through
``tools/train_seg.py``), in separate processes, one after the other:

1. a time-budgeted run, ``--budget-time SECONDS``: the training seconds its clock recorded at the
   end (from the last checkpoint's scheduler state) against the budget, as an error in % of the
   budget and in iterations; the LR multiplier of its last iteration (linear: target within 1 %
   of zero, i.e. one iteration's share of the decay);
2. an iteration-budgeted run of as many iterations: the median logged seconds per iteration of
   both (the time budget's per-iteration cost, target <= 1.01x).

    python benchmarks/time_budget.py [--seconds 40] [--frameworks detectron2 mmseg]

Timing figures move with the machine's load: run it on a quiet machine and read them as such.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
SKIP = 5  # first iterations: allocator and data-loading warm-up


def run(cmd: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        sys.exit(f"time_budget: {' '.join(cmd[:4])} ... failed:\n{proc.stderr[-3000:]}")
    return proc.stderr + proc.stdout


def detectron2(seconds: float, root: Path, env: dict[str, str]) -> dict[str, float]:
    from budgeted.detectron2.toy import make_toy_coco

    make_toy_coco(str(root / "coco"), num_train=40, num_val=8, size=128, seed=0)
    env = {**env, "DETECTRON2_DATASETS": str(root / "coco")}
    tool = [sys.executable, "tools/train_net.py", "--config-file",
            "configs/detectron2/toy/mask_rcnn_toy_budget100.yaml"]  # fmt: skip
    common = ["SOLVER.BUDGET.WRITER_PERIOD", "1", "DATASETS.TEST", "()"]
    timed = root / "d2_time"
    run([*tool, "--budget-time", str(seconds), *common, "OUTPUT_DIR", str(timed)], env)
    state = torch.load(timed / "model_final.pth", weights_only=False)
    sched = state["trainer"]["hooks"]["LRScheduler"]
    iters = int(sched["last_epoch"])
    rows = [json.loads(x) for x in (timed / "metrics.json").read_text().splitlines()]
    lrs = {r["iteration"]: r["lr"] for r in rows if "lr" in r}
    timed_it = [r["time"] for r in rows if "time" in r and r["iteration"] >= SKIP]
    counted = root / "d2_iters"
    fraction = iters / 400
    run([*tool, "SOLVER.BUDGET.FRACTION", f"{fraction}", *common, "OUTPUT_DIR", str(counted)], env)
    rows = [json.loads(x) for x in (counted / "metrics.json").read_text().splitlines()]
    iter_it = [r["time"] for r in rows if "time" in r and r["iteration"] >= SKIP]
    base = 0.01  # the toy configs' SOLVER.BASE_LR
    return summary(seconds, sched["clock"]["elapsed"], iters, lrs[iters - 1] / base,
                   timed_it, iter_it)  # fmt: skip


def mmseg(seconds: float, root: Path, env: dict[str, str]) -> dict[str, float]:
    from budgeted.toys.cityscapes import make_toy_cityscapes

    data = make_toy_cityscapes(root / "toy_cityscapes", train_per_city=20, val_per_city=4)
    tool = [sys.executable, "tools/train_seg.py",
            "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget100.py"]  # fmt: skip
    options = [*(f"{s}_dataloader.dataset.data_root={data}" for s in ("train", "val", "test")),
               "default_hooks.logger.interval=1"]  # fmt: skip
    timed = root / "seg_time"
    run([*tool, "--work-dir", str(timed), "--budget-time", str(seconds),
         "--cfg-options", *options], env)  # fmt: skip
    last = max(timed.glob("iter_*.pth"), key=lambda p: int(p.stem.split("_")[1]))
    iters = int(last.stem.split("_")[1])
    sched = torch.load(last, weights_only=False)["param_schedulers"][0]
    scalars = [json.loads(x) for p in timed.glob("*/vis_data/scalars.json")
               for x in p.read_text().splitlines()]  # fmt: skip
    lrs = {r["iter"]: r["lr"] for r in scalars if "lr" in r}
    timed_it = [r["time"] for r in scalars if "time" in r and "lr" in r and r["iter"] > SKIP]
    counted = root / "seg_iters"
    run([*tool, "--work-dir", str(counted), "--cfg-options", *options,
         f"train_cfg.max_iters={iters}", f"train_cfg.val_interval={iters}"], env)  # fmt: skip
    scalars = [json.loads(x) for p in counted.glob("*/vis_data/scalars.json")
               for x in p.read_text().splitlines()]  # fmt: skip
    iter_it = [r["time"] for r in scalars if "time" in r and "lr" in r and r["iter"] > SKIP]
    base = 0.01  # the toy configs' optimizer lr
    return summary(seconds, sched["clock"]["elapsed"], iters, lrs[iters] / base,
                   timed_it, iter_it)  # fmt: skip


def summary(
    seconds: float,
    elapsed: float,
    iters: int,
    last_factor: float,
    timed_it: list[float],
    iter_it: list[float],
) -> dict[str, float]:
    per_iter = statistics.median(timed_it)
    return {
        "budget_s": seconds,
        "trained_s": elapsed,
        "iterations": iters,
        "end_error_pct": 100.0 * (elapsed - seconds) / seconds,
        "end_error_iters": (elapsed - seconds) / per_iter,
        "last_lr_multiplier": last_factor,
        "s_per_iter_time_budget": per_iter,
        "s_per_iter_iter_budget": statistics.median(iter_it),
        "cost_ratio": per_iter / statistics.median(iter_it),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--frameworks", nargs="+", default=["detectron2", "mmseg"],
                        choices=["detectron2", "mmseg"])  # fmt: skip
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(REPO / "plugins")}
    print(f"time budget {args.seconds:g} s, {os.cpu_count()} CPUs, torch threads "
          f"{torch.get_num_threads()}")  # fmt: skip
    header = ("framework", "trained s", "iters", "end error", "last LR mult",
              "s/iter time", "s/iter iters", "ratio")  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.frameworks:
            fn = detectron2 if name == "detectron2" else mmseg
            r = fn(args.seconds, Path(tmp) / name, env)
            print(
                f"| {name} | {r['trained_s']:.2f} | {r['iterations']} | "
                f"{r['end_error_pct']:+.2f} % ({r['end_error_iters']:+.2f} it) | "
                f"{r['last_lr_multiplier']:.4f} | {r['s_per_iter_time_budget']:.4f} | "
                f"{r['s_per_iter_iter_budget']:.4f} | {r['cost_ratio']:.3f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

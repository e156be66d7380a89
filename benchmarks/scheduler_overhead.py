"""Microseconds per scheduler ``step()``: BudgetLR against the stock schedulers, in one run.

    python benchmarks/scheduler_overhead.py [--steps 20000] [--repeats 5]

Each scheduler drives the same SGD optimizer (one parameter group) through a budget of
``--steps`` iterations; the best of ``--repeats`` runs is reported, with its ratio to BudgetLR.
Target: BudgetLR <= the fastest stock scheduler.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import torch

from budgeted import BudgetLR, BudgetSchedule


def optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.02, momentum=0.9)


def budget_lr(steps: int):
    return BudgetLR(optimizer(), "linear", steps, warmup_iters=500)


def torch_lambda_lr(steps: int):
    schedule = BudgetSchedule("linear", steps, 500)
    return torch.optim.lr_scheduler.LambdaLR(optimizer(), schedule)


def detectron2_warmup_cosine(steps: int):
    from detectron2.solver.lr_scheduler import LRMultiplier, WarmupParamScheduler
    from fvcore.common.param_scheduler import CosineParamScheduler

    multiplier = WarmupParamScheduler(CosineParamScheduler(1, 0), 0.001, 500 / steps)
    return LRMultiplier(optimizer(), multiplier, max_iter=steps)


def mmengine_poly_lr(steps: int):
    from mmengine.optim.scheduler import PolyLR

    return PolyLR(optimizer(), eta_min=1e-4, power=0.9, begin=0, end=steps, by_epoch=False)


CANDIDATES: dict[str, Callable[[int], object]] = {
    "budgeted BudgetLR (linear)": budget_lr,
    "torch LambdaLR (same schedule)": torch_lambda_lr,
    "Detectron2 LRMultiplier (fvcore warmup+cosine)": detectron2_warmup_cosine,
    "MMEngine PolyLR": mmengine_poly_lr,
}


def microseconds_per_step(build: Callable[[int], object], steps: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        scheduler = build(steps)
        step = scheduler.step
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # stepping without optimizer.step() on purpose
    if args.steps <= 500 or args.repeats < 1:
        parser.error(
            f"--steps must be > 500 (got {args.steps}), --repeats >= 1 (got {args.repeats})"
        )

    timings = {
        name: microseconds_per_step(build, args.steps, args.repeats)
        for name, build in CANDIDATES.items()
    }
    ours = timings["budgeted BudgetLR (linear)"]
    print(f"{'scheduler':<48} {'us/step':>8} {'vs BudgetLR':>12}")
    for name, us in timings.items():
        print(f"{name:<48} {us:8.2f} {us / ours:11.2f}x")
    fastest_stock = min(us for name, us in timings.items() if not name.startswith("budgeted"))
    verdict = "meets" if ours <= fastest_stock else "MISSES"
    print(f"BudgetLR / fastest stock = {ours / fastest_stock:.2f} ({verdict} the target <= 1.00)")


if __name__ == "__main__":
    main()

"""Toy PSPNet seconds per iteration: BudgetLinearLR vs the stock PolyLR config, in one process.

Trains the toy config with BudgetLinearLR (``pspnet_r18-toy_cityscapes_budget100.py``) and the
stock-PolyLR toy base config for ``--iters`` iterations each, alternating for ``--rounds`` rounds
in the same process, and reports the median logged iteration time of each and their ratio
(target <= 1.01). Also times one scheduler step of each in isolation: the cost the schedule adds
to an iteration, free of the training noise.

    python benchmarks/mmseg_iteration_speed.py [--iters 40] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TOY = REPO / "configs/mmseg/toy"
CONFIGS = {
    "BudgetLinearLR": TOY / "pspnet_r18-toy_cityscapes_budget100.py",
    "PolyLR (stock)": TOY / "pspnet_r18-toy_cityscapes_base.py",
}
SKIP = 5  # first iterations: allocator and data-loading warm-up


def train_times(config: Path, work_dir: Path, data: Path, iters: int, tag: str) -> list[float]:
    """Per-iteration times that MMEngine logged for one short toy run."""
    from mmengine.runner import Runner

    from budgeted.mmengine import cli

    args = cli.parse_args(
        [
            str(config),
            "--work-dir",
            str(work_dir),
            "--cfg-options",
            *(f"{s}_dataloader.dataset.data_root={data}" for s in ("train", "val", "test")),
            f"train_cfg.max_iters={iters}",
            f"train_cfg.val_interval={iters + 1}",
            "val_cfg=None",
            "val_dataloader=None",
            "val_evaluator=None",
            "default_hooks.logger.interval=1",
            f"default_hooks.checkpoint.interval={iters + 1}",
            "default_hooks.checkpoint.save_last=False",
            f"experiment_name={tag}",
            f"visualizer.name={tag}",
        ]
    )
    Runner.from_cfg(cli.preflight(args)).train()
    records = []
    for path in work_dir.glob("*/vis_data/scalars.json"):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return [r["time"] for r in records if "time" in r and r.get("iter", 0) > SKIP]


def step_cost(kind: str, n: int = 20000) -> float:
    """Seconds per ``scheduler.step()`` (with its optimizer step counter)."""
    import torch
    from mmengine.registry import PARAM_SCHEDULERS

    import budgeted.mmengine  # noqa: F401

    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))]} for _ in range(2)]
    optimizer = torch.optim.SGD(groups, lr=0.01)
    cfg = (
        dict(type="BudgetLinearLR", warmup_iters=20)
        if kind == "BudgetLinearLR"
        else dict(type="PolyLR", eta_min=1e-4, power=0.9)
    )
    sched = PARAM_SCHEDULERS.build(
        {**cfg, "end": 10 * n, "by_epoch": False}, default_args=dict(optimizer=optimizer)
    )
    return timeit.timeit(sched.step, number=n) / n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, default=REPO / "datasets/toy_cityscapes")
    parser.add_argument("--out", type=Path, default=REPO / "output/bench_mmseg")
    args = parser.parse_args(argv)
    if not (args.data / "gtFine").is_dir():
        from budgeted.toys.cityscapes import make_toy_cityscapes

        make_toy_cityscapes(args.data)
    out = args.out / time.strftime("%Y%m%d_%H%M%S")
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for rnd in range(args.rounds):
        for name, config in CONFIGS.items():
            tag = f"bench_{rnd}_{name.split()[0]}"
            times[name] += train_times(config, out / tag, args.data, args.iters, tag)
    medians = {name: statistics.median(values) for name, values in times.items()}
    steps = {name: step_cost(name) for name in CONFIGS}
    ratio = medians["BudgetLinearLR"] / medians["PolyLR (stock)"]
    step_ratio = (medians["PolyLR (stock)"] + steps["BudgetLinearLR"] - steps["PolyLR (stock)"]) / (
        medians["PolyLR (stock)"]
    )
    print(f"toy PSPNet, {args.rounds} rounds x {args.iters} iterations, medians after {SKIP}:")
    for name in CONFIGS:
        print(
            f"  {name:15s} {medians[name]:.4f} s/iter (n={len(times[name])}), "
            f"scheduler step {steps[name] * 1e6:.1f} us"
        )
    print(f"  ratio BudgetLinearLR / PolyLR, end to end: {ratio:.3f} (target <= 1.01; noisy)")
    print(f"  ratio from the scheduler step costs alone: {step_ratio:.5f}")
    print(f"  logs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

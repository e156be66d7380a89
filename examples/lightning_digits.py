#!/usr/bin/env python
"""Train LeNet-5 on the UCI handwritten digits for a budget with PyTorch Lightning and
``budgeted.lightning.BudgetCallback``.

The same model, data, batches and optimizer as ``examples/digits_budget.py`` (LeNet-5, SGD with
momentum 0.9 and weight decay 1e-4, batch 32 drawn as one stream of seeded shuffles; the full
schedule 1,720 iterations), trained by a Lightning ``Trainer`` whose LR schedule is the callback.
It follows the sweep's script contract (docs/sweeps.md)::

    python examples/lightning_digits.py --budget 0.1 --schedule cosine --lr 0.1 --seed 0 \\
        --out output/lightning_digits/cosine_b0.1

``--time SECONDS`` trains for a time budget instead (``Trainer(max_time=...)``: the LR reaches 0
at the deadline); ``--resume`` goes on from ``OUT/checkpoints/last.ckpt`` (what a SIGTERM or
SIGUSR1 saves before the run exits with status 75), with ``--on-resume replan`` for a changed
budget. A non-finite loss ends the run with one line and exit status 3. ``--out`` gets
``metrics.jsonl`` (``iteration``, ``lr``, ``loss`` per step as it trains, then a final line with
``val_accuracy``), ``lr_trace.csv`` and, last, ``results.json``.

With LightningCLI (the callback and its arguments in the yaml, by class path)::

    python examples/lightning_digits.py fit --config examples/lightning_digits.yaml
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

import lightning as L
import torch
from digits_budget import STEP_MILESTONES, lenet5, tensors
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import nn

import budgeted
from budgeted.lightning import BudgetCallback, Diverged
from budgeted.safety import atomic_write_text
from budgeted.safety.preemption import DIVERGED_EXIT_CODE, ignore_late_signals
from budgeted.toys.digits import digits_split

PROG = "lightning_digits"
FULL_ITERS, MOMENTUM, WEIGHT_DECAY = 1720, 0.9, 1e-4
CAP = 10**9
"""The batches of a time-budget run: more than any deadline reaches (drawn lazily)."""


class StepBatches:
    """The batches ``examples/digits_budget.py`` trains on, one stream of seeded shuffles cut
    into batches of ``batch_size``, as an iterable Lightning checkpoints: its state is the next
    batch (the trainer's ``global_step``), so a resumed run trains the batches it had left."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int,
                 count: int, trainer: Any) -> None:  # fmt: skip
        self.x, self.y, self.batch_size, self.seed, self.count = x, y, batch_size, seed, count
        self.trainer, self.start = trainer, 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self):
        start, self.start = self.start, 0
        order = torch.Generator().manual_seed(self.seed)
        stream = torch.empty(0, dtype=torch.int64)
        for k in range(self.count):
            while len(stream) < self.batch_size:
                stream = torch.cat([stream, torch.randperm(len(self.x), generator=order)])
            if k >= start:
                batch = stream[: self.batch_size]
                yield self.x[batch], self.y[batch]
            stream = stream[self.batch_size :]

    def state_dict(self) -> dict[str, int]:
        return {"next_batch": self.trainer.global_step}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.start = int(state["next_batch"])


class DigitsModule(L.LightningModule):
    """LeNet-5 on the digits; ``out``: the run folder (metrics.jsonl, results.json)."""

    def __init__(self, lr: float = 0.1, batch_size: int = 32, seed: int = 0,
                 out: str | None = None) -> None:  # fmt: skip
        super().__init__()
        self.lr, self.batch_size, self.seed = lr, batch_size, seed
        self.out = None if out is None else Path(out)
        torch.manual_seed(seed)
        self.model = lenet5()
        split = digits_split()
        self.train_xy = tensors(split.train_images, split.train_labels)
        self.val_xy = tensors(split.val_images, split.val_labels)
        self.summary: dict[str, Any] = {}
        self.first_step: float | None = None
        self.last_step: float | None = None

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=self.lr, momentum=MOMENTUM,
                               weight_decay=WEIGHT_DECAY)  # fmt: skip

    def train_dataloader(self) -> StepBatches:
        steps = self.trainer.max_steps
        return StepBatches(*self.train_xy, self.batch_size, self.seed,
                           steps if steps > 0 else CAP, self.trainer)  # fmt: skip

    def on_train_start(self) -> None:  # after BudgetCallback's resume check: files change now
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            done = self.trainer.global_step
            kept = [line for line in self.lines() if line["iteration"] < done]
            atomic_write_text(self.metrics, "".join(json.dumps(r) + "\n" for r in kept))

    def training_step(self, batch: Any, idx: int) -> torch.Tensor:
        self.first_step = self.first_step or time.perf_counter()
        x, y = batch
        lr = self.trainer.optimizers[0].param_groups[0]["lr"]
        loss = nn.functional.cross_entropy(self.model(x), y)
        if self.out is not None and torch.isfinite(loss):
            line = {"iteration": self.trainer.global_step, "lr": lr, "loss": loss.item()}
            with self.metrics.open("a") as f:
                f.write(json.dumps(line) + "\n")
        return loss

    def on_train_batch_end(self, *args: Any) -> None:
        self.last_step = time.perf_counter()

    @property
    def metrics(self) -> Path:
        assert self.out is not None
        return self.out / "metrics.jsonl"

    def lines(self) -> list[dict]:
        if self.out is None or not self.metrics.exists():
            return []
        return [json.loads(t) for t in self.metrics.read_text().splitlines() if t.strip()]

    @torch.no_grad()
    def on_train_end(self) -> None:
        """The held-out accuracy at the end of the budget; the final line and results.json."""
        self.model.eval()
        x, y = self.val_xy
        val = (self.model(x).argmax(1) == y).float().mean().item()
        steps = self.trainer.global_step
        callback = next(c for c in self.trainer.callbacks if isinstance(c, BudgetCallback))
        self.summary.update(val_accuracy=val, iterations=steps, final_lr=callback.lr())
        if callback.clock is not None:  # a time budget: its training seconds, as counted
            self.summary["train_seconds"] = round(callback.clock.elapsed, 3)
        if self.first_step and self.last_step:
            self.summary["wall_seconds"] = round(self.last_step - self.first_step, 3)
        if self.out is None or not self.trainer.is_global_zero:
            return
        records = [*self.lines(), {"iteration": steps, "val_accuracy": val, "final": True}]
        atomic_write_text(self.metrics, "".join(json.dumps(r) + "\n" for r in records))
        trace = "".join(f"{r['iteration']},{r['lr']!r}\n" for r in records if "lr" in r)
        atomic_write_text(self.out / "lr_trace.csv", "iteration,lr\n" + trace)
        atomic_write_text(self.out / "results.json", json.dumps(self.summary, indent=1) + "\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        self.exit(2, f"{PROG}: error: {message}\n")


def parse_args(argv: list[str] | None) -> tuple[_Parser, argparse.Namespace]:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, help="fraction of the full schedule")
    p.add_argument("--time", type=float, help="a time budget in seconds instead")
    p.add_argument("--full-iters", type=int, default=FULL_ITERS)
    p.add_argument("--schedule", default="linear", help="NAME[:KEY=VALUE,...], registered")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup-iters", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resume", action="store_true", help="go on from OUT/checkpoints/last.ckpt")
    p.add_argument("--on-resume", default="refuse", help="refuse, replan or branch")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    if (a.budget is None) == (a.time is None):
        p.error("give one of --budget F and --time SECONDS")
    for flag, value, ok, allowed in (
        ("--budget", a.budget, a.budget is None or 0 < a.budget <= 1, "a fraction in (0, 1]"),
        ("--time", a.time, a.time is None or 0 < a.time < math.inf, "seconds > 0"),
        ("--full-iters", a.full_iters, a.full_iters >= 1, "a whole number >= 1"),
        ("--lr", a.lr, 0 < a.lr < math.inf, "a number > 0"),
        ("--threads", a.threads, a.threads >= 1, "a whole number >= 1"),
    ):
        if not ok:
            p.error(f"{flag} {value!r} is invalid; allowed: {allowed}")
    return p, a


def trainer_for(args: argparse.Namespace, callback: BudgetCallback, steps: int) -> L.Trainer:
    """A CPU trainer of ``steps`` optimizer steps (-1: until the time budget's deadline)."""
    return L.Trainer(
        accelerator="cpu", devices=1, max_steps=steps,
        max_epochs=None if steps < 0 else 1,
        max_time=None if args.time is None else timedelta(seconds=args.time),
        callbacks=[callback, ModelCheckpoint(dirpath=args.out / "checkpoints", save_top_k=0)],
        logger=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, default_root_dir=args.out,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser, args = parse_args(argv)
    if (args.out / "results.json").exists():
        parser.error(f"--out {args.out} already holds results.json; allowed: a folder without it")
    steps = -1
    if args.budget is not None:
        try:
            steps = budgeted.budget_iters(fraction=args.budget, full_iters=args.full_iters)
        except ValueError as err:
            parser.error(f"--budget {args.budget:g} of --full-iters {args.full_iters}: {err}")
    params = {"milestones": list(STEP_MILESTONES)} if args.schedule == "step" else {}
    torch.set_num_threads(args.threads)
    try:
        callback = BudgetCallback(args.schedule, warmup_iters=args.warmup_iters, params=params,
                                  on_resume=args.on_resume)  # fmt: skip
    except ValueError as err:
        parser.error(str(err))
    module = DigitsModule(args.lr, args.batch_size, args.seed, str(args.out))
    module.summary = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    module.summary.update(budget_iters=steps if steps > 0 else None, test_accuracy=None)
    last = args.out / "checkpoints" / "last.ckpt"
    ckpt = str(last) if args.resume and last.exists() else None
    trainer = trainer_for(args, callback, steps)
    try:
        trainer.fit(module, ckpt_path=ckpt)
    except (budgeted.BudgetMismatchError, ValueError) as err:  # a refused resume, a bad budget
        print(f"{PROG}: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except Diverged:  # the callback printed its line
        return DIVERGED_EXIT_CODE
    ignore_late_signals()
    s = module.summary
    print(f"{s['iterations']} steps, final LR {s['final_lr']:.3g}, val accuracy "
          f"{s['val_accuracy']:.4f}: {args.out / 'results.json'}")  # fmt: skip
    return 0


def cli(argv: list[str]) -> None:
    """LightningCLI over :class:`DigitsModule` (``fit --config examples/lightning_digits.yaml``)."""
    from lightning.pytorch.cli import LightningCLI

    LightningCLI(DigitsModule, args=argv, save_config_kwargs={"overwrite": True})


if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1] in ("fit", "validate", "test", "predict", "--help"):
        cli(sys.argv[1:])
    else:
        raise SystemExit(main())

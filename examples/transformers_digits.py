#!/usr/bin/env python
"""Train a tiny ResNet on the UCI digits for a budget with the Hugging Face ``Trainer`` and
``budgeted.transformers``.

The model is ``ResNetForImageClassification`` built from a config (32x32 grey images, two stages
of 32 and 64 channels: randomly initialised, no weights downloaded; not a ViT: transformers 5.25.0
saves ViT-family checkpoints under their old key names, and ``Trainer``'s resume then silently
keeps the encoder's initial weights), trained by
``budgeted.transformers.BudgetTrainer`` with a ``BudgetCallback``: AdamW (the Trainer's default)
at ``--lr``, batch 32, on the 1,400 training images of ``budgeted.toys.digits.digits_split``
(397 held out, evaluated once at the end). The budget is ``round(--budget x --full-iters)``
optimizer steps (``TrainingArguments.max_steps``), or ``--time SECONDS`` of training (the LR
anneals to 0 at the deadline; ``max_steps`` is then only a cap).

The sweep's script contract (docs/sweeps.md): ``--out DIR`` gets ``metrics.jsonl`` (one line
per step: ``iteration``, ``lr``, ``loss``, written as it trains; then a final line with
``val_accuracy``) and, last, ``results.json``. Checkpoints go to ``DIR/checkpoints`` (every
``--save-steps``, and on SIGTERM / SIGUSR1, which end the run with exit status 75); running the
same command again resumes from the last one, and refuses (exit 2, one line, nothing written) a
run of another budget. A non-finite loss ends the run with one line and exit status 3.

Example::

    python examples/transformers_digits.py --budget 0.1 --schedule cosine --out output/hf/cos
    python examples/transformers_digits.py --time 75 --full-iters 100000 --out output/hf/t75
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import torch

import budgeted
from budgeted.errors import BudgetConfigError, BudgetMismatchError, BudgetReplanError
from budgeted.safety import atomic_write_text
from budgeted.schedules import parse_arm, parse_duration
from budgeted.toys.image_sets import real_set

PROG = "transformers_digits"
FULL_ITERS = 1720  # examples/digits_budget.py's full schedule: 40 epochs of 43 batches of 32


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        self.exit(2, f"{PROG}: error: {message}\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=1.0, help="fraction of --full-iters")
    p.add_argument("--schedule", default="linear", help="NAME[:KEY=VALUE,...], any schedule")
    p.add_argument("--full-iters", type=int, default=FULL_ITERS, help="the full schedule's steps")
    p.add_argument("--time", help="a time budget (seconds, 90s, 2m): anneal to 0 at it")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW's base learning rate")
    p.add_argument("--warmup-iters", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--save-steps", type=int, default=0, help="checkpoint every N steps (0: none)")
    p.add_argument("--on-resume", default="refuse", help="refuse, replan or branch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    for flag, ok, allowed in (
        ("--budget", 0 < a.budget <= 1, "a fraction in (0, 1]"),
        ("--full-iters", a.full_iters >= 1, "a whole number >= 1"),
        ("--lr", 0 < a.lr < math.inf, "a number > 0"),
        ("--batch-size", 1 <= a.batch_size <= 1400, "a whole number in [1, 1400]"),
        ("--save-steps", a.save_steps >= 0, "a whole number >= 0"),
        ("--threads", a.threads >= 1, "a whole number >= 1"),
    ):
        if not ok:
            p.error(
                f"{flag} {getattr(a, flag[2:].replace('-', '_'))!r} is invalid; allowed: {allowed}"
            )
    try:
        a.name, a.params = parse_arm(a.schedule)
        a.seconds = None if a.time is None else parse_duration(a.time)
        a.steps = budgeted.budget_iters(fraction=a.budget, full_iters=a.full_iters)
    except ValueError as err:
        p.error(str(err))
    return a


class Digits(torch.utils.data.Dataset):
    """Normalised ``1 x 32 x 32`` images and labels, as the Trainer's batches of dicts."""

    def __init__(self, images: Any, labels: Any) -> None:
        digits = real_set("digits")
        self.x = ((torch.from_numpy(images).float() - digits.mean) / digits.std).unsqueeze(1)
        self.y = torch.from_numpy(labels).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"pixel_values": self.x[i], "labels": self.y[i]}


def metrics_recorder(path: Path) -> Any:
    """A callback appending ``{iteration, lr, loss}`` to ``path`` at every step's log (a resumed
    run first keeps the lines of the steps its checkpoint trained)."""
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        first_step: float | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            lines = path.read_text().splitlines() if path.exists() else []
            kept = [line for line in lines if json.loads(line)["iteration"] < state.global_step]
            path.write_text("".join(line + "\n" for line in kept))

        def on_step_begin(self, args, state, control, **kwargs):
            self.first_step = self.first_step or time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                record = {"iteration": state.global_step - 1, "lr": logs["learning_rate"],
                          "loss": logs["loss"]}  # fmt: skip
                with path.open("a") as f:
                    f.write(json.dumps(record) + "\n")

    return Recorder()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if (a.out / "results.json").exists():
        print(f"{PROG}: error: --out {a.out} already holds results.json", file=sys.stderr)
        return 2
    import transformers
    from transformers import (
        PrinterCallback,
        ResNetConfig,
        ResNetForImageClassification,
        TrainingArguments,
    )
    from transformers.trainer_utils import get_last_checkpoint

    from budgeted.transformers import BudgetCallback, BudgetTrainer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    torch.set_num_threads(a.threads)
    split = real_set("digits").load()
    train, val = (Digits(split.train_images, split.train_labels),
                  Digits(split.val_images, split.val_labels))  # fmt: skip
    torch.manual_seed(a.seed)
    config = ResNetConfig(num_channels=1, embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1],
                          num_labels=10)  # fmt: skip
    model = ResNetForImageClassification(config)
    checkpoints = a.out / "checkpoints"
    args = TrainingArguments(
        output_dir=str(checkpoints), max_steps=a.steps, per_device_train_batch_size=a.batch_size,
        learning_rate=a.lr, seed=a.seed, logging_steps=1, logging_nan_inf_filter=False,
        save_strategy="steps" if a.save_steps else "no", save_steps=a.save_steps or 500,
        report_to="none", disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
    )  # fmt: skip
    budget = {"time": a.seconds} if a.seconds is not None else {}
    callback = BudgetCallback(a.name, warmup_iters=a.warmup_iters, on_resume=a.on_resume,
                              **budget, **a.params)  # fmt: skip
    recorder = metrics_recorder(a.out / "metrics.jsonl")
    trainer = BudgetTrainer(model=model, args=args, train_dataset=train,
                            callbacks=[callback, recorder])  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # disable_tqdm=True prints every log otherwise
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    print(f"{PROG}: {callback.describe(a.steps)}, base LR {a.lr:g}, seed {a.seed}"
          + (f"; resuming from {last}" if last else ""), flush=True)  # fmt: skip
    try:
        trainer.train(resume_from_checkpoint=last)
    except (BudgetMismatchError, BudgetReplanError, BudgetConfigError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - (recorder.first_step or time.perf_counter())
    model.eval()
    with torch.no_grad():
        accuracy = (model(pixel_values=val.x).logits.argmax(1) == val.y).float().mean().item()
    steps = trainer.state.global_step
    scheduler = callback.lr_scheduler
    clock = callback.clock
    summary = {
        "budget": a.budget, "schedule": a.schedule, "full_iters": a.full_iters, "lr": a.lr,
        "seed": a.seed, "warmup_iters": a.warmup_iters, "time_budget": a.seconds,
        "budget_iters": steps, "iterations": steps, "val_accuracy": accuracy,
        "final_lr": scheduler.get_last_lr()[0],
        "train_seconds": None if clock is None else round(clock.elapsed, 3),
        "wall_seconds_this_process": round(wall, 3),
    }  # fmt: skip
    final = {"iteration": steps, "final": True, "val_accuracy": accuracy}
    with (a.out / "metrics.jsonl").open("a") as f:
        f.write(json.dumps(final) + "\n")
    atomic_write_text(a.out / "results.json", json.dumps(summary, indent=1) + "\n")
    print(f"{PROG}: {steps} steps, val accuracy {accuracy:.4f}, final LR {summary['final_lr']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

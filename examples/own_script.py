"""The sweep's script contract in 30 lines: `budgeted-sweep --script examples/own_script.py`."""

import argparse
import json
from pathlib import Path

import torch

from budgeted.pytorch import BudgetLR
from budgeted.schedules import budget_iters

p = argparse.ArgumentParser()
for flag, kind in [("--budget", float), ("--schedule", str), ("--full-iters", int),
                   ("--lr", float), ("--seed", int), ("--out", Path)]:  # fmt: skip
    p.add_argument(flag, type=kind, required=flag in ("--budget", "--schedule", "--out"))
a = p.parse_args()
torch.manual_seed(a.seed or 0)
x = torch.randn(512, 8)
y = (x @ torch.randn(8) > 0).long()  # a linearly separable toy task: 384 train, 128 held out
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=a.lr or 0.5)
iters = budget_iters(fraction=a.budget, full_iters=a.full_iters or 200)
sched = BudgetLR(opt, a.schedule, iters, warmup_iters=0)
log = []
for t in range(iters):
    batch = slice(t % 6 * 64, t % 6 * 64 + 64)
    loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
    opt.zero_grad(), loss.backward(), opt.step()
    log.append({"iteration": t, "lr": sched.get_last_lr()[0], "loss": loss.item()}), sched.step()
acc = (model(x[384:]).argmax(1) == y[384:]).float().mean().item()
a.out.mkdir(parents=True, exist_ok=True)
log.append({"iteration": iters, "final": True, "val_accuracy": acc})
(a.out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
(a.out / "results.json").write_text(json.dumps({"val_accuracy": acc, "budget_iters": iters}))

"""Detectron2's FullGradNormHook (budgeted.detectron2.grad_norm): the toy Mask R-CNN trains bit
for bit as without it and metrics.json gets ``full_grad_norm`` beside ``lr``; on a tiny model
with Detectron2's own SimpleTrainer, hooks and writers: where the values land, and DDP (2
processes, gloo)."""

from __future__ import annotations

import doctest
import logging
import math
from pathlib import Path

import pytest
import torch
from d2_testutils import TINY, TOY_CONFIG, read_metrics
from detectron2.engine import SimpleTrainer, hooks
from detectron2.utils.events import JSONWriter, get_event_storage
from torch import nn

import budgeted.detectron2.grad_norm as d2gn
from budgeted.detectron2 import BudgetConfigError, BudgetTrainer, load_config
from budgeted.detectron2.cli import run
from budgeted.detectron2.grad_norm import FullGradNormHook, grad_norm_hook_from_cfg
from budgeted.detectron2.preemption import PreemptionHook
from budgeted.safety import load_checkpoint

NAME = "full_grad_norm"
TIMING = {"time", "data_time", "eta_seconds"}
"""metrics.json keys that are wall-clock times (differ between any two runs)."""


# --- a tiny model, Detectron2's own trainer, hooks and writers --------------------------------


class TinyDetector(nn.Module):
    """Takes a list of dicts, returns a loss dict; BatchNorm, dropout, random sampling (as an
    R-CNN samples proposals) and a scalar of its own in the event storage."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(
            nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 1)
        )

    def forward(self, batch: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        x = torch.stack([d["x"] for d in batch])
        y = torch.stack([d["y"] for d in batch])
        out = self.net(x)
        keep = torch.randperm(len(batch))[:3]
        get_event_storage().put_scalar("model/mean_out", float(out.mean()))
        return {"loss_a": (out - y).pow(2)[keep].mean(), "loss_b": 0.1 * out.abs().mean()}


def stream(size: int = 4):
    """Training batches drawn from the global torch generator (as augmentations draw)."""
    while True:
        yield [{"x": torch.randn(4), "y": torch.randn(1)} for _ in range(size)]


def train_tiny(
    out: Path,
    grad_norm: FullGradNormHook | None,
    iters: int = 7,
    writer_period: int = 1,
    after_writer: bool = False,
) -> tuple[nn.Module, list[dict]]:
    """Train TinyDetector with SimpleTrainer; its weights and metrics.json rows."""
    torch.manual_seed(42)
    model = TinyDetector()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    trainer = SimpleTrainer(model, stream(), opt)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    out.mkdir(parents=True, exist_ok=True)
    writer = hooks.PeriodicWriter([JSONWriter(str(out / "metrics.json"))], period=writer_period)
    extra = [grad_norm] if grad_norm else []
    order = [writer, *extra] if after_writer else [*extra, writer]
    trainer.register_hooks([hooks.LRScheduler(opt, sched), *order])
    trainer.train(0, iters)
    return model, read_metrics(out)


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def rows_with(rows: list[dict], key: str) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for row in rows:
        if key in row:
            found.setdefault(row["iteration"], []).append(row)
    return found


@pytest.mark.integration
def test_tiny_model_trains_bit_for_bit_and_every_value_is_written_beside_lr(tmp_path):
    model_off, rows_off = train_tiny(tmp_path / "off", None)
    hook = FullGradNormHook(period=3, num_batches=2, data_loader=stream(5))
    model_on, rows_on = train_tiny(tmp_path / "on", hook)
    assert same_weights(model_off.state_dict(), model_on.state_dict())
    # every other value identical: the model's own scalars stayed out of the training storage
    strip = TIMING | {NAME}
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows_on] == [
        {k: v for k, v in r.items() if k not in TIMING} for r in rows_off
    ]
    values = rows_with(rows_on, NAME)
    assert sorted(values) == [2, 5, 6]  # after iterations 3 and 6, and after the last (7)
    for rows in values.values():
        (row,) = rows
        assert "lr" in row and math.isfinite(row[NAME]) and row[NAME] > 0
    assert hook.evaluations == 3 and hook.seconds > 0
    # the value is a function of the weights: recomputed at the final weights, the same
    assert hook.batches is None  # released after training
    again = FullGradNormHook(period=1, num_batches=2, data_loader=stream(5))
    again.trainer = type("T", (), {"model": model_on, "iter": 6})()
    again.before_train()
    assert again.evaluate() == values[6][0][NAME]


@pytest.mark.integration
def test_a_period_that_is_not_a_multiple_of_the_writers_still_writes_every_value(tmp_path):
    hook = FullGradNormHook(period=3, num_batches=1, data_loader=stream())
    _, rows = train_tiny(tmp_path / "on", hook, iters=8, writer_period=2)
    values = rows_with(rows, NAME)
    assert sorted(values) == [2, 5, 7]
    assert all(len(v) == 1 for v in values.values())  # each value once, in its iteration's row
    assert "lr" in values[5][0] and "lr" in values[7][0]  # writer iterations: beside lr


def warnings_of(**kwargs) -> tuple[list[str], list[dict]]:
    """train_tiny's metrics rows, and what the hook's logger said meanwhile."""
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    d2gn.logger.addHandler(handler)
    try:
        _, rows = train_tiny(grad_norm=FullGradNormHook(2, 1, data_loader=stream()), **kwargs)
    finally:
        d2gn.logger.removeHandler(handler)
    return seen, rows


@pytest.mark.integration
def test_a_period_shorter_than_the_writers_warns(tmp_path):
    seen, _ = warnings_of(out=tmp_path, iters=4, writer_period=4)
    assert any("period 2 < the writers' period 4" in line for line in seen), seen


@pytest.mark.integration
def test_a_hook_after_the_writer_warns_its_values_are_not_written(tmp_path):
    seen, rows = warnings_of(out=tmp_path, iters=4, after_writer=True)
    assert any("registered after a PeriodicWriter" in line for line in seen), seen
    assert not rows_with(rows, NAME)  # what the warning is about


@pytest.mark.unit
def test_the_log_lines_keep_their_words():
    seen: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    hook = FullGradNormHook(period=1, num_batches=1, data_loader=stream())
    hook.trainer = type("T", (), {"model": TinyDetector(), "iter": 6})()
    level = d2gn.logger.level
    d2gn.logger.addHandler(handler)
    d2gn.logger.setLevel(logging.INFO)
    try:
        hook.before_train()
        value = hook.evaluate()
        hook.after_train()
    finally:
        d2gn.logger.removeHandler(handler)
        d2gn.logger.setLevel(level)
    assert (
        seen[0]
        == f"full_grad_norm: {value:.6g} after iteration 7 (1 batches, {hook.seconds:.2f} s)"
    )
    assert seen[1] == (
        f"FullGradNormHook: 1 evaluations of 1 batches, {hook.seconds:.2f} s each on average"
    )
    assert len(seen) == 2 and hook.batches is None


@pytest.mark.unit
def test_bad_values_are_one_line_naming_the_value(toy_root, tmp_path) -> None:
    with pytest.raises(BudgetConfigError, match=r"^FullGradNormHook: period=0 is invalid; allo"):
        FullGradNormHook(period=0)
    with pytest.raises(BudgetConfigError, match=r"num_batches=1.5 is invalid; allowed: an int"):
        FullGradNormHook(period=2, num_batches=1.5)
    cfg = load_config(TOY_CONFIG)
    assert (cfg.SOLVER.BUDGET.GRAD_NORM_PERIOD, cfg.SOLVER.BUDGET.GRAD_NORM_BATCHES) == (0, 2)
    assert grad_norm_hook_from_cfg(cfg) is None
    cfg.SOLVER.BUDGET.GRAD_NORM_BATCHES = 0
    with pytest.raises(BudgetConfigError, match=r"^SOLVER.BUDGET.GRAD_NORM_BATCHES=0 is invalid"):
        grad_norm_hook_from_cfg(cfg)
    for key, value, allowed in (
        ("GRAD_NORM_PERIOD", "-1", "allowed: a whole number >= 0"),
        ("GRAD_NORM_BATCHES", "0", "allowed: a whole number >= 1"),
    ):
        with pytest.raises(SystemExit) as err:
            run(["--config-file", TOY_CONFIG, f"SOLVER.BUDGET.{key}", value,
                 "OUTPUT_DIR", str(tmp_path / "out")])  # fmt: skip
        message = str(err.value.code)
        assert f"SOLVER.BUDGET.{key}={value} is invalid; {allowed}" in message
        assert "\n" not in message
        assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_docstring_examples_run():
    result = doctest.testmod(d2gn, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# --- DDP: 2 processes, gloo --------------------------------------------------------------------


def _ddp_worker(rank: int, init: str, out: str) -> None:
    import torch.distributed as dist
    from detectron2.engine.defaults import create_ddp_model

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        results = {}
        for with_hook in (False, True):
            model = create_ddp_model(TinyDetector(), broadcast_buffers=False, device_ids=None)
            torch.manual_seed(42 + rank)  # each rank its own training data
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            trainer = SimpleTrainer(model, stream(), opt)
            # each rank its own subset (sizes 4 and 5: other batches under the same seed)
            hook = FullGradNormHook(period=2, num_batches=2, data_loader=stream(4 + rank))
            values: list[float | None] = []

            def now(t: SimpleTrainer, values: list[float | None] = values) -> None:
                value, it = t.storage.latest().get(NAME, (None, -1))
                values.append(value if it == t.iter else None)

            record = hooks.CallbackHook(after_step=now)
            trainer.register_hooks([hook, record] if with_hook else [record])
            trainer.train(0, 4)
            results[with_hook] = {
                "state": model.module.state_dict(),
                "params": {k: p.detach() for k, p in model.module.named_parameters()},
                "values": values,
            }
        torch.save(results, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


@pytest.mark.e2e
def test_ddp_two_ranks_train_bit_for_bit_and_agree_on_the_value(tmp_path):
    import torch.multiprocessing as mp

    out = str(tmp_path / "ddp")
    mp.spawn(_ddp_worker, args=(f"file://{tmp_path}/init", out), nprocs=2, join=True)
    ranks = [torch.load(f"{out}.{rank}", weights_only=False) for rank in range(2)]
    for r in ranks:
        assert same_weights(r[False]["state"], r[True]["state"])
    # DDP kept the weights equal (BatchNorm statistics are per rank: broadcast_buffers=False)
    assert same_weights(ranks[0][True]["params"], ranks[1][True]["params"])
    values = [r[True]["values"] for r in ranks]
    assert values[0] == values[1]  # averaged over the ranks: the same value on both
    assert [v is not None for v in values[0]] == [False, True, False, True]


# --- the real toy Mask R-CNN ---------------------------------------------------------------------

FOUR = ["SOLVER.BUDGET.FRACTION", "0.01", "DATASETS.TEST", "()"]  # 4 iterations, no evaluation


@pytest.mark.integration
def test_budget_trainer_registers_the_hook_before_the_writers(toy_root, tmp_path) -> None:
    cfg = load_config(TOY_CONFIG, [*TINY, *FOUR, "SOLVER.BUDGET.GRAD_NORM_PERIOD", "2",
                                   "OUTPUT_DIR", str(tmp_path)])  # fmt: skip
    kinds = [type(h) for h in BudgetTrainer(cfg)._hooks]
    assert kinds[-3:] == [FullGradNormHook, hooks.PeriodicWriter, PreemptionHook]
    assert kinds.index(hooks.LRScheduler) < kinds.index(FullGradNormHook)
    cfg.SOLVER.BUDGET.GRAD_NORM_PERIOD = 0
    assert FullGradNormHook not in [type(h) for h in BudgetTrainer(cfg)._hooks]


@pytest.mark.integration
def test_toy_mask_rcnn_trains_bit_for_bit_with_the_hook_and_logs_it_beside_lr(toy_root, tmp_path):
    outs = {}
    for tag, extra in (("off", []), ("on", ["SOLVER.BUDGET.GRAD_NORM_PERIOD", "2"])):
        outs[tag] = tmp_path / tag
        run(["--config-file", TOY_CONFIG, *TINY, *FOUR, *extra, "OUTPUT_DIR", str(outs[tag])])
    final = {tag: load_checkpoint(out / "model_final.pth") for tag, out in outs.items()}
    assert same_weights(final["off"]["model"], final["on"]["model"])
    momentum = [
        {k: v for k, v in final[tag]["trainer"]["_trainer"]["optimizer"]["state"].items()}
        for tag in ("off", "on")
    ]
    assert momentum[0].keys() == momentum[1].keys()
    for k in momentum[0]:
        assert same_weights(momentum[0][k], momentum[1][k])
    rows = {tag: read_metrics(out) for tag, out in outs.items()}
    # losses, lr, the model's own scalars (roi_head/..., fast_rcnn/...): all identical
    assert [{k: v for k, v in r.items() if k not in TIMING | {NAME}} for r in rows["on"]] == [
        {k: v for k, v in r.items() if k not in TIMING} for r in rows["off"]
    ]
    values = {r["iteration"]: r for r in rows["on"] if NAME in r}
    assert sorted(values) == [1, 3]  # after iterations 2 and 4 (the last)
    for row in values.values():
        assert "lr" in row and math.isfinite(row[NAME]) and row[NAME] > 0
    log = (outs["on"] / "log.txt").read_text()
    assert "full_grad_norm: " in log and "after iteration 4 (2 batches," in log
    assert "FullGradNormHook: 2 evaluations of 2 batches" in log

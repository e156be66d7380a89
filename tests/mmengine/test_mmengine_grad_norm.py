"""MMEngine's FullGradNormHook (budgeted.mmengine.grad_norm) with the real Runner on the toy
PSPNet: training is bit for bit what it is without the hook, and scalars.json gets
``full_grad_norm`` at exactly the iterations it was computed, beside ``lr`` where the logger
writes a row."""

from __future__ import annotations

import doctest
import json
import math
from pathlib import Path

import pytest
import torch
from mmengine.runner import Runner
from mmseg_testutils import stock_config, toy_args, toy_config

import budgeted.mmengine.grad_norm as mmgn
from budgeted.mmengine import BudgetConfigError, FullGradNormHook

NAME = "full_grad_norm"
VARIES = {"time", "data_time", "memory", "eta"}
"""scalars.json keys that are wall-clock times or memory (differ between any two runs)."""


def scalar_rows(work_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(work_dir.glob("*/vis_data/scalars.json")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def values_by_step(rows: list[dict]) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for row in rows:
        if NAME in row:
            found.setdefault(row["step"], []).append(row)
    return found


def train(tmp_path: Path, toy_root: Path, hook: dict | None, iters: int = 6, **options):
    """The stock route (``Runner.from_cfg``), no validation; the runner after training."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = stock_config(tmp_path, toy_root, iters=iters, warmup=2, validate=False, **options)
    if hook is not None:
        cfg.custom_hooks.append(hook)
    runner = Runner.from_cfg(cfg)
    runner.train()
    return runner


@pytest.mark.unit
def test_bad_arguments_are_one_line():
    for kwargs, message in (
        (dict(interval=0), "interval=0 is invalid; allowed: an int >= 1"),
        (dict(interval=2, num_batches=0), "num_batches=0 is invalid; allowed: an int >= 1"),
        (dict(interval=True), "interval=True is invalid"),
        (dict(interval=2, seed=-1), "seed=-1 is invalid; allowed: an int >= 0"),
        (dict(interval=2, dataloader=[1]), "dataloader=list is invalid; allowed: a dataloader"),
        (dict(interval=2, name="lr"), "name='lr' is invalid; allowed: an identifier that"),
        (dict(interval=2, name="grad_norm"), "name='grad_norm' is invalid"),
        (dict(interval=2, name="a b"), "name='a b' is invalid"),
    ):
        with pytest.raises(BudgetConfigError, match=f"^FullGradNormHook: {message}"):
            FullGradNormHook(**kwargs)


@pytest.mark.unit
def test_the_log_lines_keep_their_words():
    from mmengine.model import BaseModel

    class Net(BaseModel):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x: torch.Tensor, mode: str = "tensor") -> dict[str, torch.Tensor]:
            return {"loss_a": self.w * x.sum()}

    seen: list[str] = []
    runner = type("R", (), {"model": Net(), "iter": 3, "logger": type("L", (), {})()})()
    runner.logger.info = seen.append
    hook = FullGradNormHook(interval=2, num_batches=1)
    assert hook.interval == hook.period == 2
    hook.draw(lambda: iter([{"x": torch.ones(3)}]), runner.model)
    assert hook.evaluate(runner) == 3.0  # d(w * 3)/dw
    hook.after_train(runner)
    assert seen[0] == (
        f"FullGradNormHook: full_grad_norm=3 after iteration 4 (1 batches, {hook.seconds:.2f} s)"
    )
    assert seen[1] == (
        f"FullGradNormHook: 1 evaluations of 1 batches, {hook.seconds:.2f} s each on average"
    )
    assert len(seen) == 2 and hook.batches is None


@pytest.mark.unit
def test_a_built_train_dataloader_is_refused_not_shared():
    class Cfg(dict):
        pass

    runner = type("R", (), {"cfg": Cfg(train_dataloader=torch.utils.data.DataLoader([1, 2]))})()
    with pytest.raises(BudgetConfigError, match="train_dataloader is a DataLoader, not a config"):
        FullGradNormHook(interval=2)._loader_cfg(runner)


@pytest.mark.unit
def test_registered_in_mmengine_hooks_and_docstring_examples_run():
    from mmengine.registry import HOOKS

    assert HOOKS.get("FullGradNormHook") is FullGradNormHook
    result = doctest.testmod(mmgn, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.e2e
def test_trains_bit_for_bit_with_the_hook_and_logs_the_value_beside_lr(tmp_path, toy_root):
    hook = dict(type="FullGradNormHook", interval=2, num_batches=2)
    off = train(tmp_path / "off", toy_root, None)
    on = train(tmp_path / "on", toy_root, hook)
    weights = [r.model.state_dict() for r in (off, on)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    optim = [r.optim_wrapper.state_dict()["state"] for r in (off, on)]
    assert optim[0].keys() == optim[1].keys()
    for key in optim[0]:
        assert all(torch.equal(optim[0][key][n], optim[1][key][n]) for n in optim[0][key])
    rows = {tag: scalar_rows(Path(r.work_dir)) for tag, r in (("off", off), ("on", on))}
    # losses, accuracies and lr identical at every iteration
    assert [{k: v for k, v in r.items() if k not in VARIES | {NAME}} for r in rows["on"]] == [
        {k: v for k, v in r.items() if k not in VARIES} for r in rows["off"]
    ]
    values = values_by_step(rows["on"])
    assert sorted(values) == [2, 4, 6]
    for found in values.values():
        (row,) = found  # once, in the logger's row of that iteration
        assert "lr" in row and row["iter"] == row["step"]
        assert math.isfinite(row[NAME]) and row[NAME] > 0
    (grad_hook,) = [h for h in on.hooks if isinstance(h, FullGradNormHook)]
    assert grad_hook.evaluations == 3 and grad_hook.seconds > 0
    # the evaluations after iterations 2 and 4 are not counted as data loading of 3 and 5
    data_time = on.message_hub.get_scalar("train/data_time").data[0]
    assert len(data_time) == 6
    assert max(data_time[2], data_time[4]) < 0.5 * grad_hook.seconds / grad_hook.evaluations


@pytest.mark.e2e
def test_an_interval_that_is_not_a_multiple_of_the_loggers_loses_no_value(tmp_path, toy_root):
    hook = dict(type="FullGradNormHook", interval=3, num_batches=1)
    runner = train(tmp_path, toy_root, hook, iters=8, **{"default_hooks.logger.interval": 4})
    rows = scalar_rows(Path(runner.work_dir))
    values = values_by_step(rows)
    assert sorted(values) == [3, 6, 8]  # every 3 iterations, and after the last
    assert all(len(found) == 1 for found in values.values())  # each once, never repeated
    assert "lr" in values[8][0]  # a logger row
    assert set(values[3][0]) == {NAME, "step"}  # rows of the hook's own
    assert all(NAME not in r for r in rows if r["step"] not in values)


@pytest.mark.e2e
def test_our_tool_trains_with_the_config_hook_and_refuses_a_bad_one(
    tmp_path, toy_root, cli, capsys
):
    hooks = (
        'custom_hooks = [dict(type="RecordLRHook", out_dir="{}"), '
        'dict(type="FullGradNormHook", interval={}, num_batches=1)]\n'
    )
    good = toy_config(tmp_path, extra=hooks.format(tmp_path, 2))
    work = tmp_path / "work"
    assert cli.main(toy_args(good, work, toy_root, iters=4, warmup=2)) == 0
    assert sorted(values_by_step(scalar_rows(work))) == [2, 4]
    bad = toy_config(tmp_path, extra=hooks.format(tmp_path, 0))
    capsys.readouterr()
    assert cli.main(toy_args(bad, tmp_path / "bad", toy_root, iters=4, warmup=2)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "train_seg: error: FullGradNormHook: interval=0 is invalid; allowed: an int >= 1"
    )
    assert not (tmp_path / "bad").exists()  # refused before the runner wrote anything

"""The run-control layer with a minimal framework written here (issue 54): no Detectron2, no
MMEngine. The fake framework is an accessor (where its checkpoints and their budget state are,
its words) and a loop that forwards to the layer: the budget engine sets every iteration's LR,
``preempted_after`` saves and stops on a signal, ``save_and_point`` writes, the engine's one
resume decision goes on or refuses, and a time budget's deadline ends the run and judges it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from budgeted.control.engine import BudgetEngine, ResumeWords, write_lrs
from budgeted.control.stops import Deadline, preempted_after
from budgeted.safety import load_checkpoint
from budgeted.safety.preemption import PreemptionPolicy
from budgeted.safety.writing import save_and_point
from budgeted.schedules import BudgetMismatchError, BudgetSchedule, TimeBudget, TrainingClock

pytestmark = pytest.mark.unit


class FakeAccess:
    """The fake framework's accessor: where it keeps things, and its words."""

    POINTER = "last_checkpoint"
    WORDS = ResumeWords(names={"total": "fake.total", "warmup": "fake.warmup"},
                        fix="start a new run in another folder", owner="FakeScheduler")  # fmt: skip

    @staticmethod
    def checkpoint_name(trained: int) -> str:
        return f"fake_{trained:04d}.pt"

    @classmethod
    def resume_checkpoint(cls, folder: Path) -> Path:
        return folder / (folder / cls.POINTER).read_text()

    @staticmethod
    def saved_budget(checkpoint: dict) -> dict:
        return checkpoint["scheduler"]["budget"]


def train(folder: Path, total: int, *, policy: PreemptionPolicy | None = None, kill_at: int = -1,
          resume: bool = False) -> tuple[list[float], torch.Tensor, int | None]:  # fmt: skip
    """The fake framework's loop: the LRs it set, its weights, the signal that stopped it."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    bases = [group["lr"] for group in optimizer.param_groups]
    engine = BudgetEngine(BudgetSchedule("linear", total, warmup=2))
    start = 0
    if resume:
        checkpoint = load_checkpoint(FakeAccess.resume_checkpoint(folder))  # untrusted: as data
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start = checkpoint["iteration"]
        saved = FakeAccess.saved_budget(checkpoint)
        engine.adopt(engine.resume(saved, at=start, words=FakeAccess.WORDS))
    x, y = torch.arange(8.0).reshape(4, 2), torch.ones(4, 1)

    def save_now(trained: int) -> str:
        name = FakeAccess.checkpoint_name(trained)
        state = {"iteration": trained, "model": model.state_dict(),
                 "optimizer": optimizer.state_dict(), "scheduler": engine.state()}  # fmt: skip
        save_and_point(lambda tmp: torch.save(state, tmp), folder / name,
                       folder / FakeAccess.POINTER, name)  # fmt: skip
        return name

    lrs = []
    for t in range(start, total):
        write_lrs(optimizer.param_groups, "lr", bases, engine.multiplier(t))
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        if t + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGTERM)  # the policy only sets its flag
        stopped = preempted_after(policy, t + 1, total, save_now, lambda: None)
        if stopped is not None:
            return lrs, model.weight.detach().clone(), stopped[0]
    return lrs, model.weight.detach().clone(), None


def test_a_preempted_fake_run_saves_then_resumes_to_the_uninterrupted_run(tmp_path):
    whole, whole_weights, _ = train(tmp_path / "unused", 10)
    folder = tmp_path / "run"
    folder.mkdir()
    policy = PreemptionPolicy()
    policy.begin()
    try:
        first, _, signum = train(folder, 10, policy=policy, kill_at=4)
    finally:
        policy.end()
    assert signum == signal.SIGTERM and len(first) == 4
    assert sorted(p.name for p in folder.iterdir()) == ["fake_0004.pt", "last_checkpoint"]
    rest, weights, signum = train(folder, 10, resume=True)
    assert signum is None and first + rest == whole  # the same LRs, iteration for iteration
    assert torch.equal(weights, whole_weights) and whole[-1] == pytest.approx(0.5 * 1 / 8)


def test_resuming_a_fake_run_with_another_budget_is_one_line_in_its_words(tmp_path):
    policy = PreemptionPolicy()
    policy.begin()
    try:
        train(tmp_path, 10, policy=policy, kill_at=3)
    finally:
        policy.end()
    with pytest.raises(BudgetMismatchError) as refused:
        train(tmp_path, 20, resume=True)
    line = str(refused.value)
    assert "\n" not in line and "fake.total" in line and "20" in line and "10" in line, line
    assert line.endswith("start a new run in another folder"), line


@pytest.mark.parametrize(("warmup", "undecayed"), [(0, False), (60, True)])
def test_a_time_budget_ends_a_fake_run_at_its_deadline_and_judges_its_decay(warmup, undecayed):
    """A time budget of 5 s at 0.1 s per iteration: the deadline ends the run after 50 or so
    iterations, decayed to its last step; with a warmup of 60 iterations it came inside the
    warmup, and the one line says so in the framework's words."""
    ticks = iter(0.1 * s for s in range(100000))
    clock = TrainingClock(now=lambda: next(ticks))
    budget = TimeBudget("linear", 5, warmup_iters=warmup)
    engine = BudgetEngine(time=budget, clock=clock)
    deadline = Deadline(5, clock)
    clock.start()
    factors, trained, started = [], 0, 0.0
    while clock.elapsed < deadline.seconds:
        started = clock.elapsed
        factors.append(engine.multiplier(trained))
        trained += 1
        clock.tick(trained)
    assert trained in (50, 51) and factors[0] == pytest.approx(1.0 if not warmup else 0.001)
    reached = deadline.reached_line(trained, clock.elapsed, "", "evaluation follows")
    assert reached == f"time budget of 5 s reached after {trained} iterations (5.0 s of " \
        "training); evaluation follows"  # fmt: skip
    words = {"capped": "capped", "warmup": "{iterations} inside the warmup", "few": "few",
             "tail": "resume with a longer budget"}  # fmt: skip
    line = deadline.undecayed(budget.shortfall(trained - 1, started), trained, words,
                              capped=False, warmup=trained <= warmup)  # fmt: skip
    if undecayed:
        assert line is not None and f"; {trained} iterations inside the warmup; " in line, line
        assert line.startswith("time budget of 5 s ended before the schedule decayed: ")
    else:
        assert line is None and factors[-1] < 0.05, (line, factors[-3:])
        assert all(a > b for a, b in zip(factors, factors[1:]))  # it decays, never rises

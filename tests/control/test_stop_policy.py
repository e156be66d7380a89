"""The stops decided once for both frameworks (:mod:`budgeted.control.stops`) and the atomic
save with its pointer (:func:`budgeted.safety.writing.save_and_point`): real tensors, files and
a real :class:`~budgeted.safety.preemption.PreemptionPolicy`, no framework."""

from __future__ import annotations

import errno
import hashlib
import re
import signal

import pytest
import torch

from budgeted.control.stops import (
    NON_FINITE,
    Deadline,
    as_stop,
    base_lr_of,
    diverged,
    loss_code,
    non_finite_kind,
    preempted_after,
)
from budgeted.errors import DiskFull, Diverged, RunStopped
from budgeted.safety.preemption import PreemptionGuard, PreemptionPolicy
from budgeted.safety.writing import atomic_save, save_and_point
from budgeted.schedules import TrainingClock

pytestmark = pytest.mark.unit

WORDS = {
    "capped": "cap {cap} after {elapsed:.1f} of {seconds:g} s",
    "warmup": "inside the warmup after {iterations}",
    "few": "{iterations} of {average:.3g} s",
    "tail": "iteration {trained} kept",
}


def test_a_nan_loss_wins_over_an_infinite_one_and_names_the_divergence() -> None:
    nan, inf = float("nan"), float("inf")
    assert loss_code({"loss": torch.tensor([1.0, inf])}) == 1
    assert loss_code({"loss_cls": inf, "loss_box": torch.tensor(nan)}) == 2
    assert loss_code({"loss": 1.0, "loss_cls": nan}) == 0  # the total is what counts
    assert loss_code({"acc": nan}) == 0 and loss_code(None) == 0
    assert [NON_FINITE[c] for c in (0, 1, 2)] == [None, "inf", "nan"]
    assert non_finite_kind([torch.ones(2), torch.tensor([nan])], "loss_dict = {'l': inf}") == "nan"
    assert non_finite_kind([torch.ones(2)], "loss_dict = {'l': inf}") == "inf"
    stop = diverged("inf", 12, None, "advice")
    assert isinstance(stop, Diverged) and stop.code == 3
    assert stop.message == "diverged: the loss is inf at iteration 12 (base LR unknown); advice"


def test_the_base_lr_is_the_schedulers_else_the_groups_initial_one() -> None:
    groups = [{"lr": 0.001, "initial_lr": 0.02}, {"lr": 0.5}]
    assert base_lr_of([0.1, 0.3], groups) == 0.3  # what the scheduler multiplies
    assert base_lr_of([], groups) == 0.5 and base_lr_of(None, groups[:1]) == 0.02
    assert base_lr_of(None, []) is None


def test_the_deadline_lines_carry_the_clock_and_the_one_cause() -> None:
    deadline = Deadline(30, TrainingClock(elapsed=30.0))
    assert deadline.reached_line(3, 30.04, ", x", "tail") == (
        "time budget of 30 s reached after 3 iterations (30.0 s of training, x); tail"
    )
    shared = TrainingClock(share=lambda values: values, now=iter([0.0, 30.0]).__next__)
    shared.resume()
    assert shared.tick(3) == 30.0 and shared.syncs == 1
    line = Deadline(30, shared).reached_line(3, shared.elapsed, "", "tail")
    assert re.fullmatch(
        r"time budget .* \(30.0 s of training\); tail; clock shared 1 times, "
        r"\d+ us each",
        line,
    ), line
    head = "time budget of 30 s ended before the schedule decayed: short; "
    both = {"capped": True, "warmup": True}
    assert deadline.undecayed("short", 3, WORDS, **both, cap=3) == (
        f"{head}cap 3 after 30.0 of 30 s; iteration 3 kept"  # the cap is named first
    )
    assert deadline.undecayed("short", 1, WORDS, capped=False, warmup=True) == (
        f"{head}inside the warmup after 1 iteration; iteration 1 kept"
    )
    assert deadline.undecayed("short", 4, WORDS, capped=False, warmup=False) == (
        f"{head}4 iterations of 7.5 s; iteration 4 kept"
    )
    assert deadline.undecayed(None, 0, WORDS, capped=True, warmup=True) is None


def test_a_signal_saves_then_waits_for_every_rank_then_stops() -> None:
    calls: list[object] = []

    def save(trained: int) -> str:
        calls.append(trained)
        return f"ckpt_{trained}.pt"

    with PreemptionGuard() as guard:
        policy = PreemptionPolicy(guard)
        assert policy.begin() == 0
        assert preempted_after(policy, 3, 10, save, lambda: calls.append("barrier")) is None
        guard.request(signal.SIGUSR1)
        stop = preempted_after(policy, 4, 10, save, lambda: calls.append("barrier"))
        assert stop == (signal.SIGUSR1, "ckpt_4.pt") and calls == [4, "barrier"]
        assert preempted_after(policy, 10, 10, save, lambda: None) is None  # the last one
        assert preempted_after(None, 5, 10, save, lambda: None) is None
        policy.end()


def _sha(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def test_a_failed_save_leaves_the_checkpoint_and_its_pointer_as_they_were(tmp_path) -> None:
    pointer = tmp_path / "last_checkpoint"
    save_and_point(lambda tmp: torch.save({"w": 1}, tmp), tmp_path / "m_1.pth", pointer, "m_1.pth")
    before = _sha(tmp_path)

    def torn(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(b"torn")
        raise OSError(errno.ENOSPC, "No space left on device", tmp)

    with pytest.raises(OSError):
        save_and_point(torn, tmp_path / "m_1.pth", pointer, "m_1.pth")
    with pytest.raises(OSError):
        save_and_point(torn, tmp_path / "m_2.pth", pointer, "m_2.pth")
    assert _sha(tmp_path) == before  # no temporary left, nothing replaced, the pointer kept
    save_and_point(lambda tmp: None, tmp_path / "m_3.pth", pointer, "m_3.pth", main=False)
    assert _sha(tmp_path) == before  # another rank: the main one renames and points


def test_a_full_disk_is_one_stop_naming_the_last_intact_checkpoint(tmp_path) -> None:
    atomic_save({"w": torch.ones(1)}, tmp_path / "model_0000003.pth")
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "model_0000007.pth"))
    stop = as_stop(RuntimeError("write failed"), str(tmp_path), "model_*.pth")
    assert stop is None
    try:
        raise RuntimeError("PytorchStreamWriter failed") from full
    except RuntimeError as err:
        stop = as_stop(err, str(tmp_path), "model_*.pth")
    assert isinstance(stop, DiskFull) and stop.code == 1
    assert f"the last intact checkpoint is {str(tmp_path / 'model_0000003.pth')!r}" in stop.message
    assert stop.message.endswith("then resume with --resume")
    own = RunStopped("x")
    assert as_stop(own, None, "model_*.pth") is own

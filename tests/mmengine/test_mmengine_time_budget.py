"""Wall-clock budgets with the real MMEngine runner on the toy PSPNet (real clocks, short
budgets). Assertions compare a run with its own clock, never with fixed times (they hold under
load)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from mmengine.runner import Runner
from mmseg_testutils import (
    DEADLINE_S,
    FULL_TOY_CONFIG,
    child_env,
    logged,
    recorded_lrs,
    stock_config,
    toy_args,
    toy_config,
)

from budgeted.safety.preemption import (
    PREEMPTED_EXIT_CODE,
    UNDECAYED_EXIT_CODE,
    restore_default_signals,
)
from budgeted.schedules.clock import parse_duration

TRAIN_SEG = Path(__file__).resolve().parents[2] / "tools" / "train_seg.py"
WARMUP = 4


@pytest.fixture(scope="module")
def budget_s(first_run) -> int:
    """A time budget of about 60 toy iterations as this machine runs them now (at least 5 s):
    the tests hold however loaded the machine is (the first run's median iteration time), and
    the last iteration starts well inside the decay's last tenth (a run that ends before
    budgeted.schedules.clock.DECAYED_PROGRESS exits 4) even if a few iterations take several times
    longer."""
    times = sorted(logged(first_run[1], "time").values())
    return max(5, math.ceil(60 * times[len(times) // 2]))


@pytest.fixture(scope="module")
def timed_run(tmp_path_factory, toy_root, cli, budget_s) -> tuple[Path, Path]:
    """One toy run of ``budget_s`` seconds from its start, shared by the tests that check it or
    resume from its checkpoint after 6 iterations: (folder of its hook output, work dir)."""
    tmp = tmp_path_factory.mktemp("timed")
    work = tmp / "work"
    args = toy_args(timed_config(tmp), work, toy_root, warmup=WARMUP)
    assert cli.main([*args, "--budget-time", f"{budget_s}s"]) == 0
    return tmp, work


def timed_config(tmp_path, **kwargs):
    """The toy config of the full schedule (``--budget-time`` refuses a fraction config)."""
    return toy_config(tmp_path, base=FULL_TOY_CONFIG, **kwargs)


def scheduler_state(path) -> dict:
    return torch.load(path, weights_only=False)["param_schedulers"][0]


def log_lines(work_dir) -> list[str]:
    """The lines of every run's log in ``work_dir`` (one timestamped folder per run)."""
    return [
        line for log in sorted(work_dir.glob("*/*.log")) for line in log.read_text().splitlines()
    ]


def stop_line(work_dir) -> str:
    return next(line for line in log_lines(work_dir) if "time budget of" in line)


@pytest.mark.e2e
def test_our_tool_trains_for_the_time_then_checkpoints_and_validates(timed_run, budget_s):
    hooks, work = timed_run
    line = stop_line(work)
    trained = int(line.split("reached after ")[1].split()[0])
    assert WARMUP < trained < 3200  # the cap is the full toy schedule
    lrs = recorded_lrs(hooks)
    assert sorted(lrs) == list(range(trained))
    decay = [lrs[i] for i in range(WARMUP, trained)]
    assert all(b <= a for a, b in zip(decay, decay[1:])) and decay[-1] > 0.0
    assert list(logged(work, "mIoU")) == [trained]  # the final validation, at the last iteration
    state = scheduler_state(work / f"iter_{trained}.pth")
    assert state["clock"]["elapsed"] >= budget_s
    assert state["time_budget"]["seconds"] == budget_s
    assert 0.0 < state["time_budget"]["warmup_seconds"] < budget_s


@pytest.mark.e2e
def test_a_resumed_time_budget_goes_on_with_the_checkpoints_clock(
    tmp_path, toy_root, cli, budget_s, timed_run
):
    work = timed_run[1]
    # as if preempted after iteration 6: resume from its checkpoint with the same budget
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(work / "iter_6.pth", resumed / "iter_6.pth")
    half = scheduler_state(resumed / "iter_6.pth")
    assert 0.0 < half["clock"]["elapsed"] < budget_s
    args = toy_args(timed_config(tmp_path), resumed, toy_root, warmup=WARMUP)
    assert cli.main([*args, f"load_from={resumed / 'iter_6.pth'}", "--budget-time", f"{budget_s}s",
                     "--resume"]) == 0  # fmt: skip
    trained = int(stop_line(resumed).split("reached after ")[1].split()[0])
    final = scheduler_state(resumed / f"iter_{trained}.pth")
    # the first resumed iteration trains at the LR of the checkpoint's clock (linear, base 0.01)
    e, w = half["clock"]["elapsed"], half["time_budget"]["warmup_seconds"]
    assert recorded_lrs(tmp_path)[6] == pytest.approx(
        0.01 * (1 - (e - w) / (budget_s - w)), rel=1e-6
    )
    assert final["clock"]["elapsed"] >= budget_s  # one clock across both parts
    assert final["time_budget"]["warmup_seconds"] == half["time_budget"]["warmup_seconds"]
    # another time budget is refused, nothing written
    before = sorted(p.name for p in resumed.glob("*.pth"))
    other = f"{budget_s + 3}s"
    assert cli.main([*args, f"load_from={resumed / 'iter_6.pth'}", "--budget-time", other,
                     "--resume"]) == 2  # fmt: skip
    assert sorted(p.name for p in resumed.glob("*.pth")) == before


@pytest.mark.e2e
def test_a_preempted_time_budget_resumes_the_same_clock(tmp_path, toy_root, cli, budget_s):
    """SIGTERM mid-budget (the reliability issue's handling): exit 75 with a checkpoint holding
    the clock; --resume trains on until the total training time reaches the budget."""
    work = tmp_path / "work"
    args = [*toy_args(timed_config(tmp_path), work, toy_root, warmup=WARMUP),
            "--budget-time", f"{budget_s}s"]  # fmt: skip
    with open(tmp_path / "run.err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(TRAIN_SEG), *args], stdout=subprocess.DEVNULL, stderr=err,
            env=child_env(), preexec_fn=restore_default_signals,
        )  # fmt: skip
        deadline = time.monotonic() + DEADLINE_S
        while not (work / "iter_6.pth").exists() and proc.poll() is None:  # training has begun
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=DEADLINE_S) == PREEMPTED_EXIT_CODE, (
            tmp_path / "run.err"
        ).read_text()
    stopped_at = Path((work / "last_checkpoint").read_text().strip())
    stopped = scheduler_state(stopped_at)
    assert 0.0 < stopped["clock"]["elapsed"] < budget_s
    trained_before = int(stopped_at.stem.split("_")[1])
    assert cli.main([*args, "--resume"]) == 0
    trained = int(stop_line(work).split("reached after ")[1].split()[0])
    final = scheduler_state(work / f"iter_{trained}.pth")
    assert final["clock"]["elapsed"] >= budget_s  # one clock: the two parts add up to the budget
    assert final["time_budget"]["warmup_seconds"] == stopped["time_budget"]["warmup_seconds"]
    lrs = recorded_lrs(tmp_path)  # the resumed part
    assert sorted(lrs) == list(range(trained_before, trained))
    e, w = stopped["clock"]["elapsed"], stopped["time_budget"]["warmup_seconds"]
    assert lrs[trained_before] == pytest.approx(0.01 * (1 - (e - w) / (budget_s - w)), rel=1e-6)


@pytest.mark.e2e
def test_a_time_budget_is_replanned_on_resume_only_when_asked(
    tmp_path, toy_root, cli, capsys, budget_s, timed_run
):
    hooks, work = timed_run
    first = recorded_lrs(hooks)
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copy(work / "iter_6.pth", resumed / "iter_6.pth")  # as if stopped after 6 iterations
    mid = scheduler_state(resumed / "iter_6.pth")
    longer = budget_s + budget_s // 2  # another budget, half as long again
    ckpt = f"load_from={resumed / 'iter_6.pth'}"
    args = toy_args(timed_config(tmp_path), resumed, toy_root, ckpt, warmup=WARMUP)
    assert cli.main([*args, "--budget-time", f"{longer}s", "--resume"]) == 2  # refused by default
    assert f"seconds={longer}" in capsys.readouterr().err.strip().splitlines()[-1]
    assert sorted(p.name for p in resumed.glob("*.pth")) == ["iter_6.pth"]
    assert cli.main([*args, "budget_on_resume=replan", "--budget-time", f"{longer}s",
                     "--resume"]) == 0  # fmt: skip
    replanned = f"time budget re-planned at {mid['clock']['elapsed']:g} s: {budget_s} s -> "
    assert any(f"{replanned}{longer} s" in line for line in log_lines(resumed))
    after = recorded_lrs(tmp_path)
    assert after[6] == pytest.approx(first[6], rel=1e-6)  # no jump: the LR it had reached
    trained = int(stop_line(resumed).split("reached after ")[1].split()[0])
    decay = [after[i] for i in range(6, trained)]
    assert all(b <= a for a, b in zip(decay, decay[1:])) and decay[-1] > 0.0
    final = scheduler_state(resumed / f"iter_{trained}.pth")
    assert final["clock"]["elapsed"] >= longer
    assert final["time_budget"]["seconds"] == longer
    assert final["time_budget"]["replan"]["at"] == mid["clock"]["elapsed"]


@pytest.mark.e2e
def test_the_stock_runner_takes_the_loop_from_the_config(tmp_path, toy_root, budget_s):
    cfg = stock_config(tmp_path, toy_root, iters=3200)
    cfg.train_cfg = dict(type="TimeBudgetTrainLoop", seconds=f"{budget_s}s", max_iters=3200,
                         val_interval=3200)  # fmt: skip
    cfg.default_hooks.checkpoint.interval = 3200
    Runner.from_cfg(cfg).train()
    work = tmp_path / "work"
    trained = int(stop_line(work).split("reached after ")[1].split()[0])
    assert (work / f"iter_{trained}.pth").is_file()
    assert list(logged(work, "mIoU")) == [trained]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--budget-time", "0s"], "time budget '0s' is invalid; allowed: a duration > 0"),
        (["--budget-time=-1h"], "time budget '-1h' is invalid"),
        (["--budget-time", "abc"], "time budget 'abc' is invalid"),
        (["--budget-time", "2h", "--budget", "0.1"],
         "--budget 0.1 and --budget-time 2h are two budgets; allowed: one of them"),
        (["--cfg-options", "train_cfg.type=TimeBudgetTrainLoop", "train_cfg.seconds=abc"],
         "TimeBudgetTrainLoop: time budget 'abc' is invalid"),
        (["--budget-time", "2h", "--cfg-options", "train_cfg.clock_sync_period=0"],
         "TimeBudgetTrainLoop: clock_sync_period=0 is invalid; allowed: an integer >= 1"),
    ],
)  # fmt: skip
def test_bad_time_budgets_are_refused_in_one_line(tmp_path, toy_root, cli, capsys, extra, expected):
    work = tmp_path / "work"
    assert cli.main([*toy_args(timed_config(tmp_path), work, toy_root), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("train_seg: error: ") and expected in err
    assert not work.exists()


SLOW = 'dict(type="SlowIterationHook", seconds=1.2)'
"""Each iteration at least 1.2 s (inside the clock): longer than the whole 1 s budget."""


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("warmup", "options", "hooks", "budget", "shortfall", "cause"),
    [
        (
            3000,
            [],
            [],
            "1s",
            "trained inside the warmup of 3000 iterations, LR multiplier ",
            "inside the warmup; give a longer time budget or fewer warmup_iters",
        ),
        (
            0,
            [],
            [SLOW],
            "1s",
            "its last iteration (1) trained at 0 % of the decay, LR multiplier 1;",
            "the deadline came after 1 iteration of ",
        ),
        (
            WARMUP,
            ["full_schedule_iters=6"],
            [],
            "1h",
            "its last iteration (6) trained at 0 % of the decay, LR multiplier ",
            "train_cfg.max_iters=6 was reached after ",
        ),
    ],
    ids=["deadline-inside-the-warmup", "deadline-after-long-iterations", "iteration-cap-first"],
)
def test_a_time_budget_that_cannot_decay_is_saved_validated_and_exits_4(
    warmup, options, hooks, budget, shortfall, cause, tmp_path, toy_root, cli, capsys
):
    """The run ends as any time budget does (the last checkpoint, the final validation), then
    says in one line why its LR never reached the end of its decay, and exits 4."""
    entries = [f'dict(type="RecordLRHook", out_dir="{tmp_path}")', *hooks]
    config = timed_config(
        tmp_path,
        imports=("budgeted.mmengine", "preemption_helpers"),
        extra=f"custom_hooks = [{', '.join(entries)}]\n",
    )
    work = tmp_path / "work"
    args = toy_args(config, work, toy_root, *options, warmup=warmup)
    assert cli.main([*args, "--budget-time", budget]) == UNDECAYED_EXIT_CODE
    err = capsys.readouterr().err.strip().splitlines()
    seconds = f"{parse_duration(budget):g}"
    said = [line for line in err if "ended before the schedule decayed" in line]
    assert said == [err[-1]] and "Traceback" not in "\n".join(err)
    assert said[0].startswith(
        f"train_seg: time budget of {seconds} s ended before the schedule decayed: "
    ), said
    assert shortfall in said[0] and cause in said[0], said[0]
    trained = int(said[0].split("its last iteration (")[1].split(")")[0])
    assert said[0].endswith(
        f"the checkpoint and validation of iteration {trained} are written (exit status 4)"
    )
    assert (work / f"iter_{trained}.pth").is_file()
    assert (work / "last_checkpoint").read_text() == str(work / f"iter_{trained}.pth")
    assert list(logged(work, "mIoU")) == [trained]  # the final validation ran
    assert sorted(recorded_lrs(tmp_path)) == list(range(trained))


def bound_time_scheduler(read):
    """A ``BudgetLinearLR`` bound to a ``TimeBudgetTrainLoop`` of 10 s on a clock read ``read``
    (the loop holds only what ``bind`` reads: no runner)."""
    from budgeted.mmengine.schedulers import BudgetLinearLR
    from budgeted.mmengine.time_budget import TimeBudgetTrainLoop
    from budgeted.schedules.clock import TrainingClock

    loop = TimeBudgetTrainLoop.__new__(TimeBudgetTrainLoop)
    loop.seconds, loop.clock, loop._max_iters = 10.0, TrainingClock(now=read), 100
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = BudgetLinearLR(optimizer, end=100, warmup_iters=0, by_epoch=False)
    scheduler.bind(loop)
    return scheduler


@pytest.mark.unit
@pytest.mark.parametrize(
    ("clock", "line"),
    [
        pytest.param({"elapsed": -5}, "has clock.elapsed=-5", id="set-back"),
        pytest.param(None, "has no clock.elapsed", id="missing"),
    ],
)
def test_a_time_budget_state_with_its_clock_set_back_or_missing_is_refused(clock, line):
    """Issue 40, item 13 (MMEngine's side of the core's clock rule): a clock of -5 s gave the
    run time again, a state without its clock the whole budget again. Both are refused in one
    line, the scheduler left as built."""
    from budgeted.errors import BudgetResumeError

    seconds = [0.0]
    scheduler = bound_time_scheduler(lambda: seconds[0])
    scheduler.time_budget.multiplier(0, 0.0)  # the warmup (none) ended at 0 s
    scheduler._clock.restore(5.0)
    state = scheduler.state_dict()
    assert state["clock"] == {"elapsed": 5.0}
    if clock is None:
        del state["clock"]
    else:
        state["clock"] = clock
    resumed = bound_time_scheduler(lambda: 0.0)
    before = resumed.state_dict()
    with pytest.raises(BudgetResumeError) as err:
        resumed.load_state_dict(state)
    assert str(err.value) == (
        f"cannot resume: the checkpoint's BudgetLinearLR state {line}; allowed: a finite number "
        ">= 0 (the training seconds spent); resume from another checkpoint, or start a new run "
        "from its weights"
    )
    assert resumed.state_dict() == before and resumed._clock.elapsed == 0.0

"""Wall-clock budgets with the real Detectron2 trainer on toy data (real clocks, short budgets).

Assertions hold under load: they compare the run with its own clock, never with fixed times.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from d2_testutils import (
    REPO,
    TINY,
    TOY_CONFIG,
    edited_checkpoint,
    finish,
    folder_hashes,
    last_line,
    logged_lrs,
    read_metrics,
    start_tool,
    wait_until,
)

from budgeted.detectron2 import BudgetConfigError, load_config
from budgeted.detectron2.cli import run
from budgeted.errors import Undecayed
from budgeted.safety.preemption import UNDECAYED_EXIT_CODE

# the full toy schedule (400 iterations) as the cap, a 6-second budget, warmup 3 iterations
TIMED = [*TINY, "SOLVER.BUDGET.FRACTION", "1.0", "SOLVER.BUDGET.CLOCK_SYNC_PERIOD", "1"]


@pytest.fixture(scope="module")
def budget_s(toy_run) -> int:
    """A time budget of about 30 toy iterations as this machine runs them now (at least 6 s):
    the tests hold however loaded the machine is (the toy run's median iteration time)."""
    times = sorted(r["time"] for r in read_metrics(toy_run) if "time" in r)
    return max(6, math.ceil(30 * times[len(times) // 2]))


def scheduler_state(path) -> dict:
    checkpoint = torch.load(path, weights_only=False)
    return checkpoint["trainer"]["hooks"]["LRScheduler"]


@pytest.mark.integration
def test_a_time_budget_decays_over_the_seconds_and_stops_with_a_checkpoint_and_evaluation(
    toy_root, tmp_path, capsys, budget_s
):
    out = tmp_path / "run"
    run(["--config-file", TOY_CONFIG, "--budget-time", f"{budget_s}s", *TIMED,
         "OUTPUT_DIR", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if f"time budget of {budget_s} s reached" in x)
    trained = int(line.split("reached after ")[1].split()[0])
    assert 3 < trained < 400
    lrs = logged_lrs(out)
    assert sorted(lrs) == list(range(trained))
    decay = [lrs[i] for i in range(3, trained)]
    assert all(b <= a for a, b in zip(decay, decay[1:])) and decay[-1] > 0.0
    state = scheduler_state(out / "model_final.pth")
    assert state["last_epoch"] == trained
    assert state["clock"]["elapsed"] >= budget_s  # it stopped at the deadline, not before
    budget = state["time_budget"]
    assert budget["seconds"] == budget_s and 0 < budget["warmup_seconds"] < budget_s
    # the last LR is the schedule's at the last iteration's start: 1 - p, p from the clock
    assert final_eval(out)  # the final evaluation ran after the deadline
    # --resume of the finished run: one line, exit status 0, not one byte written
    before = folder_hashes(out)
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, "--resume", "--budget-time", f"{budget_s}s", *TIMED,
             "OUTPUT_DIR", str(out)])  # fmt: skip
    assert err.value.code == 0
    assert last_line(capsys.readouterr().err) == (
        f"train_net: the run in {out} has finished (its time budget of {budget_s} s was spent "
        f"after {trained} iterations) and nothing is left to do: nothing was written; to train "
        "it longer, resume with a longer budget and SOLVER.BUDGET.ON_RESUME replan; to evaluate "
        "it again, use --eval-only"
    )
    assert folder_hashes(out) == before


def final_eval(out) -> bool:
    return any("bbox/AP" in row for row in read_metrics(out))


@pytest.mark.e2e
def test_an_interrupted_time_budget_resumes_the_same_clock(toy_root, tmp_path, budget_s):
    budget_s *= 2  # room for 4 iterations, a stop and a resume however busy the machine gets
    out = tmp_path / "run"
    opts = [*TIMED, "DATASETS.TEST", "()", "SOLVER.CHECKPOINT_PERIOD", "4", "OUTPUT_DIR", str(out)]
    tool = [sys.executable, str(REPO / "tools" / "train_net.py"), "--config-file", TOY_CONFIG,
            "--budget-time", f"{budget_s}s"]  # fmt: skip
    cmd = [*tool, *opts]
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
    # SIGTERM once training has begun: after the first periodic checkpoint exists
    deadline = time.monotonic() + 600
    while not (out / "model_0000003.pth").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.terminate()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 75, err[-2000:]
    stopped = scheduler_state(out / (out / "last_checkpoint").read_text().strip())
    assert 0 < stopped["clock"]["elapsed"] < budget_s
    done = subprocess.run([*tool, "--resume", *opts], cwd=REPO, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    # 4: a loaded machine ran too few (slow) iterations for the schedule to decay; the clock is
    # what this test is about, and it reached the deadline either way
    assert done.returncode in (0, UNDECAYED_EXIT_CODE), done.stderr[-2000:]
    final = scheduler_state(out / "model_final.pth")
    assert final["clock"]["elapsed"] >= budget_s  # one clock: the parts add up to the budget
    assert final["time_budget"]["warmup_seconds"] == stopped["time_budget"]["warmup_seconds"]
    lrs = logged_lrs(out)
    assert sorted(lrs) == list(range(final["last_epoch"]))  # both parts, no gap, no repeat
    # the first resumed iteration trains at the LR of the checkpoint's clock (linear, base 0.01)
    e, w = stopped["clock"]["elapsed"], stopped["time_budget"]["warmup_seconds"]
    expected = 0.01 * (1 - (e - w) / (budget_s - w))
    assert lrs[stopped["last_epoch"]] == pytest.approx(expected, rel=1e-6)
    assert f"time budget of {budget_s} s reached" in done.stderr
    # after the resume: the LR never rises, the clock goes on from the checkpoint's seconds and
    # never goes back, and the two parts together train the budget, not the budget again
    resumed = range(stopped["last_epoch"], final["last_epoch"])
    assert all(lrs[i + 1] <= lrs[i] for i in resumed[:-1])
    clock = {r["iteration"]: r["time_budget/elapsed"] for r in read_metrics(out)
             if "time_budget/elapsed" in r}  # fmt: skip
    assert clock[resumed[0]] == pytest.approx(stopped["clock"]["elapsed"], abs=1e-9)
    assert all(clock[i + 1] >= clock[i] for i in resumed[:-1])

    # the two parts' own seconds: the last iteration started before the deadline, and training
    # ended past it (with a clock that restarted at 0, the last start would be a budget late)
    def trained_at(seconds_of_part_two: float) -> float:
        return stopped["clock"]["elapsed"] + seconds_of_part_two - clock[resumed[0]]

    assert trained_at(clock[resumed[-1]]) < budget_s <= trained_at(final["clock"]["elapsed"])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--budget-time", "0s"], "time budget '0s' is invalid; allowed: a duration > 0"),
        (["--budget-time=-1h"], "time budget '-1h' is invalid"),
        (["--budget-time", "abc"], "time budget 'abc' is invalid"),
        (["--budget-time", "2h", "SOLVER.BUDGET.FRACTION", "0.1"],
         "SOLVER.BUDGET.SECONDS=7200.0 with SOLVER.BUDGET.FRACTION=0.1: a time budget and a "
         "fraction of the schedule are two budgets"),
    ],
)  # fmt: skip
def test_bad_time_budgets_are_refused_in_one_line(toy_root, tmp_path, args, expected):
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, *args, *TINY, "OUTPUT_DIR", str(tmp_path / "o")])
    message = str(err.value.code)
    assert expected in message and "\n" not in message
    assert not (tmp_path / "o").exists()


@pytest.mark.unit
def test_the_time_budget_config_key_alone_builds_the_time_scheduler():
    cfg = load_config(TOY_CONFIG, ["SOLVER.BUDGET.FRACTION", "1.0", "SOLVER.BUDGET.SECONDS", "60"])
    from budgeted.detectron2 import build_lr_scheduler
    from budgeted.pytorch import BudgetTimeLR

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    sched = build_lr_scheduler(cfg, opt)
    assert isinstance(sched, BudgetTimeLR) and sched.budget.seconds == 60.0
    cfg = load_config(TOY_CONFIG, ["SOLVER.BUDGET.FRACTION", "1.0", "SOLVER.BUDGET.SECONDS", "-5"])
    with pytest.raises(BudgetConfigError, match=r"SOLVER\.BUDGET\.SECONDS: time budget -5\.0"):
        build_lr_scheduler(cfg, opt)


@pytest.mark.e2e
def test_two_workers_share_rank_0s_clock_and_stop_together(toy_root, tmp_path, budget_s):
    """2 CPU processes (gloo): the clock is broadcast every 3 iterations and extrapolated in
    between; both workers must stop after the same iteration (else DDP would hang)."""
    out = tmp_path / "run"
    # --dist-url auto: a free port, not Detectron2's fixed per-user default (another test worker's
    # two-process run may hold it)
    cmd = [sys.executable, str(REPO / "tools" / "train_net.py"), "--config-file", TOY_CONFIG,
           "--num-gpus", "2", "--dist-url", "auto", "--budget-time", f"{budget_s}s", *TINY,
           "SOLVER.BUDGET.FRACTION", "1.0", "SOLVER.BUDGET.CLOCK_SYNC_PERIOD", "3",
           "DATASETS.TEST", "()", "OUTPUT_DIR", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    # 4: a loaded machine ran too few (slow, 2-process) iterations for the schedule to decay;
    # saved and stopped together all the same
    assert done.returncode in (0, UNDECAYED_EXIT_CODE), done.stderr[-3000:]
    assert (out / "log.txt.rank1").is_file()  # two workers really trained
    reached = f"time budget of {budget_s} s reached"
    line = next(x for x in done.stderr.splitlines() if reached in x)
    assert "clock shared" in line and "us each" in line
    state = scheduler_state(out / "model_final.pth")
    assert state["clock"]["elapsed"] >= budget_s
    lrs = logged_lrs(out)
    decay = [lrs[i] for i in range(3, state["last_epoch"])]
    assert all(b <= a for a, b in zip(decay, decay[1:]))


def to_deadline(argv: list[str]) -> None:
    """``run(argv)``, a time budget trained to its deadline. On a loaded machine its iterations
    may be few and slow enough for the schedule to end undecayed (exit status 4: saved and
    evaluated all the same), which is not what the tests that call this are about."""
    with contextlib.suppress(Undecayed):
        run(argv)


@pytest.mark.integration
def test_a_time_budget_is_replanned_on_resume_only_when_asked(toy_root, tmp_path, capsys, budget_s):
    """Holds under load (issue 40, item 27): ``budget_s`` is measured once, and a machine that
    got busier since runs fewer, slower iterations in it, which once ended the first run
    undecayed (12 iterations, 86 % of the decay: exit status 4, the test failed)."""
    out = tmp_path / "run"
    opts = [*TIMED, "DATASETS.TEST", "()", "SOLVER.CHECKPOINT_PERIOD", "4", "OUTPUT_DIR", str(out)]
    longer = 2 * budget_s
    to_deadline(["--config-file", TOY_CONFIG, "--budget-time", f"{budget_s}s", *opts])
    first = logged_lrs(out)
    stopped = scheduler_state(out / "model_final.pth")
    assert stopped["clock"]["elapsed"] >= budget_s  # it ran to the deadline
    # resumed inside the decay (after the 3-iteration warmup): 8 iterations in, or 4 where a
    # loaded machine trained no more than 8 before the deadline (its first 30 median iterations)
    at = 8 if stopped["last_epoch"] > 8 else 4
    assert stopped["last_epoch"] > at, f"only {stopped['last_epoch']} iterations in {budget_s} s"
    checkpoint = f"model_{at - 1:07d}.pth"  # a periodic checkpoint (every 4 iterations)
    (out / "metrics.json").unlink()
    (out / "last_checkpoint").write_text(checkpoint)
    mid = scheduler_state(out / checkpoint)
    edited = edited_checkpoint(out / checkpoint, tmp_path / "edited.pth", last_epoch=20)
    with pytest.raises(SystemExit) as err:  # a clock state whose steps disagree: refused
        run(["--config-file", TOY_CONFIG, "--resume-from", str(edited), "--budget-time",
             f"{budget_s}s", *opts])  # fmt: skip
    assert (
        f"edited.pth' is inconsistent: its iteration is {at - 1}, its trainer's {at - 1} and its "
        "LR " in str(err.value.code)
    )
    with pytest.raises(SystemExit) as err:  # another time budget: refused by default
        run(["--config-file", TOY_CONFIG, "--resume", "--budget-time", f"{longer}s", *opts])
    assert f"seconds={budget_s:.1f}, the config's seconds={longer:.1f}" in str(err.value.code)
    capsys.readouterr()
    to_deadline(["--config-file", TOY_CONFIG, "--resume", "--budget-time", f"{longer}s", *opts,
                 "SOLVER.BUDGET.ON_RESUME", "replan"])  # fmt: skip
    replanned = f"time budget re-planned at {mid['clock']['elapsed']:g} s: {budget_s} s -> "
    assert f"{replanned}{longer} s" in (out / "log.txt").read_text()
    lrs = logged_lrs(out)
    assert lrs[at] == pytest.approx(first[at], rel=1e-6)  # no jump: the LR it had reached
    final = scheduler_state(out / "model_final.pth")
    assert final["clock"]["elapsed"] >= longer
    assert final["time_budget"]["replan"]["at"] == mid["clock"]["elapsed"]


@pytest.mark.unit
def test_bad_save_at_is_refused_in_one_line(toy_root, tmp_path):
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, *TINY, "SOLVER.BUDGET.SAVE_AT", "(0, 4)",
             "OUTPUT_DIR", str(tmp_path / "o")])  # fmt: skip
    assert str(err.value.code).endswith(
        "SOLVER.BUDGET.SAVE_AT=(0, 4) is invalid; allowed: a list of iteration counts > 0, e.g. "
        "(3040, 6080)"
    )


# a time budget that cannot decay: saved and evaluated as usual, then one line and exit status 4
UNDECAYED = {
    "the deadline inside the warmup": (
        ["--budget-time", "2s", "SOLVER.WARMUP_ITERS", "300"],
        r"its last iteration \(\d+\) trained inside the warmup of 300 iterations, LR multiplier "
        r"[\d.e-]+; the deadline came inside the warmup: shorten SOLVER.WARMUP_ITERS \(300\) or "
        r"raise the budget",
    ),
    "the deadline in the first, long iteration": (  # 30 s at 6.5 s per iteration, in small
        ["--budget-time", "0.1s", "SOLVER.WARMUP_ITERS", "0"],
        r"its last iteration \(1\) trained at 0 % of the decay, LR multiplier 1; the deadline "
        r"came after 1 iterations of [\d.]+ s on average, too few for the schedule to decay",
    ),
    "SOLVER.MAX_ITER before the deadline": (
        [
            "--budget-time",
            "1h",
            "SOLVER.BUDGET.FULL_ITERS",
            "0",
            "SOLVER.MAX_ITER",
            "3",
            "SOLVER.WARMUP_ITERS",
            "1",
        ],
        r"its last iteration \(3\) trained at 0 % of the decay, LR multiplier [\d.]+; "
        r"SOLVER.MAX_ITER=3 ended training before the deadline \([\d.]+ of 3600 s trained\): "
        r"raise SOLVER.MAX_ITER",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(UNDECAYED))
def test_a_time_budget_that_cannot_decay_ends_with_one_line_and_exit_status_4(
    toy_root, tmp_path, capsys, case
):
    args, cause = UNDECAYED[case]
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, *args[:2], *TIMED, *args[2:], "OUTPUT_DIR", str(out)])
    assert err.value.code == UNDECAYED_EXIT_CODE
    line = last_line(capsys.readouterr().err)
    seconds = {"2s": "2", "0.1s": "0.1", "1h": "3600"}[args[1]]
    prefix = f"train_net: time budget of {seconds} s ended before the schedule decayed: "
    assert re.match(prefix + cause, line), line
    assert line.endswith("; the model was saved and evaluated as usual"), line
    assert (out / "model_final.pth").is_file() and final_eval(out)  # saved and evaluated first


@pytest.mark.e2e
def test_time_stopped_inside_an_iteration_counts_as_training_time(toy_root, tmp_path, budget_s):
    """SIGSTOP for longer than the whole budget, SIGCONT: the stop falls inside an iteration
    (the clock runs there; between iterations, where it is paused, there are only a few hooks
    of microseconds: no metric writer runs before the end), so the clock, and the stop line,
    count the stopped seconds, and training ends right after that iteration."""
    out = tmp_path / "run"
    argv = ["--config-file", TOY_CONFIG, "--budget-time", f"{budget_s}s", *TIMED,
            "SOLVER.BUDGET.WRITER_PERIOD", "100000", "DATASETS.TEST", "()",
            "OUTPUT_DIR", str(out)]  # fmt: skip
    proc = start_tool(argv)
    log = out / "log.txt"
    wait_until(lambda: log.is_file() and "Starting training from" in log.read_text(), proc)
    time.sleep(1.0)  # well inside training (the budget is about 30 iterations)
    stopped = time.monotonic()
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(budget_s + 4)
    os.kill(proc.pid, signal.SIGCONT)
    paused = time.monotonic() - stopped
    rc, _, err = finish(proc)
    assert rc in (0, UNDECAYED_EXIT_CODE), err[-3000:]  # 4: the stop spent the budget early
    line = next(x for x in err.splitlines() if f"time budget of {budget_s} s reached after" in x)
    counted = float(re.search(r"\(([\d.]+) s of training", line)[1])
    assert counted >= paused - 0.5, line  # the stopped seconds are training time
    state = scheduler_state(out / "model_final.pth")
    assert state["clock"]["elapsed"] >= paused - 0.5

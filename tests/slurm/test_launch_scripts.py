"""tools/slurm_train_net.sh and tools/slurm_train.sh as real ``sbatch`` jobs on the local Slurm
cluster (issue 32, item 5): a signal stops the training after a checkpoint, the script sees exit
status 75 and requeues its job, Slurm starts it again (``SLURM_RESTART_COUNT=1``), the script
resumes the run, and the job ends COMPLETED with every iteration trained once, each at the LR
of the uninterrupted schedule.

The toy configs on CPU with tiny budgets; every wait is on an observable event (a checkpoint
file, a line of the job's output, ``scontrol show job``) with a deadline of minutes. Timings
are printed (``pytest -s``): docs/slurm.md records them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_testutils import (
    job_env,
    job_info,
    log_says,
    sbatch,
    slurm,
    wait_for,
    wait_for_end,
    wait_in_job,
)

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PREEMPTED_EXIT_CODE = 75


@pytest.fixture
def submitted(slurm_cluster: dict[str, str]) -> Iterator[list[str]]:
    """The ids of the jobs a test submits (append them): cancelled afterwards if still there."""
    jobs: list[str] = []
    yield jobs
    if jobs:
        subprocess.run(["scancel", *jobs], env=job_env(slurm_cluster), timeout=60)


def restarted(job: str, env: dict[str, str]):
    """The event: the requeued job runs again (``Restarts=1``)."""

    def running_again() -> bool:
        info = job_info(job, env)
        return info.get("Restarts") == "1" and info.get("JobState") in ("RUNNING", "COMPLETED")

    return running_again


def check_completed_once_requeued(info: dict[str, str], log: Path) -> None:
    assert info["JobState"] == "COMPLETED", f"{info}\n{log.read_text()[-3000:]}"
    assert info["Restarts"] == "1" and info["ExitCode"] == "0:0", info


# --- Detectron2: tools/slurm_train_net.sh -----------------------------------------------------

D2_ITERS = 20
D2_OPTIONS = ["SOLVER.BUDGET.FRACTION", "0.05", "SOLVER.CHECKPOINT_PERIOD", "4",
              "DATASETS.TEST", "()"]  # fmt: skip
"""20 iterations (0.05 x 400), warmup 3, a checkpoint every 4, no evaluation."""


@pytest.fixture(scope="module")
def coco_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy COCO set of the Detectron2 tests (8 train / 4 val images at 64 px)."""
    from budgeted.toys.coco import make_toy_coco

    root = tmp_path_factory.mktemp("datasets")
    make_toy_coco(str(root), num_train=8, num_val=4, size=64, seed=0)
    return root


def test_slurm_train_net_sh_as_a_batch_job_requeues_itself_on_exit_75_and_resumes_exactly(
    slurm_cluster, submitted, coco_root, tmp_path
) -> None:
    from d2_testutils import TINY, TOY_CONFIG, logged_lrs, metrics_rows

    from budgeted.detectron2 import load_config
    from budgeted.schedules import BudgetSchedule

    out, log = tmp_path / "run", tmp_path / "job.out"
    argv = ["--config-file", TOY_CONFIG, *TINY, *D2_OPTIONS, f"OUTPUT_DIR={out}"]
    env = job_env(slurm_cluster, DETECTRON2_DATASETS=str(coco_root))
    began = time.monotonic()
    job = sbatch(["--partition=low", f"--output={log}", "--cpus-per-task=1",
                  str(REPO / "tools/slurm_train_net.sh"), *argv], env, cwd=REPO)  # fmt: skip
    submitted.append(job)
    wait_for("the job to start", lambda: job_info(job, env).get("JobState") == "RUNNING")
    started = time.monotonic()
    wait_in_job("the first checkpoint", job, env, log, (out / "last_checkpoint").is_file)
    # what Slurm sends before a time limit (--signal=USR1@120) or at a preemption, to the batch
    # script (-b): it forwards the signal to the training
    slurm(["scancel", "-b", "--signal=USR1", job], env)
    signalled = time.monotonic()
    said = f"slurm_train_net: preempted (exit status 75): requeueing job {job}"
    wait_in_job("the requeue", job, env, log, log_says(log, said))
    requeued = time.monotonic()
    wait_for("the requeued job to run", restarted(job, env))
    restart = time.monotonic()
    info = wait_for_end(job, env, log)
    ended = time.monotonic()

    check_completed_once_requeued(info, log)
    text = log.read_text()
    stops = re.findall(r"train_net: preempted by SIGUSR1 at iteration (\d+)/(\d+): checkpoint "
                       r"(\S+); resume with --resume", text)  # fmt: skip
    assert len(stops) == 1, text[-3000:]
    at, total, checkpoint = int(stops[0][0]), int(stops[0][1]), Path(stops[0][2])
    assert total == D2_ITERS and 1 <= at < D2_ITERS and checkpoint.parent == out
    assert text.count("holds a run: resuming it (--resume)") == 1  # the requeued start only
    assert f"Starting training from iteration {at}" in (out / "log.txt").read_text()
    # every iteration once, each at the uninterrupted schedule's LR
    cfg = load_config(TOY_CONFIG, [*TINY, *D2_OPTIONS])
    core = BudgetSchedule("linear", D2_ITERS, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR)
    lrs = logged_lrs(out)
    assert [r["iteration"] for r in metrics_rows(out)] == list(range(D2_ITERS))
    assert [lrs[t] for t in range(D2_ITERS)] == pytest.approx(
        [cfg.SOLVER.BASE_LR * core(t) for t in range(D2_ITERS)], rel=1e-12
    )
    assert (out / "model_final.pth").is_file()
    print(f"\nslurm_train_net.sh timings: submit to RUNNING {started - began:.1f} s, USR1 to "
          f"requeue {requeued - signalled:.1f} s, requeue to RUNNING again {restart - requeued:.1f}"
          f" s, whole job {ended - began:.1f} s")  # fmt: skip


# --- MMSegmentation: tools/slurm_train.sh -----------------------------------------------------

SEG_ITERS, SEG_WARMUP, SEG_BASE_LR, PAUSE = 12, 4, 0.01, 3
"""12 toy iterations (warmup 4, checkpoints at 6 and 12); the first run pauses before the
0-based iteration PAUSE until its preemption flag is set (tests/mmengine/preemption_helpers)."""


@pytest.fixture(scope="module")
def cityscapes_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy Cityscapes set of the MMEngine tests (4 train images per city, 3 val)."""
    from budgeted.toys.cityscapes import make_toy_cityscapes

    folder = tmp_path_factory.mktemp("toy") / "toy_cityscapes"
    return make_toy_cityscapes(folder, train_per_city=4, val_per_city=3)


def test_slurm_train_sh_as_a_batch_job_requeues_itself_on_exit_75_and_resumes_exactly(
    slurm_cluster, submitted, cityscapes_root, tmp_path
) -> None:
    from mmseg_testutils import HERE, free_port, recorded_lrs, toy_args, toy_config

    from budgeted.schedules import BudgetSchedule

    hooks, work, log = tmp_path / "hooks", tmp_path / "work", tmp_path / "job.out"
    hooks.mkdir()
    extra = (f'custom_hooks = [dict(type="RecordLRHook", out_dir="{hooks}"), '
             f'dict(type="PauseForSignalHook", out_dir="{hooks}", at={PAUSE})]\n')  # fmt: skip
    config = toy_config(tmp_path, hooks_dir=hooks, extra=extra,
                        imports=("budgeted.mmengine", "preemption_helpers"))  # fmt: skip
    args = toy_args(config, work, cityscapes_root, iters=SEG_ITERS, warmup=SEG_WARMUP)
    env = job_env(slurm_cluster, GPUS="1", GPUS_PER_NODE="1", CPUS_PER_TASK="1",
                  MASTER_PORT=str(free_port()), PYTHONPATH=str(HERE))  # fmt: skip
    # as MMSegmentation's users submit it: one task with one GPU (stand-in GPUs here)
    began = time.monotonic()
    job = sbatch(["--partition=low", "--requeue", f"--output={log}", "--open-mode=append",
                  "--gres=gpu:1", "--ntasks=1", "--cpus-per-task=1",
                  str(REPO / "tools/slurm_train.sh"), "low", "budgeted-toy", *args],
                 env, cwd=REPO)  # fmt: skip
    submitted.append(job)
    wait_for("the job to start", lambda: job_info(job, env).get("JobState") == "RUNNING")
    started = time.monotonic()
    wait_in_job("the run to pause", job, env, log, (hooks / "paused_rank0").exists)
    # no -b: the job's steps get it (the training under srun), as --signal=USR1@120 sends it
    slurm(["scancel", "--signal=USR1", job], env)
    signalled = time.monotonic()
    said = f"slurm_train.sh: preempted: requeueing job {job}"
    wait_in_job("the requeue", job, env, log, log_says(log, said))
    requeued = time.monotonic()
    first = dict(recorded_lrs(hooks))  # the first run's iterations (the second run rewrites it)
    wait_for("the requeued job to run", restarted(job, env))
    restart = time.monotonic()
    info = wait_for_end(job, env, log)
    ended = time.monotonic()

    check_completed_once_requeued(info, log)
    text = log.read_text()
    said = [line for line in text.splitlines() if line.startswith("train_seg: preempted")]
    assert said == [
        f"train_seg: preempted by SIGUSR1 at iteration {PAUSE + 1} of {SEG_ITERS}: saved "
        f"{work}/iter_{PAUSE + 1}.pth; exit status 75, continue with --resume"
    ], text[-3000:]
    # the script's trace (set -x): the requeued job resumed by itself
    starts = [line for line in text.splitlines() if line.startswith("+ srun ")]
    assert len(starts) == 2 and not starts[0].endswith(" --resume"), starts
    assert starts[1].endswith(" --resume"), starts

    def core_lr(it: int) -> float:
        return SEG_BASE_LR * BudgetSchedule("linear", SEG_ITERS, SEG_WARMUP)(it)

    assert first == pytest.approx({it: core_lr(it) for it in range(PAUSE + 1)}, rel=1e-12)
    rest = {it: core_lr(it) for it in range(PAUSE + 1, SEG_ITERS)}
    assert recorded_lrs(hooks) == pytest.approx(rest, rel=1e-12)
    assert (work / f"iter_{SEG_ITERS}.pth").is_file()
    print(f"\nslurm_train.sh timings: submit to RUNNING {started - began:.1f} s, USR1 to "
          f"requeue {requeued - signalled:.1f} s, requeue to RUNNING again {restart - requeued:.1f}"
          f" s, whole job {ended - began:.1f} s")  # fmt: skip


def test_the_cluster_script_passes_shellcheck() -> None:
    import sys

    script = REPO / "tools/slurm/local_cluster.sh"
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    command = [shellcheck, str(script)] if shellcheck else ["bash", "-n", str(script)]
    checked = subprocess.run(command, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr

"""Nothing lost, nothing executed (issue 8, MMEngine / MMSegmentation): untrusted and damaged
checkpoints, refusals that write nothing, atomic checkpoints, preempted runs.

Real parts only: ``tools/train_seg.py`` (in subprocesses, or its ``main`` in this process), the real
runner on the toy set, pickled payloads that would create a folder if unpickled, truncated
checkpoints, real signals (``os.kill``) to real processes, torchrun with 2 gloo processes, and
``tools/slurm_train.sh`` with stand-in ``srun`` / ``scontrol`` commands on ``PATH``. Subprocesses
get default signal dispositions (:func:`budgeted.safety.preemption.restore_default_signals`),
whatever the test process inherited, except where a test ignores some on purpose. Every wait is for
an observable event (a file, the process's end) with a deadline of minutes.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.runner import Runner
from mmseg_testutils import (
    DEADLINE_S,
    FULL_TOY_CONFIG,
    REPO,
    TOY_CONFIG,
    child_env,
    free_port,
    logged,
    recorded_lrs,
    snapshot,
    stock_config,
    toy_args,
    toy_config,
    toy_options,
    wait_until,
)

from budgeted.mmengine.checkpoint import load_mmengine_checkpoint
from budgeted.mmengine.hooks import Diverged
from budgeted.mmengine.resume import newest_resumable_checkpoint
from budgeted.runs.mmengine import LOCK_NAME, WorkDirLock
from budgeted.safety.preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    Preempted,
    restore_default_signals,
)
from budgeted.schedules import BudgetSchedule

ITERS, WARMUP, BASE_LR = 12, 4, 0.01
TRAIN_SEG = REPO / "tools/train_seg.py"
HOOK_IMPORTS = ("budgeted.mmengine", "preemption_helpers")


def core_lr(it: int, total: int = ITERS, warmup: int = WARMUP) -> float:
    return BASE_LR * BudgetSchedule("linear", total, warmup)(it)


def hooks_config(tmp: Path, hooks_dir: Path, *hooks: str) -> Path:
    """The toy config recording LRs into ``hooks_dir``, plus the test hooks ``hooks``."""
    entries = [f'dict(type="RecordLRHook", out_dir="{hooks_dir}")', *hooks]
    extra = f"custom_hooks = [{', '.join(entries)}]\n"
    return toy_config(tmp, hooks_dir=hooks_dir, extra=extra, imports=HOOK_IMPORTS)


def start(args: list[str], logs: Path, preexec=restore_default_signals, **env: str):
    """``tools/train_seg.py args`` in a subprocess; stdout/stderr to ``logs``.{out,err}."""
    return popen([sys.executable, str(TRAIN_SEG), *args], logs, preexec, **env)


def popen(command: list[str], logs: Path, preexec=restore_default_signals, **env: str):
    with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
        return subprocess.Popen(
            command, stdout=out, stderr=err, env=child_env(**env), preexec_fn=preexec, cwd=REPO
        )


def finish(proc: subprocess.Popen, logs: Path) -> tuple[int, str]:
    """Wait for the process (with the deadline); its status and stderr."""
    try:
        proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{logs} did not end within {DEADLINE_S} s") from None
    return proc.returncode, Path(f"{logs}.err").read_text()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# --- untrusted files -----------------------------------------------------------------------------


class Payload:
    """Unpickled, this creates the folder ``marker``: code run from a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def plant_payloads(folder: Path, marker: Path) -> tuple[Path, Path]:
    """A checkpoint-shaped payload as a plain pickle (``.pkl``) and as ``torch.save`` (``.pth``)."""
    folder.mkdir(parents=True, exist_ok=True)
    content = {"meta": {"iter": 6, "epoch": 0}, "state_dict": {}, "message_hub": Payload(marker)}
    pkl, pth = folder / "evil.pkl", folder / "evil.pth"
    with open(pkl, "wb") as f:
        pickle.dump(content, f)
    torch.save(content, pth)
    return pkl, pth


@pytest.mark.e2e
def test_a_payload_in_any_file_we_load_is_refused_in_one_line_and_never_runs(tmp_path, toy_root):
    live = tmp_path / "live_marker"
    pickle.loads(pickle.dumps(Payload(live)))  # the payload is real: unpickling runs it
    assert live.is_dir()
    marker = tmp_path / "PAYLOAD_RAN"
    pkl, pth = plant_payloads(tmp_path / "files", marker)
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(pth)) == ["posix.mkdir"]
    config = toy_config(tmp_path)

    def resume_dir(name: str, payload: Path) -> Path:  # a run whose last checkpoint is a payload
        folder = tmp_path / name
        folder.mkdir()
        planted = shutil.copy(payload, folder / f"iter_6{payload.suffix}")
        (folder / "last_checkpoint").write_text(str(planted))
        return folder

    cases = {  # name: (work dir, file named in the refusal, extra arguments)
        "load_from_pkl": (tmp_path / "w1", pkl, [f"load_from={pkl}"]),
        "load_from_pth": (tmp_path / "w2", pth, [f"load_from={pth}"]),
        "resume_pth": (resume_dir("w3", pth), tmp_path / "w3/iter_6.pth", ["--resume"]),
        "resume_pkl": (resume_dir("w4", pkl), tmp_path / "w4/iter_6.pkl", ["--resume"]),
        "resume_from_pth": (tmp_path / "w5", pth, ["--resume-from", str(pth)]),
        "resume_from_pkl": (tmp_path / "w6", pkl, ["--resume-from", str(pkl)]),
    }
    before = {name: snapshot(work) for name, (work, _, _) in cases.items()}
    procs = {  # all at once: they only load the config and the file
        name: start(toy_args(config, work, toy_root, *extra), tmp_path / name)
        for name, (work, _, extra) in cases.items()
    }
    for name, proc in procs.items():
        code, err = finish(proc, tmp_path / name)
        named = cases[name][1]
        assert code == 2, (name, err[-3000:])
        assert lines(err) == [lines(err)[0]], (name, err[-3000:])  # exactly one line
        assert lines(err)[0].startswith(
            f"train_seg: error: refusing to load '{named}': it names the global posix.mkdir, "
            "outside the allow-list"
        ), (name, err)
        assert snapshot(cases[name][0]) == before[name], name  # nothing written
    assert not marker.exists()  # nothing ran


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            ["{garbled}"],
            "train_seg: error: config {garbled} cannot be loaded: SyntaxError: '(' was never "
            "closed",
        ),
        (
            ["{config}", "--cfg-options", "train_cfg.max_iters"],
            "train_seg: error: --cfg-options item 'train_cfg.max_iters' is not KEY=VALUE",
        ),
        (
            ["{config}", "--budget", "1.5"],
            "train_seg: error: argument --budget: 1.5 is invalid; allowed: a fraction in (0, 1]",
        ),
    ],
    ids=["garbled-config", "cfg-options-without-=", "budget-1.5"],
)
def test_bad_input_is_one_line_through_tools_train_seg(arguments, expected, tmp_path):
    garbled = tmp_path / "garbled.py"
    garbled.write_text("model = dict(\n    type='EncoderDecoder',\n")
    fill = dict(garbled=garbled, config=toy_config(tmp_path))
    work = tmp_path / "work"
    args = [a.format(**fill) for a in arguments] + ["--work-dir", str(work)]
    code, err = finish(start(args, tmp_path / "bad"), tmp_path / "bad")
    assert code == 2 and len(lines(err)) == 1, err[-3000:]
    assert lines(err)[0].startswith(expected.format(**fill)), err
    assert not work.exists()


# --- refusals write nothing -------------------------------------------------------------------


def stopped_at_6(source: Path, folder: Path, edit=None) -> Path:
    """A copy of run ``source`` as if stopped after iteration 6: ``iter_6.pth`` (changed by
    ``edit(checkpoint)``, as a hand would) named by ``last_checkpoint``, nothing later."""
    folder.mkdir()
    checkpoint = load_mmengine_checkpoint(source / "iter_6.pth")
    if edit is not None:
        edit(checkpoint)
    torch.save(checkpoint, folder / "iter_6.pth")
    (folder / "last_checkpoint").write_text(str(folder / "iter_6.pth"))
    return folder


SPENT = "0.5s"
"""The time budget of the ``timed_done`` run: spent within its first iterations, however fast."""
CAPPED = ["full_schedule_iters=12"]
"""The ``timed`` run's cap (``--budget-time 1h``): 12 iterations, whatever the machine's load."""


def timed_runs(root: Path, toy_root: Path, cli) -> tuple[Path, Path, str]:
    """Two runs of the toy under a time budget, neither depending on how fast the machine is:
    one that spent its budget (``--budget-time 0.5s``) and a copy, as if preempted after
    iteration 6, of one of 1 h capped at 12 iterations; ``(spent, stopped, half the seconds at
    iteration 6)``."""
    config = toy_config(root, base=FULL_TOY_CONFIG)
    done, capped = root / "timed_done", root / "timed_capped"
    assert cli.main([*toy_args(config, done, toy_root), "--budget-time", SPENT]) in (0, 4)
    capped_args = [*toy_args(config, capped, toy_root, *CAPPED), "--budget-time", "1h"]
    assert cli.main(capped_args) == 4  # the cap came first: the exit status says so
    stopped = stopped_at_6(capped, root / "timed")
    elapsed = load_mmengine_checkpoint(stopped / "iter_6.pth")["param_schedulers"][0]["clock"]
    return done, stopped, f"{elapsed['elapsed'] / 2:.3f}"


def add_20_to_last_step(checkpoint: dict) -> None:
    checkpoint["param_schedulers"][0]["last_step"] += 20


def set_iteration_4(checkpoint: dict) -> None:
    checkpoint["meta"]["iter"] = 4


@pytest.fixture(scope="module")
def finished_runs(first_run, tmp_path_factory, toy_root, cli):
    """Copies of the finished 12-iteration run: as it is, with its last checkpoint cut short,
    without ``last_checkpoint``, stopped at 6 with an edited scheduler or iteration; a finished
    and a stopped time-budget run; a folder not there yet; files to refuse (a payload, a
    Detectron2 checkpoint, a symbolic link loop, a ``_base_`` cycle, a toy set without training
    images)."""
    _, source = first_run
    root = tmp_path_factory.mktemp("finished")
    finished = Path(shutil.copytree(source, root / "finished"))
    damaged = Path(shutil.copytree(source, root / "damaged"))
    last = damaged / f"iter_{ITERS}.pth"
    os.truncate(last, last.stat().st_size // 2)
    unnamed = Path(shutil.copytree(source, root / "unnamed"))
    (unnamed / "last_checkpoint").unlink()
    marker = root / "PAYLOAD_RAN"
    _, evil = plant_payloads(root / "files", marker)
    timed_done, timed, passed = timed_runs(root, toy_root, cli)
    d2 = root / "files/model_0000007.pth"  # what Detectron2's Checkpointer.save writes
    torch.save(
        {"model": {"backbone.bottom_up.stem.conv1.weight": torch.zeros(2, 3, 3, 3)},
         "optimizer": {}, "scheduler": {}, "iteration": 7},
        d2,
    )  # fmt: skip
    (root / "files/loop.pth").symlink_to("loop.pth")
    (root / "files/a.py").write_text('_base_ = "./b.py"\n')
    (root / "files/b.py").write_text(f'_base_ = ["{TOY_CONFIG}", "./a.py"]\n')
    empty = Path(shutil.copytree(toy_root, root / "empty_toy"))
    shutil.rmtree(empty / "leftImg8bit/train")
    (empty / "leftImg8bit/train").mkdir()
    return {
        "finished": finished,
        "damaged": damaged,
        "unnamed": unnamed,
        "edited_step": stopped_at_6(source, root / "edited_step", add_20_to_last_step),
        "edited_iter": stopped_at_6(source, root / "edited_iter", set_iteration_4),
        "timed": timed,
        "timed_done": timed_done,
        "new": root / "new",
        "evil": evil,
        "d2": d2,
        "loop": root / "files/loop.pth",
        "cycle": root / "files/a.py",
        "empty": empty,
        "full_config": toy_config(root, base=FULL_TOY_CONFIG),
        "passed": passed,
    }


REFUSALS = {  # name: (folder, --cfg-options items, other arguments, status, the line's start,
    # ... and what else it says)
    "another budget (--budget)": (
        "finished",
        [],
        ["--resume", "--budget", "0.05"],
        2,
        "train_seg: error: cannot resume: the checkpoint's budget has train_cfg.max_iters "
        "(end - begin)=12, the config's train_cfg.max_iters (end - begin)=160",
        "to resume, keep the checkpoint's budget (train_cfg.max_iters=12)",
    ),
    "another budget (max_iters)": (
        "finished",
        ["train_cfg.max_iters=20"],
        ["--resume"],
        2,
        "train_seg: error: cannot resume: the checkpoint's budget has train_cfg.max_iters "
        "(end - begin)=12, the config's train_cfg.max_iters (end - begin)=20",
        "load_from=<checkpoint> and resume=False",
    ),
    "another budget (--resume-from)": (
        "damaged",
        ["param_scheduler.0.warmup_iters=2"],
        ["--resume-from", "{folder}/iter_6.pth"],
        2,
        "train_seg: error: cannot resume: the checkpoint's budget has warmup_iters=4, the "
        "config's warmup_iters=2",
        "",
    ),
    "damaged last checkpoint": (
        "damaged",
        [],
        ["--resume"],
        2,
        "train_seg: error: checkpoint '{folder}/iter_12.pth' cannot be read (truncated or "
        "damaged: PytorchStreamReader failed reading zip archive",
        "the newest intact checkpoint in {folder} is iter_6.pth: resume from it with "
        "--resume-from {folder}/iter_6.pth",
    ),
    "no last_checkpoint": (
        "unnamed",
        [],
        ["--resume"],
        2,
        "train_seg: error: cannot resume: {folder} holds checkpoints (iter_12.pth, iter_6.pth) "
        "but no last_checkpoint naming the latest",
        "the newest intact checkpoint in {folder} is iter_12.pth",
    ),
    "payload to resume from": (
        "finished",
        [],
        ["--resume-from", "{evil}"],
        2,
        "train_seg: error: refusing to load '{evil}': it names the global posix.mkdir",
        "",
    ),
    "missing file to resume from": (
        "finished",
        [],
        ["--resume-from", "{folder}/iter_7.pth"],
        2,
        "train_seg: error: checkpoint '{folder}/iter_7.pth' does not exist",
        "the newest intact checkpoint in {folder} is iter_12.pth",
    ),
    "a new run in a folder holding one": (
        "finished",
        [],
        [],
        2,
        "train_seg: error: work dir {folder} already holds a run",
        "pass --resume to continue it",
    ),
    "busy folder": (
        "finished",
        [],
        ["--resume"],
        2,
        "train_seg: error: work dir {folder} is in use: pid {pid} is training there",
        "choose another --work-dir",
    ),
    "garbled config": (
        "finished",
        [],
        ["--resume", "--config", "{garbled}"],
        2,
        "train_seg: error: config {garbled} cannot be loaded: SyntaxError: ",
        "",
    ),
    "--cfg-options item without =": (
        "finished",
        ["train_cfg.max_iters"],
        ["--resume"],
        2,
        "train_seg: error: --cfg-options item 'train_cfg.max_iters' is not KEY=VALUE",
        "",
    ),
    "--budget 1.5": (
        "finished",
        [],
        ["--resume", "--budget", "1.5"],
        2,
        "train_seg: error: argument --budget: 1.5 is invalid; allowed: a fraction in (0, 1]",
        "",
    ),
    "a finished run: nothing to resume": (
        "finished",
        [],
        ["--resume"],
        0,
        "train_seg: nothing to resume: {folder}/iter_12.pth is at iter 12 of "
        "train_cfg.max_iters=12",
        "(nothing was written)",
    ),
    "a scheduler's last_step moved by 20": (
        "edited_step",
        [],
        ["--resume"],
        2,
        "train_seg: error: cannot resume from {folder}/iter_6.pth: its budget scheduler "
        "param_scheduler[0] has _global_step=6, last_step=26, but the checkpoint is at "
        "iteration 6 (meta.iter), where they are 6, 6",
        "resume from a checkpoint the runner wrote",
    ),
    "a checkpoint's iteration edited": (
        "edited_iter",
        [],
        ["--resume"],
        2,
        "train_seg: error: cannot resume from {folder}/iter_6.pth: its budget scheduler "
        "param_scheduler[0] has _global_step=6, last_step=6, but the checkpoint is at "
        "iteration 4 (meta.iter), where they are 4, 4",
        "",
    ),
    "another time budget": (
        "timed",
        CAPPED,
        ["--resume", "--budget-time", "10m", "--config", "{full_config}"],
        2,
        "train_seg: error: cannot resume: the checkpoint's budget has seconds=3600.0, the "
        "config's seconds=600.0",
        "(or re-plan it)",
    ),
    "a time budget re-planned to a deadline already passed": (
        "timed",
        [*CAPPED, "budget_on_resume=replan"],
        ["--resume", "--budget-time", "{passed}", "--config", "{full_config}"],
        2,
        "train_seg: error: BudgetLinearLR: time budget: cannot change the budget to ",
        "of it has already elapsed",
    ),
    "a finished time budget: nothing to resume": (
        "timed_done",
        [],
        ["--resume", "--budget-time", SPENT, "--config", "{full_config}"],
        0,
        "train_seg: nothing to resume: {folder}/iter_",
        f"its whole time budget of {SPENT[:-1]} s (nothing was written)",
    ),
    "a fraction config with --budget-time": (
        "new",
        [],
        ["--budget-time", "1h"],
        2,
        "train_seg: error: --budget-time 1h with a fraction config (budget_fraction=0.01 of "
        "full_schedule_iters=3200): a time budget and a fraction of the schedule are two budgets",
        "allowed: one of them",
    ),
    "an empty training split": (
        "new",
        ["train_dataloader.dataset.data_root={empty}"],
        [],
        2,
        "train_seg: error: train_dataloader: {empty}/leftImg8bit/train holds no files: the "
        "training split is empty",
        "",
    ),
    "--resume-from a symbolic link loop": (
        "finished",
        [],
        ["--resume-from", "{loop}"],
        2,
        "train_seg: error: checkpoint '{loop}' is a symbolic link loop",
        "",
    ),
    "a _base_ cycle": (
        "new",
        [],
        ["--config", "{cycle}"],
        2,
        "train_seg: error: config {cycle} inherits from itself through _base_: a.py -> b.py -> "
        "a.py",
        "",
    ),
    "a payload as init_cfg's Pretrained checkpoint": (
        "new",
        ["model.backbone.init_cfg.type=Pretrained", "model.backbone.init_cfg.checkpoint={evil}"],
        [],
        2,
        "train_seg: error: model.backbone.init_cfg.checkpoint: refusing to load '{evil}': it "
        "names the global posix.mkdir",
        "",
    ),
    "load_from a Detectron2 checkpoint": (
        "new",
        ["load_from={d2}"],
        [],
        2,
        "train_seg: error: load_from={d2}: none of its 4 keys (iteration, model, optimizer) is "
        "a key of the model",
        "a Detectron2 checkpoint keeps its weights under 'model'",
    ),
    "a dict(...) value in --cfg-options": (
        "new",
        ["model.backbone.init_cfg=dict(type='Pretrained',checkpoint='{evil}')"],
        [],
        2,
        "train_seg: error: --cfg-options item \"model.backbone.init_cfg=dict(type='Pretrained',"
        "checkpoint='{evil}')\" cannot be parsed",
        "a dict as one item per key",
    ),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refusal_writes_nothing(case, finished_runs, tmp_path, toy_root, cli, capsys):
    folder_name, options, flags, status, start_text, contains = REFUSALS[case]
    folder = finished_runs[folder_name]
    config = toy_config(tmp_path)
    garbled = tmp_path / "garbled.py"
    garbled.write_text("model = dict(\n    type='EncoderDecoder',\n")
    fill = dict(finished_runs, folder=folder, garbled=garbled, pid=os.getpid())
    flags = [item.format(**fill) for item in flags]
    options = [item.format(**fill) for item in options]
    if "--config" in flags:  # another config file, with the same arguments
        config = Path(flags.pop(flags.index("--config") + 1))
        flags.remove("--config")
    args = toy_args(config, folder, toy_root, *options, *flags)
    existed = folder.exists()
    holder = WorkDirLock(folder) if case == "busy folder" else None
    if holder is not None:  # the lock a training process holds on its work dir
        holder.acquire()
    before = snapshot(folder)
    try:
        assert cli.main(args) == status
    finally:
        if holder is not None:
            holder.release()
    err = capsys.readouterr().err
    assert len(lines(err)) == 1, err
    assert lines(err)[0].startswith(start_text.format(**fill)), err
    assert contains.format(**fill) in err
    assert snapshot(folder) == before  # not a byte, not a folder: no new timestamp, no dump
    assert folder.exists() == existed
    assert not (finished_runs["evil"].parent.parent / "PAYLOAD_RAN").exists()


def work_dir_with(source: Path, tmp_path: Path, *names: str) -> Path:
    """``tmp_path/work`` holding copies of ``source``'s checkpoints ``names``, the last of them
    named by ``last_checkpoint``."""
    work = tmp_path / "work"
    work.mkdir()
    for name in names:
        shutil.copy(source / name, work / name)
    (work / "last_checkpoint").write_text(str(work / names[-1]))
    return work


@pytest.mark.e2e
def test_a_damaged_checkpoint_names_the_intact_one_and_resume_from_continues_exactly(
    first_run, tmp_path, toy_root, cli, capsys
):
    _, source = first_run
    work = work_dir_with(source, tmp_path, "iter_6.pth", f"iter_{ITERS}.pth")
    os.truncate(work / f"iter_{ITERS}.pth", 1000)  # cut short by a crash, say
    config = toy_config(tmp_path)
    assert cli.main(toy_args(config, work, toy_root, "--resume")) == 2
    err = capsys.readouterr().err
    offered = re.search(r"resume from it with --resume-from (\S+)$", err.strip())
    assert offered and offered.group(1) == str(work / "iter_6.pth"), err
    # ... and taking the offer continues from exactly that file, at exactly the same LR
    assert cli.main(toy_args(config, work, toy_root, "--resume-from", offered.group(1))) == 0
    first = logged(source, "lr")
    assert logged(work, "lr") == {it: first[it] for it in range(7, ITERS + 1)}
    assert load_mmengine_checkpoint(work / f"iter_{ITERS}.pth")["meta"]["iter"] == ITERS


@pytest.mark.integration
def test_resume_goes_on_from_the_work_dirs_checkpoint_not_the_load_from_it_started_from(
    first_run, tmp_path, toy_root, cli, capsys
):
    """A fine-tuning run (``load_from`` another run's checkpoint) preempted at iteration 6:
    ``--resume``, as a requeued job runs it, takes its own iter_6.pth (and says so)."""
    _, source = first_run
    work = work_dir_with(source, tmp_path, "iter_6.pth")
    started_from = tmp_path / "started_from.pth"
    shutil.copy(source / f"iter_{ITERS}.pth", started_from)
    args = toy_args(toy_config(tmp_path), work, toy_root, f"load_from={started_from}", "--resume")
    cfg = cli.preflight(cli.parse_args(args))
    assert cfg.resume and cfg.load_from == str(work / "iter_6.pth")
    assert f"not from load_from={started_from}" in capsys.readouterr().err


@pytest.mark.integration
def test_resume_from_an_earlier_checkpoint_would_not_overwrite_the_later_ones(
    first_run, tmp_path, toy_root, cli, capsys
):
    _, source = first_run
    work = work_dir_with(source, tmp_path, "iter_6.pth", f"iter_{ITERS}.pth")
    before = snapshot(work)
    args = toy_args(toy_config(tmp_path), work, toy_root, "--resume-from", str(work / "iter_6.pth"))
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"train_seg: error: --resume-from iter_6.pth would overwrite later checkpoints in {work} "
        f"(iter_{ITERS}.pth) as training goes on; allowed: resume into another --work-dir (with "
        f"--resume-from {work / 'iter_6.pth'}), or move those checkpoints away first"
    )
    assert snapshot(work) == before  # nothing written, nothing lost


@pytest.mark.integration
def test_resume_before_the_first_checkpoint_starts_from_the_load_from_weights(
    first_run, tmp_path, toy_root, cli
):
    """Requeued before it wrote a checkpoint: ``--resume`` with plain weights as ``load_from``
    starts the run from them (as Detectron2's ``--resume`` loads MODEL.WEIGHTS then)."""
    _, source = first_run
    weights = tmp_path / "weights.pth"
    torch.save(
        {"state_dict": load_mmengine_checkpoint(source / "iter_6.pth")["state_dict"]}, weights
    )
    args = toy_args(toy_config(tmp_path), tmp_path / "work", toy_root, f"load_from={weights}")
    cfg = cli.preflight(cli.parse_args([*args, "--resume"]))
    assert not cfg.resume and cfg.load_from == str(weights)
    with pytest.raises(ValueError, match="not a checkpoint of MMEngine's runner"):
        cli.preflight(cli.parse_args([*args, "--resume-from", str(weights)]))  # explicit: refused


# --- atomic checkpoints ---------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_kill_during_a_checkpoint_write_leaves_an_intact_checkpoint_behind(
    tmp_path, toy_root, cli
):
    """SIGKILL while ``iter_8.pth`` (padded to 64 MB) is being written: ``last_checkpoint``
    names a checkpoint that loads, every checkpoint there loads, and ``--resume`` takes it."""
    work = tmp_path / "work"
    config = hooks_config(tmp_path, tmp_path, 'dict(type="KillDuringWriteHook", at=8)')
    args = toy_args(config, work, toy_root, "default_hooks.checkpoint.interval=4")
    proc = start(args, tmp_path / "killed")
    code, err = finish(proc, tmp_path / "killed")
    assert code == -signal.SIGKILL, err[-3000:]
    named = Path((work / "last_checkpoint").read_text())
    assert named.parent == work and named.name in ("iter_4.pth", "iter_8.pth")
    assert load_mmengine_checkpoint(named)["meta"]["iter"] == int(named.stem.split("_")[1])
    for path in work.glob("iter_*.pth"):  # no torn file under a checkpoint's name
        load_mmengine_checkpoint(path)
    cfg = cli.preflight(cli.parse_args([*args, "--resume"]))
    assert cfg.load_from == str(named)
    assert newest_resumable_checkpoint(work, cfg) == named
    # the torn temporary file (64 MB and more) is removed when the next run starts
    stale = sorted(p.name for p in work.glob(".iter_*.pth.tmp-*"))
    if not stale:  # the kill came just after the rename: plant what one a moment earlier leaves
        stale = [".iter_8.pth.tmp-0123abcd"]
        (work / stale[0]).write_bytes(b"torn")
    again = toy_args(hooks_config(tmp_path, tmp_path), work, toy_root, "--resume")
    assert cli.main(again) == 0
    assert not list(work.glob(".*.tmp-*"))
    logs = "".join(log.read_text() for log in work.glob("*/*.log"))
    assert (
        f"removed {len(stale)} temporary file(s) that a killed checkpoint write left in {work}: "
        f"{', '.join(stale)}"
    ) in logs


@pytest.mark.e2e
def test_atomic_checkpoints_keep_mmengine_names_and_max_keep_ckpts(tmp_path, toy_root, cli):
    work = tmp_path / "work"
    options = ["default_hooks.checkpoint.interval=2", "default_hooks.checkpoint.max_keep_ckpts=2"]
    assert cli.main(toy_args(toy_config(tmp_path), work, toy_root, *options, iters=8)) == 0
    assert sorted(p.name for p in work.iterdir() if p.suffix == ".pth") == [
        "iter_6.pth",
        "iter_8.pth",
    ]
    assert (work / "last_checkpoint").read_text() == str(work / "iter_8.pth")
    assert not list(work.glob(".*.tmp-*"))
    saved = load_mmengine_checkpoint(work / "iter_8.pth")
    assert saved["message_hub"]["runtime_info"]["keep_ckpt_ids"] == [6, 8]
    assert "AtomicCheckpointHook" in next(work.glob("toy_*.py")).read_text()  # the dumped config


# --- preemption -------------------------------------------------------------------------------

PAUSE = 3
"""The 0-based iteration the preempted runs pause before, until the signal has arrived."""


def ignore_int_and_term() -> None:
    """A background job of a non-interactive shell ignores SIGINT; SIGTERM ignored too."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("signum", "preexec", "second"),
    [
        (signal.SIGTERM, restore_default_signals, False),
        (signal.SIGUSR1, ignore_int_and_term, True),
    ],
    ids=["SIGTERM", "SIGUSR1-inherited-ignores-second-signal-during-write"],
)
def test_a_preempted_run_saves_exits_75_and_resumes_at_the_same_lr(
    signum, preexec, second, first_run, tmp_path, toy_root, cli, capsys
):
    work = tmp_path / "work"
    hooks = [f'dict(type="PauseForSignalHook", out_dir="{tmp_path}", at={PAUSE})']
    if second:  # the same signal again, while the checkpoint is being written
        hooks.append(f'dict(type="SignalDuringSaveHook", out_dir="{tmp_path}", signum={signum})')
    config = hooks_config(tmp_path, tmp_path, *hooks)
    proc = start(toy_args(config, work, toy_root), tmp_path / "run", preexec=preexec)
    wait_until("the run paused", (tmp_path / "paused_rank0").exists, proc)
    if signum == signal.SIGTERM:  # meanwhile the folder is busy: refused, and nothing written
        before = snapshot(work)
        assert cli.main(toy_args(config, work, toy_root, "--resume")) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"train_seg: error: work dir {work} is in use: pid {proc.pid} ")
        assert snapshot(work) == before and (work / LOCK_NAME).is_file()
    os.kill(proc.pid, signum)
    code, err = finish(proc, tmp_path / "run")
    assert code == PREEMPTED_EXIT_CODE, err[-3000:]
    said = [line for line in lines(err) if "preempted" in line]
    name = signal.Signals(signum).name
    assert said == [
        f"train_seg: preempted by {name} at iteration {PAUSE + 1} of {ITERS}: saved "
        f"{work}/iter_{PAUSE + 1}.pth; exit status 75, continue with --resume"
    ], err[-3000:]
    assert lines(err)[-1] == said[0] and "Traceback" not in err
    if second:
        assert (tmp_path / "second_signal").read_text() == str(int(signum))
    saved = load_mmengine_checkpoint(work / f"iter_{PAUSE + 1}.pth")  # whole, and safe
    assert saved["meta"]["iter"] == PAUSE + 1
    assert (work / "last_checkpoint").read_text() == str(work / f"iter_{PAUSE + 1}.pth")
    assert not list(work.glob(".*.tmp-*"))
    # --resume continues with exactly the uninterrupted run's learning rate, to the end
    assert cli.main(toy_args(config, work, toy_root, "--resume")) == 0
    assert logged(work, "lr") == logged(first_run[1], "lr")
    assert (work / f"iter_{ITERS}.pth").is_file()


@pytest.mark.e2e
def test_a_signal_before_the_first_iteration_stops_at_once(tmp_path, toy_root, cli, capsys):
    config = hooks_config(tmp_path, tmp_path, 'dict(type="SelfSignalHook", at=-1)')
    work = tmp_path / "work"
    assert cli.main(toy_args(config, work, toy_root)) == PREEMPTED_EXIT_CODE
    err = lines(capsys.readouterr().err)
    assert err[-1] == (
        f"train_seg: preempted by SIGUSR1 before iteration 1 of {ITERS}: nothing new to save; "
        "exit status 75, continue with --resume"
    )
    assert logged(work, "lr") == {} and not list(work.glob("*.pth"))


@pytest.mark.unit
def test_a_signal_while_the_run_is_checked_stops_it_before_anything_is_written(
    tmp_path, toy_root, cli, capsys, monkeypatch
):
    """SIGUSR1 while ``train_seg`` loads the config (from a module its ``custom_imports``
    imports): nothing is built or written, exit 75."""
    module = tmp_path / "signal_on_import.py"
    module.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGUSR1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "signal_on_import", raising=False)
    config = toy_config(tmp_path, imports=("budgeted.mmengine", "signal_on_import"))
    work = tmp_path / "work"
    assert cli.main(toy_args(config, work, toy_root)) == PREEMPTED_EXIT_CODE
    assert lines(capsys.readouterr().err) == [
        "train_seg: preempted by SIGUSR1 before training started: nothing written; exit status "
        "75, run the same command again"
    ]
    assert not work.exists()


@pytest.mark.e2e
def test_without_a_preemption_hook_sigterm_ends_the_run_as_before(tmp_path, toy_root):
    """An epoch-based run gets no PreemptionHook: SIGTERM must not be swallowed by a flag that
    nothing reads (it ends the process, as without our tool)."""
    hook = f'dict(type="SelfSignalHook", at=1, signum={int(signal.SIGTERM)})'
    epochs = (
        'train_cfg = dict(_delete_=True, type="EpochBasedTrainLoop", max_epochs=3, '
        "val_interval=9)\n"
        "param_scheduler = [dict(type='BudgetLinearLR', warmup_iters=4, by_epoch=True, "
        "convert_to_iter_based=True)]\n"
        "default_hooks = dict(checkpoint=dict(by_epoch=True, interval=1))\n"
        "train_dataloader = dict(sampler=dict(type='DefaultSampler', shuffle=True))\n"
        f"custom_hooks = [{hook}]\n"
    )
    config = toy_config(tmp_path, extra=epochs, imports=HOOK_IMPORTS)
    options = {
        k: v for k, v in toy_options(toy_root).items() if not k.startswith(("train_cfg", "param_"))
    }
    args = [str(config), "--work-dir", str(tmp_path / "work"), "--cfg-options"]
    args += [f"{k}={v}" for k, v in options.items() if not k.startswith("default_hooks.check")]
    code, err = finish(start(args, tmp_path / "epochs"), tmp_path / "epochs")
    assert code == -signal.SIGTERM, err[-3000:]


@pytest.mark.e2e
def test_preemption_hook_in_a_config_with_the_stock_runner(first_run, tmp_path, toy_root):
    """What MMSegmentation's own tools/train.py runs: ``custom_hooks=[dict(type=
    "PreemptionHook")]``; a real SIGUSR1 to this process stops the run after the iteration it
    arrived in; the stock resume continues at the same LR."""
    hooks = [
        dict(type="RecordLRHook", out_dir=str(tmp_path)),
        dict(type="PreemptionHook"),
        dict(type="SelfSignalHook", at=4),
    ]
    imports = ("budgeted.mmengine", "budgeted.mmengine.safe_checkpoints", "preemption_helpers")
    cfg = stock_config(tmp_path, toy_root, imports=imports, custom_hooks=hooks)
    handler = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(Preempted) as stop:
        Runner.from_cfg(cfg).train()
    assert stop.value.code == PREEMPTED_EXIT_CODE
    assert signal.getsignal(signal.SIGUSR1) is handler  # the hook's handlers are gone again
    work = Path(cfg.work_dir)
    assert load_mmengine_checkpoint(work / "iter_5.pth")["meta"]["iter"] == 5
    resumed = stock_config(tmp_path, toy_root, imports=imports, custom_hooks=hooks[:2])
    resumed.work_dir, resumed.resume = str(work), True
    Runner.from_cfg(resumed).train()
    first = recorded_lrs(first_run[0])
    assert recorded_lrs(tmp_path) == {it: first[it] for it in range(5, ITERS)}


@pytest.mark.e2e
def test_two_processes_stop_at_the_same_iteration_and_resume_at_the_same_lr(tmp_path, toy_root):
    """tools/dist_train.sh: 2 gloo processes; SIGTERM to rank 1 only. Both ranks stop after the
    same iteration (the flag is all-reduced), rank 0 alone writes the checkpoint, the script
    exits 75; ``--resume`` continues with the core's LR on both ranks."""
    iters, warmup = 8, 2
    work, first, second = tmp_path / "work", tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    go = tmp_path / "go"
    pause = f'dict(type="PauseForSignalHook", out_dir="{tmp_path}", at={PAUSE}, go_file="{go}")'
    config = hooks_config(tmp_path, first, pause)
    args = toy_args(config, work, toy_root, iters=iters, warmup=warmup)
    env = dict(PYTHON=sys.executable, PORT=str(free_port()))

    def launch(config_args: list[str], logs: Path) -> subprocess.Popen:
        command = ["bash", str(REPO / "tools/dist_train.sh"), config_args[0], "2"]
        return popen([*command, *config_args[1:]], logs, **env)

    proc = launch(args, tmp_path / "dist")
    paused = [tmp_path / f"paused_rank{r}" for r in (0, 1)]
    wait_until("both ranks paused", lambda: all(p.exists() for p in paused), proc)
    os.kill(int(paused[1].read_text()), signal.SIGTERM)
    go.touch()
    code, err = finish(proc, tmp_path / "dist")
    out = Path(f"{tmp_path / 'dist'}.out").read_text()
    assert code == PREEMPTED_EXIT_CODE, err[-3000:]
    said = [line for line in lines(err) if line.startswith("train_seg: preempted")]
    assert said == [  # rank 0 speaks, for both
        f"train_seg: preempted by SIGTERM at iteration {PAUSE + 1} of {iters}: saved "
        f"{work}/iter_{PAUSE + 1}.pth; exit status 75, continue with --resume"
    ], err[-3000:]
    assert "Traceback" not in err and "ChildFailedError" not in err  # no torchrun report
    assert sorted(p.name for p in work.glob("*.pth")) == [f"iter_{PAUSE + 1}.pth"]
    assert not list(work.glob(".*.tmp-*"))
    before = {it: core_lr(it, iters, warmup) for it in range(PAUSE + 1)}
    for rank in (0, 1):  # every rank trained exactly the iterations before the stop
        assert recorded_lrs(first, rank) == pytest.approx(before, rel=1e-12)
    cost = re.search(r"PreemptionHook: (\d+) all-reduced preemption checks over 2 ranks", out)
    assert cost and int(cost.group(1)) == PAUSE + 2  # one before training, one per iteration
    # the resume, again 2 processes
    config = hooks_config(tmp_path, second)
    resume_args = toy_args(config, work, toy_root, "--resume", iters=iters, warmup=warmup)
    env["PORT"] = str(free_port())
    code, err = finish(launch(resume_args, tmp_path / "resume"), tmp_path / "resume")
    assert code == 0, err[-3000:]
    expected = {it: core_lr(it, iters, warmup) for it in range(PAUSE + 1, iters)}
    assert recorded_lrs(second, 0) == recorded_lrs(second, 1)
    assert recorded_lrs(second, 0) == pytest.approx(expected, rel=1e-12)
    assert "Distributed training: True" in Path(f"{tmp_path / 'resume'}.out").read_text()


def dist_train(config_args: list[str], logs: Path) -> subprocess.Popen:
    """``tools/dist_train.sh CONFIG 2 ...`` (two gloo processes) in a subprocess."""
    command = ["bash", str(REPO / "tools/dist_train.sh"), config_args[0], "2", *config_args[1:]]
    return popen(command, logs, PYTHON=sys.executable, PORT=str(free_port()))


@pytest.mark.e2e
def test_dist_train_refuses_missing_data_once_before_any_rank_starts(tmp_path, toy_root):
    work = tmp_path / "work"
    missing = tmp_path / "no_data"
    args = toy_args(
        toy_config(tmp_path), work, toy_root, f"train_dataloader.dataset.data_root={missing}"
    )
    code, err = finish(dist_train(args, tmp_path / "dist"), tmp_path / "dist")
    assert code == 2, err[-3000:]
    assert lines(err) == [
        f"train_seg: error: train_dataloader: {missing} does not exist; set "
        "train_dataloader.dataset.data_root (--cfg-options) or create the data "
        "(tools/make_toy_cityscapes.py for the toy set, tools/prepare_cityscapes.py for "
        "Cityscapes)"
    ]
    assert not work.exists()


@pytest.mark.e2e
def test_a_killed_rank_is_named_in_one_line(tmp_path, toy_root):
    """SIGKILL to rank 1 of 2 (as the OOM killer would): torchrun stops rank 0, whose
    collectives fail; the launcher says which rank died and how, in one line, and exits 1."""
    go = tmp_path / "go"
    pause = f'dict(type="PauseForSignalHook", out_dir="{tmp_path}", at={PAUSE}, go_file="{go}")'
    args = toy_args(hooks_config(tmp_path, tmp_path, pause), tmp_path / "work", toy_root, iters=8)
    proc = dist_train(args, tmp_path / "dist")
    paused = [tmp_path / f"paused_rank{r}" for r in (0, 1)]
    wait_until("both ranks paused", lambda: all(p.exists() for p in paused), proc)
    victim = int(paused[1].read_text())
    os.kill(victim, signal.SIGKILL)
    go.touch()
    code, err = finish(proc, tmp_path / "dist")
    assert code == 1, err[-3000:]
    assert [line for line in lines(err) if line.startswith(("dist_train.sh:", "train_seg:"))] == [
        f"dist_train.sh: rank 1 (pid {victim}) was killed by SIGKILL; torchrun stopped the others"
    ], err[-3000:]
    for noise in ("Traceback", "ChildFailedError", "gloo", "Connection"):
        assert noise not in err, err[-3000:]


# --- divergence -----------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_diverged_run_stops_at_the_first_non_finite_loss_in_one_line(tmp_path, toy_root):
    """The toy PSPNet at lr=1e8 without gradient clipping: the loss turns NaN within a few
    iterations. The run stops at that iteration: one line naming it and the base LR, exit 3,
    no checkpoint of it or after it, no validation."""
    work = tmp_path / "work"
    diverge = ["optim_wrapper.optimizer.lr=1e8", "optim_wrapper.clip_grad=None"]
    args = toy_args(toy_config(tmp_path), work, toy_root, *diverge)
    code, err = finish(start(args, tmp_path / "div"), tmp_path / "div")
    assert code == DIVERGED_EXIT_CODE, err[-3000:]
    losses = logged(work, "loss")  # the logger writes every iteration trained
    first = min(it for it, loss in losses.items() if not math.isfinite(loss))
    assert max(losses) == first  # not one iteration more
    what = "nan" if math.isnan(losses[first]) else "inf"
    assert lines(err)[-1] == (
        f"train_seg: diverged: the loss is {what} at iteration {first} (base LR 1e+08); lower "
        "the base LR (optim_wrapper.optimizer.lr) or clip the gradients (optim_wrapper."
        "clip_grad=dict(max_norm=...)); stopped before any checkpoint or validation of it, the "
        "run is not a result (exit status 3)"
    ), err[-3000:]
    assert "Traceback" not in err and sum("diverged" in line for line in lines(err)) == 1
    assert all(int(p.stem.split("_")[1]) < first for p in work.glob("iter_*.pth"))
    assert logged(work, "mIoU") == {}


@pytest.mark.e2e
def test_divergence_hook_in_a_config_with_the_stock_runner(tmp_path, toy_root):
    """What MMSegmentation's own tools/train.py runs: ``custom_hooks=[dict(type=
    "DivergenceHook")]`` ends the stock runner's training with ``Diverged`` (exit status 3)."""
    cfg = stock_config(
        tmp_path,
        toy_root,
        custom_hooks=[dict(type="DivergenceHook")],
        optim_wrapper=dict(optimizer=dict(lr=1e8), clip_grad=None),
    )
    with pytest.raises(Diverged) as stop:
        Runner.from_cfg(cfg).train()
    assert stop.value.code == DIVERGED_EXIT_CODE
    assert re.fullmatch(r"diverged: the loss is (nan|inf) at iteration \d+ \(base LR 1e\+08\); .*",
                        stop.value.message)  # fmt: skip
    work = Path(cfg.work_dir)
    assert not list(work.glob("*.pth")) and logged(work, "mIoU") == {}


@pytest.mark.e2e
def test_two_processes_stop_together_when_one_rank_diverges(tmp_path, toy_root):
    """tools/dist_train.sh, 2 gloo processes; rank 1's loss alone turns NaN at iteration 3.
    Both ranks stop after that iteration (the flag is all-reduced), rank 0 says so in one line,
    the script exits 3."""
    nan = f'dict(type="NanLossOnRankHook", out_dir="{tmp_path}", rank=1, at=2)'
    work = tmp_path / "work"
    args = toy_args(hooks_config(tmp_path, tmp_path, nan), work, toy_root, iters=8)
    code, err = finish(dist_train(args, tmp_path / "dist"), tmp_path / "dist")
    assert code == DIVERGED_EXIT_CODE, err[-3000:]
    said = [line for line in lines(err) if "diverged" in line]
    assert said == [
        "train_seg: diverged: the loss is nan at iteration 3 (base LR 0.01); lower the base LR "
        "(optim_wrapper.optimizer.lr) or clip the gradients (optim_wrapper.clip_grad="
        "dict(max_norm=...)); stopped before any checkpoint or validation of it, the run is "
        "not a result (exit status 3)"
    ], err[-3000:]
    assert lines(err)[-1] == said[0] and "Traceback" not in err
    for rank in (0, 1):  # no rank trained an iteration more
        assert (tmp_path / f"trained_rank{rank}").read_text() == "3"
    assert not list(work.glob("*.pth"))


# --- a read-only work dir ------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_read_only_work_dir_is_one_line_and_nothing_written(tmp_path, toy_root):
    """The output folder on a read-only mount (a user and mount namespace: as root, mode bits
    would not stop a write)."""
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -rm (user and mount namespaces) is not allowed here")
    read_only = tmp_path / "ro"
    (read_only / "runs").mkdir(parents=True)
    work = read_only / "runs/run"
    mount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    command = ["unshare", "-rm", "sh", "-c", mount, "sh", str(read_only), sys.executable]
    args = toy_args(toy_config(tmp_path), work, toy_root)
    code, err = finish(popen([*command, str(TRAIN_SEG), *args], tmp_path / "ro"), tmp_path / "ro")
    assert code == 2, err[-3000:]
    assert lines(err) == [
        f"train_seg: error: work dir {work} cannot be written ({read_only}/runs: Read-only file "
        "system); allowed: a --work-dir where this user can create files (nothing was written)"
    ]
    assert snapshot(read_only) == {"runs": "folder"}


# --- Slurm --------------------------------------------------------------------------------------

FAKE_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$FAKE_DIR/srun_args"
exit "$FAKE_SRUN_STATUS"
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
printf '%s\\n' "$@" >> "$FAKE_DIR/scontrol_calls"
"""


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("status", "job", "restarts", "options", "requeued", "passed"),
    [
        (75, "4242", "0", ["--work-dir", "w"], True, ["--work-dir", "w"]),
        (0, "4242", "0", ["--work-dir", "w"], False, ["--work-dir", "w"]),
        (1, "4242", "0", [], False, []),
        (75, "", "0", [], False, []),
        (
            0,
            "4242",
            "1",
            ["--resume-from", "old/iter_8.pth", "--amp"],
            False,
            ["--amp", "--resume"],
        ),
        (0, "4242", "2", ["--resume", "--resume-from=x.pth"], False, ["--resume"]),
    ],
    ids=["preempted", "done", "failed", "preempted-outside-a-job", "requeued", "requeued-again"],
)
def test_slurm_train_requeues_a_preempted_job_which_then_resumes(
    status, job, restarts, options, requeued, passed, tmp_path
):
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    env = child_env(
        PATH=f"{fake}{os.pathsep}{os.environ['PATH']}",
        FAKE_DIR=str(tmp_path),
        FAKE_SRUN_STATUS=str(status),
        SLURM_JOB_ID=job,
        SLURM_RESTART_COUNT=restarts,
    )
    if not job:
        del env["SLURM_JOB_ID"]
    script = REPO / "tools/slurm_train.sh"
    proc = subprocess.run(
        ["bash", str(script), "part", "job", "cfg.py", *options],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=restore_default_signals,
    )
    assert proc.returncode == status, proc.stderr
    srun = (tmp_path / "srun_args").read_text().splitlines()
    tool = srun.index(str(script.parent / "train_seg.py"))
    assert srun[tool + 1 :] == ["cfg.py", "--launcher=slurm", *passed]
    calls = tmp_path / "scontrol_calls"
    assert (calls.read_text().split() if calls.exists() else []) == (
        ["requeue", job] if requeued else []
    )
    if status == PREEMPTED_EXIT_CODE:
        said = "requeueing job 4242" if requeued else "run the same command with --resume"
        assert said in proc.stderr


@pytest.mark.e2e
def test_the_launch_scripts_parse():
    for script in ("slurm_train.sh", "dist_train.sh"):
        proc = subprocess.run(["bash", "-n", str(REPO / "tools" / script)], capture_output=True)
        assert proc.returncode == 0, proc.stderr

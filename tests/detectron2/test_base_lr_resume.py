"""A resumed checkpoint whose base LRs are not the config's is refused (issue 40, items 15 and 25):
edited ``base_lrs`` or ``initial_lr``, a base LR of NaN, a config whose ``SOLVER.BASE_LR`` or
``BIAS_LR_FACTOR`` changed; per param group, so an unchanged config with per-group factors
resumes exactly. Real checkpoints of the toy trainer, tools/train_net.py (in this process, and
once as a subprocess for its exit status), a user's own ``DefaultTrainer``; a diverged run names
the base LR its scheduler multiplies, not the config's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from d2_testutils import (
    EIGHT,
    TINY,
    TOY_CONFIG,
    copy_run,
    finish,
    folder_hashes,
    last_line,
    logged_lrs,
    refusal,
    start_tool,
)
from detectron2.engine import DefaultTrainer

import budgeted.detectron2 as bd2
from budgeted.detectron2 import BudgetResumeError, BudgetTrainer, load_config
from budgeted.detectron2.cli import run
from budgeted.detectron2.lazy_cli import run as lazy_run
from budgeted.detectron2.stops import Diverged
from budgeted.safety import load_checkpoint

NO_EVAL = ["DATASETS.TEST", "()"]
BIAS = ["SOLVER.BIAS_LR_FACTOR", "2.0"]  # biases train at twice SOLVER.BASE_LR: 4 param groups
WEIGHTS = "start a new run from its weights: MODEL.WEIGHTS {path}"


def edited(src: Path, dst: Path, *, base_lrs=None, initial_lr=None) -> Path:
    """A copy of checkpoint ``src`` at ``dst`` with the LR scheduler's ``base_lrs`` and/or the
    optimizer's ``initial_lr`` of every param group replaced by ``f(old)``."""
    checkpoint = load_checkpoint(src)
    scheduler = checkpoint["trainer"]["hooks"]["LRScheduler"]
    if base_lrs is not None:
        scheduler["base_lrs"] = [base_lrs(v) for v in scheduler["base_lrs"]]
    if initial_lr is not None:
        for group in checkpoint["trainer"]["_trainer"]["optimizer"]["param_groups"]:
            group["initial_lr"] = initial_lr(group["initial_lr"])
    torch.save(checkpoint, dst)
    return dst


@pytest.fixture(scope="module")
def bias_run(toy_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 8-iteration toy run with ``SOLVER.BIAS_LR_FACTOR 2``, no evaluation."""
    out = tmp_path_factory.mktemp("bias_run")
    assert run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, *BIAS, *NO_EVAL,
                "OUTPUT_DIR", str(out)]) == 0  # fmt: skip
    return out


def _x10(out: Path, tmp: Path) -> tuple[list[str], str]:
    edited(out / "model_0000003.pth", out / "edited.pth", base_lrs=lambda v: v * 10)
    (out / "last_checkpoint").write_text("edited.pth")
    return ["--resume"], (
        f"train_net: cannot resume: checkpoint {str(out / 'edited.pth')!r} has base LR 0.1 in "
        "param group 0 of 2 (the LR scheduler's base_lrs), where the config gives 0.01 "
        "(SOLVER.BASE_LR=0.01): resuming it would train every remaining iteration at other LRs "
        "than the run it continues (the file was edited, or the config's LR changed since); "
        "every group's base LR is 10 x the config's, as if the run was planned with "
        "SOLVER.BASE_LR=0.1: resume with that, or " + WEIGHTS.format(path=out / "edited.pth")
    )


def _x10_resume_from(out: Path, tmp: Path) -> tuple[list[str], str]:
    path = edited(out / "model_0000003.pth", tmp / "edited.pth", base_lrs=lambda v: v * 10)
    return ["--resume-from", str(path)], (
        f"train_net: --resume-from {str(path)!r} has base LR 0.1 in param group 0 of 2 (the LR "
        "scheduler's base_lrs), where the config gives 0.01 (SOLVER.BASE_LR=0.01)"
    )


def _initial_lr(out: Path, tmp: Path) -> tuple[list[str], str]:
    edited(out / "model_0000003.pth", out / "edited.pth", initial_lr=lambda v: v * 10)
    (out / "last_checkpoint").write_text("edited.pth")
    return ["--resume"], (
        f"train_net: cannot resume: checkpoint {str(out / 'edited.pth')!r} has base LR 0.1 in "
        "param group 0 of 2 (the trainer._trainer.optimizer param groups' initial_lr), where "
        "the config gives 0.01 (SOLVER.BASE_LR=0.01)"
    )


def _nan(out: Path, tmp: Path) -> tuple[list[str], str]:
    nan = float("nan")
    edited(out / "model_0000003.pth", out / "edited.pth", base_lrs=lambda v: nan,
           initial_lr=lambda v: nan)  # fmt: skip
    (out / "last_checkpoint").write_text("edited.pth")
    return ["--resume"], (
        f"train_net: cannot resume: checkpoint {str(out / 'edited.pth')!r} has base LR nan in "
        "param group 0 of 2 (the LR scheduler's base_lrs), where the config gives 0.01 "
        "(SOLVER.BASE_LR=0.01): not a finite number >= 0, the file was damaged or edited; "
        "resume from another checkpoint, or " + WEIGHTS.format(path=out / "edited.pth")
    )


def _config_lr(out: Path, tmp: Path) -> tuple[list[str], str]:
    return ["--resume", "SOLVER.BASE_LR", "0.02"], (
        f"train_net: cannot resume: checkpoint {str(out / 'model_0000003.pth')!r} has base LR "
        "0.01 in param group 0 of 2 (the LR scheduler's base_lrs), where the config gives 0.02 "
        "(SOLVER.BASE_LR=0.02)"
    )


REFUSALS = {
    "--resume, base_lrs x10": _x10,
    "--resume-from, base_lrs x10": _x10_resume_from,
    "--resume, initial_lr x10": _initial_lr,
    "--resume, base LR nan": _nan,
    "--resume, SOLVER.BASE_LR changed": _config_lr,
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(REFUSALS))
def test_other_base_lrs_are_refused_in_one_line_and_nothing_is_written(
    toy_run, tmp_path, case
) -> None:
    out = copy_run(toy_run, tmp_path / "run")
    flags, expected = REFUSALS[case](out, tmp_path)
    before = folder_hashes(out)
    message = refusal(["--config-file", TOY_CONFIG, *flags, *TINY, *EIGHT, "OUTPUT_DIR", str(out)])
    assert message.startswith(expected), message
    assert folder_hashes(out) == before  # not one byte changed, no file added


@pytest.mark.e2e
def test_the_tool_exits_1_with_the_one_line(toy_run, tmp_path) -> None:
    out = copy_run(toy_run, tmp_path / "run")
    flags, expected = _x10(out, tmp_path)
    before = folder_hashes(out)
    rc, _, err = finish(start_tool(["--config-file", TOY_CONFIG, *flags, *TINY, *EIGHT,
                                    "OUTPUT_DIR", str(out)]))  # fmt: skip
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    assert [line for line in err.splitlines() if line.startswith("train_net:")] == [expected]
    assert last_line(err) == expected
    assert folder_hashes(out) == before


@pytest.mark.integration
def test_an_unchanged_config_with_per_group_factors_resumes_exactly(bias_run, tmp_path) -> None:
    """4 param groups (weights at 0.01, biases at 0.02): the resume is not refused, and trains
    iterations 4-7 at the LRs of the uninterrupted run; a changed BIAS_LR_FACTOR is refused,
    naming the bias group."""
    out = copy_run(bias_run, tmp_path / "run")
    argv = ["--config-file", TOY_CONFIG, *TINY, *EIGHT, *BIAS, *NO_EVAL, "OUTPUT_DIR", str(out)]
    groups = load_checkpoint(out / "model_0000003.pth")["trainer"]["hooks"]["LRScheduler"]
    assert sorted(set(groups["base_lrs"])) == [0.01, 0.02]
    before = folder_hashes(out)
    message = refusal(["--resume", *argv, "SOLVER.BIAS_LR_FACTOR", "3.0"])
    assert message.startswith(
        f"train_net: cannot resume: checkpoint {str(out / 'model_0000003.pth')!r} has base LR "
        "0.02 in param group 1 of 4 (the LR scheduler's base_lrs), where the config gives 0.03 "
        "(SOLVER.BASE_LR=0.01 with that group's multiplier)"
    ), message
    assert "the groups' base LRs are not one multiple of the config's" in message
    assert folder_hashes(out) == before
    (out / "metrics.json").unlink()
    assert run(["--resume", *argv]) == 0
    resumed, full = logged_lrs(out), logged_lrs(bias_run)
    assert sorted(resumed) == [4, 5, 6, 7]
    assert resumed == pytest.approx({it: full[it] for it in resumed}, rel=1e-12)


@pytest.mark.integration
def test_a_users_own_trainer_refuses_other_base_lrs(toy_run, tmp_path) -> None:
    """The adoption line of docs/detectron2.md (``build_lr_scheduler``) in a plain
    ``DefaultTrainer``: the scheduler refuses the edited state when the trainer resumes it."""

    class Trainer(DefaultTrainer):
        build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))

    out = copy_run(toy_run, tmp_path / "run")
    edited(out / "model_0000003.pth", out / "edited.pth", base_lrs=lambda v: v * 10)
    (out / "last_checkpoint").write_text("edited.pth")
    own = [*TINY, *EIGHT, *NO_EVAL, "SOLVER.BUDGET.WRITER_PERIOD", "20"]  # DefaultTrainer's
    trainer = Trainer(load_config(TOY_CONFIG, [*own, "OUTPUT_DIR", str(out)]))
    with pytest.raises(BudgetResumeError) as err:
        trainer.resume_or_load(resume=True)
    assert str(err.value).startswith(
        "cannot resume: the checkpoint has base LR 0.1 in param group 0 of 2 (the LR "
        "scheduler's base_lrs), where the config gives 0.01 (SOLVER.BASE_LR): "
    ), err.value
    assert trainer.scheduler.base_lrs == [0.01, 0.01]  # nothing of it was loaded


@pytest.mark.integration
def test_a_diverged_line_names_the_base_lr_the_scheduler_multiplies(toy_root, tmp_path) -> None:
    """A stock scheduler (Detectron2's own, no check of ours) resumed from a state whose
    base_lrs are 1e8, the optimizer's ``initial_lr`` still the config's 0.01: the loss turns
    non-finite and the line says the base LR it trained at."""
    cfg = load_config(TOY_CONFIG, [*TINY, *EIGHT, *NO_EVAL, "SOLVER.LR_SCHEDULER_NAME",
                                   "WarmupMultiStepLR", "SOLVER.WARMUP_ITERS", "0",
                                   "SOLVER.CLIP_GRADIENTS.ENABLED", "False",
                                   "OUTPUT_DIR", str(tmp_path / "out")])  # fmt: skip
    trainer = BudgetTrainer(cfg)
    trainer.resume_or_load(resume=False)
    state = trainer.scheduler.state_dict()
    trainer.scheduler.load_state_dict({**state, "base_lrs": [1e8] * len(state["base_lrs"])})
    with pytest.raises(Diverged) as stop:
        trainer.train()
    assert "(base LR 1e+08)" in stop.value.message, stop.value.message


@pytest.mark.integration
def test_the_lazyconfig_tool_refuses_other_base_lrs_and_resumes_its_own(toy_root, tmp_path):
    """tools/lazyconfig_train_net.py shares the check: ``optimizer.lr`` x its params' groups."""
    first, out = tmp_path / "first", tmp_path / "out"
    tiny = [
        "train.max_iter=4",
        "train.log_period=1",
        "lr_multiplier.warmup_iters=1",
        "train.checkpointer.period=2",
        "dataloader.test.dataset.names=toy_coco_val",
    ]
    tool = ["--config", "mask_rcnn_toy_budget10.py"]
    assert lazy_run([*tool, *tiny, f"train.output_dir={first}"]) == 0
    path = edited(first / "model_0000001.pth", tmp_path / "edited.pth", base_lrs=lambda v: v * 10)
    out.mkdir()
    with pytest.raises(SystemExit) as err:
        lazy_run([*tool, "--resume-from", str(path), *tiny, f"train.output_dir={out}"])
    assert str(err.value.code).startswith(
        f"lazyconfig_train_net: --resume-from {str(path)!r} has base LR 0.1 in param group 0 of "
        "2 (the LR scheduler's base_lrs), where the config gives 0.01 (optimizer.lr=0.01)"
    ), err.value.code
    assert "start a new run from its weights: train.init_checkpoint=" in str(err.value.code)
    assert list(out.iterdir()) == []  # nothing written
    intact = str(first / "model_0000001.pth")
    assert lazy_run([*tool, "--resume-from", intact, *tiny, f"train.output_dir={out}"]) == 0
    assert logged_lrs(out) == pytest.approx({it: logged_lrs(first)[it] for it in (2, 3)})

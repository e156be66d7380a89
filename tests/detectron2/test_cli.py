"""tools/train_net.py (budgeted.detectron2.cli) with the real Detectron2 trainer on toy data."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from d2_testutils import (
    EIGHT,
    REPO,
    TINY,
    TINY_OWN,
    TOY_CONFIG,
    copy_run,
    folder_hashes,
    last_line,
    logged_lrs,
    read_metrics,
)
from detectron2.config import get_cfg
from detectron2.engine import DefaultTrainer, hooks

import budgeted.detectron2 as bd2
from budgeted.detectron2 import BudgetConfigError, BudgetResumeError, BudgetTrainer, load_config
from budgeted.detectron2.cli import run
from budgeted.runs.detectron2 import final_metrics, max_iter
from budgeted.schedules import BudgetMismatchError, BudgetSchedule

CONFIGS = REPO / "configs" / "detectron2"


@pytest.mark.integration
def test_logged_lr_equals_the_core_and_ap_is_computed(toy_run: Path) -> None:
    cfg = load_config(TOY_CONFIG, [*TINY, *EIGHT])
    core = BudgetSchedule("linear", 8, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR)
    lrs = logged_lrs(toy_run)
    assert sorted(lrs) == list(range(8))
    assert [lrs[i] for i in range(8)] == pytest.approx(
        [cfg.SOLVER.BASE_LR * core(i) for i in range(8)], rel=1e-9
    )
    final = read_metrics(toy_run)[-1]
    for key in ("bbox/AP", "bbox/AP50", "segm/AP", "segm/AP50"):
        assert math.isfinite(final[key]) and 0.0 <= final[key] <= 100.0  # pycocotools ran
    assert len(list(toy_run.glob("events.out.tfevents.*"))) == 1  # TensorBoard, one writer
    assert (toy_run / "inference" / "coco_instances_results.json").exists()
    found = final_metrics(toy_run)  # what the report reads
    assert found is not None and found["bbox/AP"] == final["bbox/AP"]
    assert found["segm/AP50"] == final["segm/AP50"] and "lr" not in found


@pytest.mark.integration
def test_resume_continues_the_schedule_exactly(toy_run: Path, tmp_path: Path) -> None:
    stopped = tmp_path / "stopped"
    shutil.copytree(toy_run, stopped)
    # as if the run had stopped after iteration 3: its last checkpoint is model_0000003.pth
    for f in ("model_0000007.pth", "model_final.pth", "metrics.json"):
        (stopped / f).unlink(missing_ok=True)
    (stopped / "last_checkpoint").write_text("model_0000003.pth")
    run(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT, "DATASETS.TEST", "()",
         "OUTPUT_DIR", str(stopped)])  # fmt: skip
    resumed, full = logged_lrs(stopped), logged_lrs(toy_run)
    assert sorted(resumed) == [4, 5, 6, 7]
    assert [resumed[i] for i in range(4, 8)] == [full[i] for i in range(4, 8)]
    assert final_metrics(stopped) is None  # finished, but never evaluated (DATASETS.TEST empty)


@pytest.mark.integration
def test_resume_with_another_budget_is_refused(toy_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    (out / "last_checkpoint").write_text("model_0000003.pth")
    other = [*TINY, "SOLVER.BUDGET.FRACTION", "0.03", "OUTPUT_DIR", str(out)]  # 12 iterations
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, "--resume", *other])
    msg = str(err.value.code)
    assert "SOLVER.MAX_ITER=8" in msg and "SOLVER.MAX_ITER=12" in msg
    assert "MODEL.WEIGHTS" in msg and "\n" not in msg
    # the real trainer refuses too, before training
    trainer = BudgetTrainer(load_config(TOY_CONFIG, other))
    with pytest.raises(BudgetConfigError, match=r"SOLVER\.MAX_ITER=8"):
        trainer.resume_or_load(resume=True)
    assert not (out / "model_0000011.pth").exists()


def _stopped_at(toy_run: Path, tmp_path: Path, checkpoint: str) -> Path:
    """A copy of the 8-iteration toy run whose last checkpoint is ``checkpoint``."""
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    (out / "metrics.json").unlink()
    (out / "last_checkpoint").write_text(checkpoint)
    return out


@pytest.mark.integration
def test_replan_on_resume_goes_on_from_the_current_lr_and_is_saved(toy_run, tmp_path) -> None:
    out = _stopped_at(toy_run, tmp_path, "model_0000003.pth")  # 4 of 8 iterations done
    twelve = [*TINY, "SOLVER.BUDGET.FRACTION", "0.03", "SOLVER.CHECKPOINT_PERIOD", "4",
              "DATASETS.TEST", "()", "OUTPUT_DIR", str(out)]  # fmt: skip
    run(["--config-file", TOY_CONFIG, "--resume", *twelve, "SOLVER.BUDGET.ON_RESUME", "replan"])
    cfg = load_config(TOY_CONFIG, [*TINY, *EIGHT])
    base, old = cfg.SOLVER.BASE_LR, bd2.budget_schedule_from_cfg(cfg)
    new = old.replan(12, at=4)
    lrs = logged_lrs(out)
    assert sorted(lrs) == list(range(4, 12))
    assert lrs[4] == pytest.approx(base * old(4), rel=1e-9)  # what the 8-iteration run had
    assert [lrs[i] for i in range(4, 12)] == pytest.approx(
        [base * (old(4) * (12 - i) / (12 - 4)) for i in range(4, 12)], rel=1e-9
    )  # linear: a straight line from the current LR to 0 at the new end
    assert [lrs[i] for i in range(4, 12)] == pytest.approx([base * new(i) for i in range(4, 12)])
    log = (out / "log.txt").read_text()
    assert log.count("budget re-planned at 4: SOLVER.MAX_ITER 8 -> 12") >= 1
    # the re-plan is in the checkpoints: resuming one later is exact, with the default policy
    (out / "metrics.json").unlink()
    (out / "last_checkpoint").write_text("model_0000007.pth")
    run(["--config-file", TOY_CONFIG, "--resume", *twelve])
    again = logged_lrs(out)
    assert sorted(again) == [8, 9, 10, 11]
    assert [again[i] for i in range(8, 12)] == [lrs[i] for i in range(8, 12)]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("checkpoint", "fraction", "expected"),
    [
        ("model_final.pth", "0.03", "SOLVER.MAX_ITER: cannot change the budget at 8: the budget "
         "of 8 has run out there (multiplier 0); re-plan from a checkpoint saved before 8"),
        ("model_0000003.pth", "0.01", "SOLVER.MAX_ITER: cannot change the budget to 4: 4 of it "
         "has already elapsed; allowed: a budget > 4"),
    ],
)  # fmt: skip
def test_a_replan_that_cannot_be_made_is_refused_in_one_line(
    toy_run, tmp_path, checkpoint, fraction, expected
) -> None:
    out = _stopped_at(toy_run, tmp_path, checkpoint)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, "--resume", *TINY, "SOLVER.BUDGET.FRACTION", fraction,
             "SOLVER.BUDGET.ON_RESUME", "replan", "OUTPUT_DIR", str(out)])  # fmt: skip
    assert str(err.value.code).endswith(expected) and "\n" not in str(err.value.code)
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


@pytest.mark.unit
def test_an_unknown_on_resume_policy_is_refused_in_one_line() -> None:
    cfg = load_config(TOY_CONFIG, ["SOLVER.BUDGET.ON_RESUME", "extend"])
    with pytest.raises(BudgetConfigError) as err:
        bd2.build_lr_scheduler(cfg, sgd_for(cfg))
    assert str(err.value) == (
        "SOLVER.BUDGET.ON_RESUME='extend' is invalid; allowed: refuse, replan, branch"
    )


def sgd_for(cfg):
    import torch

    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.SOLVER.BASE_LR)


class OwnTrainer(DefaultTrainer):
    """A user's trainer, adopting the schedulers in the documented one line."""

    build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))


def stock_cfg(path: str | Path, opts: list[str]):
    """The documented route for any trainer: get_cfg, add_budget_config, merge_from_file."""
    cfg = get_cfg()
    bd2.add_budget_config(cfg)
    cfg.merge_from_file(str(path))
    cfg.merge_from_list(opts)
    return cfg


@pytest.mark.integration
def test_a_plain_default_trainer_refuses_another_budget_on_resume(toy_run, tmp_path) -> None:
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    (out / "last_checkpoint").write_text("model_0000003.pth")
    cfg = stock_cfg(TOY_CONFIG, [*TINY_OWN, "SOLVER.BUDGET.FRACTION", "0.03", "SOLVER.MAX_ITER",
                                 "12", "DATASETS.TEST", "()", "OUTPUT_DIR", str(out)])  # fmt: skip
    trainer = OwnTrainer(cfg)
    with pytest.raises(BudgetResumeError) as err:
        trainer.resume_or_load(resume=True)
    assert isinstance(err.value, BudgetMismatchError)  # the core's except clauses hold
    assert isinstance(err.value, BudgetConfigError)
    assert str(err.value) == (
        "cannot resume: the checkpoint's budget has SOLVER.MAX_ITER=8, the config's "
        "SOLVER.MAX_ITER=12; resume with the checkpoint's budget (its SOLVER.MAX_ITER, warmup, "
        "schedule and GPU count), or start a new run from its weights: MODEL.WEIGHTS "
        "<checkpoint>, no --resume, another OUTPUT_DIR"
    )


# the SOLVER.BUDGET keys only BudgetTrainer acts on (its build_hooks), and the line a trainer of
# one's own (the documented one-line adoption), which would silently ignore them, refuses them with
OWN_TRAINER_REFUSALS = {
    "WRITER_PERIOD": (
        "1",
        "SOLVER.BUDGET.WRITER_PERIOD=1 does nothing in this trainer: only bd2.BudgetTrainer acts "
        "on it (it writes metrics.json every 1 iterations; DefaultTrainer's writer keeps its "
        "period of 20); allowed here: 20, or train with bd2.BudgetTrainer, or give the "
        "PeriodicWriter of your build_hooks that period",
    ),
    "GRAD_NORM_PERIOD": (
        "2",
        "SOLVER.BUDGET.GRAD_NORM_PERIOD=2 does nothing in this trainer: only bd2.BudgetTrainer "
        "acts on it (it registers the FullGradNormHook); allowed here: 0, or train with "
        "bd2.BudgetTrainer, or insert bd2.FullGradNormHook(period=2) in your build_hooks",
    ),
    "SAVE_AT": (
        "(2,)",
        "SOLVER.BUDGET.SAVE_AT=(2,) does nothing in this trainer: only bd2.BudgetTrainer acts on "
        "it (it registers the CheckpointAtHook); allowed here: (), or train with "
        "bd2.BudgetTrainer, or register budgeted.detectron2.checkpoint.CheckpointAtHook((2,))",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("key", list(OWN_TRAINER_REFUSALS))
def test_a_budget_trainer_key_is_refused_by_ones_own_trainer_in_one_line(toy_root, tmp_path, key):
    """Before, ``SOLVER.BUDGET.WRITER_PERIOD 1`` in a ``DefaultTrainer`` with the documented
    adoption line wrote metrics every 20 iterations all the same, silently."""
    value, line = OWN_TRAINER_REFUSALS[key]
    out = tmp_path / "out"
    cfg = stock_cfg(TOY_CONFIG, [*TINY_OWN, f"SOLVER.BUDGET.{key}", value, "DATASETS.TEST", "()",
                                 "OUTPUT_DIR", str(out)])  # fmt: skip
    with pytest.raises(BudgetConfigError) as err:
        OwnTrainer(cfg)
    assert str(err.value) == line
    assert not out.exists()  # refused before anything was written
    if key == "WRITER_PERIOD":  # BudgetTrainer acts on it, also as a subclass of one's own
        trainer = type("Mine", (BudgetTrainer,), {"build_lr_scheduler": OwnTrainer.__dict__[
            "build_lr_scheduler"]})(cfg)  # fmt: skip
        periods = [h._period for h in trainer._hooks if isinstance(h, hooks.PeriodicWriter)]
        assert periods == [1]


@pytest.mark.integration
def test_the_docs_own_trainer_route_refuses_a_budget_it_would_not_train(toy_root, tmp_path):
    # FULL_ITERS 400, FRACTION 0.1, no MAX_ITER: before, the zoo's MAX_ITER was silently trained
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        f'_BASE_: "{CONFIGS / "toy" / "Base-Toy-Mask-RCNN.yaml"}"\n'
        "SOLVER:\n  LR_SCHEDULER_NAME: BudgetLinear\n  BUDGET:\n    FULL_ITERS: 400\n"
        "    FRACTION: 0.1\n"
    )
    cfg = stock_cfg(mine, [*TINY_OWN, "OUTPUT_DIR", str(tmp_path / "out")])
    with pytest.raises(BudgetConfigError) as err:
        OwnTrainer(cfg)
    assert str(err.value).startswith(
        "SOLVER.MAX_ITER=400 is not the budget the config states (SOLVER.BUDGET.FRACTION=0.1 x "
        "FULL_ITERS=400 = 40 iterations); set SOLVER.MAX_ITER 40 "
    )
    assert bd2.load_config(str(mine)).SOLVER.MAX_ITER == 40  # what our loader makes of it


@pytest.mark.integration
def test_the_cli_trains_a_bare_name_with_key_equals_value_overrides_and_a_new_schedule(
    toy_root, tmp_path, sqrt_schedule
) -> None:
    out = tmp_path / "a=b"  # a value that holds "="
    mixed = []  # TINY, half as KEY VALUE pairs and half as KEY=VALUE
    for i, (key, value) in enumerate(zip(TINY[::2], TINY[1::2])):
        mixed += [f"{key}={value}"] if i % 2 else [key, value]
    # sqrt: registered in the core by the fixture, after budgeted.detectron2 was imported
    argv = ["--config", "mask_rcnn_toy_budget1.yaml", *mixed,
            "SOLVER.LR_SCHEDULER_NAME=BudgetSqrt", "SOLVER.BUDGET.SQRT_FLOOR=0.2",
            "SOLVER.WARMUP_ITERS", "1", "DATASETS.TEST=()", f"OUTPUT_DIR={out}"]  # fmt: skip
    assert run(argv) == 0
    core = BudgetSchedule(sqrt_schedule, 4, 1, 0.001, params={"floor": 0.2})
    lrs = logged_lrs(out)
    assert sorted(lrs) == [0, 1, 2, 3]  # the 1 % toy budget, 4 iterations
    assert [lrs[t] for t in range(4)] == pytest.approx([0.01 * core(t) for t in range(4)])
    assert lrs[3] == pytest.approx(0.01 * (0.2 + 0.8 * (1 / 3) ** 0.5))  # p = 2/3, floor 0.2


@pytest.mark.e2e
def test_an_unknown_or_ambiguous_name_lists_the_candidates(tmp_path, monkeypatch) -> None:
    for folder in ("detectron2", "detectron2/toy"):  # two yaml files of one stem
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "same.yaml").write_text("VERSION: 2\n")
    with monkeypatch.context() as env:
        env.setenv("BUDGETED_CONFIGS", str(tmp_path))
        with pytest.raises(SystemExit) as err:
            run(["--config", "same", "OUTPUT_DIR", str(tmp_path / "o")])
    assert str(err.value.code) == (
        "train_net: config 'same' is ambiguous; candidates: detectron2/same.yaml, "
        "detectron2/toy/same.yaml"
    )
    tool = subprocess.run(
        [sys.executable, str(REPO / "tools" / "train_net.py"), "--config", "budget11.yaml"],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert tool.returncode == 1 and "Traceback" not in tool.stderr
    last = tool.stderr.strip().splitlines()[-1]
    assert last.startswith("train_net: config 'budget11.yaml' does not exist")
    assert "candidates: " in last and "mask_rcnn_budget1.yaml" in last


@pytest.mark.integration
def test_an_existing_run_is_never_overwritten(toy_run: Path) -> None:
    before = (toy_run / "metrics.json").read_text()
    with pytest.raises(SystemExit, match="already holds a run; pass --resume"):
        run(["--config-file", TOY_CONFIG, *TINY, *EIGHT, "OUTPUT_DIR", str(toy_run)])
    assert (toy_run / "metrics.json").read_text() == before


@pytest.mark.integration
def test_resume_of_a_finished_run_says_so_and_writes_nothing(toy_run, tmp_path, capsys) -> None:
    out = copy_run(toy_run, tmp_path / "run", ("model_0000003.pth", "model_final.pth"))
    before = folder_hashes(out)
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, "--resume", *TINY, *EIGHT, "OUTPUT_DIR", str(out)])
    assert err.value.code == 0 and folder_hashes(out) == before
    assert last_line(capsys.readouterr().err) == (
        f"train_net: the run in {out} has finished (all 8 iterations were trained) and nothing "
        "is left to do: nothing was written; to train it longer, resume with a longer budget "
        "and SOLVER.BUDGET.ON_RESUME replan; to evaluate it again, use --eval-only"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "opts,message",
    [
        (["SOLVER.BUDGET.FRACTION", "0"], "SOLVER.BUDGET.FRACTION=0"),
        (["SOLVER.WARMUP_ITERS", "40"], "SOLVER.WARMUP_ITERS=40 is not shorter"),
        (["SOLVER.LR_SCHEDULER_NAME", "BudgetLinar"], "valid names: BudgetLinear"),
        (["DATASETS.TRAIN", "('nope',)"], "unknown dataset 'nope'"),
    ],
)
def test_bad_input_fails_in_one_line_before_training(toy_root, tmp_path, opts, message) -> None:
    with pytest.raises(SystemExit) as err:
        run(["--config-file", TOY_CONFIG, *opts, "OUTPUT_DIR", str(tmp_path / "out")])
    assert message in str(err.value.code) and "\n" not in str(err.value.code)
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_missing_dataset_files_name_detectron2_datasets(tmp_path, monkeypatch) -> None:
    from budgeted.detectron2 import register_toy_coco

    register_toy_coco(str(tmp_path / "empty"), replace=True)
    try:
        with pytest.raises(SystemExit, match="does not exist; set DETECTRON2_DATASETS"):
            run(["--config-file", TOY_CONFIG, "OUTPUT_DIR", str(tmp_path / "out")])
    finally:
        register_toy_coco(replace=True)


@pytest.mark.unit
def test_warmup_after_auto_scaling_is_checked_before_launch(toy_root, tmp_path) -> None:
    # toy 1 %: MAX_ITER 4, warmup 3; on 4 workers instead of 1: MAX_ITER 1, warmup 1
    with pytest.raises(SystemExit, match="after REFERENCE_WORLD_SIZE scaling to 4 workers"):
        run(["--config-file", "configs/detectron2/toy/mask_rcnn_toy_budget1.yaml", "--num-gpus",
             "4", "SOLVER.REFERENCE_WORLD_SIZE", "1",
             "OUTPUT_DIR", str(tmp_path / "o")])  # fmt: skip


@pytest.mark.integration
def test_eval_only_in_a_runs_folder_keeps_the_runs_config(toy_run, tmp_path) -> None:
    out = tmp_path / "run"
    shutil.copytree(toy_run, out)
    recorded = (out / "config.yaml").read_bytes()
    assert max_iter(out) == 8
    run(["--config-file", TOY_CONFIG, "--eval-only", *TINY, "SOLVER.BUDGET.FRACTION", "0.03",
         "MODEL.WEIGHTS", str(out / "model_final.pth"), "OUTPUT_DIR", str(out)])  # fmt: skip
    assert (out / "config.yaml").read_bytes() == recorded  # the run's record, as it was
    assert max_iter(out) == 8
    assert "MAX_ITER: 12" in (out / "config.eval.yaml").read_text()  # what was evaluated with

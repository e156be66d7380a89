"""The sweep's arms (issue 43): ``--schedules`` with schedule parameters, ``schedulefree`` and
``subset``, the ``--optimizers`` axis, ``--lrs-for`` and ``--validate-every``, planned into each
tool's command; every refusal one line, nothing written. The cells run in
test_sweep_best_checkpoint.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from budgeted.experiments.families import family
from budgeted.experiments.sweep import main
from budgeted.experiments.sweep.plan import Plan, committed_configs
from budgeted.experiments.sweep.records import cell_key, cell_name, read_sweep
from budgeted.experiments.sweep.slurm import cell_jobs
from budgeted.experiments.sweep.slurm_options import SlurmOptions

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "python examples/digits_budget.py"
EVERY_ARM = ["linear", "wsd:decay=sqrt", "sgdr:restarts=2", "schedulefree", "subset"]


def planned(capsys: pytest.CaptureFixture, *args: str) -> dict[str, str]:
    """cell -> its command line, from ``budgeted-sweep ... --dry-run`` in this process."""
    assert main([*args, "--dry-run"]) == 0, capsys.readouterr().err
    lines = capsys.readouterr().out.splitlines()
    return dict(line.split(": ", 1) for line in lines if not line.startswith("["))


def test_every_arm_of_the_digits_script_is_its_flags(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "s"
    cells = planned(capsys, "pytorch", "--task", "digits", "--schedules", *EVERY_ARM,
                    "--optimizers", "sgd", "adamw", "--lrs", "0.1", "--lrs-for", "adamw=0.001",
                    "--budgets", "0.01", "--validate-every", "5", "--out", str(out))  # fmt: skip
    tail = "--budget 0.01 --full-iters 1720 --out"

    def line(name: str, flags: str, lr: str, schedule: str) -> str:
        return f"{SCRIPT} {flags} --validate-every 5 --lr {lr} " + tail.replace(
            "--full-iters", f"--schedule {schedule} --full-iters"
        ) + f" {out}/{name}"  # fmt: skip

    expected = {}
    for optimizer, lr in (("sgd", "0.1"), ("adamw", "0.001")):
        for arm, schedule, more in (
            ("linear", "linear", ""), ("wsd-decay-sqrt", "wsd:decay=sqrt", ""),
            ("sgdr-restarts-2", "sgdr:restarts=2", ""),
            ("schedulefree", "constant", " --schedule-free"),
            ("subset", "step", " --subset 0.01"),
        ):  # fmt: skip
            name = f"{arm}-{optimizer}_budget1_lr{lr}"
            expected[name] = line(name, f"--optimizer {optimizer}{more}", lr, schedule)
    assert cells == expected
    assert not out.exists()


def test_every_arm_of_an_mmengine_family_is_its_config_keys_and_tool_flags(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "s"
    cells = planned(capsys, "mmpretrain", "--task", "digits", "--schedules", *EVERY_ARM,
                    "step:gamma=0.5", "--optimizers", "adamw", "--budgets", "0.01",
                    "--validate-every", "5", "--out", str(out))  # fmt: skip
    config = "configs/mmpretrain/digits/lenet5_digits_budget1"
    head = "budgeted-train-seg"
    flags = "--optimizer adamw"
    wsd = "param_scheduler.0.type=BudgetWSDLR param_scheduler.0.decay=sqrt"
    sgdr = "param_scheduler.0.type=BudgetSGDRLR param_scheduler.0.restarts=2"

    def line(name: str, suffix: str, more: str, options: str = "") -> str:
        cfg = f" --cfg-options {options}" if options else ""
        return (f"{head} {config}{suffix}.py --work-dir {out}/{name}_budget1 {flags}{more} "
                f"--validate-every 5{cfg}")  # fmt: skip

    assert cells == {
        "linear-adamw_budget1": line("linear-adamw", "", ""),
        "wsd-decay-sqrt-adamw_budget1": line("wsd-decay-sqrt-adamw", "", "", wsd),
        "sgdr-restarts-2-adamw_budget1": line("sgdr-restarts-2-adamw", "", "", sgdr),
        "schedulefree-adamw_budget1": line("schedulefree-adamw", "", " --schedule-free"),
        "subset-adamw_budget1": line("subset-adamw", "_step", " --subset 0.01"),
        "step-gamma-0.5-adamw_budget1": line(
            "step-gamma-0.5-adamw", "_step", "", "param_scheduler.0.gamma=0.5"
        ),
    }


def test_detectron2_arms_are_its_budget_keys_and_its_eval_period(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    out = tmp_path / "s"
    cells = planned(capsys, "detectron2", "--toy", "--schedules", "wsd:decay=sqrt,cooldown=0.1",
                    "--budgets", "0.1", "--validate-every", "20", "--out", str(out))  # fmt: skip
    (name, command), = cells.items()  # fmt: skip
    assert name == "wsd-cooldown-0.1-decay-sqrt_budget10"  # its one text: keys in wsd's order
    assert command.endswith(
        "mask_rcnn_toy_budget10.yaml SOLVER.LR_SCHEDULER_NAME BudgetWSD SOLVER.BUDGET.WSD_COOLDOWN "
        f"0.1 SOLVER.BUDGET.WSD_DECAY sqrt TEST.EVAL_PERIOD 20 OUTPUT_DIR {out}/{name}"
    )


def test_lrs_for_takes_a_cells_text_then_its_arm_then_its_optimizer(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    cells = planned(capsys, "pytorch", "--task", "digits", "--schedules", "linear", "schedulefree",
                    "--optimizers", "sgd", "adamw", "--budgets", "0.01", "--lrs", "0.1",
                    "--lrs-for", "adamw=0.001,0.003", "--lrs-for", "schedulefree=1",
                    "--lrs-for", "schedulefree@adamw=0.01",
                    "--out", str(tmp_path / "s"))  # fmt: skip
    assert list(cells) == [
        "linear-sgd_budget1_lr0.1", "linear-adamw_budget1_lr0.001", "linear-adamw_budget1_lr0.003",
        "schedulefree-sgd_budget1_lr1", "schedulefree-adamw_budget1_lr0.01",
    ]  # fmt: skip


REFUSALS = [
    (["pytorch", "--task", "digits", "--schedules", "wsd:decay=cubic"],
     "wsd schedule: decay='cubic' is invalid; allowed: linear, sqrt, cosine"),
    (["pytorch", "--task", "digits", "--schedules", "wsd:shape=sqrt"],
     "schedule 'wsd' has no parameter 'shape'; it takes: cooldown, decay"),
    (["pytorch", "--task", "digits", "--schedules", "wsd:decay"],
     "schedule 'wsd:decay' is invalid; allowed: NAME[:KEY=VALUE[,KEY=VALUE...]], e.g. "
     "wsd:decay=sqrt"),
    (["pytorch", "--task", "digits", "--schedules", "cosine/../x"],
     "schedule 'cosine/../x' is invalid; allowed: NAME[:KEY=VALUE,...][@OPTIMIZER], "
     "schedulefree or subset, e.g. wsd:decay=sqrt"),
    (["pytorch", "--task", "digits", "--schedules", "subset:fraction=0.5"],
     "arm 'subset:fraction=0.5' takes no parameters; allowed: subset"),
    (["pytorch", "--task", "digits", "--schedules", "linear@sgd"],
     "--schedules 'linear@sgd' names an optimizer; allowed: the arm alone with --optimizers sgd"),
    (["detectron2", "--toy", "--schedules", "schedulefree"],
     "schedulefree (schedulefree) is refused for detectron2 families: its trainer builds the "
     "optimizer and the training set itself; allowed: plain-PyTorch scripts and MMEngine "
     "codebases (mmseg, mmdet, mmpretrain, mmaction, pytorch, mmengine)"),
    (["detectron2", "--toy", "--schedules", "linear", "subset"],
     "subset (subset) is refused for detectron2 families"),
    (["detectron2", "--toy", "--schedules", "linear", "--optimizers", "adamw"],
     "--optimizers (linear@adamw) is refused for detectron2 families"),
    (["pytorch", "--task", "digits", "--optimizers", "sgd", "lion"],
     "--optimizers 'lion' is not a known optimizer; allowed: sgd, adamw, amsgrad"),
    (["pytorch", "--task", "digits", "--schedules", "schedulefree", "--optimizers", "amsgrad"],
     "'schedulefree@amsgrad': optimizer 'amsgrad' has no schedule-free form; allowed: "
     "schedulefree@sgd, schedulefree@adamw"),
    (["pytorch", "--task", "digits", "--lrs-for", "adamw=0.001"],
     "--lrs-for 'adamw' is no cell, arm or optimizer of the grid; allowed: linear, step"),
    (["pytorch", "--task", "digits", "--lrs-for", "linear"],
     "--lrs-for 'linear' is invalid; allowed: WORD=LR[,LR...], e.g. adamw=0.001,0.003"),
    (["pytorch", "--task", "digits", "--lrs-for", "linear=-1"],
     "--lrs value '-1' is not a positive number"),
    (["pytorch", "--task", "digits", "--validate-every", "0"],
     "--validate-every '0' is invalid; allowed: a whole number >= 1"),
    (["pytorch", "--task", "digits", "--schedules", "subset", "--", "--subset", "0.5"],
     "override '--subset' after -- is set by the sweep per cell"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), REFUSALS, ids=lambda v: " ".join(v)[:60])
def test_a_bad_arm_is_one_line_and_nothing_is_written(args, message, tmp_path, capsys) -> None:
    out = tmp_path / "s"
    assert main([*args, "--out", str(out), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sweep: error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_record_keeps_the_arm_text_and_refuses_any_other(tmp_path) -> None:
    key = cell_key("wsd:decay=sqrt@adamw", 0.01, 0.001, None)
    assert key.schedule == "wsd:decay=sqrt@adamw"
    assert cell_name(*key) == "wsd-decay-sqrt-adamw_budget1_lr0.001"
    for bad, problem in (
        ("wsd:decay=cubic", "schedule 'wsd:decay=cubic': wsd schedule: decay='cubic' is invalid"),
        ("schedulefree@amsgrad", "schedule 'schedulefree@amsgrad': 'schedulefree@amsgrad': "),
        ("../x", "schedule '../x' is not a registered schedule ("),
    ):
        with pytest.raises(ValueError) as err:
            cell_key(bad, 0.01)
        assert str(err.value).startswith(problem) and "\n" not in str(err.value)
    out = tmp_path / "s"  # a sweep folder of arm cells, as a sweep writes it, read back
    (out / "subset-adamw_budget1").mkdir(parents=True)
    (out / "sweep.json").write_text(json.dumps({
        "framework": "pytorch", "family": "examples/digits_budget.py",
        "cells": [["subset@adamw", 0.01], ["wsd:decay=sqrt", 0.01]],
    }))  # fmt: skip
    (out / "subset-adamw_budget1/sweep_cell.json").write_text(
        json.dumps({"schedule": "subset@adamw", "budget": 0.01, "framework": "pytorch"})
    )
    found = read_sweep(out)
    assert [(c.key.schedule, c.run_dir.name) for c in found.cells] == [
        ("subset@adamw", "subset-adamw_budget1"), ("wsd:decay=sqrt", "wsd-decay-sqrt_budget1")
    ]  # fmt: skip


def test_a_slurm_job_of_an_arm_trains_what_the_local_cell_trains(tmp_path) -> None:
    fam = family("mmpretrain", False, "digits")
    configs = committed_configs(fam)
    plans = [
        Plan(fam, t, 0.01, None, None, tmp_path / t, {"validate_every": 5}, [], "run")
        for t in ("sgdr:restarts=2@adamw", "subset")
    ]  # fmt: skip
    sgdr, subset = (j.command(["node0"], 0) for j in cell_jobs(plans, configs, None, [], {},
                                                                SlurmOptions()))  # fmt: skip
    assert sgdr[sgdr.index("--work-dir") + 2 :] == [
        "--optimizer", "adamw", "--validate-every", "5", "--cfg-options",
        "param_scheduler.0.type=BudgetSGDRLR", "param_scheduler.0.restarts=2",
    ]  # fmt: skip
    assert subset[3] == str(configs["step", 0.01])
    assert subset[subset.index("--work-dir") + 2 :] == ["--subset", "0.01", "--validate-every", "5"]


def test_an_own_lazyconfig_cell_takes_the_arm_as_its_schedule(tmp_path, capsys) -> None:
    from detectron2.config import LazyConfig, instantiate

    from budgeted.detectron2.lazy import apply_budget

    config = REPO / "configs/detectron2/lazy/mask_rcnn_toy_budget10.py"
    cells = planned(capsys, "--config", str(config), "--schedules", "wsd:decay=sqrt",
                    "--budgets", "0.5", "--validate-every", "4",
                    "--out", str(tmp_path / "s"))  # fmt: skip
    (command,) = cells.values()
    assert "--budget 0.5 --schedule wsd:decay=sqrt --full-iters" in command
    assert command.endswith(
        f"train.eval_period=4 train.output_dir={tmp_path}/s/wsd-decay-sqrt_budget50"
    )
    cfg = LazyConfig.load(str(config))  # what the tool does with it
    apply_budget(cfg, 0.5, "wsd:decay=sqrt", 40)
    budget = instantiate(cfg.lr_multiplier).budget
    assert (budget.schedule, budget.params) == ("wsd", {"decay": "sqrt"})


def test_an_own_mmengine_config_cell_takes_the_schedule_and_its_parameters(tmp_path, capsys):
    from own_configs import digits_config

    from budgeted.toys.digits import write_digits

    write_digits(tmp_path / "data")
    config = digits_config(tmp_path, tmp_path / "data")
    cells = planned(capsys, "--config", str(config), "--schedules", "wsd:decay=sqrt",
                    "schedulefree", "--optimizers", "adamw", "--budgets", "0.5",
                    "--out", str(tmp_path / "s"))  # fmt: skip
    wsd, free = cells["wsd-decay-sqrt-adamw_budget50"], cells["schedulefree-adamw_budget50"]
    assert "--budget 0.5 --schedule wsd --full-iters" in wsd
    assert wsd.endswith("--optimizer adamw --cfg-options param_scheduler.0.decay=sqrt")
    assert "--schedule " not in free  # --schedule-free is the cell's LR schedule
    assert free.endswith("--optimizer adamw --schedule-free")

"""Any registered schedule in a sweep of a config family (issue 33, item 2): a schedule the family
ships configs of trains from them (the step-BAC baselines, MMSegmentation's stock ``PolyLR``);
any other registered one trains from the family's linear config of the budget with the adapter's
scheduler name set (``SOLVER.LR_SCHEDULER_NAME BudgetRex``, ``param_scheduler.0.type=BudgetRexLR``),
and its LRs are the core's at every iteration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import budgeted
from budgeted.experiments.families import FAMILIES, MASK_RCNN_TOY
from budgeted.experiments.sweep import main
from budgeted.experiments.sweep.plan import cell_source, committed_configs
from budgeted.schedules import schedule_info, schedule_names
from budgeted.toys.digits import write_digits

REPO = Path(__file__).resolve().parents[2]
CONFIG_FAMILIES = [f for f in FAMILIES.values() if not f.script]


def planned(capsys: pytest.CaptureFixture, *args: str) -> dict[str, str]:
    """cell -> its command line, from ``budgeted-sweep ... --dry-run`` run in this process."""
    assert main([*args, "--dry-run"]) == 0, capsys.readouterr().err
    lines = capsys.readouterr().out.splitlines()
    return dict(line.split(": ", 1) for line in lines if not line.startswith("["))


@pytest.mark.unit
@pytest.mark.parametrize("fam", CONFIG_FAMILIES, ids=lambda f: f.name)
def test_every_registered_schedule_has_a_config_and_a_scheduler_name(fam) -> None:
    configs = committed_configs(fam)
    for schedule in schedule_names():
        for budget in fam.fractions:
            config, switch = cell_source(fam, configs, schedule, budget)
            if schedule in fam.schedules:  # shipped: its own file, nothing switched
                assert (config, switch) == (configs[schedule, budget], [])
                continue
            assert config == configs["linear", budget]
            name = f"Budget{schedule_info(schedule).label}"
            assert switch == (
                ["SOLVER.LR_SCHEDULER_NAME", name]
                if fam.framework == "detectron2"
                else [f"param_scheduler.0.type={name}LR"]
            )


@pytest.mark.unit
def test_the_sweep_trains_unshipped_schedules_from_the_linear_configs(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(REPO)
    cells = planned(capsys, "mmseg", "--toy", "--schedules", "rex", "poly", "step", "--budgets",
                    "0.05", "--out", str(tmp_path / "s"))  # fmt: skip
    toy = "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget5"
    assert cells["rex_budget5"].startswith(f"budgeted-train-seg {toy}.py --work-dir ")
    assert cells["rex_budget5"].endswith(" param_scheduler.0.type=BudgetRexLR")
    assert cells["poly_budget5"].startswith(f"budgeted-train-seg {toy}_poly.py ")  # stock PolyLR
    assert cells["step_budget5"].startswith(f"budgeted-train-seg {toy}_step.py ")
    assert "param_scheduler" not in cells["poly_budget5"] + cells["step_budget5"]

    cells = planned(capsys, "detectron2", "--toy", "--schedules", "cosine", "--budgets", "0.1",
                    "--lrs", "0.02", "--out", str(tmp_path / "d"))  # fmt: skip
    assert cells["cosine_budget10_lr0.02"].split("budgeted-train-net ", 1)[1] == (
        "--config-file configs/detectron2/toy/mask_rcnn_toy_budget10.yaml SOLVER.LR_SCHEDULER_NAME"
        f" BudgetCosine SOLVER.BASE_LR 0.02 OUTPUT_DIR {tmp_path}/d/cosine_budget10_lr0.02"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--schedules", "nosuch"],
            "schedule 'nosuch' is not a registered schedule or arm; allowed: linear, cosine, poly, "
            "htd, ",
        ),
        (
            ["--schedules", "rex", "--", "param_scheduler.0.type=PolyLR"],
            "override 'param_scheduler.0.type=PolyLR' after -- would replace the scheduler of "
            "--schedules rex (trained from the linear configs); allowed: no "
            "param_scheduler.0.type override, or --schedules linear poly step only",
        ),
    ],
)
def test_a_schedule_the_sweep_cannot_train_is_one_line(args, message, tmp_path, capsys) -> None:
    out = tmp_path / "s"
    assert main(["mmseg", "--toy", "--out", str(out), "--dry-run", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sweep: error: {message}") and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.unit
def test_the_detectron2_overrides_build_the_schedule_at_every_iteration(capsys, tmp_path) -> None:
    """The cell's command-line overrides, merged as ``budgeted-train-net`` merges them, build
    the core's REX with the config's warmup and budget."""
    from detectron2.config import get_cfg

    import budgeted.detectron2 as bd2

    configs = committed_configs(MASK_RCNN_TOY)
    config, switch = cell_source(MASK_RCNN_TOY, configs, "rex", 0.1)
    cfg = get_cfg()
    bd2.add_budget_config(cfg)
    cfg.merge_from_file(str(config))
    cfg.merge_from_list([*switch, "SOLVER.BASE_LR", "0.5"])
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
    scheduler = bd2.build_lr_scheduler(cfg, optimizer)
    iters, warmup = MASK_RCNN_TOY.iters(0.1), MASK_RCNN_TOY.warmup
    assert (cfg.SOLVER.MAX_ITER, cfg.SOLVER.WARMUP_ITERS) == (iters, warmup) == (40, 3)
    lrs = []
    for _ in range(iters):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    expected = [
        0.5 * budgeted.lr_multiplier("rex", it, iters, warmup_iters=warmup, warmup_factor=0.001)
        for it in range(iters)
    ]
    assert lrs == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.e2e
def test_an_mmpretrain_rex_cell_trains_at_the_cores_lrs(tmp_path) -> None:
    """``budgeted-sweep mmpretrain --task digits --schedules rex``: the real cell (34
    iterations of LeNet-5 through ``budgeted-train-seg``) logs the core's REX LR every
    iteration and its accuracy, and the report reads it."""
    write_digits(tmp_path / "datasets/digits")  # where the configs' data_root points
    out = tmp_path / "sweep"
    sweep = [sys.executable, "-m", "budgeted.experiments.sweep", "mmpretrain", "--task",
             "digits", "--schedules", "rex", "--budgets", "0.02", "--lrs", "0.2", "--out",
             str(out), "--", "default_hooks.logger.interval=1"]  # fmt: skip
    run = subprocess.run(sweep, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    run_dir = out / "rex_budget2_lr0.2"
    (scalars,) = run_dir.glob("*/vis_data/scalars.json")
    records = [json.loads(line) for line in scalars.read_text().splitlines()]
    lrs = {r["iter"]: r["lr"] for r in records if "lr" in r}
    expected = {
        it + 1: 0.2 * budgeted.lr_multiplier("rex", it, 34, warmup_iters=0) for it in range(34)
    }
    assert lrs == pytest.approx(expected, rel=1e-12, abs=1e-15)
    record = json.loads((run_dir / "sweep_cell.json").read_text())
    assert record["status"] == "finished" and 0 <= record["metrics"]["top-1"] <= 100

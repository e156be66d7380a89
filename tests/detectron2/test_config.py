"""budgeted.detectron2.config: budget keys, load_config, the committed yaml files."""

from __future__ import annotations

import importlib.util
from fractions import Fraction
from pathlib import Path

import pytest
import torch
import yaml
from d2_testutils import REPO
from detectron2.config import get_cfg

from budgeted.detectron2 import add_budget_config, build_lr_scheduler, check_max_iter, load_config
from budgeted.detectron2.config import split_overrides
from budgeted.experiments.families import MASK_RCNN, MASK_RCNN_TOY
from budgeted.schedules import BUDGET_FRACTIONS, schedule_params

pytestmark = pytest.mark.unit

CONFIGS = REPO / "configs" / "detectron2"
SHIPPED = sorted(p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*.yaml"))


def generator():
    """tools/gen_detectron2_configs.py as a module (run in this process: no second import of
    Detectron2)."""
    spec = importlib.util.spec_from_file_location(
        "gen_detectron2_configs", REPO / "tools" / "gen_detectron2_configs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_add_budget_config_defaults_come_from_the_core() -> None:
    cfg = add_budget_config(get_cfg())
    b = cfg.SOLVER.BUDGET
    assert schedule_params("poly")["power"] == b.POLY_POWER
    assert (
        schedule_params("htd")["lower"],
        schedule_params("htd")["upper"],
    ) == (b.HTD_LOWER, b.HTD_UPPER)
    assert tuple(schedule_params("step")["milestones"]) == b.STEP_MILESTONES
    assert schedule_params("exp")["end_factor"] == b.EXP_END_FACTOR
    assert (b.FULL_ITERS, b.FRACTION, b.IMS_PER_BATCH) == (0, 1.0, 0)
    assert add_budget_config(cfg) is cfg  # idempotent
    assert cfg.SOLVER.MAX_ITER == get_cfg().SOLVER.MAX_ITER  # existing keys untouched


@pytest.mark.parametrize("fraction", BUDGET_FRACTIONS)
@pytest.mark.parametrize("suffix,scheduler", [("", "BudgetLinear"), ("_step", "BudgetStep")])
def test_committed_configs_load_with_the_right_budget(fraction, suffix, scheduler) -> None:
    pct = round(fraction * 100)
    cfg = load_config(str(CONFIGS / f"mask_rcnn_budget{pct}{suffix}.yaml"))
    assert round(fraction * 90000) == cfg.SOLVER.MAX_ITER
    assert scheduler == cfg.SOLVER.LR_SCHEDULER_NAME
    assert cfg.SOLVER.WARMUP_ITERS == 500
    assert cfg.TEST.EVAL_PERIOD == 0
    # the model zoo's Mask R-CNN R50-FPN 1x, resolved from the installed Detectron2
    assert cfg.MODEL.MASK_ON and cfg.MODEL.RESNETS.DEPTH == 50
    assert cfg.MODEL.META_ARCHITECTURE == "GeneralizedRCNN"
    assert cfg.SOLVER.IMS_PER_BATCH == 16 and cfg.SOLVER.BASE_LR == 0.02
    toy = load_config(str(CONFIGS / "toy" / f"mask_rcnn_toy_budget{pct}{suffix}.yaml"))
    assert round(fraction * 400) == toy.SOLVER.MAX_ITER
    assert toy.SOLVER.WARMUP_ITERS < toy.SOLVER.MAX_ITER
    assert toy.MODEL.RESNETS.NORM == "BN" and toy.MODEL.BACKBONE.FREEZE_AT == 0
    if suffix == "_step":  # the family's milestones, stated in the file
        assert MASK_RCNN.step_milestones == cfg.SOLVER.BUDGET.STEP_MILESTONES
        assert MASK_RCNN_TOY.step_milestones == toy.SOLVER.BUDGET.STEP_MILESTONES


@pytest.mark.parametrize("rel", SHIPPED)
def test_every_shipped_yaml_loads_the_same_in_any_detectron2_trainer(rel: str) -> None:
    path = CONFIGS / rel
    assert "model-zoo://" not in path.read_text()
    stock = add_budget_config(get_cfg())  # what the docs tell any trainer to do
    stock.merge_from_file(str(path))
    ours = load_config(str(path))
    assert stock.dump() == ours.dump()  # the whole config: MAX_ITER, warmup, scheduler, ...
    if stock.SOLVER.BUDGET.FULL_ITERS > 0:
        assert (
            round(stock.SOLVER.BUDGET.FRACTION * stock.SOLVER.BUDGET.FULL_ITERS)
            == stock.SOLVER.MAX_ITER
        )
    for fam in (MASK_RCNN, MASK_RCNN_TOY):
        parsed = fam.parse(rel)
        if parsed and fam.filename(*parsed) == f"detectron2/{rel}":  # a budget file
            assert fam.iters(parsed[0]) == stock.SOLVER.MAX_ITER
            assert "MAX_ITER" in yaml.safe_load(path.read_text())["SOLVER"]  # stated in it
    if stock.SOLVER.LR_SCHEDULER_NAME.startswith("Budget"):
        states = [
            build_lr_scheduler(
                cfg, torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1)
            ).budget.state()
            for cfg in (stock, ours)
        ]
        assert states[0] == states[1]
        assert states[0]["total"] == stock.SOLVER.MAX_ITER
        assert states[0]["warmup"] == stock.SOLVER.WARMUP_ITERS


def test_the_stock_route_test_covers_every_generated_yaml() -> None:
    gen = generator()
    assert set(SHIPPED) == set(gen.files())
    assert {"_model_zoo/Base-RCNN-FPN.yaml", "Base-Budget-Mask-RCNN-R50-FPN.yaml"} <= set(SHIPPED)


def test_generated_configs_match_their_source(capsys) -> None:
    assert generator().main(["--check"]) == 0, capsys.readouterr().out


def test_generator_check_detects_stale_missing_and_stray_files(tmp_path: Path, capsys) -> None:
    gen = generator()
    assert gen.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "_model_zoo/COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml").is_file()
    assert gen.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "mask_rcnn_budget10.yaml").write_text("SOLVER: {}\n")
    (tmp_path / "toy" / "mask_rcnn_toy_budget5.yaml").unlink()
    (tmp_path / "toy" / "mask_rcnn_toy_budget7.yaml").write_text("SOLVER: {}\n")
    capsys.readouterr()
    assert gen.main(["--out", str(tmp_path), "--check"]) == 1
    out = capsys.readouterr().out
    stale, stray = out.splitlines()
    assert "mask_rcnn_budget10.yaml" in stale and "toy/mask_rcnn_toy_budget5.yaml" in stale
    assert stray.startswith("stray configs") and stray.endswith(": toy/mask_rcnn_toy_budget7.yaml")
    assert gen.main(["--out", str(tmp_path), "--prune"]) == 0
    assert gen.main(["--out", str(tmp_path), "--check"]) == 0


def test_overrides_restate_the_budget() -> None:
    path = str(CONFIGS / "mask_rcnn_budget10.yaml")
    assert load_config(path, ["SOLVER.BUDGET.FRACTION", "0.25"]).SOLVER.MAX_ITER == 22500
    cfg = load_config(path, ["SOLVER.MAX_ITER", "4500"])
    assert cfg.SOLVER.MAX_ITER == 4500 and pytest.approx(0.05) == cfg.SOLVER.BUDGET.FRACTION
    # the budget is images: half the batch, twice the iterations (FULL_ITERS counted at 16)
    assert load_config(path, ["SOLVER.IMS_PER_BATCH", "8"]).SOLVER.MAX_ITER == 18000
    # an explicit MAX_ITER at another batch: the restated FRACTION states that MAX_ITER again,
    # so the scheduler builder (which re-checks it) trains it
    for batch, max_iter in (("2", "1001"), ("3", "7"), ("1", "81")):
        cfg = load_config(path, ["SOLVER.IMS_PER_BATCH", batch, "SOLVER.MAX_ITER", max_iter])
        check_max_iter(cfg)
        assert int(max_iter) == cfg.SOLVER.MAX_ITER


def test_overrides_as_key_value_pairs_or_key_equals_value() -> None:
    opts = ["SOLVER.LR_SCHEDULER_NAME=BudgetCosine", "SOLVER.BUDGET.FRACTION", "0.25",
            "OUTPUT_DIR=./out/a=b", "MODEL.WEIGHTS", "x=y.pth"]  # fmt: skip
    assert split_overrides(opts) == [
        "SOLVER.LR_SCHEDULER_NAME", "BudgetCosine", "SOLVER.BUDGET.FRACTION", "0.25",
        "OUTPUT_DIR", "./out/a=b", "MODEL.WEIGHTS", "x=y.pth",
    ]  # fmt: skip
    assert split_overrides(split_overrides(opts)) == split_overrides(opts)
    cfg = load_config("mask_rcnn_budget10.yaml", opts)  # a bare name, too
    assert (cfg.SOLVER.LR_SCHEDULER_NAME, cfg.SOLVER.MAX_ITER) == ("BudgetCosine", 22500)
    assert (cfg.OUTPUT_DIR, cfg.MODEL.WEIGHTS) == ("./out/a=b", "x=y.pth")


def test_a_users_file_on_the_model_zoo_still_loads(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        '_BASE_: "model-zoo://COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"\n'
        "SOLVER:\n  BUDGET:\n    FULL_ITERS: 90000\n    FRACTION: 0.1\n"
    )
    cfg = load_config(str(mine))
    assert cfg.SOLVER.MAX_ITER == 9000 and cfg.MODEL.MASK_ON and cfg.MODEL.RESNETS.DEPTH == 50
    # a file below one of ours that restates the fraction restates MAX_ITER
    below = tmp_path / "below.yaml"
    below.write_text(
        f'_BASE_: "{CONFIGS / "mask_rcnn_budget10.yaml"}"\nSOLVER:\n  BUDGET:\n    FRACTION: 0.5\n'
    )
    assert load_config(str(below)).SOLVER.MAX_ITER == 45000


@pytest.mark.parametrize(
    "opts,message",
    [
        (["SOLVER.BUDGET.FRACTION", "0"], "SOLVER.BUDGET.FRACTION=0"),
        (["SOLVER.BUDGET.FRACTION", "-0.1"], "allowed: a number > 0"),
        (["SOLVER.BUDGET.FULL_ITERS", "-5"], "SOLVER.BUDGET.FULL_ITERS=-5"),
        (["SOLVER.BUDGET.NOPE", "1"], "SOLVER.BUDGET.NOPE"),
        (["SOLVER.MAX_ITER", "100", "SOLVER.BUDGET.FRACTION", "0.5"], "state the budget once"),
        (["SOLVER.MAX_ITER"], "KEY VALUE pairs or KEY=VALUE; 'SOLVER.MAX_ITER' has no value"),
        (["SOLVER.BUDGET.IMS_PER_BATCH", "-2"], "SOLVER.BUDGET.IMS_PER_BATCH=-2 is invalid"),
        (["SOLVER.BUDGET.WRITER_PERIOD", "0"], "SOLVER.BUDGET.WRITER_PERIOD=0 is invalid; allowed"),
        (["SOLVER.BUDGET.WRITER_PERIOD", "-1"], "SOLVER.BUDGET.WRITER_PERIOD=-1 is invalid"),
        (["SOLVER.BUDGET.SAVE_AT", "(-1,)"], r"SOLVER.BUDGET.SAVE_AT=\(-1,\) is invalid; allowed"),
        (["SOLVER.IMS_PER_BATCH", "0"], "SOLVER.IMS_PER_BATCH=0 is invalid; allowed: a whole"),
    ],
)
def test_bad_budget_values_fail_with_one_line(opts, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        load_config(str(CONFIGS / "mask_rcnn_budget10.yaml"), opts)
    assert "\n" not in str(err.value)


def test_a_file_stating_max_iter_against_its_fraction_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f'_BASE_: "{CONFIGS / "mask_rcnn_budget10.yaml"}"\nSOLVER:\n  MAX_ITER: 1234\n')
    with pytest.raises(ValueError, match="MAX_ITER=1234 but"):
        load_config(str(bad))
    (tmp_path / "ok.yaml").write_text(
        f'_BASE_: "{CONFIGS / "mask_rcnn_budget10.yaml"}"\nSOLVER:\n  MAX_ITER: 1234\n'
        "  BUDGET:\n    FULL_ITERS: 0\n    FRACTION: 1.0\n"
    )
    assert load_config(str(tmp_path / "ok.yaml")).SOLVER.MAX_ITER == 1234


def test_missing_files_and_unknown_zoo_configs_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        load_config(str(tmp_path / "nope.yaml"))
    # toy/...yaml and lazy/...py share the stem: the yaml (the LazyConfig is the LazyConfig tool's)
    assert load_config("mask_rcnn_toy_budget10").SOLVER.MAX_ITER == 40
    with pytest.raises(ValueError, match="is a LazyConfig"):
        load_config("mask_rcnn_R_50_FPN_budget10.py")
    zoo = tmp_path / "zoo.yaml"
    zoo.write_text('_BASE_: "model-zoo://COCO-InstanceSegmentation/nope.yaml"\n')
    with pytest.raises(ValueError, match="not in the installed Detectron2 model zoo"):
        load_config(str(zoo))


@pytest.mark.parametrize(("fraction", "full"), [(0.29, 100), (0.57, 100), (0.009, 90000)])
def test_a_fraction_whose_product_is_inexact_gives_the_nearest_iteration(fraction, full) -> None:
    """0.29 * 100 is 28.999999999999996 in floating point: the budget is 29 iterations, here as
    in budgeted.budget_iters, and the scheduler built from it agrees (issue 35)."""
    opts = ["SOLVER.BUDGET.FULL_ITERS", str(full), "SOLVER.BUDGET.FRACTION", str(fraction),
            "SOLVER.WARMUP_ITERS", "1"]  # fmt: skip
    cfg = load_config("mask_rcnn_toy_budget10.yaml", opts)
    expected = round(Fraction(str(fraction)) * full)
    assert fraction * full != expected
    max_iter = cfg.SOLVER.MAX_ITER
    assert max_iter == expected
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    assert build_lr_scheduler(cfg, optimizer).budget.total == expected

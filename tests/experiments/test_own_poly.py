"""A ``poly`` cell of one's own config (issue 52, a confusion): it was the built-in
``BudgetPolyLR(power=0.9)`` to zero whatever the config's ``PolyLR`` said, silently, while a
``step`` cell converts the config's own step schedule. It is the budget-aware form of the
config's own poly: its ``PolyLR`` power (MMEngine), its ``PolynomialDecayParamScheduler`` power
(a Detectron2 LazyConfig); a ``PolyLR`` ``eta_min`` it does not keep (the cells decay to 0, as
the paper's schedules do) is said in one line of the plan."""

from __future__ import annotations

import shlex

import pytest
from own_configs import STOCK_SCHEDULE, fcn_config
from run_folders import call_tool

from budgeted import sweep

POLY = STOCK_SCHEDULE.replace("power=0.9", "power=2.0")
"""The stock schedule (LinearLR warmup 4 at 0.01, then PolyLR to eta_min 1e-4) at power 2."""
NOTE = (
    "[sweep] note: a poly cell keeps your PolyLR power 2 but not eta_min=0.0001: it decays to 0, "
    "as the paper's budget schedules do"
)


@pytest.mark.unit
def test_a_poly_cell_of_an_own_mmengine_config_trains_its_power(tmp_path, capsys, monkeypatch):
    """The cell's command, as the sweep plans it, builds (``budgeted-train-seg``'s preflight)
    a ``BudgetPolyLR`` of the config's power 2 with its warmup; the plan says once that its
    ``eta_min`` is not kept, and says nothing where no poly cell is planned."""
    from budgeted.mmengine import cli
    from budgeted.mmengine.preflight import preflight

    root = tmp_path / "cityscapes"  # a stand-in: the preflight checks its folders hold files
    for folder in ("leftImg8bit/train", "gtFine/train", "leftImg8bit/val", "gtFine/val"):
        (root / folder).mkdir(parents=True)
        (root / folder / "x.png").write_bytes(b"")
    config = fcn_config(tmp_path, root, POLY)
    config.write_text(config.read_text().replace("max_iters=40,", "max_iters=400,"))
    monkeypatch.chdir(tmp_path)  # the plan shows paths relative to it
    argv = ["--config", str(config), "--budgets", "0.1", "0.25", "--out", "out", "--dry-run"]
    code, printed, err = call_tool(sweep.main, [*argv, "--schedules", "poly", "linear"], capsys)
    assert (code, err) == (0, ""), err
    lines = printed.splitlines()
    assert lines[0] == NOTE and printed.count("[sweep] note:") == 1, printed
    (command,) = [line.split(": ", 1)[1] for line in lines if line.startswith("poly_budget10: ")]
    tool, *cell = shlex.split(command)
    assert tool == "budgeted-train-seg"
    (entry,) = preflight(cli.parse_args(cell)).param_scheduler
    assert (entry["type"], entry["power"]) == ("BudgetPolyLR", 2.0)
    assert (entry["warmup_iters"], entry["warmup_factor"]) == (4, 0.01)
    code, printed, err = call_tool(sweep.main, argv, capsys)  # linear and step: no poly cell
    assert (code, err) == (0, "") and "note:" not in printed, printed


@pytest.mark.unit
def test_a_poly_cell_takes_mmengines_default_power_and_an_arms_own(tmp_path):
    """A ``PolyLR`` without ``power`` has MMEngine's default, 1.0 (not the core's 0.9); an arm's
    ``poly:power=P`` wins, as ``param_scheduler.0.power`` after the conversion."""
    from mmengine.config import Config

    from budgeted.mmengine.own_schedule import apply_own_schedule, poly_power

    cfg = Config.fromfile(str(fcn_config(tmp_path, tmp_path, POLY.replace("power=2.0, ", ""))))
    assert poly_power(cfg)[0] == {"power": 1.0}
    apply_own_schedule(cfg, "poly", 400)
    assert [(e["type"], e["power"]) for e in cfg.param_scheduler] == [("BudgetPolyLR", 1.0)]
    cfg.merge_from_dict({"param_scheduler.0.power": 3.0})
    assert cfg.param_scheduler[0]["power"] == 3.0


@pytest.mark.unit
def test_a_poly_cell_of_an_own_lazy_config_trains_its_power():
    """A LazyConfig's ``PolynomialDecayParamScheduler`` (which decays to 0, as the budget poly)
    under a ``WarmupParamScheduler``: the cell's ``BudgetLRMultiplier`` has its power."""
    pytest.importorskip("detectron2")
    from detectron2.config import LazyCall as L
    from detectron2.config import LazyConfig, instantiate
    from detectron2.solver import WarmupParamScheduler
    from fvcore.common.param_scheduler import PolynomialDecayParamScheduler
    from own_configs import TOY_LAZY

    from budgeted.detectron2.lazy import apply_budget

    cfg = LazyConfig.load(str(TOY_LAZY))
    cfg.train.max_iter = 400
    cfg.lr_multiplier = L(WarmupParamScheduler)(
        scheduler=L(PolynomialDecayParamScheduler)(base_value=1.0, power=2.0),
        warmup_length=40 / 400,
        warmup_factor=0.01,
    )
    apply_budget(cfg, 0.25, "poly")
    budget = instantiate(cfg.lr_multiplier).budget
    assert (budget.schedule, budget.params, budget.total, budget.warmup) == (
        "poly", {"power": 2.0}, 100, 40,
    )  # fmt: skip

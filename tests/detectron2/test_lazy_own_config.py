"""``budgeted-lazy-train-net --budget --schedule --full-iters``: a user's own LazyConfig, whose
``lr_multiplier`` is Detectron2's stock ``WarmupParamScheduler``, trained under a budget-aware
schedule with its warmup kept in iterations (budgeted.detectron2.lazy.apply_budget)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from d2_testutils import REPO, logged_lrs, read_metrics
from detectron2.config import LazyCall as L
from detectron2.config import LazyConfig, instantiate
from detectron2.solver import WarmupParamScheduler
from fvcore.common.param_scheduler import MultiStepParamScheduler
from omegaconf import OmegaConf
from own_configs import TOY_LAZY as TOY
from own_configs import lazy_config

from budgeted.detectron2.lazy import BudgetLRMultiplier, apply_budget, lazy_step, lazy_warmup
from budgeted.detectron2.lazy_cli import lazy_argument_parser, load, run
from budgeted.schedules import BudgetSchedule, schedule_names


@pytest.fixture
def own_config(tmp_path: Path) -> Path:
    return lazy_config(tmp_path, evaluate=False)


def _stock(warmup_length: float, **kwargs) -> object:
    return L(WarmupParamScheduler)(
        scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1, 0.01], milestones=[300, 350]),
        warmup_length=warmup_length,
        **kwargs,
    )


@pytest.mark.unit
def test_lazy_warmup_of_a_stock_warmup_param_scheduler_is_in_iterations_of_the_full_schedule():
    # coco_schedule.py's form: warmup_length = 250 / train.max_iter, a fraction of the full run
    assert lazy_warmup(_stock(250 / 400, warmup_factor=0.001), 400) == (250, 0.001, "linear")
    assert lazy_warmup(_stock(4 / 40, warmup_factor=0.01), 40) == (4, 0.01, "linear")
    constant = _stock(0.1, warmup_factor=0.5, warmup_method="constant")
    assert lazy_warmup(constant, 1000) == (100, 0.5, "constant")
    assert lazy_warmup(_stock(0.0, warmup_factor=0.01), 40) == (0, 0.01, "linear")
    # the same node as a saved config.yaml holds it: the target by its name
    named = _stock(0.1, warmup_factor=0.01)
    named._target_ = "detectron2.solver.WarmupParamScheduler"
    assert lazy_warmup(named, 40) == (4, 0.01, "linear")
    # a BudgetLRMultiplier's own warmup (its defaults where unset), anything else none
    own = L(BudgetLRMultiplier)(schedule="linear", total_iters="${train.max_iter}")
    assert lazy_warmup(own, 40) == (500, 0.001, "linear")
    own.warmup_iters, own.warmup_factor = 3, 0.1
    assert lazy_warmup(own, 40) == (3, 0.1, "linear")
    assert lazy_warmup(L(MultiStepParamScheduler)(values=[1.0], milestones=[]), 40) == (
        0,
        1.0,
        "linear",
    )


@pytest.mark.unit
def test_apply_budget_replaces_the_stock_multiplier_and_keeps_everything_else(
    own_config: Path,
) -> None:
    cfg = LazyConfig.load(str(own_config))
    before = OmegaConf.to_container(cfg, resolve=False)
    lines = apply_budget(cfg, 0.25, "cosine")
    assert cfg.train.max_iter == 10
    mult = instantiate(cfg.lr_multiplier)
    assert isinstance(mult, BudgetLRMultiplier)
    assert mult.budget == BudgetSchedule("cosine", 10, 4, 0.01)
    after = OmegaConf.to_container(cfg, resolve=False)
    assert after["lr_multiplier"] == {
        "_target_": BudgetLRMultiplier,
        "schedule": "cosine",
        "total_iters": "${train.max_iter}",
        "warmup_iters": 4,
        "warmup_factor": 0.01,
        "warmup_method": "linear",
    }
    before["train"]["max_iter"] = 10  # and nothing else changed
    assert {k: v for k, v in after.items() if k != "lr_multiplier"} == {
        k: v for k, v in before.items() if k != "lr_multiplier"
    }
    assert lines[0] == "--budget 0.25: train.max_iter 40 -> 10 (of --full-iters 40)"
    assert lines[1].endswith("the warmup: lr_multiplier.warmup_length 0.1 of 40 iterations")
    # --full-iters: the budget and the stock warmup are fractions of it
    cfg = LazyConfig.load(str(own_config))
    apply_budget(cfg, 0.5, "linear", full_iters=400)
    assert instantiate(cfg.lr_multiplier).budget == BudgetSchedule("linear", 200, 40, 0.01)


@pytest.mark.unit
def test_a_step_schedule_drops_where_the_configs_own_multistep_does(own_config: Path) -> None:
    """BAC of the config's own step baseline (x0.1 at iteration 30 of 40): the budget's step at
    0.75 of it; any other schedule, or another multiplier, gets the core's defaults."""
    cfg = LazyConfig.load(str(own_config))
    apply_budget(cfg, 0.5, "step")
    mult = instantiate(cfg.lr_multiplier)
    assert mult.budget == BudgetSchedule("step", 20, 4, 0.01, params={"milestones": (0.75,),
                                                                       "gamma": 0.1})  # fmt: skip
    assert lazy_step(L(BudgetLRMultiplier)(schedule="linear"), 40) == {}


@pytest.mark.unit
def test_budget_alone_follows_a_budget_lr_multiplier_and_schedule_keeps_its_warmup(
    toy_root,
) -> None:
    """The toy LazyConfig's lr_multiplier is a BudgetLRMultiplier following train.max_iter
    (warmup 3): --budget alone sets train.max_iter; --schedule keeps the warmup."""
    args = lazy_argument_parser().parse_args(["--config-file", str(TOY), "--budget", "0.5",
                                              "--full-iters", "400"])  # fmt: skip
    cfg = load(args)
    assert cfg.train.max_iter == 200
    assert instantiate(cfg.lr_multiplier).budget == BudgetSchedule("linear", 200, 3, 0.001)
    args = lazy_argument_parser().parse_args(
        ["--config-file", str(TOY), "--schedule", "step", "lr_multiplier.warmup_factor=0.1"]
    )
    cfg = load(args)
    assert cfg.train.max_iter == 40
    assert instantiate(cfg.lr_multiplier).budget == BudgetSchedule("step", 40, 3, 0.1)
    # a total_iters written as the number train.max_iter is, set to the new one
    args = lazy_argument_parser().parse_args(
        ["--config-file", str(TOY), "--budget", "0.25", "lr_multiplier.total_iters=40"]
    )
    cfg = load(args)
    assert (cfg.train.max_iter, instantiate(cfg.lr_multiplier).budget.total) == (10, 10)
    # no option: the config as it is, nothing logged
    args = argparse.Namespace(config_file=str(TOY), opts=[])
    assert load(args).train.max_iter == 40


@pytest.mark.integration
def test_own_lazyconfig_trains_under_the_budget_schedule_with_its_warmup_in_iterations(
    toy_root, own_config: Path
) -> None:
    out = own_config.parent / "cell"
    argv = ["--config-file", str(own_config), "--budget", "0.25", "--schedule", "cosine",
            "train.log_period=1", "optimizer.lr=0.03", f"train.output_dir={out}"]  # fmt: skip
    assert run(argv) == 0
    # 10 iterations (0.25 of 40), warmup 4 (4 / 40 of the full 40), factor 0.01, at the
    # override's optimizer.lr, logged at every iteration
    core = BudgetSchedule("cosine", total=10, warmup=4, warmup_factor=0.01)
    lrs = logged_lrs(out)
    assert sorted(lrs) == list(range(10))
    assert [lrs[t] for t in range(10)] == pytest.approx([0.03 * core(t) for t in range(10)],
                                                        rel=1e-9)  # fmt: skip
    assert max(r["iteration"] for r in read_metrics(out)) == 9
    saved = LazyConfig.load(str(out / "config.yaml"))  # what Detectron2 saved of the run's cfg
    assert saved.train.max_iter == 10
    assert instantiate(saved.lr_multiplier).budget == core
    assert saved.optimizer.lr == 0.03  # the override, and the user's own settings
    assert (saved.optimizer.momentum, saved.optimizer.weight_decay) == (0.8, 5e-4)
    log = (out / "log.txt").read_text()
    replaced = (
        "--schedule cosine: lr_multiplier detectron2.solver.lr_scheduler.WarmupParamScheduler"
    )
    assert log.count(f"{replaced} -> BudgetLRMultiplier(schedule='cosine'") == 1


REFUSALS = [
    (["--budget", "0.25", "--schedule", "cosin"],
     "--schedule cosin is unknown; allowed: {names}"),
    (["--budget", "1.5", "--schedule", "cosine"],
     "--budget 1.5 is invalid; allowed: a fraction in (0, 1] of --full-iters"),
    (["--budget", "abc", "--schedule", "cosine"],
     "--budget abc is invalid; allowed: a fraction in (0, 1]"),
    (["--budget", "0.25", "--schedule", "cosine", "--full-iters", "0"],
     "--full-iters 0 is invalid; allowed: a whole number >= 1"),
    (["--budget", "0.1", "--schedule", "cosine"],
     "a budget of 4 iterations (--budget 0.1 of --full-iters 40) is not longer than the warmup "
     "of 4 iterations (lr_multiplier.warmup_length 0.1 of 40 iterations)"),
    (["--budget", "0.25"],
     "--budget 0.25 sets train.max_iter=10, but lr_multiplier (detectron2.solver.lr_scheduler."
     "WarmupParamScheduler) does not follow train.max_iter"),
]  # fmt: skip
REFUSAL_IDS = ["unknown-schedule", "budget-1.5", "budget-abc", "full-iters-0",
               "budget-not-longer-than-warmup", "budget-alone-on-stock"]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize(("options", "message"), REFUSALS, ids=REFUSAL_IDS)
def test_bad_budget_options_are_one_line_and_exit_status_2_before_anything_is_written(
    toy_root, own_config: Path, capsys, options, message
) -> None:
    out = own_config.parent / "cell"
    capsys.readouterr()
    with pytest.raises(SystemExit) as err:
        run(["--config-file", str(own_config), *options, f"train.output_dir={out}"])
    assert err.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    message = message.format(names=", ".join(schedule_names()))  # registered when it runs
    assert len(lines) == 1 and lines[0].startswith(f"lazyconfig_train_net: {message}"), lines
    assert not out.exists()
    if options == ["--budget", "0.25"]:
        assert "add --schedule NAME (linear, cosine," in lines[0]


@pytest.mark.e2e
def test_the_console_script_refuses_a_bad_schedule_in_one_line(toy_root, own_config: Path) -> None:
    out = own_config.parent / "cell"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "budgeted-lazy-train-net"), "--config-file",
         str(own_config), "--budget", "0.25", "--schedule", "nope", f"train.output_dir={out}"],
        cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # the tool's own registry: this process's may hold more
    assert lines[0].startswith(
        "lazyconfig_train_net: --schedule nope is unknown; allowed: linear, cosine,"
    )
    assert not out.exists()

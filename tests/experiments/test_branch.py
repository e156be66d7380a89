"""budgeted-branch: one stable WSD run, one cooldown per budget, with the real trainers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from own_configs import fcn_config
from own_sweeps import digests
from run_folders import call_tool, toy_data, write_sweep
from toy_pspnet import width_overrides

from budgeted.experiments.branch import branch_points, compute, main
from budgeted.experiments.own import family_record, own_family
from budgeted.schedules import BudgetSchedule

REPO = Path(__file__).resolve().parents[2]
BRANCH = [sys.executable, "-m", "budgeted.experiments.branch"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]


def cli(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=REPO, check=False
    )


@pytest.mark.unit
def test_branch_points_are_where_the_shorter_wsd_leaves_the_longer():
    points = branch_points({0.05: 160, 1.0: 3200}, warmup=20, cooldown=0.2)
    short, long = BudgetSchedule("wsd", 160, 20), BudgetSchedule("wsd", 3200, 20)
    n = points[0.05]
    assert all(short(t) == long(t) for t in range(n))  # the same up to the branch point
    assert short(n) < long(n)  # the cooldown starts right after it
    # the budgets {5, 10, 25, 50, 100 %} of the toy PSPNet schedule: at most 0.65x
    iters = {b: round(b * 3200) for b in (0.05, 0.1, 0.25, 0.5, 1.0)}
    branched, separate = compute(iters, branch_points(iters, 20, 0.2))
    assert branched / separate <= 0.65


def mmseg_lrs(run_dir: Path) -> dict[int, float]:
    return {
        r["iter"]: r["lr"]
        for p in sorted(run_dir.glob("*/vis_data/scalars.json"))
        for r in map(json.loads, p.read_text().splitlines())
        if "lr" in r
    }


@pytest.mark.e2e
@pytest.mark.parametrize("decay", ["linear", "sqrt"])
def test_mmseg_branches_resume_the_stable_run_exactly_and_are_reported(tmp_path, decay):
    """Each cooldown shape (``--decay``): the branch trains only its cooldown, at its LRs."""
    data, out = tmp_path / "toy_cityscapes", tmp_path / "branch"
    text = "wsd" if decay == "linear" else f"wsd:decay={decay}"
    # toy PSPNet budgets 1 % (32 iterations) and 5 % (160): stable WSD over 160, branch at 30
    # a narrower toy PSPNet (width 8): the test checks LRs, checkpoints and resuming, not mIoU
    args = ["mmseg", "--toy", "--budgets", "0.01", "0.05", "--decay", decay, "--data", data,
            "--out", out, "--", "default_hooks.logger.interval=1", *width_overrides(8)]  # fmt: skip
    run = cli(BRANCH, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "one stable run + cooldowns = 162 iterations, separate WSD runs = 192" in run.stdout
    folder = text.replace(":", "-").replace("=", "-")
    stable, branch = out / f"{folder}_budget5", out / f"{folder}_budget1"
    assert (stable / "iter_30.pth").is_file()  # the branch point, saved by the stable run
    first, cooled = mmseg_lrs(stable), mmseg_lrs(branch)
    assert sorted(cooled) == list(range(31, 33))  # only the cooldown was trained
    base = first[30]  # the stable LR (MMEngine logs iteration i with the LR it trained at)
    wsd = BudgetSchedule(text, 32, 20, 0.001)
    assert [cooled[i] for i in (31, 32)] == pytest.approx([base * wsd(30), base * wsd(31)])
    assert "budget branched at 30" in (next(branch.glob("*/*.log"))).read_text()
    report = cli(REPORT, out)
    assert report.returncode == 0, report.stderr
    head = next(x for x in report.stdout.splitlines() if x.startswith("| budget |"))
    assert head == f"| budget | iterations | {text} |"
    again = cli(BRANCH, *args)
    assert again.returncode == 0 and "2 skipped" in again.stdout.replace("0 run, 0 resumed, ", "")


@pytest.mark.unit
def test_compare_adds_a_separate_linear_run_per_budget(tmp_path, capsys):
    """``--compare``: the linear sweep cells of the same budgets, trained from the linear
    configs as budgeted-sweep trains them (the report shows them beside the branches)."""
    out = tmp_path / "o"
    args = ["mmseg", "--toy", "--budgets", "0.01", "0.05", "--out", str(out), "--dry-run"]
    assert main([*args, "--compare"]) == 0
    cells = [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines() if ": " in ln]
    assert [c for c in cells if not c.startswith("[")] == [
        "wsd_budget5", "wsd_budget1", "linear_budget1", "linear_budget5"
    ]  # fmt: skip
    assert main(args) == 0
    cells = [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines() if ": " in ln]
    assert [c for c in cells if not c.startswith("[")] == ["wsd_budget5", "wsd_budget1"]
    assert not out.exists()


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--budgets", "0.05"], "--budgets 0.05: allowed: two budgets or more"),
        (
            ["--budgets", "0.05", "0.1", "--cooldown", "0"],
            "--cooldown 0: wsd schedule: cooldown=0.0 is invalid; allowed: a number in [1e-06, 1]",
        ),
    ],
)
def test_bad_branch_input_is_one_line(tmp_path, args, expected):
    run = cli(BRANCH, "mmseg", "--toy", *args, "--out", tmp_path / "o", "--dry-run")
    assert run.returncode == 2 and expected in run.stderr and run.stderr.count("\n") == 1


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["pytorch", "--budgets", "0.05", "0.1"], "branch: error: argument framework: invalid"),
        (["mmseg", "--budgets", "0.05", "0.1", "--data", "x"], "--data is for --toy runs"),
    ],
)
def test_bad_branch_arguments_are_one_line(tmp_path, args, expected):
    run = cli(BRANCH, *args, "--out", tmp_path / "o", "--dry-run")
    assert run.returncode == 2 and expected in run.stderr and run.stderr.count("\n") == 1


def refused(argv: list, root: Path, capsys) -> str:
    """The one line ``budgeted-branch ARGV`` refuses with (exit 2); no file under ``root``
    changed and none added."""
    before = digests(root)
    code, printed, err = call_tool(main, [str(a) for a in argv], capsys)
    assert (code, printed) == (2, ""), (code, printed, err)
    assert err.count("\n") == 1 and err.startswith("branch: error: "), err
    assert digests(root) == before
    return err.strip()


def _plain_pytorch_sweep(root: Path) -> tuple[list, str]:
    cells = {("linear", 0.01, None): 90.0, ("linear", 0.05, None): 95.0}
    write_sweep(root / "out", "pytorch", cells, root)
    return ["mmpretrain", "--task", "digits"], "holds a pytorch sweep of examples/digits_budget.py"


def _other_files(root: Path) -> tuple[list, str]:
    (root / "out").mkdir()
    (root / "out" / "notes.txt").write_text("the user's own notes\n")
    return ["mmseg", "--toy", "--data", toy_data("mmseg", root / "data")], "holding other files"


def _edited_config(root: Path) -> tuple[list, str]:
    config = fcn_config(root, root / "no_data")
    (root / "out").mkdir()  # what a first sweep of the config left: its record of it
    record = {"framework": "mmseg", "family": str(config), "cells": [["linear", 0.25]],
              "experiment": family_record(own_family(config))}  # fmt: skip
    (root / "out" / "sweep.json").write_text(json.dumps(record))
    config.write_text(config.read_text().replace("momentum=0.9", "momentum=0.95"))
    return ["--config", config], "changed since the first cells of --out"


@pytest.mark.unit
@pytest.mark.parametrize(
    "folder", [_plain_pytorch_sweep, _other_files, _edited_config],
    ids=["a plain-PyTorch sweep", "a folder of other files", "a config edited since"],
)  # fmt: skip
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry run"])
def test_an_out_folder_the_sweep_refuses_is_refused_in_one_line_untouched(
    folder, dry_run, tmp_path, capsys
):
    """Issue 52/14: the branch goes through the sweep's own checks of the grid and ``--out``
    (:func:`budgeted.experiments.sweep.grid.check_grid`); before, it rewrote a plain-PyTorch
    sweep's ``sweep.json`` as an MMPretrain one, wrote into a folder of other files and planned
    against an edited config."""
    given, words = folder(tmp_path)
    argv = [*given, "--budgets", "0.25", "0.5", "--out", tmp_path / "out", *dry_run]
    if given[0] == "mmpretrain":
        argv[argv.index("0.25") : argv.index("0.5") + 1] = ["0.01", "0.05"]
    assert words in refused(argv, tmp_path, capsys)


@pytest.mark.unit
def test_a_cooldown_shorter_than_an_iteration_of_a_budget_is_refused(tmp_path, capsys):
    """The toy PSPNet's 1 % is 32 iterations, 12 after its warmup of 20: a cooldown of 0.05 is
    0.6 of an iteration, so that budget's branch would train none of it."""
    line = refused(["mmseg", "--toy", "--budgets", "0.01", "0.05", "--cooldown", "0.05",
                    "--out", tmp_path / "out", "--dry-run"], tmp_path, capsys)  # fmt: skip
    assert line == (
        "branch: error: budget 0.01 (32 iterations): wsd schedule: cooldown=0.05 is invalid for "
        "a decay of 12 steps; allowed: a cooldown of more than one step, cooldown > 1/12"
    )


@pytest.mark.unit
def test_the_dry_run_shows_each_command_once_with_its_tool(tmp_path, capsys):
    """Each command names its tool and sets the budget, the schedule and its cooldown once;
    a cooldown other than WSD's default is in the cells' text (one folder per cooldown)."""
    config = fcn_config(tmp_path, tmp_path / "no_data")
    code, out, err = call_tool(main, ["--config", str(config), "--budgets", "0.25", "0.5",
                                      "--cooldown", "0.5", "--out", str(tmp_path / "o"),
                                      "--dry-run"], capsys)  # fmt: skip
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if not ln.startswith("[")]
    assert [ln.split(":")[0] for ln in lines] == [
        "wsd-cooldown-0.5_budget50", "wsd-cooldown-0.5_budget25"
    ]  # fmt: skip
    for line in lines:
        command = line.split(": run: ", 1)[1].split()
        assert command[0] == "budgeted-train-seg", line
        for flag in ("--budget", "--schedule", "--full-iters", "param_scheduler.0.cooldown=0.5"):
            assert command.count(flag) == 1, (flag, line)
    assert not (tmp_path / "o").exists()


@pytest.mark.unit
def test_the_help_says_what_each_option_is_and_its_defaults(capsys):
    code, out, _ = call_tool(main, ["--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "framework a shipped family's framework, one of: detectron2, mmseg" in text
    assert "--out OUT the sweep folder" in text and "(default: 0.2)" in text
    assert "(default: linear)" in text and "--script" not in text and "--status" not in text

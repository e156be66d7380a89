"""budgeted-branch: one stable WSD run, one cooldown per budget, with the real trainers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from toy_pspnet import width_overrides

from budgeted.experiments.branch import branch_points, compute, main
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
        (["--budgets", "0.05", "0.1", "--cooldown", "0"], "--cooldown 0.0 is invalid"),
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

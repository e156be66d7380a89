"""budgeted.experiments.rank (``budgeted-rank``, tools/rank.py): Kendall's tau between the
architecture ranking at small budgets and at the full budget, from toy sweep folders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from run_folders import call_tool, toy_data, write_sweep
from toy_pspnet import width_overrides

from budgeted.experiments import rank
from budgeted.experiments.rank import Architectures, kendall_tau, markdown
from budgeted.experiments.report import Cell, CellKey, Final, Group
from budgeted.experiments.report import main as report

REPO = Path(__file__).resolve().parents[2]
RANK = [sys.executable, "-m", "budgeted.experiments.rank"]
FAMILY = "configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget"


def cli(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=REPO, check=False
    )


def group(values: dict[tuple[str, float, int], float]) -> Group:
    """A report group of finished toy MMSeg runs, (schedule, budget, seed) -> mIoU, one LR."""
    found = Group("mmseg", FAMILY)
    for (schedule, budget, seed), miou in values.items():
        key = CellKey(schedule, budget, None, seed)
        final = Final(int(budget * 3200), {"mIoU": miou})
        found.cells[key] = Cell(key, Path(f"/runs/{schedule}{budget}{seed}"), final, 1.0)
    return found


@pytest.mark.unit
def test_kendall_tau_counts_concordant_and_discordant_pairs():
    assert kendall_tau([1, 2, 3], [4, 5, 6])[0] == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3], [6, 5, 4])[0] == pytest.approx(-1.0)
    # 6 pairs, one discordant (3, 4): (5 - 1) / 6
    assert kendall_tau([1, 2, 3, 4], [1, 2, 4, 3])[0] == pytest.approx(4 / 6)


@pytest.mark.unit
def test_tables_rank_each_budget_against_the_full_budget():
    """Linear at 0.05 orders the three architectures as at 0.25 (tau 1); step swaps the top
    two (tau 1/3); scores are means over seeds; normalized by the same row's full budget."""
    full = {"a": 50.0, "b": 40.0, "c": 30.0}
    small = {"linear": {"a": 30.0, "b": 20.0, "c": 10.0}, "step": {"a": 20.0, "b": 25.0, "c": 5.0}}
    groups = {}
    for name in full:
        values = {}
        for schedule in ("linear", "step"):
            for seed, noise in enumerate((-1.0, 1.0)):
                values[schedule, 0.05, seed] = small[schedule][name] + noise
                values[schedule, 0.25, seed] = full[name] + noise
        groups[name] = group(values)
    text = markdown(Architectures("mmseg", groups), "mIoU", 0.25)
    tau = text.split("each budget and at 0.25\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert tau[2].startswith("| 0.05 | +1.00 (p 0.33, n 3) | +0.33 (p 1.00, n 3) |"), tau
    assert len(tau) == 3  # no row for the full budget against itself
    assert "| b | 20.00 ± 1.41 (2) | 40.00 ± 1.41 (2) | 25.00 ± 1.41 (2) |" in text
    assert "| b | 0.500 | 1.000 | 0.625 | 1.000 |" in text


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a=x", "b=y"], "2 architectures given; allowed: three or more (NAME=SWEEP)"),
        (["a=x", "a=y", "c=z"], "architecture 'a' is given twice; allowed: one sweep per name"),
        (["a=x", "b", "c=z"], "'b' is invalid; allowed: NAME=SWEEP_FOLDER"),
        (["a=x", "b=y", "c=z"], "is not a sweep folder (no sweep.json)"),
        (
            ["a=x", "b=x", "c=x"],
            "architectures a, b, c are the same sweep folder {tmp}/x; allowed: one sweep folder "
            "per architecture",
        ),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path):
    run = cli(RANK, *[a.replace("=", f"={tmp_path}/", 1) if "=" in a else a for a in args])
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith("rank: error: ") and "\n" not in err, err
    assert message.format(tmp=tmp_path) in err


@pytest.mark.e2e
def test_sweeps_of_different_base_lr_grids_are_refused(tmp_path):
    """Each architecture's score is its best LR's: chosen from different grids, the ranking
    compares different protocols (a narrower grid cannot find the others' best LR)."""
    data = toy_data("mmseg", tmp_path / "data")
    grids = {"a": (0.01, 0.1), "b": (0.01, 0.1), "c": (0.1,)}
    for name, lrs in grids.items():
        cells = {("linear", b, lr): 40.0 + 10 * b for b in (0.01, 0.05) for lr in lrs}
        write_sweep(tmp_path / name, "mmseg", cells, data)
    run = cli(RANK, *(f"{name}={tmp_path / name}" for name in grids))
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == (
        "rank: error: the sweeps searched different base-LR grids (a: 0.01 0.1; b: 0.01 0.1; "
        "c: 0.1); allowed: sweeps of the same --lrs, so that every architecture's best LR is "
        "chosen from the same grid\n"
    )
    same = cli(RANK, f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", f"c={tmp_path / 'a'}")
    assert same.returncode == 2 and same.stderr.count("\n") == 1
    assert f"architectures a, c are the same sweep folder {tmp_path / 'a'}" in same.stderr


WIDTHS = {"w4": 4, "w6": 6, "w8": 8}
"""Toy PSPNet R18 backbones of three widths (base and stem channels; the shipped toy has 16)."""


SCORES = {"w4": (30.0, 45.0), "w6": (35.0, 42.0), "w8": (40.0, 50.0)}
"""mIoU at 1 % and 5 %: w4 and w6 swap places at 5 %, w8 leads both (tau = (2 - 1) / 3)."""


@pytest.fixture
def arch_sweeps(tmp_path: Path) -> dict[str, Path]:
    """Three toy MMSeg sweeps, one per backbone width, as ``budgeted-sweep mmseg --toy
    --schedules linear --budgets 0.01 0.05 -- <width overrides>`` leaves them (run folders in
    MMEngine's format, read by the same reader as trained ones: tests/experiments/run_folders.py;
    the report's tests read trained ones)."""
    data = toy_data("mmseg", tmp_path / "data")
    sweeps = {}
    for name, width in WIDTHS.items():
        cells = {("linear", b, None): m for b, m in zip((0.01, 0.05), SCORES[name])}
        write_sweep(tmp_path / name, "mmseg", cells, data, width_overrides(width))
        sweeps[name] = tmp_path / name
    return sweeps


@pytest.mark.e2e
def test_rank_reads_sweep_folders_and_refuses_a_budget_not_run(arch_sweeps, tmp_path):
    from budgeted.experiments.report import load_sweep

    named = [f"{name}={path}" for name, path in arch_sweeps.items()]
    run = cli(RANK, *named)
    assert run.returncode == 0, run.stderr
    assert "against the full budget 0.05 (3 architectures: w4, w6, w8)" in run.stdout
    lines = run.stdout.split("per architecture", 1)[1].split("####", 1)[0].splitlines()
    for name, path in arch_sweeps.items():  # the table shows each sweep's logged mIoU
        cells = {c.key.budget: c.final.metrics["mIoU"] for c in load_sweep(path).cells}
        assert f"| {name} | {cells[0.01]:.2f} | {cells[0.05]:.2f} |" in lines
    assert kendall_tau([m for m, _ in SCORES.values()], [m for _, m in SCORES.values()])[0] == (
        pytest.approx(1 / 3)
    )
    assert "| 0.01 | +0.33" in run.stdout
    bad = cli(RANK, *named, "--full", "0.5")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "rank: error: --full 0.5 is not a budget every architecture and schedule finished; "
        "allowed: 0.01, 0.05"
    )
    bad = cli(RANK, *named, "--metric", "box AP")  # what budgeted-report --metric says
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("rank: error: --metric 'box AP' is not logged by the run in ")
    assert bad.stderr.endswith("; allowed: a key its final evaluation logged (aAcc, mAcc, mIoU)\n")


@pytest.mark.unit
def test_rank_takes_the_metric_the_report_takes(arch_sweeps, capsys):
    """Issue 52: ``budgeted-rank --metric KEY`` reads the metric as ``budgeted-report --metric
    KEY`` does (one route): a key the runs logged (aAcc) is ranked (refused before, "not a mmseg
    metric"), a name the report shows (mIoU) too."""
    named = [f"{name}={path}" for name, path in arch_sweeps.items()]
    for metric, w4 in (("aAcc", "| w4 | 80.00 | 80.00 |"), ("mIoU", "| w4 | 30.00 | 45.00 |")):
        assert call_tool(report, [str(arch_sweeps["w4"]), "--metric", metric], capsys)[0] == 0
        code, out, err = call_tool(rank.main, [*named, "--metric", metric], capsys)
        assert code == 0 and f"### Architecture ranking by {metric}:" in out, err
        assert w4 in out, out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("axis", "cells", "says"),
    [
        ("budgets", {("linear", 0.01, None): 30.0}, "different budgets (w4: 0.01 0.05; w6: 0.01 "
         "0.05; w8: 0.01); allowed: sweeps of the same --budgets"),
        ("seeds", {("linear", b, None, s): 30.0 for b in (0.01, 0.05) for s in (0, 1)},
         "different seeds (w4: the config's; w6: the config's; w8: 0 1); allowed: sweeps of the "
         "same --seeds"),
        ("schedules", {(s, b, None): 30.0 for b in (0.01, 0.05) for s in ("linear", "step")},
         "different schedules (w4: linear; w6: linear; w8: linear step)"),
    ],
)  # fmt: skip
def test_sweeps_of_different_grids_are_refused(axis, cells, says, arch_sweeps, tmp_path, capsys):
    """Issue 52: a ranking over sweeps of different budgets, seeds or schedules compares other
    protocols (taken silently before: the budgets in common, means over other seeds): one line
    naming the axis, as for different base-LR grids."""
    import shutil

    shutil.rmtree(arch_sweeps["w8"])
    write_sweep(arch_sweeps["w8"], "mmseg", cells, tmp_path / "data")
    named = [f"{name}={path}" for name, path in arch_sweeps.items()]
    code, out, err = call_tool(rank.main, named, capsys)
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith(f"rank: error: the sweeps searched {says}"), err

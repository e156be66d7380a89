"""A tiny real sweep of every arm kind with ``--validate-every`` (issue 43): each cell trains the
digits script with its arm's flags, its record keeps the arm's text, ``--status`` and the report
read the folder (rows labelled by the arm), and ``--best-progress`` says where each arm's best
periodic evaluation fell."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from budgeted.experiments.report import main as report
from budgeted.experiments.sweep import main as sweep
from budgeted.runs import reader

REPO = Path(__file__).resolve().parents[2]
ARMS = ["linear", "wsd:decay=sqrt", "sgdr:restarts=2", "schedulefree", "subset"]
FOLDERS = ["linear", "wsd-decay-sqrt", "sgdr-restarts-2", "schedulefree", "subset"]


@pytest.mark.e2e
def test_a_sweep_of_every_arm_validates_and_reports_its_best_checkpoint(
    tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "arms"
    grid = ["pytorch", "--task", "digits", "--schedules", *ARMS, "--budgets", "0.01", "--lrs",
            "0.1", "--validate-every", "5", "--out", str(out)]  # fmt: skip
    assert sweep(grid) == 0, capsys.readouterr().err
    capsys.readouterr()
    cells = json.loads((out / "sweep.json").read_text())["cells"]
    assert cells == [[a, 0.01, 0.1, None] for a in ARMS]
    for arm, folder in zip(ARMS, FOLDERS):
        run = out / f"{folder}_budget1_lr0.1"
        record = json.loads((run / "sweep_cell.json").read_text())
        assert (record["schedule"], record["validate_every"]) == (arm, 5)
        # 17 iterations: the periodic evaluations at 5, 10, 15, then the final one
        assert [at for at, _ in reader("pytorch").evaluations(run)] == [5, 10, 15, 17], arm

    assert sweep(grid) == 0  # finished: every cell skipped, nothing retrained
    assert "5 skipped" in capsys.readouterr().out
    assert sweep(["--status", str(out)]) == 0
    status = capsys.readouterr().out
    assert all(re.search(rf"^{f}_budget1_lr0.1 +done ", status, re.M) for f in FOLDERS), status

    assert report([str(out), "--best-progress"]) == 0
    text = capsys.readouterr().out
    head = "| budget | " + " | ".join(ARMS) + " |"
    best, progress = [text.split(head)[i].splitlines()[2] for i in (1, 3)]
    assert best.startswith("| 0.01 | ") and best.count(" @ 0.1 |") == len(ARMS)
    fractions = [float(v) for v in progress.strip("| ").split(" | ")[1:]]
    assert len(fractions) == len(ARMS) and all(0 < f <= 1 for f in fractions), progress


@pytest.mark.e2e
def test_an_mmengine_sweep_of_arms_trains_them_with_budgeted_train_seg(
    tmp_path, capsys, monkeypatch
) -> None:
    """The same arms through ``budgeted-train-seg``'s flags (the MMPretrain digits family)."""
    from budgeted.toys.digits import write_digits

    monkeypatch.chdir(tmp_path)  # the family's data_root: datasets/digits
    write_digits(tmp_path / "datasets/digits")
    out = tmp_path / "arms"
    arms = ["wsd:decay=sqrt", "schedulefree"]
    assert sweep(["mmpretrain", "--task", "digits", "--schedules", *arms, "--optimizers", "adamw",
                  "--lrs", "0.001", "--budgets", "0.01", "--validate-every", "5",
                  "--out", str(out)]) == 0, capsys.readouterr().err  # fmt: skip
    capsys.readouterr()
    for folder in ("wsd-decay-sqrt-adamw", "schedulefree-adamw"):
        run = out / f"{folder}_budget1_lr0.001"
        assert [at for at, _ in reader("mmpretrain").evaluations(run)] == [5, 10, 15, 17], folder
    assert report([str(out), "--best-progress"]) == 0
    text = capsys.readouterr().out
    assert "| budget | wsd:decay=sqrt@adamw | schedulefree@adamw |" in text

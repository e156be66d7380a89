"""``make paper`` (tools/paper/run.py, report.py, tables.py) on a tiny grid of the real digits:
every block of the doc it writes is what the report functions make of the sweeps it ran, the
figure and per-run CSVs are written, the prose around the blocks survives a second report, and a
doc with a broken or unknown block is one line and left as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "paper"))
import report  # noqa: E402  # tools/paper/report.py
import run  # noqa: E402  # tools/paper/run.py

TINY = """\
budgets = [0.02, 0.05]
seeds = [0, 1]
jobs = 2
preload = ["torch", "torch._dynamo", "budgeted.toys.digits"]

[sets.digits]
title = "UCI digits"
task = "digits"
full_iters = 1720

[[sweeps]]
name = "arms"
schedules = ["linear", "step", "subset"]
lrs = [0.1]
validate_every = 0.02

[[sweeps]]
name = "optimizers"
schedules = ["linear", "step"]
optimizers = ["adamw"]
lrs = [0.003]

[[sweeps]]
name = "batch128"
schedules = ["linear", "step"]
batch_size = 128
lrs = [0.3]
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The tiny grid run by tools/paper/run.py: (grid file, sweeps folder, doc)."""
    root = tmp_path_factory.mktemp("paper")
    grid, out, doc = root / "grid.toml", root / "out", root / "docs" / "paper.md"
    grid.write_text(TINY)
    done = subprocess.run(
        [sys.executable, str(REPO / "tools/paper/run.py"), "--grid", str(grid), "--out", str(out),
         "--doc", str(doc)], capture_output=True, text=True, cwd=root, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return grid, out, doc


@pytest.mark.e2e
def test_the_docs_blocks_are_the_report_functions_of_the_sweeps(made) -> None:
    grid_file, out, doc = made
    texts = report.blocks(run.load_grid(grid_file), out, Path("paper"))
    text = doc.read_text()
    for name, block in texts.items():
        assert f"<!-- paper:{name} -->\n{block}\n<!-- /paper:{name} -->" in text, name
    arms = texts["digits-arms"]
    assert "| `subset` |" in arms and "| 2 % (34 it.) | 5 % (86 it.) |" in arms
    assert "@ 0.1" in arms and "*not run yet*" not in text
    assert "linear, AdamW" in texts["digits-optimizers"] and "step, 128" in texts["digits-batch"]
    assert "| digits/arms | 12 |" in texts["cost"]  # 3 arms x 2 budgets x 2 seeds
    best = texts["digits-best"].splitlines()[2]  # linear: a periodic evaluation at 34 of 86
    assert best.startswith("| `linear` | 1.00 / +0.00 |") and best.count(" / ") == 2
    assert (doc.parent / "paper" / "digits.png").stat().st_size > 10_000
    for sweep in ("arms", "optimizers", "batch128"):
        assert (doc.parent / "paper" / f"digits_{sweep}.csv").read_text().startswith("framework,")


@pytest.mark.e2e
def test_prose_around_the_blocks_survives_and_a_broken_doc_is_one_line(made, capsys) -> None:
    grid_file, out, doc = made
    argv = ["--grid", str(grid_file), "--out", str(out), "--doc", str(doc)]
    prose = "Written by a person.\n\n" + doc.read_text() + "\nWhat it shows: ...\n"
    doc.write_text(prose)
    assert report.main(argv) == 0
    assert doc.read_text() == prose
    for broken, line in (
        (prose.replace("<!-- /paper:cost -->", ""), "has no matching"),
        (prose + "<!-- paper:mine -->\n<!-- /paper:mine -->\n", "block 'mine' is not one"),
    ):
        doc.write_text(broken)
        capsys.readouterr()
        assert report.main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and line in err and "nothing was written" in err
        assert doc.read_text() == broken


@pytest.mark.unit
def test_a_grid_with_an_unknown_key_is_one_line(tmp_path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(TINY.replace("jobs = 2", "jobz = 2"))
    with pytest.raises(ValueError, match=r"unknown keys \['jobz'\]"):
        run.load_grid(grid)


@pytest.mark.unit
@pytest.mark.parametrize("data", ["digits", "mnist5k"])
def test_the_committed_tables_are_the_report_functions_of_the_committed_runs(data) -> None:
    """docs/paper.md's Table 2, optimizer and batch blocks, recomputed from the per-run CSVs
    committed beside it (docs/paper/<set>_<sweep>.csv, read back as sweeps), figure for figure.
    (The best-checkpoint block reads the runs' periodic evaluations, which the CSVs do not hold:
    the tiny grid above checks it.)"""
    import tables

    from budgeted.experiments.report import group_sweeps
    from budgeted.experiments.report.model import load_report_csv

    grid = run.load_grid(REPO / "tools" / "paper" / "grid.toml")
    runs = REPO / "docs" / "paper"
    groups = {s["name"]: group_sweeps([load_report_csv(runs / f"{data}_{s['name']}.csv")])[0]
              for s in grid["sweeps"]}  # fmt: skip
    doc = (REPO / "docs" / "paper.md").read_text()
    expected = {
        "arms": tables.arms_table(groups["arms"], report.arm_order(grid)),
        "optimizers": tables.optimizers_table(groups["arms"], groups["optimizers"]),
        "batch": tables.batch_table(groups["arms"], groups["batch128"]),
    }
    for name, text in expected.items():
        block = doc.split(f"<!-- paper:{data}-{name} -->\n", 1)[1].split("\n<!-- /paper:", 1)[0]
        assert block.split("\n\n![")[0] == text, name

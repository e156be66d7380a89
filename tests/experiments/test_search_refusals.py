"""``budgeted-search`` refuses what it cannot answer in one line, exit status 2, with every file
of the search folder (and its study's storage) unchanged: a search budget below one target run
(or too small for a ladder: it names the smallest useful one), an empty or inverted LR range, a
target budget outside (0, 1] or past the full schedule, a storage that cannot be opened, a study
made for another search, a folder of other files; and its study is Optuna's, read back by
Optuna's own API."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from run_folders import call_tool

from budgeted.experiments.search import main
from budgeted.experiments.search.study import open_study

pytestmark = pytest.mark.unit


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def refused(argv: list[str], capsys, root: Path) -> str:
    before = digests(root)
    code, out, err = call_tool(main, argv, capsys)
    assert (code, out) == (2, ""), (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("search: error: "), err
    assert digests(root) == before
    return lines[0]


def search_args(out: Path, **given: str | list[str] | None) -> list[str]:
    """``SEARCH`` with ``given`` options replaced (``budget=None``: left out), then ``--out``."""
    options = {"budget": "0.1", "lr_range": ["0.01", "1"], **given}
    argv = ["pytorch", "--task", "digits", "--schedules", "linear"]
    for name, value in options.items():
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", *([value] if isinstance(value, str) else value)]
    return [*argv, "--out", str(out)]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"search_budget": "0.5x"}, "--search-budget 0.5x is smaller than one target run "
         "(172 iterations)"),
        ({"search_budget": "100"}, "--search-budget 100 is smaller than one target run"),
        ({"search_budget": "1.2x"}, "buys no ladder of 1 schedule(s) over --lr-range 0.01 1; "
         "the smallest useful search budget is"),
        ({"lr_range": ["1", "0.01"]}, "--lr-range 1 0.01 is inverted; allowed: LO <= HI"),
        ({"lr_range": ["0", "1"]}, "--lr-range value '0' is not a positive number"),
        ({"lr_range": None}, "--lr-range LO HI is required"),
        ({"budget": "1.5"}, "--budget 1.5 is not a fraction in (0, 1] of the full schedule "
         "(1720 iterations)"),
        ({"budget": "0"}, "--budget 0 is not a fraction in (0, 1]"),
        ({"budget_iters": "100"}, "the target budget is missing or given twice"),
        ({"budget": None, "budget_iters": "5000"}, "--budget-iters 5000 is outside the full "
         "schedule; allowed: 1 to 1720 iterations"),
        ({"storage": "sqlite:////no/such/folder/study.db"}, "--storage sqlite:////no/such/"
         "folder/study.db cannot be opened"),
        ({"storage": "postgresql://nobody@127.0.0.1:9/none"}, "--storage postgresql://nobody"
         "@127.0.0.1:9/none cannot be opened"),
    ],
)  # fmt: skip
def test_a_search_it_cannot_run_is_one_line_and_writes_nothing(given, says, tmp_path, capsys):
    line = refused(search_args(tmp_path / "search", **given), capsys, tmp_path)
    assert says in line, line
    assert not (tmp_path / "search").exists()


def test_a_study_made_for_another_search_is_refused(tmp_path, capsys):
    out = tmp_path / "search"
    out.mkdir()
    other = {"experiment": "other.py", "target": 0.5}
    open_study(str(out / "study.journal"), "budgeted-search", other).ask()
    (out / "search.json").write_text(json.dumps({"search": other}))
    line = refused(search_args(out), capsys, tmp_path)
    assert "the study 'budgeted-search' in " in line and "was made for another search" in line
    assert "allowed: the same search, another --study-name, or another --out" in line


def test_a_folder_of_other_files_is_refused(tmp_path, capsys):
    out = tmp_path / "search"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    line = refused(search_args(out), capsys, tmp_path)
    assert "is a folder holding other files and no search.json" in line


def test_the_dry_run_prints_the_ladder_and_its_first_cells_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "search"
    code, printed, err = call_tool(main, [*search_args(out), "--dry-run"], capsys)
    assert (code, err) == (0, ""), err
    assert "rung 0.00625 (11 iterations): 1 schedule(s) x 5 LR(s)" in printed
    assert "planned cost 3.06 target runs" in printed
    assert "linear_budget0p625_lr0.01_seed0: python " in printed
    assert not out.exists()

"""A report's CSV read back as sweeps (``budgeted-report FILE.csv``): untrusted as a sweep folder
is, every field checked as the sweep's records are (issue 52/12), its run folders read relative
to the CSV's folder and only inside it (52/13), refused before anything is written; a CSV of
several config families reads as several; every committed CSV reads back."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from own_sweeps import digests
from run_folders import call_tool, write_sweep

from budgeted.experiments.report import main
from budgeted.experiments.report.model import read_report_csv

REPO = Path(__file__).resolve().parents[2]
HEAD = ["framework", "family", "schedule", "budget", "lr", "seed", "iterations", "top-1",
        "wall_s", "run_dir", "status"]  # fmt: skip
GOOD = {"framework": "pytorch", "family": "mine.py", "schedule": "linear", "budget": "0.1",
        "lr": "0.1", "seed": "0", "iterations": "100", "top-1": "90.5", "wall_s": "1.0",
        "run_dir": "", "status": "finished"}  # fmt: skip


def write_rows(path: Path, rows: list[dict[str, str]], head: list[str] = HEAD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, head, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def refused(argv: list[str], folder: Path, capsys) -> str:
    """``budgeted-report ARGV`` refused in one line, exit 2, every file under ``folder`` as it
    was and none added; the line."""
    before = digests(folder)
    code, out, err = call_tool(main, argv, capsys)
    assert (code, out) == (2, ""), (code, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("report: error: "), err
    assert digests(folder) == before
    return err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("top-1", "1e300", "top-1 1e+300 is not in [0, 100]"),
        ("top-1", "-50", "top-1 -50.0 is not in [0, 100]"),
        ("top-1", "nan", "metrics {'top-1': nan} is not an object of metric: number"),
        ("lr", "nan", "lr nan is not a positive number or null"),
        ("lr", "-1", "lr -1.0 is not a positive number or null"),
        ("seed", "-1", "seed -1 is not an integer in [0, 2**32) or null"),
        ("seed", "1.5", "seed '1.5' is not an integer in [0, 2**32) or null"),
        ("iterations", "-5", "iterations '-5' is not a number >= 1 or empty"),
        ("status", "bogus", "status 'bogus' is not one of finished, undecayed, diverged or empty"),
        ("status", "diverged", "metrics {'top-1': 90.5} beside iterations 100 and status diverged"),
        ("wall_s", "-1", "wall_s -1.0 is not a number of seconds >= 0 or null"),
        ("budget", "2", "budget 2.0 is not a budget fraction in (0, 1]"),
        ("schedule", "../x", "schedule '../x' is not a registered schedule"),
        ("framework", "caffe", "framework 'caffe' is not one of detectron2, mmaction"),
    ],
)  # fmt: skip
def test_a_field_a_sweep_would_refuse_is_one_line_and_nothing_is_written(
    field, value, says, tmp_path, capsys
) -> None:
    """Each field of a row is checked as a sweep's records are (the same checks), a metric the
    report knows (top-1: percent) in its range; the figure and CSV asked for are not written."""
    data = write_rows(tmp_path / "runs.csv", [GOOD, {**GOOD, "seed": "1", field: value}])
    argv = [str(data), "--csv", str(tmp_path / "out.csv"), "--plot", str(tmp_path / "out.png")]
    err = refused(argv, tmp_path, capsys)
    assert f"{data} line 3 is not a run of a report's CSV: " in err and says in err, err


@pytest.mark.unit
def test_a_key_of_the_users_is_any_finite_number(tmp_path, capsys) -> None:
    """A metric of the user's (``--metric``) has no known range: -3.5 is a result, NaN is not."""
    head = [h if h != "top-1" else "val_score" for h in HEAD]
    rows = [{**{k if k != "top-1" else "val_score": v for k, v in GOOD.items()},
             "val_score": "-3.5"}]  # fmt: skip
    data = write_rows(tmp_path / "runs.csv", rows, head)
    code, out, err = call_tool(main, [str(data)], capsys)
    assert code == 0 and "| -3.500 |" in out, (out, err)
    write_rows(data, [{**rows[0], "val_score": "inf"}], head)
    assert "metrics {'val_score': inf} is not an object" in refused([str(data)], tmp_path, capsys)


def _pytorch_run(run_dir: Path) -> None:
    """A finished digits run (its LR and loss logged), as tests/experiments/run_folders.py
    writes them."""
    write_sweep(run_dir.parent / "tmp_sweep", "pytorch", {("linear", 0.1, 0.1, 0): 90.5},
                run_dir.parent)  # fmt: skip
    (run_dir.parent / "tmp_sweep" / "linear_budget10_lr0.1_seed0").rename(run_dir)


@pytest.mark.unit
@pytest.mark.parametrize(
    "where", ["../elsewhere/run", "absolute", "link out", "link to a folder inside", "link inside"]
)
def test_a_run_dir_outside_the_csvs_folder_is_refused_before_any_figure(
    where, tmp_path, capsys
) -> None:
    """A CSV's ``run_dir`` is untrusted as a record is: one outside its folder (``..``, an
    absolute path, a link out) or through a symbolic link (to a folder inside, or a log in the
    run folder linked) is refused in one line, and no figure is drawn from it (before:
    ``--plot`` drew the logs of any folder named)."""
    elsewhere = tmp_path / "elsewhere" / "run"
    elsewhere.parent.mkdir()
    _pytorch_run(elsewhere)
    folder = tmp_path / "evidence"
    folder.mkdir()
    text = {"../elsewhere/run": "../elsewhere/run", "absolute": str(elsewhere)}.get(where, "run")
    if where == "link out":
        (folder / "run").symlink_to(elsewhere)
    if where == "link to a folder inside":
        elsewhere.rename(folder / "real")
        (folder / "run").symlink_to(folder / "real")
    if where == "link inside":
        (folder / "run").mkdir()
        (folder / "run" / "metrics.jsonl").symlink_to(elsewhere / "metrics.jsonl")
    data = write_rows(folder / "runs.csv", [{**GOOD, "run_dir": text}])
    argv = [str(data), "--plot", str(tmp_path / "figure.png")]
    err = refused(argv, tmp_path, capsys)
    assert f"{data} line 2 is not a run of a report's CSV: run_dir {text!r}" in err, err
    said = "is a symbolic link" if where.endswith("inside") else "is not a folder inside"
    assert said in err, err


@pytest.mark.unit
def test_run_dirs_are_written_and_read_relative_to_the_csvs_folder(
    tmp_path, capsys, monkeypatch
) -> None:
    """The CSV names each run folder relative to its own folder, and a report reads it back
    from there whatever the current folder (before: relative to the current folder, so a
    report run elsewhere found no logs); a run folder outside the CSV's folder is left empty."""
    results = tmp_path / "results"
    write_sweep(results / "sweep", "pytorch", {("linear", b, 0.1, 0): 80.0 + 10 * b
                                               for b in (0.1, 0.25)}, tmp_path)  # fmt: skip
    monkeypatch.chdir(results)
    code, _, err = call_tool(main, ["sweep", "--csv", "runs.csv"], capsys)
    assert code == 0, err
    with (results / "runs.csv").open() as f:
        assert [r["run_dir"] for r in csv.DictReader(f)] == [
            "sweep/linear_budget10_lr0.1_seed0", "sweep/linear_budget25_lr0.1_seed0",
        ]  # fmt: skip
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "b")
    code, _, err = call_tool(main, [str(results / "runs.csv"), "--plot", "figure.png"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in Path().iterdir()) == [
        "figure.png", "figure_loss.png", "figure_lr.png"
    ]  # the logs found beside the CSV  # fmt: skip
    code, _, err = call_tool(main, [str(results / "sweep"), "--csv", "elsewhere.csv"], capsys)
    with open("elsewhere.csv") as f:
        assert code == 0 and {r["run_dir"] for r in csv.DictReader(f)} == {""}, err
    assert call_tool(main, ["elsewhere.csv"], capsys)[0] == 0


@pytest.mark.unit
def test_a_csv_of_several_families_reads_as_several(tmp_path, capsys) -> None:
    """One report of two families writes one CSV; read back it is two tables, not one (before:
    every row was taken for the first row's family)."""
    other = {**GOOD, "family": "theirs.py", "top-1": "70.0"}
    data = write_rows(tmp_path / "runs.csv", [GOOD, other])
    code, out, err = call_tool(main, [str(data)], capsys)
    assert code == 0, err
    assert "### top-1: pytorch mine.py (" in out and "### top-1: pytorch theirs.py (" in out
    assert [len(s.cells) for s in read_report_csv(data)] == [1, 1]
    write_rows(data, [GOOD, {**GOOD, "top-1": "91.0"}])
    assert "line 3 repeats the run of line 2" in refused([str(data)], tmp_path, capsys)


@pytest.mark.unit
@pytest.mark.parametrize(
    "path",
    sorted(p.relative_to(REPO) for p in REPO.glob("docs/*/*.csv") if p.parent.name != "search"),
    ids=str,
)  # docs/search/: one row per search, not per run (tests/tools/test_search_eval.py)
def test_every_committed_csv_reads_back(path) -> None:
    """The committed evidence (docs/results, docs/paper) passes every check; its run folders,
    not committed, are read relative to the CSV's folder (none there)."""
    sweeps = read_report_csv(REPO / path)
    cells = [c for s in sweeps for c in s.cells]
    assert cells and all(c.run_dir.resolve().is_relative_to((REPO / path).parent) for c in cells)
    assert not any(os.path.isdir(c.run_dir) for c in cells)

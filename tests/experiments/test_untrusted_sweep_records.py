"""Every value read from a sweep folder is checked against what it may be (issue 40, items 9-12
and 19): a record's schedule is a registered schedule, its budget one of the family's, its base
LR a positive number, its seed an integer, its framework the sweep's, its values those of its
folder; every path stays inside the sweep folder (no cell folder that is, or holds, a symbolic
link); a final metric lies in the range its training tool logs it in.

Each bad folder is read by ``budgeted-report``, ``budgeted-sweep --status``, ``budgeted-sweep
--dry-run`` and the sweep itself (the same command again), through their console-script
functions: each refuses it in the same one line (with its own prefix), exit 2, and every file
is unchanged, none added.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from run_folders import TIMESTAMP, call_tool, toy_data, write_sweep

from budgeted import report, sweep
from budgeted.schedules import schedule_names

REPO = Path(__file__).resolve().parents[2]
GRID = ["pytorch", "--task", "digits", "--schedules", "linear", "--budgets", "0.01", "--lrs",
        "0.3", "--seeds", "0", "1"]  # fmt: skip
"""The digits sweep of the folders below: 1 schedule x the 1 % budget x base LR 0.3 x 2 seeds."""
CELLS = {("linear", 0.01, 0.3, 0): 79.85, ("linear", 0.01, 0.3, 1): 81.36}
CELL = "linear_budget1_lr0.3_seed0"
ALLOWED = "allowed: a JSON object written by budgeted-sweep (move the file away to start that " \
    "sweep or cell over)"  # fmt: skip


def registered() -> str:
    """The registered schedules as the tools list them, read when a test runs: a schedule that
    another test in the same worker registered (tests/conftest.py's ``sqrt``) is listed too."""
    return ", ".join(schedule_names())


TOOLS = ("budgeted-report", "budgeted-sweep --status", "budgeted-sweep --dry-run", "budgeted-sweep")


def _tool(name: str, out: Path) -> tuple[Callable, list[str]]:
    """(console-script function, its arguments) of a reader of the sweep folder ``out``."""
    return {
        "budgeted-report": (report.main, [str(out)]),
        "budgeted-sweep --status": (sweep.main, ["--status", str(out)]),
        "budgeted-sweep --dry-run": (sweep.main, [*GRID, "--out", str(out), "--dry-run"]),
        "budgeted-sweep": (sweep.main, [*GRID, "--out", str(out)]),
    }[name]


def digests(root: Path) -> dict[str, str]:
    """Every entry under ``root``, links not followed: a file's sha256, a link's target."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            if path.is_symlink():
                found[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "folder"
    return found


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _final(value: str) -> Callable[[Path, Path], None]:
    """Seed 1's final val_accuracy written as ``value`` (JSON text: NaN, 1e999, ...)."""

    def edit(out: Path, tmp: Path) -> None:
        log = out / "linear_budget1_lr0.3_seed1" / "metrics.jsonl"
        lines = log.read_text().splitlines()
        lines[-1] = f'{{"iteration": 17, "val_accuracy": {value}, "final": true}}'
        log.write_text("\n".join(lines) + "\n")

    return edit


def _cell_field(key: str, value: object) -> Callable[[Path, Path], None]:
    """The cell's ``sweep_cell.json`` with ``key`` set to ``value``."""
    return lambda out, tmp: _edit_json(
        out / CELL / "sweep_cell.json", lambda r: r.update({key: value})
    )


def _planned(cell: list) -> Callable[[Path, Path], None]:
    return lambda out, tmp: _edit_json(out / "sweep.json", lambda r: r["cells"].append(cell))


def _outside(out: Path, tmp: Path) -> None:
    """A finished run with a fabricated 99.90 beside the sweep folder, and a planned cell whose
    schedule climbs out to it."""
    write_sweep(tmp / "outside", "pytorch", {("linear", 0.01, 0.3, 0): 99.9}, tmp)
    _planned(["../outside/linear", 0.01, 0.3, 0])(out, tmp)


def _absolute(out: Path, tmp: Path) -> None:
    (out / "extra").mkdir()
    record = json.loads((out / CELL / "sweep_cell.json").read_text())
    record["schedule"] = "/etc/linear"
    (out / "extra" / "sweep_cell.json").write_text(json.dumps(record))


def _linked_cell(out: Path, tmp: Path) -> None:
    """The cell folder moved beside an unrelated file, a link to it in its place."""
    (tmp / "target").mkdir()
    (tmp / "target" / "unrelated.txt").write_text("not the sweep's")
    (out / CELL).rename(tmp / "target" / "real")
    (out / CELL).symlink_to(tmp / "target")


def _linked_log(out: Path, tmp: Path) -> None:
    """The cell's log a link to a log outside the sweep folder with a fabricated 99.90."""
    log = out / CELL / "metrics.jsonl"
    lines = log.read_text().splitlines()
    lines[-1] = '{"iteration": 17, "val_accuracy": 0.999, "final": true}'
    (tmp / "forged.jsonl").write_text("\n".join(lines) + "\n")
    log.unlink()
    log.symlink_to(tmp / "forged.jsonl")


def _frameworks(out: Path, tmp: Path) -> None:
    _edit_json(out / "sweep.json", lambda r: r.update(framework="mmseg"))


ARMS = ", schedulefree or subset (NAME[:KEY=VALUE,...][@OPTIMIZER])"
"""What else a cell's schedule may be (budgeted.experiments.arms)."""
CELL_FILE = "{out}/" + CELL + "/sweep_cell.json is not a sweep record: "
SWEEP_FILE = "{out}/sweep.json is not a sweep record: "
METRICS_LOG = "{out}/linear_budget1_lr0.3_seed1/metrics.jsonl: its final val_accuracy "
NOT_A_RESULT = " is not a result; allowed: a number in [0, 1] (pytorch logs val_accuracy as a " \
    "fraction; move the cell's folder away to train it again)"  # fmt: skip
LINK = " is a symbolic link (to {target}); allowed: plain files and folders inside the sweep " \
    "folder (a sweep folder is read and written only inside it; move the link away)"  # fmt: skip
CASES = {
    # 9. a record key that climbs out of the sweep folder
    "sweep.json cell ../outside/linear": (_outside, SWEEP_FILE + "its cell ['../outside/linear', "
        f"0.01, 0.3, 0]: schedule '../outside/linear' is not a registered schedule "
        f"({{registered}}){ARMS}; {ALLOWED}"),
    "sweep_cell.json schedule /etc/linear": (_absolute, "{out}/extra/sweep_cell.json is not a "
        f"sweep record: its schedule '/etc/linear' is not a registered schedule "
        f"({{registered}}){ARMS}; {ALLOWED}"),
    # 10. a cell folder that is (or holds) a symbolic link
    "cell folder a link": (_linked_cell, "{out}/" + CELL + LINK.replace("{target}",
        "{tmp}/target")),
    "metrics.jsonl a link": (_linked_log, "{out}/" + CELL + "/metrics.jsonl" + LINK.replace(
        "{target}", "{tmp}/forged.jsonl")),
    # 11. a final metric that is not finite, or outside its range
    **{f"val_accuracy {value}": (_final(value), METRICS_LOG + shown + NOT_A_RESULT)
       for value, shown in [("NaN", "nan"), ("Infinity", "inf"), ("1e308", "1e+308"),
                            ("1e999", "inf"), ("2.5", "2.5"), ("-3", "-3.0")]},
    # 12. a 400-digit integer
    "sweep_cell.json wall_s of 400 digits": (_cell_field("wall_s", 10**400 - 1), CELL_FILE
        + f"its wall_s {'9' * 57}... is not a number of seconds >= 0 or null; {ALLOWED}"),
    "sweep.json seed of 400 digits": (_planned(["linear", 0.01, 0.3, 10**400 - 1]), SWEEP_FILE
        + f"its cell {['linear', 0.01, 0.3, 10**400 - 1]!r:.57}...: seed {'9' * 57}... is not an "
        f"integer in [0, 2**32) or null; {ALLOWED}"),
    # 19. values of the wrong type, of another cell, of another framework
    "sweep_cell.json seed 1.5": (_cell_field("seed", 1.5), CELL_FILE
        + f"its seed 1.5 is not an integer in [0, 2**32) or null; {ALLOWED}"),
    "sweep_cell.json seed true": (_cell_field("seed", True), CELL_FILE
        + f"its seed True is not an integer in [0, 2**32) or null; {ALLOWED}"),
    "sweep_cell.json lr true": (_cell_field("lr", True), CELL_FILE
        + f"its lr True is not a positive number or null; {ALLOWED}"),
    "sweep_cell.json budget of another folder": (_cell_field("budget", 0.05), CELL_FILE
        + "its schedule, budget, lr and seed are those of the cell linear_budget5_lr0.3_seed0, "
        f"not of its folder {CELL}; {ALLOWED}"),
    "sweep_cell.json of another framework": (_cell_field("framework", "mmseg"), CELL_FILE
        + f"its framework 'mmseg' is not the sweep's (pytorch); {ALLOWED}"),
    "sweep.json cell schedule 5": (_planned([5, 0.01, 0.3, 0]), SWEEP_FILE
        + "its cell [5, 0.01, 0.3, 0]: schedule 5 is not a registered schedule "
        f"({{registered}}){ARMS}; {ALLOWED}"),
    "sweep.json cell seed 1.5": (_planned(["linear", 0.01, 0.3, 1.5]), SWEEP_FILE
        + f"its cell ['linear', 0.01, 0.3, 1.5]: seed 1.5 is not an integer in [0, 2**32) or "
        f"null; {ALLOWED}"),
    "sweep.json cell seed true": (_planned(["linear", 0.01, 0.3, True]), SWEEP_FILE
        + f"its cell ['linear', 0.01, 0.3, True]: seed True is not an integer in [0, 2**32) or "
        f"null; {ALLOWED}"),
    "sweep.json cell lr true": (_planned(["linear", 0.01, True, 0]), SWEEP_FILE
        + f"its cell ['linear', 0.01, True, 0]: lr True is not a positive number or null; "
        f"{ALLOWED}"),
    "sweep.json cell budget 0.5": (_planned(["linear", 0.5, 0.3, 0]), SWEEP_FILE
        + "its cell ['linear', 0.5, 0.3, 0]: budget 0.5 is not a budget of "
        f"examples/digits_budget.py (0.01, 0.02, 0.05, 0.1, 0.25, 1); {ALLOWED}"),
    "sweep.json of another framework": (_frameworks, SWEEP_FILE
        + "its framework 'mmseg' is not that of its family examples/digits_budget.py (pytorch); "
        f"{ALLOWED}"),
}  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", CASES)
def test_a_bad_value_in_a_sweep_folder_is_one_line_and_nothing_is_written(
    case, tool, tmp_path, capsys
):
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", CELLS, tmp_path)
    edit, line = CASES[case]
    edit(out, tmp_path)
    before = digests(tmp_path)
    function, argv = _tool(tool, out)
    code, printed, err = call_tool(function, argv, capsys)
    prefix = "report" if tool == "budgeted-report" else "sweep"
    assert (code, printed) == (2, ""), (code, printed, err)
    assert (
        err == f"{prefix}: error: {line.format(out=out, tmp=tmp_path, registered=registered())}\n"
    )
    assert digests(tmp_path) == before


@pytest.mark.unit
@pytest.mark.parametrize("seed", ["4294967296", "9" * 400])
def test_a_seed_the_records_would_refuse_is_refused_before_anything_is_written(
    seed, tmp_path, capsys
):
    """``--seeds`` takes what a record may hold (below 2**32, numpy's seeds): a 400-digit seed
    was planned (a folder name too long to create) and written into ``sweep.json``."""
    out = tmp_path / "sweep"
    code, printed, err = call_tool(sweep.main, [*GRID[:-2], seed, "--out", str(out)], capsys)
    assert (code, printed) == (2, "")
    shown = repr(seed) if len(seed) < 59 else f"{repr(seed)[:57]}..."
    assert err == f"sweep: error: --seeds value {shown} is not below 2**32; allowed: e.g. 0 1 2\n"
    assert not out.exists()


@pytest.mark.unit
def test_a_clean_digits_folder_is_read_by_every_tool(tmp_path, capsys):
    """The folder the cases above start from is read as it is (so their refusals are theirs)."""
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", CELLS, tmp_path)
    before = digests(tmp_path)
    for tool in TOOLS[:3]:
        code, printed, err = call_tool(*_tool(tool, out), capsys)
        assert (code, err) == (0, ""), (tool, err)
        assert digests(tmp_path) == before
    code, printed, err = call_tool(*_tool("budgeted-report", out), capsys)
    assert "| 0.01 | 17 | 80.60 ± 1.07 (2) |" in printed, printed


@pytest.mark.unit
@pytest.mark.parametrize(
    ("framework", "logged", "line"),
    [
        ("mmseg", "150.0", "{run}/" + TIMESTAMP + "/vis_data/scalars.json: its final mIoU 150.0 is "
         "not a result; allowed: a number in [0, 100] (mmseg logs mIoU in percent; move the "
         "cell's folder away to train it again)"),
        ("mmseg", "NaN", "{run}/" + TIMESTAMP + "/vis_data/scalars.json: its final mIoU "
         "nan is not a result; allowed: a number in [0, 100] (mmseg logs mIoU in percent; move "
         "the cell's folder away to train it again)"),
        ("detectron2", "Infinity", "{run}/metrics.json: its final bbox/AP inf is not a result; "
         "allowed: a number in [0, 100] or NaN (detectron2 logs bbox/AP in percent, NaN where "
         "the model predicted nothing; move the cell's folder away to train it again)"),
        ("detectron2", "-1.0", "{run}/metrics.json: its final bbox/AP -1.0 is not a result; "
         "allowed: a number in [0, 100] or NaN (detectron2 logs bbox/AP in percent, NaN where "
         "the model predicted nothing; move the cell's folder away to train it again)"),
    ],
    ids=["mmseg 150", "mmseg nan", "detectron2 inf", "detectron2 -1"],
)  # fmt: skip
def test_a_final_metric_outside_its_range_is_one_line(framework, logged, line, tmp_path, capsys):
    """The range is the one each tool logs its metric in: percent for Detectron2's COCO AP,
    MMSegmentation's mIoU and MMPretrain's accuracy, fractions for MMDetection's COCO mAP,
    MMAction2's accuracy and the digits example's; NaN only where Detectron2 logs it for a model
    that predicted nothing (counted as 0, as before)."""
    out = tmp_path / "sweep"
    data = toy_data(framework, tmp_path / "datasets")
    write_sweep(out, framework, {("linear", 0.01, None): 41.25}, data)
    key = "bbox/AP" if framework == "detectron2" else "mIoU"
    for log in [out / "linear_budget1" / "metrics.json", *out.glob("*/*/vis_data/scalars.json")]:
        if log.is_file():  # the final evaluation's metric, as the log holds it
            log.write_text(log.read_text().replace(f'"{key}": 41.25', f'"{key}": {logged}'))
    before = digests(tmp_path)
    code, printed, err = call_tool(report.main, [str(out)], capsys)
    assert (code, printed) == (2, ""), err
    assert err == f"report: error: {line.format(run=out / 'linear_budget1')}\n"
    assert digests(tmp_path) == before


@pytest.mark.e2e
def test_a_real_digits_sweep_refuses_a_linked_cell_and_a_cell_outside_it(tmp_path):
    """A real digits sweep: its cell folder replaced by a link to a folder with an unrelated
    file, then rerun with the same command (and ``--dry-run``, ``--status``, the report): one
    line each, nothing written through the link. Then, the cell back in place, a cell planned in
    ``sweep.json`` whose schedule climbs out of the folder to a fabricated 99.90: the same."""
    out, target = tmp_path / "sweep", tmp_path / "target"
    grid = [*GRID[:-1], "--out", str(out)]  # seed 0 only
    tools = {
        "report": [sys.executable, "-m", "budgeted.experiments.report", str(out)],
        "status": [sys.executable, "-m", "budgeted.experiments.sweep", "--status", str(out)],
        "dry-run": [sys.executable, "-m", "budgeted.experiments.sweep", *grid, "--dry-run"],
        "sweep": [sys.executable, "-m", "budgeted.experiments.sweep", *grid],
    }
    first = subprocess.run(tools["sweep"], capture_output=True, text=True, cwd=REPO)
    assert first.returncode == 0, first.stderr
    target.mkdir()
    (target / "unrelated.txt").write_text("not the sweep's")
    (out / CELL).rename(tmp_path / "moved")
    (out / CELL).symlink_to(target)
    in_a_new_process = subprocess.run(  # the built-ins: no test registered anything there
        [sys.executable, "-c", "import budgeted; print(', '.join(budgeted.schedule_names()))"],
        capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    linked = f"{out / CELL}{LINK.replace('{target}', str(target))}"
    outside = (
        f"{SWEEP_FILE.format(out=out)}its cell ['../outside/linear', 0.01, 0.3, 0]: schedule "
        f"'../outside/linear' is not a registered schedule ({in_a_new_process}){ARMS}; {ALLOWED}"
    )
    for case, line in (("link", linked), ("outside", outside)):
        if case == "outside":
            (out / CELL).unlink()
            (tmp_path / "moved").rename(out / CELL)
            _outside(out, tmp_path)
        before = digests(tmp_path)
        for name, command in tools.items():
            run = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
            prefix = "report" if name == "report" else "sweep"
            assert (run.returncode, run.stdout) == (2, ""), (case, name, run.stdout, run.stderr)
            assert run.stderr == f"{prefix}: error: {line}\n", (case, name)
            assert digests(tmp_path) == before, (case, name)
    assert sorted(p.name for p in target.iterdir()) == ["unrelated.txt"]

"""What a sweep cell came to, beyond finished (issue 30): a run whose loss became non-finite
diverged, a result ("this base LR diverges") and never a metric; a time budget that ended
before its LR decayed is a metric, marked. ``budgeted-sweep`` records them in
``sweep_cell.json`` and goes on, ``budgeted-report`` names them and never picks their LR as the
best, and a rerun does not train them again. Also: output folders that cannot be written."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_folders import toy_data, write_sweep

from budgeted.safety.preemption import DIVERGED_EXIT_CODE, UNDECAYED_EXIT_CODE

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SWEEP = [sys.executable, "-m", "budgeted.experiments.sweep"]
REPORT = [sys.executable, "-m", "budgeted.experiments.report"]
BRANCH = [sys.executable, "-m", "budgeted.experiments.branch"]


def cli(cmd: list[str], *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, cwd=REPO, check=False
    )


def table(text: str, title: str) -> dict[str, dict[str, str]]:
    """``{budget: {column: cell}}`` of the Markdown table under the heading containing title."""
    lines = text.split(title, 1)[1].split("\n\n", 2)[1].splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {row[0]: dict(zip(head[1:], row[1:])) for row in rows}


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (and the folders, as empty)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


TINY = ["INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "64", "INPUT.MIN_SIZE_TEST",
        "64", "INPUT.MAX_SIZE_TEST", "64", "SOLVER.BUDGET.WRITER_PERIOD", "1"]  # fmt: skip
"""The Detectron2 tests' 64 px images (tests/detectron2/d2_testutils.py), losses logged each
iteration."""
DIVERGES = {"mmseg": ["optim_wrapper.clip_grad=None", "default_hooks.logger.interval=1"],
            "detectron2": TINY}  # fmt: skip
"""At ``--lrs 1e8`` (without gradient clipping) the toy's loss is NaN within a few iterations."""
UNDECAYED = {
    "mmseg": ["--budget-time", "1", "param_scheduler.0.warmup_iters=300"],
    "detectron2": ["--budget-time", "1", "SOLVER.WARMUP_ITERS", "300", *TINY],
}
"""A time budget of 1 s and a warmup of 300 iterations: the deadline comes inside the warmup
however fast the machine is (with the configs' few warmup iterations a fast machine decayed)."""
ENDED = {
    "diverged": (
        "diverged (a non-finite loss): {name}; results of their base LR, kept and not "
        "retrained; budgeted-report names them and never picks their LR as the best (move a "
        "cell's folder away to train it again)"
    ),
    "undecayed": (
        "ended undecayed (the time budget ran out before the LR decayed): {name}; their "
        "metrics are kept, marked in budgeted-report, and their LR is never the best"
    ),
}
"""The sweep's last line, per status."""


@pytest.mark.parametrize("case", ["diverged", "undecayed"])
@pytest.mark.parametrize("framework", ["mmseg", "detectron2"])
def test_a_diverged_or_undecayed_cell_is_recorded_never_the_best_lr_and_not_retrained(
    framework, case, tmp_path
):
    """The real training tools (toy PSPNet, toy Mask R-CNN) end such a run with their own exit
    status and line (a tool that trains on through NaN: its log shows the loss): the sweep
    records the cell, goes on without --keep-going and exits with that status; the report names
    the cell, and only an LR whose runs all finished is the best; a rerun trains nothing again.
    The issue's case is the first: MMSeg at ``lr=1e8`` exited 0 with mIoU 3.95, and the sweep
    and report listed it as finished, "3.95 @ 1e+08", normalized 1.000."""
    diverged = case == "diverged"
    budget, lr, code = (
        ("0.01", "1e+08", DIVERGED_EXIT_CODE) if diverged else ("1", "0.01", UNDECAYED_EXIT_CODE)
    )
    name = f"linear_budget{'1' if diverged else '100'}_lr{lr}"
    data, out = tmp_path / "data", tmp_path / "sweep"
    args = [framework, "--toy", "--schedules", "linear", "--budgets", budget, "--lrs", lr,
            "--data", data, "--out", out, "--",
            *(DIVERGES if diverged else UNDECAYED)[framework]]  # fmt: skip
    run = cli(SWEEP, *args)
    assert run.returncode == code, run.stderr[-3000:]
    assert run.stderr == f"sweep: 1 cell(s) {ENDED[case].format(name=name)}\n"
    record = json.loads((out / name / "sweep_cell.json").read_text())
    assert record["status"] == case and record["exit"] in (0, code)
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith(f"[1/1] {name}: running"))
    metric = "mIoU" if framework == "mmseg" else "box AP"
    if diverged:  # the tool's line (exit 3), or the logged NaN (a tool that trained on)
        assert record["metrics"] is None and "nan" in line.split(" DIVERGED after ")[1], line
        shown, finished = "diverged", "0/1 runs finished, 1 diverged"
    else:
        value = record["metrics"][metric]
        tool = "train_seg" if framework == "mmseg" else "train_net"
        assert f"s: {metric} {value:.2f}" in line and f"(UNDECAYED: {tool}: time budget of 1 s " \
            "ended before the schedule decayed: " in line  # fmt: skip
        shown, finished = f"{value:.2f} *", "1/1 runs finished"
    report = cli(REPORT, out)
    assert report.returncode == 0, report.stderr
    assert table(report.stdout, f"### {metric}")[budget][f"linear lr={lr}"] == shown
    assert any(f"; {finished}{end}" in report.stdout for end in ";)"), report.stdout
    assert f"never picked as the best: {name}." in report.stdout
    assert table(report.stdout, f"#### {metric} at the best base LR")[budget]["linear"] == "-"
    assert f"@ {lr}" not in report.stdout and "normalized" not in report.stdout
    # beside a sweep at a sane LR (whatever its metric), that LR is the best
    write_sweep(tmp_path / "sane", framework, {("linear", float(budget), 0.001): 0.5}, data)
    merged = cli(REPORT, tmp_path / "sane", out)
    best = table(merged.stdout, f"#### {metric} at the best base LR")
    assert best[budget]["linear"] == "0.50 @ 0.001 (edge)", merged.stdout
    before = digests(out / name)
    again = cli(SWEEP, *args)
    assert again.returncode == code, again.stderr[-3000:]
    skipped = "diverged: a result of that base LR" if diverged else f"finished undecayed: {metric}"
    assert f"[1/1] {name}: skipped, already {skipped}" in again.stdout
    assert "running" not in again.stdout and digests(out / name) == before


def _report_case(case: str, tmp_path: Path) -> Path:
    """A sweep of two base LRs whose better-looking one diverged or ended undecayed."""
    data, out = toy_data("mmseg", tmp_path / "data"), tmp_path / "sweep"
    write_sweep(out, "mmseg", {("linear", 0.01, 0.01): 2.0}, data)
    if case == "diverged":  # as a sweep recorded it before: exit 0, mIoU 3.95, NaN losses
        other = write_sweep(tmp_path / "other", "mmseg", {("linear", 0.01, 1e8): 3.95}, data,
                            losses=(math.nan,) * 3)  # fmt: skip
    else:  # a time budget whose LR was still high when it ran out (exit 4)
        other = write_sweep(tmp_path / "other", "mmseg", {("linear", 0.01, 0.1): 30.0}, data,
                            status="undecayed")  # fmt: skip
    for name, run_dir in other.items():
        shutil.move(run_dir, out / name)
    record = json.loads((out / "sweep.json").read_text())
    record["cells"] += json.loads((tmp_path / "other" / "sweep.json").read_text())["cells"]
    (out / "sweep.json").write_text(json.dumps(record))
    return out


@pytest.mark.parametrize(
    ("case", "cell", "note"),
    [
        (
            "diverged",
            "diverged",
            "1 run(s) diverged (a non-finite training loss): no result, and their base LR is "
            "never picked as the best: linear_budget1_lr1e+08.",
        ),
        (
            "undecayed",
            "30.00 *",
            "1 run(s) ended undecayed (the time budget ran out before the LR decayed): their "
            "metrics are marked *, and their base LR is never picked as the best: "
            "linear_budget1_lr0.1.",
        ),
    ],
)
def test_the_report_never_picks_a_diverged_or_undecayed_lr_as_the_best(case, cell, note, tmp_path):
    """A diverged run is never a metric, even one an older sweep recorded as finished (its log
    holds the NaN losses); an undecayed one is shown, marked; neither LR is the best, though
    its metric is higher; the CSV says which is which; a sweep never retrains either."""
    out = _report_case(case, tmp_path)
    run = cli(REPORT, out, "--csv", tmp_path / "r.csv")
    assert run.returncode == 0, run.stderr
    lr = "1e+08" if case == "diverged" else "0.1"
    assert table(run.stdout, "### mIoU")["0.01"] == {
        "iterations": "32", "linear lr=0.01": "2.00", f"linear lr={lr}": cell,
    }  # fmt: skip
    assert note in run.stdout
    assert table(run.stdout, "#### mIoU at the best base LR")["0.01"] == {
        "linear": "2.00 @ 0.01 (edge)"
    }
    assert table(run.stdout, "#### mIoU normalized")["0.01"] == {"linear": "1.000"}
    with (tmp_path / "r.csv").open() as f:
        rows = {row["lr"]: (row["mIoU"], row["status"]) for row in csv.DictReader(f)}
    assert rows == {"0.01": ("2.0", "finished"), lr: ("" if case == "diverged" else "30.0", case)}
    dry = cli(SWEEP, "mmseg", "--toy", "--schedules", "linear", "--budgets", "0.01", "--lrs",
              "0.01", lr, "--data", tmp_path / "data", "--out", out, "--dry-run")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    shown = "diverged: a result of that base LR" if case == "diverged" else (
        "finished undecayed: mIoU 30.00"
    )  # fmt: skip
    assert f"linear_budget1_lr{lr}: skip ({shown}" in dry.stdout
    assert dry.stdout.startswith(
        "[sweep] grid: 2 runs (1 finished, 1 diverged, 0 to run or resume"
        if case == "diverged"
        else "[sweep] grid: 2 runs (2 finished, 0 to run or resume"
    )


def _read_only_runner(folder: Path) -> list[str]:
    """The command prefix that runs a tool with ``folder`` read-only: for root (who may write
    anywhere a mode forbids) a read-only bind mount in a mount namespace of its own; else the
    folder's mode made 0o555 here (and left so: ``tmp_path`` is the test's own)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    mount = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    prefix = ["unshare", "-m", "sh", "-c", mount, "sh", str(folder)]
    if shutil.which("unshare") is None or subprocess.run([*prefix, "true"]).returncode != 0:
        pytest.skip("a read-only folder needs unshare -m (root) or a user other than root")
    return prefix


@pytest.mark.parametrize(
    ("tool", "args", "flag"),
    [
        ("sweep", ["mmseg", "--toy", "--budgets", "0.01", "--out", "{ro}/new"], "--out"),
        ("sweep", ["mmseg", "--toy", "--budgets", "0.01", "--out", "{ro}"], "--out"),
        ("branch", ["mmseg", "--toy", "--budgets", "0.01", "0.05", "--out", "{ro}/new"], "--out"),
        ("report", ["{sweep}", "--csv", "{ro}/r.csv"], "--csv"),
        ("report", ["{sweep}", "--plot", "{ro}/r.png"], "--plot"),
    ],
    ids=[
        "sweep --out new",
        "sweep --out a finished sweep",
        "branch --out",
        "report --csv",
        "report --plot",
    ],
)
def test_a_read_only_output_folder_is_one_line_and_nothing_is_written(tool, args, flag, tmp_path):
    """Before: an ``OSError`` traceback (the report's after its tables); now one line, exit 2,
    before anything is read or written."""
    data = toy_data("mmseg", tmp_path / "data")
    ro, sweep = tmp_path / "ro", tmp_path / "sweep"
    write_sweep(sweep, "mmseg", {("linear", 0.01, None): 41.0}, data)
    if "{ro}" in args:  # the read-only folder is itself a finished sweep
        write_sweep(ro, "mmseg", {("linear", 0.01, None): 41.0}, data)
    else:
        ro.mkdir()
    args = [a.format(ro=ro, sweep=sweep) for a in args]
    if tool != "report":
        args += ["--data", str(data)]
    before = digests(tmp_path)
    command = {"sweep": SWEEP, "report": REPORT, "branch": BRANCH}[tool]
    run = cli([*_read_only_runner(ro), *command], *args)
    target = args[args.index(flag) + 1]
    why = "Read-only file system" if os.geteuid() == 0 else "Permission denied"
    allowed = "a folder you can write to" if tool != "report" else "a path in a folder you can"
    assert (run.returncode, run.stdout) == (2, ""), run.stderr[-3000:]
    assert run.stderr.startswith(f"{tool}: error: {flag} {target} cannot be written ({ro}: {why})")
    assert allowed in run.stderr and run.stderr.endswith("(nothing was written)\n")
    assert run.stderr.count("\n") == 1
    ro.chmod(0o755)
    assert digests(tmp_path) == before

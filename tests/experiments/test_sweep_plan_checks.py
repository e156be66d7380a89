"""What ``budgeted-sweep`` checks before it writes anything (issue 52): a grid that plans no cell,
a word given twice to ``--lrs-for``, a ``--preload`` module that fails or exits as it is
imported, a finished run whose final metric is no number in its range. Each is one line
``<tool>: error: ...`` naming the value and what is allowed, exit 2, every file unchanged and
none added; ``--budgets``' help names the fractions one's own experiment takes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from own_configs import d2_yaml
from own_sweeps import digests
from run_folders import call_tool, write_sweep

from budgeted import report, sweep
from budgeted.experiments.sweep.cli import build_parser

GRID = ["pytorch", "--task", "digits", "--schedules", "linear", "--budgets", "0.01", "--lrs",
        "0.3", "--seeds", "0", "1"]  # fmt: skip
"""The digits sweep of :func:`write_sweep`'s folders: linear x 1 % x base LR 0.3 x 2 seeds."""
CELLS = {("linear", 0.01, 0.3, 0): 79.85, ("linear", 0.01, 0.3, 1): 81.36}


def refused(function, argv: list, root: Path, capsys, prefix: str = "sweep") -> str:
    """The one line ``function(argv)`` refuses with (exit 2, nothing printed on stdout); nothing
    under ``root`` changed or added."""
    before = digests(root)
    code, printed, err = call_tool(function, [str(a) for a in argv], capsys)
    assert (code, printed) == (2, ""), (code, printed, err)
    assert err.count("\n") == 1 and err.startswith(f"{prefix}: error: "), err
    assert digests(root) == before
    return err.strip()


@pytest.mark.unit
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_grid_that_plans_no_cell_is_refused(dry_run, tmp_path, capsys, monkeypatch):
    """Item 1: a sweep with no cell (here a shipped family whose config folder holds none of its
    configs) wrote ``"cells": []`` and the toy set, and exited 0."""
    (tmp_path / "configs" / "mmseg" / "toy").mkdir(parents=True)
    monkeypatch.setenv("BUDGETED_CONFIGS", str(tmp_path / "configs"))
    argv = ["mmseg", "--toy", "--data", tmp_path / "data", "--out", tmp_path / "out"]
    line = refused(sweep.main, [*argv, *(["--dry-run"] if dry_run else [])], tmp_path, capsys)
    assert line == (
        f"sweep: error: the sweep plans no cell: {tmp_path}/configs/mmseg/toy holds none of the "
        "pspnet_toy family's configs (pspnet_r18-toy_cityscapes_budget*.py); allowed: a config "
        "root with them (the checkout's configs/ or $BUDGETED_CONFIGS)"
    )


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["yaml", "script"])
def test_ones_own_yaml_or_script_plans_linear_and_step_by_default(kind, tmp_path, capsys):
    """Item 1, Detectron2 yamls alike: without ``--schedules`` one's own experiment plans the
    paper's comparison, ``linear`` and ``step``, at each budget (docs/sweeps.md)."""
    if kind == "yaml":
        argv = ["--config", d2_yaml(tmp_path)]  # 20 iterations, warmup 2
    else:
        (tmp_path / "train.py").write_text("print('trains')\n")
        argv = ["--script", tmp_path / "train.py", "--full-iters", "20"]
    argv += ["--budgets", "0.25", "0.5", "--out", tmp_path / "out", "--dry-run"]
    code, printed, err = call_tool(sweep.main, [str(a) for a in argv], capsys)
    assert (code, err) == (0, ""), err
    cells = [line.split(":")[0] for line in printed.splitlines()[1:]]
    assert cells == ["linear_budget25", "step_budget25", "linear_budget50", "step_budget50"]
    assert not (tmp_path / "out").exists()


@pytest.mark.unit
def test_a_word_given_twice_to_lrs_for_is_refused(tmp_path, capsys):
    """Weak point: the second ``--lrs-for linear=...`` replaced the first without a word."""
    argv = [*GRID[:7], "--lrs-for", "linear=0.1", "--lrs-for", "linear=0.2,0.3", "--out",
            tmp_path / "out", "--dry-run"]  # fmt: skip
    assert refused(sweep.main, argv, tmp_path, capsys) == (
        "sweep: error: --lrs-for 'linear' is given twice (linear=0.1 and linear=0.2,0.3); "
        "allowed: one --lrs-for per word, its LRs together (linear=0.1,0.2,0.3)"
    )


PRELOADED = {
    "exits-0": ("raise SystemExit(0)", "SystemExit: 0"),
    "raises": ("raise ValueError('no GPU')", "ValueError: no GPU"),
}
"""A ``--preload`` module's code, and how the refusal names what it did."""


@pytest.mark.unit
@pytest.mark.parametrize("case", PRELOADED)
def test_a_preload_module_that_exits_or_raises_is_refused_before_anything_is_written(
    case, tmp_path, capsys, monkeypatch
):
    """Item 4 and a weak point: a ``--preload`` module that raised ``SystemExit(0)`` ended the
    sweep silently with exit 0, after ``sweep.json`` was written; one that raised was refused
    only after it was written."""
    code, why = PRELOADED[case]
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ beside the module
    name = f"preloaded_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(f"{code}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    script = tmp_path / "train.py"
    script.write_text("print('trains')\n")
    argv = ["--script", script, "--full-iters", "100", "--budgets", "0.1", "--preload", name,
            "--out", tmp_path / "out"]  # fmt: skip
    assert refused(sweep.main, argv, tmp_path, capsys) == (
        f"sweep: error: --preload {name} cannot be imported ({why}); allowed: modules this "
        "interpreter imports (nothing was run or written)"
    )


def _final_line(out: Path, value: str) -> Path:
    """Seed 1's final line with ``val_accuracy`` logged as ``value`` (JSON text) beside a
    numeric ``val_loss``; its cell folder."""
    run = out / "linear_budget1_lr0.3_seed1"
    log = run / "metrics.jsonl"
    lines = log.read_text().splitlines()
    lines[-1] = f'{{"iteration": 17, "val_accuracy": {value}, "val_loss": 0.3, "final": true}}'
    log.write_text("\n".join(lines) + "\n")
    return run


NOT_A_RESULT = (
    "{run}/metrics.jsonl: its final val_accuracy {shown} is not a result; allowed: a number in "
    "[0, 1] (pytorch logs val_accuracy as a fraction; move the cell's folder away to train it "
    "again)"
)
FINAL_VALUES = {
    "string": ('"0.9"', NOT_A_RESULT.format(run="{run}", shown="'0.9'")),
    "10**400": ("1" + "0" * 400, NOT_A_RESULT.format(run="{run}", shown="1" + "0" * 56 + "...")),
    "null": ("null", NOT_A_RESULT.format(run="{run}", shown="None")),
}


@pytest.mark.unit
@pytest.mark.parametrize("tool", ["budgeted-report", "--status", "--dry-run", "budgeted-sweep"])
@pytest.mark.parametrize("case", FINAL_VALUES)
def test_a_final_metric_that_is_no_number_is_one_line(case, tool, tmp_path, capsys):
    """Item 2: a final ``val_accuracy`` of ``"0.9"``, ``10**400`` or null beside a numeric
    ``val_loss`` was read as a finished run with no result: skipped forever by the sweep, shown
    as finished with ``-`` by the report. Every reader now names the value and its range."""
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", CELLS, tmp_path)
    value, line = FINAL_VALUES[case]
    run = _final_line(out, value)
    function, argv, prefix = {
        "budgeted-report": (report.main, [out], "report"),
        "--status": (sweep.main, ["--status", out], "sweep"),
        "--dry-run": (sweep.main, [*GRID, "--out", out, "--dry-run"], "sweep"),
        "budgeted-sweep": (sweep.main, [*GRID, "--out", out], "sweep"),
    }[tool]
    err = refused(function, argv, tmp_path, capsys, prefix)
    assert err == f"{prefix}: error: {line.format(run=run)}"


@pytest.mark.unit
def test_a_final_line_without_the_metric_is_one_line_naming_what_it_logged(tmp_path, capsys):
    """A final line that logs only other keys is no result of the sweep's metric: the line says
    which it logged and that ``--metric KEY`` reports another."""
    out = tmp_path / "sweep"
    write_sweep(out, "pytorch", CELLS, tmp_path)
    run = out / "linear_budget1_lr0.3_seed1"
    log = run / "metrics.jsonl"
    lines = log.read_text().splitlines()
    lines[-1] = json.dumps({"iteration": 17, "val_loss": 0.3, "f1": 0.8, "final": True})
    log.write_text("\n".join(lines) + "\n")
    assert refused(report.main, [out], tmp_path, capsys, "report") == (
        f"report: error: {log}: its final evaluation logged no val_accuracy (it logged f1, "
        "val_loss); allowed: val_accuracy as a number in [0, 1] (pytorch logs val_accuracy as a "
        "fraction; move the cell's folder away to train it again), or --metric KEY to report "
        "another key"
    )


@pytest.mark.unit
def test_the_budgets_help_names_the_fractions_of_ones_own_experiment():
    """A confusion: ``--budgets``' help said "of the committed ones", which one's own config or
    script has none of."""
    text = " ".join(build_parser().format_help().split())
    assert "of the committed ones" not in text
    assert (
        "--budgets F [F ...] budget fractions: a shipped family's committed ones (default: all), "
        "or with --config / --script any in (0, 1] of the full schedule (default: 0.01 0.05 0.1 "
        "0.25 0.5 1)"
    ) in text

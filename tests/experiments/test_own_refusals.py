"""What ``budgeted-sweep --config`` / ``--script`` refuses, before anything is written: one line
``sweep: error: ...`` (exit 2) naming the bad value and what is allowed, every file unchanged
(a config that does not load, a loop or scheduler that cannot carry a budget, a budget inside the
warmup, a source changed since the first cells, options of the wrong route), and a script that
exits without its metrics file (its cell failed, in one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from own_configs import STOCK_SCHEDULE, d2_yaml, fcn_config
from own_sweeps import digests
from run_folders import call_tool

from budgeted import sweep

MOMENTUM = STOCK_SCHEDULE.replace(
    "]", '    dict(type="CosineAnnealingMomentum", T_max=40, by_epoch=False),\n]'
)


def refused(argv: list, tmp_path: Path, capsys) -> str:
    """The one line ``budgeted-sweep ARGV`` refuses with; nothing under ``tmp_path`` changed."""
    before = digests(tmp_path)
    code, printed, err = call_tool(sweep.main, [str(a) for a in argv], capsys)
    assert (code, printed) == (2, ""), (code, printed, err)
    assert err.count("\n") == 1 and err.startswith("sweep: error: "), err
    assert digests(tmp_path) == before
    return err.strip()


@pytest.mark.unit
def test_a_config_that_does_not_load_is_its_loaders_message_in_one_line(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # --import my_data: from the current folder
    monkeypatch.setenv("SHAPES", str(tmp_path))
    config = d2_yaml(tmp_path)
    config.write_text(config.read_text() + "NOT_A_KEY: 1\n")
    line = refused(["--config", config, "--import", "my_data", "--out", tmp_path / "out"],
                   tmp_path, capsys)  # fmt: skip
    assert f"--config {config} does not load: " in line and "NOT_A_KEY" in line, line


@pytest.mark.unit
@pytest.mark.parametrize(
    ("schedule", "options", "words"),
    [
        (MOMENTUM, [], ["CosineAnnealingMomentum", "cannot carry it over"]),
        (STOCK_SCHEDULE.replace("LinearLR", "MyWarmupLR"), [], ["MyWarmupLR"]),
        (STOCK_SCHEDULE, ["--budgets", "0.1"], ["budget 0.1 is 4 iterations", "warmup of 4"]),
        (STOCK_SCHEDULE, ["--budgets", "1.5"], ["budget 1.5 is not a fraction in (0, 1]"]),
        (STOCK_SCHEDULE, ["--schedules", "nope"], ["'nope' is not a registered schedule"]),
        (STOCK_SCHEDULE, ["--", "--schedule", "cosine"], ["'--schedule'", "set by the sweep"]),
        (STOCK_SCHEDULE, ["--toy"], ["--toy is for the shipped families"]),
    ],
    ids=[
        "momentum",
        "unknown-scheduler",
        "budget-in-warmup",
        "budget-1.5",
        "schedule",
        "schedule-override",
        "toy",
    ],
)
def test_an_mmengine_config_the_cells_cannot_carry_is_refused(
    schedule, options, words, tmp_path, capsys
):
    config = fcn_config(tmp_path, tmp_path / "no_data", schedule)
    line = refused(["--config", config, "--out", tmp_path / "out", *options], tmp_path, capsys)
    assert all(word in line for word in words), line


@pytest.mark.unit
def test_a_custom_train_loop_is_refused(tmp_path, capsys):
    config = fcn_config(tmp_path, tmp_path / "no_data")
    config.write_text(config.read_text().replace('type="IterBasedTrainLoop", ', 'type="MyLoop", '))
    line = refused(["--config", config, "--full-iters", "40", "--out", tmp_path / "out"],
                   tmp_path, capsys)  # fmt: skip
    assert "MyLoop" in line and "IterBasedTrainLoop" in line, line


@pytest.mark.unit
def test_the_options_of_ones_own_experiment_need_a_config(tmp_path, capsys):
    line = refused(
        ["mmseg", "--toy", "--metric", "mIoU", "--out", tmp_path / "o"], tmp_path, capsys
    )
    assert "--metric is for your own experiment" in line, line
    line = refused(["--script", tmp_path / "none.py", "--out", tmp_path / "o"], tmp_path, capsys)
    assert "is not a file" in line, line
    script = tmp_path / "train.py"
    script.write_text("print('trains')\n")
    line = refused(["--script", script, "--out", tmp_path / "o"], tmp_path, capsys)
    assert "needs --full-iters N" in line, line


@pytest.mark.unit
def test_a_config_changed_since_the_first_cells_is_refused_unless_forced(tmp_path, capsys):
    config = fcn_config(tmp_path, tmp_path / "no_data")
    out = tmp_path / "out"
    argv = ["--config", config, "--budgets", "0.25", "--out", out]
    code, _, err = call_tool(sweep.main, [*map(str, argv), "--dry-run"], capsys)
    assert code == 0, err
    out.mkdir()  # what a first sweep left: its record of the config
    from budgeted.experiments.own import family_record, own_family

    record = {"framework": "mmseg", "family": str(config), "cells": [["linear", 0.25]],
              "experiment": family_record(own_family(config))}  # fmt: skip
    (out / "sweep.json").write_text(json.dumps(record))
    config.write_text(config.read_text().replace("momentum=0.9", "momentum=0.95"))
    line = refused(argv, tmp_path, capsys)
    assert f"{config} changed since the first cells of --out {out}" in line, line
    assert "--force-source" in line
    code, _, err = call_tool(sweep.main, [*map(str, argv), "--force-source", "--dry-run"], capsys)
    assert code == 0, err
    line = refused([*argv, "--full-iters", "80"], tmp_path, capsys)
    assert "full iters of 40" in line and "now has 80" in line, line


def _first_sweep(config: Path, out: Path, metric: str = "") -> None:
    """What a first sweep of ``config`` left in ``out``: its record of the config (with
    ``--metric metric``), one cell planned."""
    from budgeted.experiments.own import family_record, own_family

    out.mkdir()
    record = {"framework": "mmseg", "family": str(config), "cells": [["linear", 0.25]],
              "experiment": family_record(own_family(config, metric=metric))}  # fmt: skip
    (out / "sweep.json").write_text(json.dumps(record))


@pytest.mark.unit
@pytest.mark.parametrize(("before", "now"), [("", "aAcc"), ("aAcc", "mAcc"), ("aAcc", "")])
def test_another_metric_than_the_first_cells_is_refused(before, now, tmp_path, capsys):
    """Issue 52, item 3: a sweep run again with another ``--metric`` rewrote ``sweep.json``
    silently, and the report then refused the folder (its cells' records name the old one)."""
    config = fcn_config(tmp_path, tmp_path / "no_data")
    out = tmp_path / "out"
    _first_sweep(config, out, before)
    argv = ["--config", config, "--budgets", "0.25", "--out", out, *(["--metric", now] * bool(now))]
    then = f"--metric {before!r}" if before else "the framework's metric (no --metric)"
    asked = f"--metric {now!r}" if now else "the framework's metric (no --metric)"
    for dry_run in (["--dry-run"], []):
        assert refused([*argv, *dry_run], tmp_path, capsys) == (
            f"sweep: error: --out {out} holds cells reported by {then}, not {asked}; allowed: "
            f"{then} as before (budgeted-report --metric KEY reports another key they logged), "
            "or another --out"
        )


@pytest.mark.unit
@pytest.mark.parametrize("where", ["--import", "config"])
def test_an_import_or_config_that_exits_is_refused(where, tmp_path, capsys, monkeypatch):
    """Issue 52, item 4: an ``--import`` module that raised ``SystemExit(0)`` ended the sweep
    silently with exit 0 (the config's own ``sys.exit()`` alike)."""
    monkeypatch.chdir(tmp_path)  # --import: from the current folder
    config = fcn_config(tmp_path, tmp_path / "no_data")
    module = f"exits_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("raise SystemExit(0)\n")
    if where == "config":
        config.write_text(f"{config.read_text()}_done = __import__('sys').exit(0)\n")
    imports = ["--import", module] if where == "--import" else []
    line = refused(["--config", config, *imports, "--out", tmp_path / "out"], tmp_path, capsys)
    what = f"--import {module} fails" if imports else f"--config {config} does not load"
    assert line.startswith(f"sweep: error: {what}: it exits (SystemExit 0)"), line


@pytest.mark.unit
def test_a_script_with_an_import_is_refused(tmp_path, capsys):
    """Weak point: ``--script`` took ``--import``, which no cell imports (a cell runs ``python
    SCRIPT``)."""
    script = tmp_path / "train.py"
    script.write_text("print('trains')\n")
    argv = ["--script", script, "--full-iters", "100", "--import", "my_data", "--out",
            tmp_path / "out", "--dry-run"]  # fmt: skip
    assert refused(argv, tmp_path, capsys) == (
        "sweep: error: --import my_data is for --config (each cell imports it before its config "
        "is built); a --script imports its own modules; allowed: --script PATH without --import"
    )


@pytest.mark.unit
def test_a_full_schedule_past_any_count_names_its_key(tmp_path, capsys):
    """Weak point: ``max_iters=10**400`` was ``int too large to convert to float``."""
    config = fcn_config(tmp_path, tmp_path / "no_data")
    config.write_text(config.read_text().replace("max_iters=40,", "max_iters=10**400,"))
    assert refused(["--config", config, "--out", tmp_path / "out"], tmp_path, capsys) == (
        f"sweep: error: full schedule 1{'0' * 56}... (train_cfg.max_iters) is not a whole number "
        "of iterations in [1, 2**40); allowed: such a number (--full-iters N sets it)"
    )


@pytest.mark.unit
def test_ctrl_c_while_ones_config_loads_is_one_line_and_exit_130(tmp_path, capsys):
    """Weak point: Ctrl-C while the config loaded (it imports the codebase, may build the train
    set to count an epoch) was a long traceback, not the documented line."""
    config = fcn_config(tmp_path, tmp_path / "no_data")
    ctrl_c = "(_ for _ in ()).throw(KeyboardInterrupt())"  # what Ctrl-C raises there
    config.write_text(f"{config.read_text()}_stopped = {ctrl_c}\n")
    before = digests(tmp_path)
    try:
        code, printed, err = call_tool(
            sweep.main, ["--config", str(config), "--out", str(tmp_path / "out")], capsys
        )
    except KeyboardInterrupt:  # it would end pytest too
        pytest.fail("Ctrl-C while the config loads escaped the sweep: a traceback")
    assert (code, printed) == (130, "")
    assert err == "sweep: interrupted before any cell ran; run the same command again\n"
    assert digests(tmp_path) == before

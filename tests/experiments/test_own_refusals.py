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

"""Reading a sweep folder runs nothing from it (issue 30, defect 1).

A sweep folder is something users copy, share and download. Payloads that create a marker file
if anything runs them are planted in every file of a finished toy sweep's run folders (the
Python config dumps, ``config.yaml``, the checkpoints, the JSON logs and records), and the
folder is read by every tool that reads run folders, through its console-script function, for
both adapters: no marker appears, and the outcome is the clean result or one line.
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_folders import call_tool, plant, toy_data, write_sweep

from budgeted import branch, rank, report, sweep

CELLS = {("linear", 0.01, None): 41.25, ("linear", 0.05, None): 47.5}
"""Two finished toy cells (budgeted-branch plans 5 % and 10 %: Detectron2's 1 % has no cooldown)."""
GRID = ["--toy", "--schedules", "linear", "--budgets", "0.01", "0.05"]


def _readers(framework: str, sweeps: list[Path], data: Path, tmp: Path) -> dict[str, tuple]:
    """reader -> (console-script function, its arguments): each reads ``sweeps[0]`` (rank all
    three)."""
    out = str(sweeps[0])
    found = {
        "budgeted-report": (report.main, [out, "--csv", str(tmp / "r.csv"), "--plot",
                                          str(tmp / "r.png"), "--best-progress"]),
        "budgeted-sweep --dry-run": (sweep.main, [framework, *GRID, "--data", str(data),
                                                  "--out", out, "--dry-run"]),
        "budgeted-sweep": (sweep.main, [framework, *GRID, "--data", str(data), "--out", out]),
        "budgeted-branch --dry-run": (branch.main, [framework, "--toy", "--budgets", "0.05",
                                                    "0.1", "--compare", "--data", str(data),
                                                    "--out", out, "--dry-run"]),
        "budgeted-rank": (rank.main, [f"{name}={path}" for name, path in zip("abc", sweeps)]),
    }  # fmt: skip
    if framework == "detectron2":
        found["budgeted-sweep --evaluate-from --dry-run"] = (sweep.main, [
            framework, *GRID, "--evaluate-from", out, "--data", str(data), "--out",
            str(tmp / "evaluated"), "--dry-run",
        ])  # fmt: skip
    return found


READERS = [
    (framework, reader)
    for framework in ("mmseg", "detectron2")
    for reader in _readers(framework, [Path("x")] * 3, Path("d"), Path("t"))
]


@pytest.mark.unit
@pytest.mark.parametrize("in_place", [False, True], ids=["beside the data", "in place of it"])
@pytest.mark.parametrize(("framework", "reader"), READERS)
def test_reading_a_planted_sweep_folder_runs_nothing(framework, reader, in_place, tmp_path, capsys):
    """Beside the data (a line appended to the config dumps, a key with a python tag in
    config.yaml, payload checkpoints, strings in the JSON): the clean result. In place of it
    (``max_iters=<payload> or 32``; config.yaml a python tag as a whole): MMSeg's length
    cannot be read as a literal, one line naming the file; Detectron2's run ends where its
    model_final.pth says, the clean result."""
    data, marker = toy_data(framework, tmp_path / "datasets"), tmp_path / "marker"
    sweeps = []
    for name in ("a", "b", "c"):  # budgeted-rank ranks three sweeps
        folders = write_sweep(tmp_path / name, framework, CELLS, data)
        for run_dir in folders.values():
            plant(run_dir, marker, in_place)
        sweeps.append(tmp_path / name)
    function, argv = _readers(framework, sweeps, data, tmp_path)[reader]
    code, out, err = call_tool(function, argv, capsys)
    assert not marker.exists(), f"{reader} ran a payload from the sweep folder"
    if in_place and framework == "mmseg":
        assert code == 2 and err.count("\n") == 1, (code, out, err)
        assert "train_cfg.max_iters is an expression, not a number (line 1); allowed: the " \
            "config MMEngine dumped" in err and "/linear_budget" in err  # fmt: skip
        return
    assert code == 0 and err == "", (code, err)
    expected = {
        "budgeted-report": "| 0.01 | ",
        "budgeted-sweep --dry-run": "linear_budget1: skip (finished: ",
        "budgeted-sweep": "skipped, already finished: ",
        "budgeted-branch --dry-run": "linear_budget5: skip: ",  # Detectron2's 1 %: no cooldown
        "budgeted-rank": "| a | 41.25 | 47.50 |",
        "budgeted-sweep --evaluate-from --dry-run": "linear_budget5: DETECTRON2_DATASETS=",
    }[reader]
    assert expected in out, out
    if reader == "budgeted-report":
        assert "41.25" in out and "47.50" in out


@pytest.mark.e2e
def test_the_planted_payloads_are_live(tmp_path):
    """The payloads of the test above run when a file is read the unsafe way: the Python dump
    executed, config.yaml loaded with an unsafe yaml loader, a checkpoint unpickled."""
    import torch
    import yaml

    marker = tmp_path / "marker"
    for framework in ("mmseg", "detectron2"):
        folders = write_sweep(tmp_path / framework, framework, CELLS, tmp_path)
        for run_dir in folders.values():
            plant(run_dir, marker, in_place=True)
    run_dir = tmp_path / "mmseg" / "linear_budget1"
    checks = {
        "config dump": lambda: subprocess.run(
            [sys.executable, "-c", (run_dir / "20260101_000000/vis_data/config.py").read_text()],
            check=True,
        ),
        "config.yaml": lambda: yaml.unsafe_load(
            (tmp_path / "detectron2/linear_budget1/config.yaml").read_text()
        ),
        "pickle": lambda: pickle.loads(
            (tmp_path / "detectron2/linear_budget1/model_0000001.pth").read_bytes()
        ),
        "torch.save": lambda: torch.load(run_dir / "iter_32.pth", weights_only=False),
    }
    for name, read in checks.items():
        read()
        assert marker.exists(), name
        marker.unlink()
    record = json.loads((run_dir / "sweep_cell.json").read_text())
    assert "__import__('os').system(" in record["command"][-1]
    shutil.rmtree(tmp_path / "mmseg")


@pytest.mark.unit
def test_evaluate_from_takes_no_config_or_folder_from_the_records_it_reads(tmp_path, capsys):
    """``--evaluate-from`` builds each evaluation with the overrides its run was trained with,
    read from the source's ``sweep_cell.json``: a record that sets what the sweep sets per cell
    (here the config file, a yaml whose python tag Detectron2's own loader would run) is
    refused in one line, and nothing runs."""
    data, marker = toy_data("detectron2", tmp_path / "datasets"), tmp_path / "marker"
    evil = tmp_path / "evil.yaml"
    evil.write_text(f'!!python/object/apply:os.system ["touch {marker}"]\n')
    source = tmp_path / "source"
    write_sweep(source, "detectron2", CELLS, data, overrides=["--config-file", str(evil)])
    code, out, err = call_tool(sweep.main, [
        "detectron2", *GRID, "--evaluate-from", str(source), "--data", str(data), "--out",
        str(tmp_path / "evaluated"), "--dry-run",
    ], capsys)  # fmt: skip
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err == (
        f"sweep: error: {source / 'linear_budget1' / 'sweep_cell.json'}: its trained override "
        "'--config-file' after -- is set by the sweep per cell; allowed: any override but "
        "OUTPUT_DIR, SOLVER.BUDGET.FRACTION, SOLVER.BUDGET.FULL_ITERS, SOLVER.MAX_ITER, "
        "--config-file, --config, --resume, --eval-only\n"
    )
    assert not marker.exists() and not (tmp_path / "evaluated").exists()

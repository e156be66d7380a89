"""Sweep folders as ``budgeted-sweep`` and the training tools leave them, written by the tests
without training, for the tests of the tools that read them (report, sweep, branch, rank): the
records a finished toy cell holds, with the names and shapes of the real ones, and payloads
planted in each of them (:func:`plant`)."""

from __future__ import annotations

import json
import os
import pickle
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from budgeted.experiments.families import family
from budgeted.experiments.report import METRICS, cell_name, family_label

TIMESTAMP = "20260101_000000"
"""The launch folder of an MMEngine run (``<work_dir>/<timestamp>/vis_data/``)."""


def toy_data(framework: str, root: Path) -> Path:
    """An empty stand-in for the toy set at ``root`` (what the sweep checks for: it is then not
    written for a sweep that trains nothing); ``root``."""
    if framework == "detectron2":
        for split in ("train", "val"):
            ann = root / "toy_coco" / "annotations" / f"instances_{split}.json"
            ann.parent.mkdir(parents=True, exist_ok=True)
            ann.write_text("{}")
    else:
        (root / "gtFine").mkdir(parents=True, exist_ok=True)
    return root


def _mmseg_run(run_dir: Path, iters: int, metric: float, losses: Sequence[float]) -> None:
    """A finished MMSeg run: the config dumps, ``scalars.json`` (training records, then the
    validation after the last iteration), the last checkpoint."""
    logs = run_dir / TIMESTAMP / "vis_data"
    logs.mkdir(parents=True)
    dump = f"train_cfg = dict(type='IterBasedTrainLoop', max_iters={iters}, val_interval={iters})\n"
    (run_dir / "pspnet_r18-toy_cityscapes_budget.py").write_text(dump)
    (logs / "config.py").write_text(dump)
    steps = [round(iters * (i + 1) / len(losses)) for i in range(len(losses))]
    rows = [{"lr": 0.01, "loss": loss, "iter": s, "step": s} for s, loss in zip(steps, losses)]
    rows.append({"aAcc": 80.0, "mIoU": metric, "mAcc": 50.0, "time": 0.1, "step": iters})
    (logs / "scalars.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / f"iter_{iters}.pth").write_bytes(b"")
    (run_dir / "last_checkpoint").write_text(str(run_dir / f"iter_{iters}.pth"))


def _detectron2_run(run_dir: Path, iters: int, metric: float, losses: Sequence[float]) -> None:
    """A finished Detectron2 run: ``config.yaml``, ``metrics.json`` (training rows, the last
    with the final evaluation), ``model_final.pth``."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"SOLVER:\n  MAX_ITER: {iters}\n  BASE_LR: 0.01\n")
    steps = [round(iters * (i + 1) / len(losses)) - 1 for i in range(len(losses))]
    rows = [{"iteration": s, "total_loss": loss, "lr": 0.01} for s, loss in zip(steps, losses)]
    rows[-1].update({"bbox/AP": metric, "bbox/AP50": 2 * metric, "segm/AP": metric / 2})
    (run_dir / "metrics.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "model_final.pth").write_bytes(b"")
    (run_dir / "last_checkpoint").write_text("model_final.pth")


def _pytorch_run(run_dir: Path, iters: int, metric: float, losses: Sequence[float]) -> None:
    """A finished run of ``examples/digits_budget.py``: ``metrics.jsonl`` (training lines, then
    the final line with ``val_accuracy``, a fraction), ``lr_trace.csv``, ``results.json``."""
    run_dir.mkdir(parents=True)
    steps = [round(iters * i / len(losses)) for i in range(len(losses))]
    rows = [{"iteration": s, "lr": 0.3, "loss": loss} for s, loss in zip(steps, losses)]
    rows.append({"iteration": iters, "val_accuracy": metric / 100, "final": True})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "lr_trace.csv").write_text("iteration,lr\n" + "".join(f"{s},0.3\n" for s in steps))
    summary = {"val_accuracy": metric / 100, "iterations": iters, "budget_iters": iters}
    (run_dir / "results.json").write_text(json.dumps(summary))


def write_sweep(
    out: Path,
    framework: str,
    cells: Mapping[tuple, float],
    data: Path,
    overrides: Sequence[str] = (),
    losses: Sequence[float] = (2.0, 1.5, 1.2),
    status: str = "finished",
) -> dict[str, Path]:
    """A toy sweep folder of finished runs, as ``budgeted-sweep FRAMEWORK --toy --data DATA
    --out OUT [--lrs ...] [--seeds ...] -- OVERRIDES`` leaves it (``pytorch``: the digits
    family, ``budgeted-sweep pytorch --task digits``, no ``--toy``): ``sweep.json``, and per cell
    its run folder and ``sweep_cell.json`` (``status``, one try).

    Args:
        cells: (schedule, budget, base LR or None[, seed]) -> the final metric (mIoU, box AP,
            top-1 in percent).
        losses: the training losses logged (a NaN: a run that diverged and trained on).

    Returns:
        cell name -> run folder.
    """
    fam = family(framework, framework != "pytorch", "digits" if framework == "pytorch" else None)
    out.mkdir(parents=True)
    planned, folders = [], {}
    for key, metric in cells.items():
        schedule, budget, lr, seed = (*key, None)[:4]
        run_dir = out / cell_name(schedule, budget, lr, seed)
        writer = {"detectron2": _detectron2_run, "pytorch": _pytorch_run}.get(framework, _mmseg_run)
        writer(run_dir, fam.iters(budget), metric, losses)
        spec = {
            "framework": framework, "schedule": schedule, "budget": budget, "lr": lr,
            "seed": seed, "config": fam.script or f"configs/{fam.filename(budget, schedule)}",
            "data": None if fam.script else str(data.resolve()), "overrides": list(overrides),
        }  # fmt: skip
        record = {
            **spec,
            "tries": [{"action": "run", "started": "2026-01-01T00:00:00+0000", "wall_s": 12.5,
                       "exit": 0}],
            "command": ["python", "-c", "train", str(run_dir)],
            "wall_s": 12.5, "exit": 0, "status": status,
            "metrics": None if status == "diverged" else {METRICS[framework][0][0]: metric},
        }  # fmt: skip
        (run_dir / "sweep_cell.json").write_text(json.dumps(record, indent=1))
        planned.append([schedule, budget, *([lr, seed] if (lr, seed) != (None, None) else [])])
        folders[run_dir.name] = run_dir
    label = family_label(fam)
    (out / "sweep.json").write_text(json.dumps({"framework": framework, "family": label,
                                                "cells": planned}))  # fmt: skip
    return folders


class Payload:
    """Pickled, it calls ``os.system(command)`` when unpickled (what a malicious checkpoint
    does)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple:
        return (os.system, (self.command,))


def plant(run_dir: Path, marker: Path, in_place: bool = False) -> None:
    """Payloads that create ``marker`` if anything runs them, in every file of the run folder a
    reader of run folders might touch: the Python config dumps, ``config.yaml`` (a
    ``!!python/object/apply`` tag), the checkpoints (``__reduce__``: a plain pickle and a
    ``torch.save`` archive), the JSON logs and records (as strings; the logs also get a line
    that is not UTF-8 and one with an integer too long to read), ``last_checkpoint``.

    ``in_place``: the payload replaces the data a reader needs (``train_cfg.max_iters``, the
    whole ``config.yaml``), rather than sitting beside it.
    """
    import torch

    command = f"touch {shlex.quote(str(marker))}"
    python = f"__import__('os').system({command!r})"
    for dump in [*run_dir.glob("*.py"), *run_dir.glob("*/vis_data/config.py")]:
        text = dump.read_text()
        if in_place:
            text = text.replace("max_iters=", f"max_iters={python} or ")
        dump.write_text(f"{text}_x = {python}\n")
    yaml = f"!!python/object/apply:os.system [{json.dumps(command)}]\n"
    if (run_dir / "config.yaml").is_file():
        old = (run_dir / "config.yaml").read_text()
        (run_dir / "config.yaml").write_text(yaml if in_place else f"{old}PAYLOAD: {yaml}")
    for checkpoint in [*run_dir.glob("*.pth"), run_dir / "model_0000001.pth"]:
        if checkpoint.name.startswith("iter_") or checkpoint.name == "model_final.pth":
            torch.save({"model": Payload(command), "iteration": 1}, checkpoint)
        else:
            checkpoint.write_bytes(pickle.dumps({"model": Payload(command)}))
    for log in [*run_dir.glob("*/vis_data/scalars.json"), run_dir / "metrics.json"]:
        if log.is_file():  # a payload as a string, a line not UTF-8, an integer of 5000 digits
            with log.open("ab") as f:
                f.write(f"{json.dumps({'note': python})}\n".encode())
                f.write(b'{"note": "\xff\xfe"}\n{"step": 1' + b"9" * 5000 + b"}\n")
    record = json.loads((run_dir / "sweep_cell.json").read_text())
    record["command"].append(python)
    record["tries"][0]["started"] = python
    (run_dir / "sweep_cell.json").write_text(json.dumps(record, indent=1))
    (run_dir / "last_checkpoint").write_text(python)


def call_tool(function: Callable, argv: list[str], capsys: Any) -> tuple:
    """(exit status, stdout, stderr) of a console-script function called in this process
    (``capsys``: pytest's fixture)."""
    try:
        code = function(argv)
    except SystemExit as done:
        code = done.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err

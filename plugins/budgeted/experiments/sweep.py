"""Run the paper's comparison: one training run per (schedule, budget, base LR, seed).

    budgeted-sweep mmseg --toy --schedules linear poly step --budgets 0.05 0.1 \
        --lrs 0.03 0.1 0.3 --seeds 0 1 2 --out output/sweep/mmseg_toy
    budgeted-sweep detectron2 --toy --schedules linear step --budgets 0.1 0.25 \
        --out output/sweep/d2_toy -- SOLVER.IMS_PER_BATCH 4
    budgeted-report output/sweep/mmseg_toy --plot output/sweep/mmseg_toy.png

Each cell trains the shipped config of its schedule and budget (the config families of
:mod:`budgeted.experiments.families`; ``--toy``: the toy ones) with the real training tool
(``budgeted-train-net``, ``budgeted-train-seg``) in a subprocess, into
``<out>/<schedule>_budget<tag>[_lr<LR>][_seed<SEED>]/``, and prints one line: command, wall
time, final metric. ``--lrs`` sets the framework's base LR key, ``--seeds`` its seed key.
Arguments after ``--`` go to the training tool. A finished cell is skipped, never retrained; an
unfinished one is resumed with the tool's ``--resume``. The first failing run stops the sweep
(exit 1) unless ``--keep-going``. One sweep at a time per ``--out`` (a lock); SIGINT, SIGTERM
and SIGUSR1 are forwarded to the running training process, which saves and exits 75, and the
sweep stops (exit 130 after Ctrl-C, else 75). ``--evaluate-from SWEEP...`` trains nothing: each
cell's final weights in those sweep folders are evaluated (Detectron2's ``--eval-only``) on
``--data``'s test set, into ``--out``, a sweep folder the report reads as any other (a larger
held-out set, say). See docs/sweeps.md.

This module imports no framework: an adapter is imported only to read or write its runs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from ..config_files import config_root
from ..errors import SweepError
from ..safety.checkpoints import atomic_write_text
from ..safety.locks import FolderBusyError, FolderLock, unwritable
from ..safety.preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    UNDECAYED_EXIT_CODE,
    restore_default_signals,
    signal_name,
)
from . import report
from .families import FRAMEWORKS, ConfigFamily, family
from .report import CELL_FILE, SWEEP_FILE, CellKey, ReportError, cell_name, family_label

__all__ = [
    "FRAMEWORKS",
    "RESERVED",
    "TRAIN_TOOLS",
    "Plan",
    "SweepError",
    "build_command",
    "committed_configs",
    "main",
    "parse_budget",
]

MMENGINE_FRAMEWORKS = tuple(f for f in FRAMEWORKS if f != "detectron2")
"""The MMEngine codebases (mmseg, mmdet, mmpretrain, mmaction): one training tool, one set of
config keys."""


def _per_framework(detectron2: Any, mmengine: Any) -> dict[str, Any]:
    return {"detectron2": detectron2, **dict.fromkeys(MMENGINE_FRAMEWORKS, mmengine)}


TRAIN_TOOLS = _per_framework(
    ("budgeted-train-net", "budgeted.detectron2.cli", "run"),
    ("budgeted-train-seg", "budgeted.mmengine.cli", "main"),
)
"""framework -> (console script, module, function) of its training tool."""
RESERVED = _per_framework(
    ("OUTPUT_DIR", "SOLVER.BUDGET.FRACTION", "SOLVER.BUDGET.FULL_ITERS", "SOLVER.MAX_ITER",
     "--config-file", "--config", "--resume", "--eval-only"),
    ("work_dir", "train_cfg.max_iters", "budget_fraction", "full_schedule_iters", "--work-dir",
     "--resume", "--budget"),
)  # fmt: skip
"""Overrides the sweep sets per cell (run folder, budget, resuming): refused after ``--``."""
LR_KEYS = _per_framework("SOLVER.BASE_LR", "optim_wrapper.optimizer.lr")
"""framework -> the config key ``--lrs`` sets (the base LR the schedule multiplies)."""
SEED_KEYS = _per_framework("SEED", "randomness.seed")
"""framework -> the config key ``--seeds`` sets."""
SWEEP_LOCK = ".sweep.lock"
"""The lock file a running sweep holds (``flock``) in its ``--out`` folder."""


@dataclass
class Plan:
    """One cell: what runs, where, and whether it is new, resumed or skipped."""

    family: ConfigFamily
    schedule: str
    budget: float
    lr: float | None
    seed: int | None
    run_dir: Path
    spec: dict
    command: list[str]
    action: str  # "run", "resume" or "skip"
    final: report.Final | None = None
    status: str | None = None  # budgeted.runs.records.CELL_STATUSES: what its last try came to
    note: str = ""  # how its last try ended: the tool's last line, or why it has no result


def committed_configs(fam: ConfigFamily) -> dict[tuple[str, float], Path]:
    """(schedule, budget) -> config file, for every shipped config of ``fam``.

    Args:
        fam: a config family (:func:`budgeted.experiments.families.family`).

    Example:
        >>> from budgeted.experiments.families import MASK_RCNN_TOY
        >>> committed_configs(MASK_RCNN_TOY)["step", 0.1].name
        'mask_rcnn_toy_budget10_step.yaml'
    """
    folder = config_root() / fam.folder
    if not folder.is_dir():
        raise SweepError(
            f"config folder {folder} does not exist; allowed: a config root holding "
            f"{fam.folder}/ (the checkout's configs/, the package's, or $BUDGETED_CONFIGS)"
        )
    found = {}
    for path in sorted(folder.iterdir()):
        parsed = fam.parse(path.name) if path.is_file() else None
        if parsed is not None:
            fraction, schedule = parsed
            found[schedule, fraction] = path
    return found


def describe(configs: dict[tuple[str, float], Path]) -> str:
    """``linear (0.01 0.05 ...), step (...)``: what the family ships."""
    by_schedule: dict[str, list[float]] = {}
    for schedule, budget in sorted(configs, key=lambda k: k[1]):
        by_schedule.setdefault(schedule, []).append(budget)
    return ", ".join(
        f"{s} ({' '.join(f'{b:g}' for b in bs)})" for s, bs in sorted(by_schedule.items())
    )


def parse_budget(text: str, fam: ConfigFamily) -> float:
    """The budget fraction ``text`` names, one of ``fam.fractions``; :class:`SweepError`."""
    allowed = ", ".join(f"{b:g}" for b in fam.fractions)
    try:
        value = float(text)
    except ValueError:
        raise SweepError(f"budget {text!r} is not a number; allowed: {allowed}") from None
    for budget in fam.fractions:
        if abs(value - budget) < 1e-9:
            return budget
    raise SweepError(f"budget {text} is not a committed budget fraction; allowed: {allowed}")


def check_extra(
    framework: str, extra: Sequence[str], lrs: bool = False, seeds: bool = False
) -> None:
    """Refuse overrides that would clash with what the sweep sets per cell (with ``--lrs`` /
    ``--seeds``, also the base LR / seed key)."""
    reserved = [
        *RESERVED[framework],
        *([LR_KEYS[framework]] if lrs else []),
        *([SEED_KEYS[framework]] if seeds else []),
    ]
    for token in extra:
        key = token.split("=", 1)[0] if framework != "detectron2" or "=" in token else token
        if key in reserved:
            raise SweepError(
                f"override {token!r} after -- is set by the sweep per cell; allowed: any "
                f"override but {', '.join(reserved)}"
            )


def axis_overrides(framework: str, lr: float | None, seed: int | None) -> list[str]:
    """The overrides that set a cell's base LR and seed, in the training tool's syntax.

    Example:
        >>> axis_overrides("detectron2", 0.03, 1), axis_overrides("mmseg", None, 2)
        (['SOLVER.BASE_LR', '0.03', 'SEED', '1'], ['randomness.seed=2'])
    """
    pairs = [(LR_KEYS[framework], lr), (SEED_KEYS[framework], seed)]
    pairs = [(k, v) for k, v in pairs if v is not None]
    texts = [(k, report.number_text(v) if isinstance(v, float) else str(v)) for k, v in pairs]
    if framework == "detectron2":
        return [t for pair in texts for t in pair]
    return [f"{k}={v}" for k, v in texts]


def parse_lr(text: str) -> float:
    """A base LR of ``--lrs``: a positive finite number; :class:`SweepError`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SweepError(f"--lrs value {text!r} is not a positive number; allowed: e.g. 0.01 0.03")
    return value


def parse_seed(text: str) -> int:
    """A seed of ``--seeds``: an integer >= 0; :class:`SweepError`."""
    if not (text.isascii() and text.isdigit()):
        raise SweepError(f"--seeds value {text!r} is not an integer >= 0; allowed: e.g. 0 1 2")
    return int(text)


def split_mmseg_extra(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """(flags, ``key=value`` config options) of MMSeg overrides, each in their order."""
    options = [t for t in extra if "=" in t and not t.startswith("-")]
    return [t for t in extra if t not in options], options


def tool_command(framework: str, args: Sequence[str]) -> list[str]:
    """The command that runs ``framework``'s training tool with ``args``: this interpreter
    calling the console script's function (so it needs no ``bin/`` folder on ``PATH``)."""
    script, module, function = TRAIN_TOOLS[framework]
    boot = (
        f"import sys; from {module} import {function} as f; sys.argv[0] = {script!r}; sys.exit(f())"
    )
    return [sys.executable, "-c", boot, *args]


def build_command(
    framework: str, config: Path, run_dir: Path, data: Path | None, extra: Sequence[str],
    resume: bool,
) -> list[str]:  # fmt: skip
    """The training tool's command line for one cell (``extra``: the user's overrides, then
    the cell's :func:`axis_overrides`)."""
    again = ["--resume"] if resume else []
    if framework == "detectron2":
        args = ["--config-file", str(config), *again, *extra, "OUTPUT_DIR", str(run_dir)]
        return tool_command(framework, args)
    flags, options = split_mmseg_extra(extra)
    if data is not None:  # as the toy demo points the toy config at the toy set
        options = [
            *(f"{split}_dataloader.dataset.data_root={data}" for split in ("train", "val")),
            f"test_dataloader.dataset.data_root={data}",
            *options,
        ]
    args = [
        str(config), "--work-dir", str(run_dir), *again, *flags,
        *(["--cfg-options", *options] if options else []),
    ]  # fmt: skip
    return tool_command(framework, args)


def toy_data(fam: ConfigFamily, data: Path | None) -> tuple[Path, bool]:
    """The toy set's root (the toy configs' default unless ``data``) and whether it exists."""
    if fam.toy_data is not None:
        root = (data or Path(fam.toy_data.root)).resolve()
        return root, (root / fam.toy_data.marker).exists()
    with warnings.catch_warnings():  # torch.jit's FutureWarnings, on importing detectron2
        warnings.simplefilter("ignore", FutureWarning)
        from ..detectron2.data import TOY_DATASETS, datasets_root

    root = Path(data or datasets_root()).resolve()
    return root, all((root / ann).exists() for _, ann in TOY_DATASETS.values())


def toy_environment(
    fam: ConfigFamily, toy: bool, data: Path | None
) -> tuple[Path | None, bool, dict[str, str]]:
    """(the toy set's root or None, whether it exists, the training tools' environment): with
    ``toy``, Detectron2's tools find the toy set through ``DETECTRON2_DATASETS``."""
    env = dict(os.environ)
    if not toy:
        return None, True, env
    root, present = toy_data(fam, data)
    if fam.framework == "detectron2":
        env["DETECTRON2_DATASETS"] = str(root)
    return root, present, env


def make_toy_data(fam: ConfigFamily, root: Path) -> None:
    """Write the toy set as the demos do (the family's
    :class:`~budgeted.experiments.families.ToyData` writer; Detectron2's toy COCO under
    ``DETECTRON2_DATASETS``)."""
    if fam.toy_data is not None:
        module, function = fam.toy_data.writer.split(":")
        getattr(importlib.import_module(module), function)(root)
    else:
        from ..detectron2.toy import make_toy_coco

        make_toy_coco(str(root))


def check_grid(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, float]]:
    """The (schedule, budget) cells, smallest budgets first, after checking the arguments and
    ``--out``; raises :class:`SweepError`."""
    fam = args.family
    configs = committed_configs(fam)
    label = family_label(fam)
    schedules = list(dict.fromkeys(args.schedules or sorted({s for s, _ in configs})))
    budgets = sorted({parse_budget(b, fam) for b in args.budgets or map(str, fam.fractions)})
    for schedule in schedules:
        for budget in budgets:
            if (schedule, budget) in configs:
                continue
            where = (
                f"configs/{fam.filename(budget, schedule)} does not exist"
                if schedule in fam.schedules
                else f"the {fam.name} family ships no {schedule!r} configs"
            )
            raise SweepError(
                f"no committed config for schedule {schedule!r} at budget {budget:g} ({where}); "
                f"committed: {describe(configs)}"
            )
    check_extra(args.framework, extra, lrs=bool(args.lrs), seeds=bool(args.seeds))
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; allowed: a new folder or a sweep folder")
    record = out / SWEEP_FILE
    if record.is_file():
        meta = report.read_record(record)
        if (meta["framework"], meta["family"]) != (args.framework, label):
            raise SweepError(
                f"--out {out} holds a {meta['framework']} sweep of {meta['family']}; allowed: "
                f"a new folder, or a sweep of {args.framework} {label}"
            )
        seeded = {isinstance(cell, list) and len(cell) > 3 and cell[3] is not None
                  for cell in meta.get("cells") or []}  # fmt: skip
        if seeded - {bool(args.seeds)}:
            before = "at the configs' own seed" if args.seeds else "at --seeds"
            raise SweepError(
                f"--out {out} holds runs {before}, which the report cannot pair with runs "
                f"{'at' if args.seeds else 'without'} --seeds; allowed: "
                f"{'no --seeds' if args.seeds else '--seeds'}, as before, or a new folder"
            )
    elif out.is_dir() and any(p.name != SWEEP_LOCK for p in out.iterdir()):
        raise SweepError(f"--out {out} is a folder holding other files; allowed: a new or empty "
                         "folder, or a sweep folder")  # fmt: skip
    lrs = list(dict.fromkeys(parse_lr(t) for t in args.lrs)) if args.lrs else [None]
    seeds = list(dict.fromkeys(parse_seed(t) for t in args.seeds)) if args.seeds else [None]
    # a table's rows fill in order: budget, then seed (a whole replicate), then schedule and LR
    return [
        CellKey(s, b, lr, seed) for b in budgets for seed in seeds for s in schedules for lr in lrs
    ]


def plan_cells(
    args: argparse.Namespace, grid: list[CellKey], extra: list[str], data: Path | None
) -> list[Plan]:
    """Each cell's plan; raises :class:`SweepError` for a run folder it must not touch."""
    fam = args.family
    configs = committed_configs(fam)
    return [plan_cell(fam, key, configs, args.out, data, extra) for key in grid]


def plan_cell(
    fam: ConfigFamily, key: CellKey, configs: dict[tuple[str, float], Path], out: Path,
    data: Path | None, extra: list[str], config_schedule: str | None = None,
) -> Plan:  # fmt: skip
    """One cell's plan: skip a finished run, resume a started one, else run it.

    ``config_schedule``: whose committed config the cell trains (default: the cell's schedule;
    ``budgeted-branch`` trains ``wsd`` cells from the ``linear`` configs plus overrides)."""
    framework = fam.framework
    schedule, budget, lr, seed = key
    config_schedule = config_schedule or schedule
    config = configs[config_schedule, budget]
    run_dir = out / cell_name(*key)
    spec = {
        "framework": framework,
        "schedule": schedule,
        "budget": budget,
        "lr": lr,
        "seed": seed,
        "config": f"configs/{fam.filename(budget, config_schedule)}",
        "data": None if data is None else str(data),
        "overrides": extra,
    }
    if run_dir.exists() and not run_dir.is_dir():
        raise SweepError(f"{run_dir} is a file; allowed: a run folder (move the file away)")
    spec_file = run_dir / CELL_FILE
    old = report.read_record(spec_file) if spec_file.is_file() else None
    same = old is not None and all(old.get(k) == v for k, v in spec.items())
    final = report.read_final(fam, budget, run_dir)
    status = report.run_status(framework, run_dir, final, old.get("status") if same else None)
    done = final is not None or status == "diverged"  # a diverged LR is a result: not retrained
    started = report.holds_run(framework, run_dir)
    if (done or started) and not same:
        what = "finished" if done else "started"
        held = (
            f"config {old.get('config')}, data {old.get('data')}, overrides {old.get('overrides')}"
            if old is not None
            else "a run that budgeted-sweep did not start"
        )
        raise SweepError(
            f"{run_dir} holds a {what} run with other settings ({held}); allowed: the same "
            f"settings (overrides {extra}), or another --out"
        )
    action = "skip" if done else "resume" if started else "run"
    overrides = [*extra, *axis_overrides(framework, lr, seed)]
    command = build_command(framework, config, run_dir, data, overrides, action == "resume")
    final = None if status == "diverged" else final
    return Plan(fam, schedule, budget, lr, seed, run_dir, spec, command, action, final, status)


EVALUATED_WEIGHTS = ("MODEL.WEIGHTS", "model_final.pth")
"""``--evaluate-from``: the weights key the evaluation sets, and the file of a finished run it
loads (Detectron2's; MMEngine runs are evaluated with MMEngine's ``tools/test.py``)."""


def plan_evaluations(
    args: argparse.Namespace, grid: list[CellKey], extra: list[str], data: Path | None
) -> list[Plan]:
    """``--evaluate-from``: each cell's plan to evaluate the final weights of the same cell of
    those sweep folders (finished in exactly one) with the training tool's ``--eval-only``, on
    ``--data``'s (or the config's) test set, into ``--out``. The overrides the run was trained
    with come first (the model is built as it was trained), then ``extra``, then the weights.
    Raises :class:`SweepError`."""
    fam = args.family
    sources = [Path(p).resolve() for p in args.evaluate_from]
    key, name = EVALUATED_WEIGHTS
    if fam.framework != "detectron2":
        raise SweepError(
            f"--evaluate-from with {fam.framework}: allowed: detectron2 sweeps (evaluate an "
            "MMEngine run with its codebase's tools/test.py)"
        )
    if key in extra:
        raise SweepError(f"override {key} after -- is set per cell by --evaluate-from "
                         f"(<cell>/{name}); allowed: any override but {key}")  # fmt: skip
    for source in sources:
        if source == args.out:
            raise SweepError(f"--evaluate-from {source} is --out; allowed: another --out")
        if not (source / SWEEP_FILE).is_file():
            raise SweepError(f"--evaluate-from {source} is not a sweep folder (no {SWEEP_FILE}); "
                             "allowed: folders written by budgeted-sweep --out")  # fmt: skip
    if args.toy and data is not None and not toy_data(fam, data)[1]:
        raise SweepError(
            f"--data {data} holds no toy set to evaluate on; allowed: a folder with one "
            f"(python tools/make_toy_coco.py --root {data} --seed 2 --num-val 500, say)"
        )
    configs = committed_configs(fam)
    plans = []
    for cell in grid:
        runs = [
            source / cell_name(*cell)
            for source in sources
            if (source / cell_name(*cell) / name).is_file()
            and report.read_final(fam, cell.budget, source / cell_name(*cell)) is not None
        ]
        if len(runs) != 1:
            where = "none of" if not runs else "each of"
            found = [str(r.parent) for r in runs] or [str(s) for s in sources]
            raise SweepError(
                f"cell {cell_name(*cell)} is finished ({name} and its final evaluation) in "
                f"{where} {', '.join(found)}; allowed: cells finished in exactly one "
                "--evaluate-from folder (finish that sweep, or narrow the grid)"
            )
        record = runs[0] / CELL_FILE
        trained = report.read_record(record).get("overrides") or [] if record.is_file() else []
        try:  # a record from elsewhere must not choose the config, the folder or the weights
            check_extra(fam.framework, trained)
        except SweepError as err:
            raise SweepError(f"{record}: its trained {err}") from None
        overrides = [*trained, *extra, key, str(runs[0] / name)]
        plan = plan_cell(fam, cell, configs, args.out, data, overrides)
        plan.spec["evaluated_from"] = str(runs[0])
        plan.command = [t for t in plan.command if t != "--resume"]
        plan.command.insert(3, "--eval-only")  # after ``python -c BOOT``
        plans.append(plan)
    return plans


PRIOR_COST: dict[str, tuple[float, float]] = {}
"""family name -> (seconds per run, seconds per iteration) measured on 2 CPU cores, for
``--dry-run``'s estimate before a run of the sweep has finished (see docs/sweeps.md)."""


def cost_model(plans: Sequence[Plan], out: Path) -> tuple[float, float, str] | None:
    """(seconds per run, seconds per iteration, where from): a least-squares line through the
    finished runs of this sweep (wall time against iterations), else :data:`PRIOR_COST`."""
    points = []
    for cell_file in out.glob(f"*/{CELL_FILE}"):
        with contextlib.suppress(ReportError, KeyError, TypeError, ValueError):
            record = report.read_record(cell_file)
            if record.get("metrics") and record.get("wall_s"):
                fam = plans[0].family
                points.append((fam.iters(float(record["budget"])), float(record["wall_s"])))
    if len({x for x, _ in points}) >= 2:
        n = len(points)
        mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
        slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
        slope = max(slope, 0.0)
        return max(my - slope * mx, 0.0), slope, f"fitted to the {n} finished runs in --out"
    if points:
        return 0.0, sum(y for _, y in points) / sum(x for x, _ in points), "from finished runs"
    prior = PRIOR_COST.get(plans[0].family.name) if plans else None
    if prior is not None:
        return *prior, "measured on a 2-core machine (docs/sweeps.md)"
    return None


def estimate(plans: Sequence[Plan], out: Path) -> str:
    """``--dry-run``'s first line: the grid's size, what is left, and its estimated cost."""
    todo = [p for p in plans if p.action != "skip"]
    if any("evaluated_from" in p.spec for p in plans):  # --evaluate-from: no training
        plural = "s" if len(plans) != 1 else ""
        head = f"[sweep] grid: {len(plans)} evaluation{plural} ({len(plans) - len(todo)} finished, "
        walls = []
        for cell_file in out.glob(f"*/{CELL_FILE}"):
            with contextlib.suppress(ReportError, TypeError, ValueError):  # as cost_model
                record = report.read_record(cell_file)
                if record.get("metrics") and record.get("wall_s"):
                    walls.append(float(record["wall_s"]))
        if not todo or not walls:
            cost = "" if not todo else "; cost unknown until one has finished"
            return f"{head}{len(todo)} to run){cost}"
        per_run = sum(walls) / len(walls)
        return (
            f"{head}{len(todo)} to run); estimated {len(todo) * per_run / 60:.0f} min at "
            f"{per_run:.0f} s each (the mean of the {len(walls)} finished in --out)"
        )
    iters = sum(p.family.iters(p.budget) for p in todo)
    diverged = sum(p.status == "diverged" for p in plans)
    head = (
        f"[sweep] grid: {len(plans)} runs ({len(plans) - len(todo) - diverged} finished, "
        f"{f'{diverged} diverged, ' if diverged else ''}{len(todo)} to run or resume, {iters} "
        "iterations)"
    )
    model = cost_model(plans, out) if todo else None
    if not todo:
        return head
    if model is None:
        return f"{head}; cost unknown until one run has finished (time one with --budgets)"
    per_run, per_iter, source = model
    seconds = len(todo) * per_run + iters * per_iter
    return (
        f"{head}; estimated {seconds / 60:.0f} min at {per_run:.0f} s per run + "
        f"{per_iter * 1000:.0f} ms per iteration ({source}; resumed runs cost less)"
    )


def short(path: str) -> str:
    """``path`` relative to the current folder when it lies under it, for printing."""
    return path.replace(f"{Path.cwd()}{os.sep}", "")


def show(command: Sequence[str]) -> str:
    """A tool command as printed: the console script's name and its arguments, paths shortened
    (``budgeted-train-seg configs/mmseg/toy/... --work-dir output/...``)."""
    if len(command) > 2 and command[1] == "-c":
        script = next(s for s, m, _ in TRAIN_TOOLS.values() if f"from {m} import" in command[2])
        return shlex.join([script, *(short(t) for t in command[3:])])
    return shlex.join(["python", *(short(t) for t in command[1:])])


def metrics_text(final: report.Final) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in final.metrics.items())


def _start_child() -> None:
    """In the training process, before it runs (``preexec_fn``): default signal handling
    (whatever the sweep inherited: a background job's ignored SIGINT), its own process group (a
    terminal's Ctrl-C reaches the sweep alone, which forwards it once), and SIGTERM when the
    sweep dies, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``), so it is never left training
    alone."""
    restore_default_signals()
    os.setpgid(0, 0)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the sweep died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


class SignalForwarder:
    """While a sweep runs: SIGINT, SIGTERM and SIGUSR1 stop it cleanly instead of killing it.

    A signal to the sweep is forwarded to the running training process, which finishes its
    iteration, writes a checkpoint and exits 75 (:mod:`budgeted.safety.preemption`): SIGTERM and
    SIGINT (Ctrl-C) as SIGTERM, SIGUSR1 as SIGUSR1. The sweep waits for it, records the try and
    starts no other cell. A second SIGINT kills the training process at once (SIGKILL; its last
    checkpoint stays whole, checkpoints being written atomically).

    Example::

        with SignalForwarder() as forwarder:
            code = forwarder.run(command, stdout=log)
            if forwarder.signum is not None:
                ...  # interrupted: stop the sweep
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.child: subprocess.Popen | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> SignalForwarder:
        for signum in self.SIGNALS:
            self._old[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, old in self._old.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)
        self._old.clear()

    @property
    def exit_code(self) -> int:
        """The sweep's exit status once interrupted: 130 after SIGINT (as a shell reports
        Ctrl-C), 75 after SIGTERM / SIGUSR1 (:data:`PREEMPTED_EXIT_CODE`: rerun to resume)."""
        return 130 if self.signum == signal.SIGINT else PREEMPTED_EXIT_CODE

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        first = self.signum is None
        if first:
            self.signum = signum
        child = self.child
        if child is None or child.poll() is not None:
            return
        if signum == signal.SIGINT and not first:
            forward = signal.SIGKILL
        elif signum == signal.SIGUSR1:
            forward = signal.SIGUSR1
        else:
            forward = signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, forward)

    def run(self, command: Sequence[str], **popen: Any) -> int:
        """Run ``command`` (``subprocess.Popen`` keywords ``popen``) to its end; its exit status.
        A signal that came before it starts (between cells) starts nothing: -1."""
        if self.signum is not None:
            return -1
        self.child = subprocess.Popen(command, preexec_fn=_start_child, **popen)
        try:
            if self.signum is not None:  # arrived while the process was being started
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.child.pid, signal.SIGTERM)
            return self.child.wait()
        finally:
            self.child = None


class Interrupted(Exception):
    """The sweep got a signal while a cell ran; that cell's try is recorded."""


def _read_cell_record(plan: Plan) -> dict:
    """The cell's record if it holds the same settings (its tries carry on), else a new one."""
    path = plan.run_dir / CELL_FILE
    old = report.read_record(path) if path.is_file() else {}
    if not all(old.get(k) == v for k, v in plan.spec.items()):
        return {**plan.spec, "tries": []}
    tries = old.get("tries")
    if tries is None:  # a record from before tries were recorded: its total as one try
        tries = [{"wall_s": old["wall_s"]}] if old.get("wall_s") else []
    return {**old, "tries": tries}


def run_cell(plan: Plan, env: dict[str, str], forwarder: SignalForwarder) -> float:
    """Run one cell's command, its output appended to ``<run_dir>/sweep.log``; its wall time.

    Every try is recorded in ``sweep_cell.json`` (written atomically): start, action, wall time,
    exit status, and the signal that interrupted it; the cell's ``wall_s`` is the sum over its
    tries, interrupted ones included, and its ``status`` what the last try came to
    (:func:`try_status`; ``plan.status``): a run that diverged or ended undecayed is a result.

    Raises:
        Interrupted: a signal stopped the try (the training process saved and exited).
        RuntimeError: the training tool failed (one line: its last log line, the log's path).
    """
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = plan.run_dir / CELL_FILE
    record = _read_cell_record(plan)
    record["command"] = plan.command
    attempt = {
        "action": plan.action,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "wall_s": None,
        "exit": None,
    }
    record["tries"].append(attempt)
    atomic_write_text(spec_file, json.dumps(record, indent=1) + "\n")
    with (plan.run_dir / "sweep.log").open("a") as log:
        log.write(f"\n$ {show(plan.command)}  # {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        log.write(f"# exactly: {shlex.join(plan.command)}\n")
        log.flush()
        start = time.monotonic()
        code = forwarder.run(
            plan.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        wall = time.monotonic() - start
    attempt.update(wall_s=round(wall, 3), exit=code)
    if forwarder.signum is not None:
        attempt["signal"] = signal_name(forwarder.signum)
    record["wall_s"] = round(sum(t.get("wall_s") or 0.0 for t in record["tries"]), 3)
    record["exit"] = code
    plan.status = try_status(plan, code, interrupted=forwarder.signum is not None)
    record["status"] = plan.status
    record["metrics"] = None if plan.final is None else plan.final.metrics
    atomic_write_text(spec_file, json.dumps(record, indent=1) + "\n")
    if plan.status == "interrupted":
        raise Interrupted(f"training stopped with exit status {code}")
    if plan.status == "failed":
        log = plan.run_dir / "sweep.log"
        if code in (0, UNDECAYED_EXIT_CODE):
            raise RuntimeError(f"{plan.run_dir.name} exited {code} but {plan.note} (log: {log})")
        raise RuntimeError(
            f"{plan.run_dir.name} failed (exit {code}): {last_log_line(plan)} (log: {log}); "
            "rerun the sweep to resume it"
        )
    return wall


def try_status(plan: Plan, code: int, interrupted: bool) -> str:
    """What a try that ended with exit status ``code`` came to (one of
    :data:`budgeted.runs.records.CELL_STATUSES`); ``plan.final`` holds its result, if any.

    :data:`~budgeted.safety.preemption.DIVERGED_EXIT_CODE`: ``diverged``; a signal: ``interrupted``;
    0 or :data:`~budgeted.safety.preemption.UNDECAYED_EXIT_CODE` with the final evaluation logged:
    ``finished`` or ``undecayed`` (``diverged`` where the log holds a non-finite loss all the
    same: a tool that trained on through it); anything else: ``failed``.
    """
    plan.final, plan.note = None, last_log_line(plan)
    if code == DIVERGED_EXIT_CODE:
        return "diverged"
    if interrupted and code != 0:
        return "interrupted"
    if code not in (0, UNDECAYED_EXIT_CODE):
        return "failed"
    try:
        final = report.read_final(plan.family, plan.budget, plan.run_dir)
    except ReportError as err:
        plan.note = f"its final metric cannot be read: {err}"
        return "failed"
    recorded = "undecayed" if code == UNDECAYED_EXIT_CODE else None
    status = report.run_status(plan.family.framework, plan.run_dir, final, recorded)
    if status is None:
        plan.note = f"has no final metric in {plan.run_dir}"
    elif status == "diverged":  # a tool that trained on through a NaN loss, exit 0
        plan.note = f"{report.divergence(plan.family.framework, plan.run_dir)} (exit {code})"
    plan.final = final if status in ("finished", "undecayed") else None
    return status or "failed"


def last_log_line(plan: Plan) -> str:
    """The last line the cell's training tool printed (its one-line account of how it ended)."""
    lines = [ln for ln in (plan.run_dir / "sweep.log").read_text().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def save_sweep(out: Path, framework: str, label: str, plans: Sequence[Plan]) -> None:
    """Write ``<out>/sweep.json``: the framework, family and every cell ever planned."""
    record = out / SWEEP_FILE
    cells = report.read_record(record)["cells"] if record.is_file() else []
    for plan in plans:
        axes = [plan.lr, plan.seed] if (plan.lr, plan.seed) != (None, None) else []
        cell = [plan.schedule, plan.budget, *axes]  # [schedule, budget] without --lrs / --seeds
        if cell not in cells:
            cells.append(cell)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"framework": framework, "family": label, "cells": cells}
    atomic_write_text(record, json.dumps(meta, indent=1) + "\n")


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line (``<label>: error: ...``), exit status 2."""

    label = "sweep"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.label}: error: {message}\n")


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The sweep's arguments and the overrides after ``--``."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = _Parser(prog="budgeted-sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", help=f"one of: {', '.join(FRAMEWORKS)}")
    parser.add_argument("--toy", action="store_true", help="the toy configs and data (CPU)")
    parser.add_argument(
        "--task", help="where a framework ships several families: mmpretrain cifar10 or imagenet"
    )
    parser.add_argument("--schedules", nargs="+", help="default: every committed one")
    parser.add_argument(
        "--budgets", nargs="+", help="budget fractions, of the committed ones (default: all)"
    )
    parser.add_argument(
        "--lrs", nargs="+", metavar="LR",
        help="base LRs, one cell each (SOLVER.BASE_LR / optim_wrapper.optimizer.lr; default: "
        "the config's)",
    )  # fmt: skip
    parser.add_argument(
        "--seeds", nargs="+", metavar="SEED",
        help="seeds, one cell each (SEED / randomness.seed; default: the config's)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="sweep folder (default: output/sweep/<framework>)")
    parser.add_argument(
        "--data", type=Path, help="with --toy: the toy set's root (default: as the demos)"
    )
    parser.add_argument(
        "--evaluate-from", type=Path, nargs="+", metavar="SWEEP",
        help="train nothing: evaluate each cell's final weights from these sweep folders "
        "(--eval-only; Detectron2) on --data's test set, into --out",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.add_argument(
        "--keep-going", action="store_true",
        help="go on after a failed run (a diverged LR of a grid, say); exit 1 at the end",
    )  # fmt: skip
    args = parser.parse_args(argv[:cut])
    try:
        args.family = family(args.framework, args.toy, args.task)
    except ValueError as err:
        parser.error(str(err))
    if args.data is not None and not args.toy:
        parser.error("--data is for --toy runs; full datasets come from the configs")
    if args.out is None:
        name = "_".join(filter(None, (args.framework, args.task, "toy" if args.toy else "")))
        args.out = Path("output/sweep") / name
    args.out = args.out.resolve()
    return args, argv[cut + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-sweep``: plan, then run, skip or resume every cell; the exit status.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``); overrides for the training tool after
            ``--``.

    Example:
        >>> main(["mmseg", "--toy", "--budgets", "0.05", "--dry-run"])  # doctest: +SKIP
        0
    """
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _sweep(args, extra)
    except KeyboardInterrupt:  # before the cells run (planning, writing the toy set)
        print("sweep: interrupted before any cell ran; run the same command again", file=sys.stderr)
        return 130


def sweep_lock(out: Path) -> FolderLock:
    """The lock a sweep holds in ``out`` (:data:`SWEEP_LOCK`) while it runs."""
    return FolderLock(
        out,
        SWEEP_LOCK,
        "--out {folder} is in use: {holder} is running a sweep there (it holds {lock}); wait "
        "for it to end, stop it, or choose another --out (nothing was written)",
    )


def _sweep(args: argparse.Namespace, extra: list[str]) -> int:
    lock = sweep_lock(args.out)
    try:
        if not args.dry_run:
            lock.check()
        grid = check_grid(args, extra)
        data, present, env = toy_environment(args.family, args.toy, args.data)
        if args.evaluate_from is not None:
            plans = plan_evaluations(args, grid, extra, data)
        else:
            plans = plan_cells(args, grid, extra, data)
        if not args.dry_run:
            check_writable(args.out, None if present else data)
            lock.acquire()  # the first write; another sweep may have taken it meanwhile
    except (SweepError, ReportError, FolderBusyError, ImportError) as err:
        print(f"sweep: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the lock file: unreadable, say
        print(f"sweep: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    if args.dry_run:
        print_dry_run(args, plans, lock, data, present)
        return 0
    with lock, SignalForwarder() as forwarder:
        try:
            if args.toy and not present:
                print(f"[sweep] writing the toy set in {data}", flush=True)
                make_toy_data(args.family, data)
            save_sweep(args.out, args.framework, family_label(args.family), plans)
            return _run_cells(args.out, plans, env, forwarder, keep_going=args.keep_going)
        except OSError as err:  # checked writable before; a disk that filled up, say
            print(f"sweep: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
            return 1


def check_writable(out: Path, toy_root: Path | None) -> None:
    """Refuse (:class:`SweepError`, before anything is written) an ``--out`` folder, or a toy
    set's folder the sweep would write, in which nothing can be created (read-only)."""
    for what, folder in (("--out", out), ("the toy set's folder", toy_root)):
        problem = None if folder is None else unwritable(folder)
        if problem is not None:
            raise SweepError(
                f"{what} {folder} cannot be written ({problem}); allowed: a folder you can write "
                "to (nothing was written)"
            )


def print_dry_run(
    args: argparse.Namespace, plans: Sequence[Plan], lock: FolderLock, data: Path | None,
    present: bool,
) -> None:  # fmt: skip
    """``--dry-run``: the estimate, a running sweep's note, then each cell's command or why it
    is skipped."""
    print(estimate(plans, args.out))
    try:
        lock.check()
    except FolderBusyError:
        print(f"[sweep] note: {lock.holder()} is running a sweep in {short(str(args.out))} now")
    if args.toy and not present:
        print(f"[sweep] would write the toy set in {data}")
    env_note = f"DETECTRON2_DATASETS={data} " if data and args.framework == "detectron2" else ""
    for plan in plans:
        line = (
            f"skip ({skip_text(plan)})" if plan.action == "skip" else env_note + show(plan.command)
        )
        print(f"{plan.run_dir.name}: {line}")


def _run_cells(
    out: Path, plans: Sequence[Plan], env: dict[str, str], forwarder: SignalForwarder,
    keep_going: bool = False,
) -> int:  # fmt: skip
    """Run, resume or skip each planned cell in order; the sweep's exit status. A failed run
    stops the sweep (exit 1), or with ``keep_going`` is reported and the sweep goes on (exit 1
    at the end). A run that diverged or ended undecayed is a result: the sweep goes on, and
    ends with :func:`ended_status`."""
    total = time.monotonic()
    counts = {"run": 0, "resume": 0, "skip": 0}
    failed: list[str] = []
    for i, plan in enumerate(plans, 1):
        head = f"[{i}/{len(plans)}] {plan.run_dir.name}:"
        if forwarder.signum is not None:
            print(f"sweep: stopped by {signal_name(forwarder.signum)} before {plan.run_dir.name}; "
                  "rerun the same command to go on", file=sys.stderr)  # fmt: skip
            return forwarder.exit_code
        counts[plan.action] += 1
        if plan.action == "skip":
            print(f"{head} skipped, already {skip_text(plan)}", flush=True)
            continue
        verb = "resuming" if plan.action == "resume" else "running"
        print(f"{head} {verb} {show(plan.command)} ...", end="", flush=True)
        try:
            wall = run_cell(plan, env, forwarder)
        except RuntimeError as err:
            print(" FAILED", flush=True)
            print(f"sweep: error: {err}", file=sys.stderr, flush=True)
            if not keep_going:
                return 1
            failed.append(plan.run_dir.name)
            continue
        except Interrupted as err:
            print(" interrupted", flush=True)
            print(
                f"sweep: interrupted by {signal_name(forwarder.signum)} ({err}); rerun the same "
                f"command to resume {plan.run_dir.name}",
                file=sys.stderr,
            )
            return forwarder.exit_code
        if plan.status == "diverged":
            print(f" DIVERGED after {wall:.1f} s: {plan.note}", flush=True)
            continue
        undecayed = f" (UNDECAYED: {plan.note})" if plan.status == "undecayed" else ""
        print(f" {wall:.1f} s: {metrics_text(plan.final)}{undecayed}", flush=True)
    print(
        f"[sweep] {counts['run']} run, {counts['resume']} resumed, {counts['skip']} skipped"
        f"{f', {len(failed)} failed' if failed else ''} in {time.monotonic() - total:.0f} s; "
        f"table: budgeted-report {short(str(out))}"
    )
    code = ended_status(plans)
    if failed:
        print(f"sweep: error: {len(failed)} runs failed: {', '.join(failed)}; their logs say why "
              "(<run>/sweep.log); rerun the sweep to retry them", file=sys.stderr)  # fmt: skip
        return 1
    return code


ENDED = (
    ("diverged", DIVERGED_EXIT_CODE, "diverged (a non-finite loss)", "results of their base LR, "
     "kept and not retrained; budgeted-report names them and never picks their LR as the best "
     "(move a cell's folder away to train it again)"),
    ("undecayed", UNDECAYED_EXIT_CODE, "ended undecayed (the time budget ran out before the LR "
     "decayed)", "their metrics are kept, marked in budgeted-report, and their LR is never the "
     "best"),
)  # fmt: skip
"""(status, the sweep's exit status, what happened, what it means) of the runs that ended
without a plain result."""


def ended_status(plans: Sequence[Plan]) -> int:
    """The sweep's exit status from its cells that diverged (3, first) or ended undecayed (4);
    0 where there are none. Each kind is named in one line."""
    code = 0
    for status, exit_code, happened, meaning in ENDED:
        names = [p.run_dir.name for p in plans if p.status == status]
        if names:
            print(f"sweep: {len(names)} cell(s) {happened}: {', '.join(names)}; {meaning}",
                  file=sys.stderr)  # fmt: skip
            code = code or exit_code
    return code


def skip_text(plan: Plan) -> str:
    """Why a skipped cell is done: ``finished: <metrics>`` (``finished undecayed: ...``), or
    that it diverged."""
    if plan.status == "diverged":
        return "diverged: a result of that base LR (move its folder away to train it again)"
    undecayed = " undecayed" if plan.status == "undecayed" else ""
    return f"finished{undecayed}: {metrics_text(plan.final)}"


if __name__ == "__main__":
    sys.exit(main())

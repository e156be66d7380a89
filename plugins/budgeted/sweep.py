"""Run the paper's comparison: one training run per (schedule, budget), one after the other.

    budgeted-sweep mmseg --toy --schedules linear poly step --budgets 0.05 0.1 \
        --out output/sweep/mmseg_toy
    budgeted-sweep detectron2 --toy --schedules linear step --budgets 0.1 0.25 \
        --out output/sweep/d2_toy -- SOLVER.IMS_PER_BATCH 4
    budgeted-report output/sweep/mmseg_toy --plot output/sweep/mmseg_toy.png

Each cell trains the shipped config of its schedule and budget (the config families of
:mod:`budgeted.families`; ``--toy``: the toy ones) with the real training tool
(``budgeted-train-net``, ``budgeted-train-seg``) in a subprocess, into
``<out>/<schedule>_budget<tag>/``, and prints one line: command, wall time, final metric.
Arguments after ``--`` go to the training tool. A finished cell is skipped, never retrained; an
unfinished one is resumed with the tool's ``--resume``. The first failing run stops the sweep
(exit 1). See docs/sweeps.md.

This module imports no framework: an adapter is imported only to read or write its runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from . import report
from .config_files import config_root
from .families import ConfigFamily, family
from .report import CELL_FILE, SWEEP_FILE, cell_name, family_label

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

FRAMEWORKS = ("detectron2", "mmseg")
TRAIN_TOOLS = {
    "detectron2": ("budgeted-train-net", "budgeted.detectron2.cli", "run"),
    "mmseg": ("budgeted-train-seg", "budgeted.mmengine.cli", "main"),
}
"""framework -> (console script, module, function) of its training tool."""
RESERVED = {
    "detectron2": ("OUTPUT_DIR", "SOLVER.BUDGET.FRACTION", "SOLVER.BUDGET.FULL_ITERS",
                   "SOLVER.MAX_ITER", "--config-file", "--config", "--resume", "--eval-only"),
    "mmseg": ("work_dir", "train_cfg.max_iters", "budget_fraction", "full_schedule_iters",
              "--work-dir", "--resume", "--budget"),
}  # fmt: skip
"""Overrides the sweep sets per cell (run folder, budget, resuming): refused after ``--``."""
DEFAULT_TOY_CITYSCAPES = Path("datasets/toy_cityscapes")
"""Where ``--toy`` MMSegmentation sweeps keep the toy set unless ``--data``: the toy configs'
``data_root`` (``budgeted.mmengine.toy.TOY_ROOT``), relative to the current folder."""


class SweepError(ValueError):
    """Bad input: reported as one line, exit 2, before anything runs."""


@dataclass
class Plan:
    """One cell: what runs, where, and whether it is new, resumed or skipped."""

    family: ConfigFamily
    schedule: str
    budget: float
    run_dir: Path
    spec: dict
    command: list[str]
    action: str  # "run", "resume" or "skip"
    final: report.Final | None = None


def committed_configs(fam: ConfigFamily) -> dict[tuple[str, float], Path]:
    """(schedule, budget) -> config file, for every shipped config of ``fam``.

    Args:
        fam: a config family (:func:`budgeted.families.family`).

    Example:
        >>> from budgeted.families import MASK_RCNN_TOY
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


def check_extra(framework: str, extra: Sequence[str]) -> None:
    """Refuse overrides that would clash with what the sweep sets per cell."""
    for token in extra:
        key = token.split("=", 1)[0] if framework == "mmseg" or "=" in token else token
        if key in RESERVED[framework]:
            raise SweepError(
                f"override {token!r} after -- is set by the sweep per cell; allowed: any "
                f"override but {', '.join(RESERVED[framework])}"
            )


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
    """The training tool's command line for one cell."""
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


def toy_data(framework: str, data: Path | None) -> tuple[Path, bool]:
    """The toy set's root (the demos' default unless ``data``) and whether it exists yet."""
    if framework == "mmseg":
        root = (data or DEFAULT_TOY_CITYSCAPES).resolve()
        return root, (root / "gtFine").is_dir()
    with warnings.catch_warnings():  # torch.jit's FutureWarnings, on importing detectron2
        warnings.simplefilter("ignore", FutureWarning)
        from .detectron2.data import TOY_DATASETS, datasets_root

    root = Path(data or datasets_root()).resolve()
    return root, all((root / ann).exists() for _, ann in TOY_DATASETS.values())


def make_toy_data(framework: str, root: Path) -> None:
    """Write the toy set as the demos do."""
    if framework == "mmseg":
        from .mmengine.toy import make_toy_cityscapes

        make_toy_cityscapes(root)
    else:
        from .detectron2.toy import make_toy_coco

        make_toy_coco(str(root))


def check_grid(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, float]]:
    """The (schedule, budget) cells, smallest budgets first, after checking the arguments and
    ``--out``; raises :class:`SweepError`."""
    fam = family(args.framework, args.toy)
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
    check_extra(args.framework, extra)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; allowed: a new folder or a sweep folder")
    record = out / SWEEP_FILE
    if record.is_file():
        meta = json.loads(record.read_text())
        if (meta["framework"], meta["family"]) != (args.framework, label):
            raise SweepError(
                f"--out {out} holds a {meta['framework']} sweep of {meta['family']}; allowed: "
                f"a new folder, or a sweep of {args.framework} {label}"
            )
    elif out.is_dir() and any(out.iterdir()):
        raise SweepError(f"--out {out} is a folder holding other files; allowed: a new or empty "
                         "folder, or a sweep folder")  # fmt: skip
    return [(s, b) for b in budgets for s in schedules]  # a table's rows fill in order


def plan_cells(
    args: argparse.Namespace, grid: list[tuple[str, float]], extra: list[str], data: Path | None
) -> list[Plan]:
    """Each cell's plan; raises :class:`SweepError` for a run folder it must not touch."""
    fam = family(args.framework, args.toy)
    configs = committed_configs(fam)
    return [plan_cell(fam, s, b, configs, args.out, data, extra) for s, b in grid]


def plan_cell(
    fam: ConfigFamily, schedule: str, budget: float, configs: dict[tuple[str, float], Path],
    out: Path, data: Path | None, extra: list[str],
) -> Plan:  # fmt: skip
    """One cell's plan: skip a finished run, resume a started one, else run it."""
    framework = fam.framework
    config = configs[schedule, budget]
    run_dir = out / cell_name(schedule, budget)
    spec = {
        "framework": framework,
        "schedule": schedule,
        "budget": budget,
        "config": f"configs/{fam.filename(budget, schedule)}",
        "data": None if data is None else str(data),
        "overrides": extra,
    }
    if run_dir.exists() and not run_dir.is_dir():
        raise SweepError(f"{run_dir} is a file; allowed: a run folder (move the file away)")
    spec_file = run_dir / CELL_FILE
    old = json.loads(spec_file.read_text()) if spec_file.is_file() else None
    same = old is not None and all(old.get(k) == v for k, v in spec.items())
    final = report.read_final(fam, budget, run_dir)
    started = report.holds_run(framework, run_dir)
    if (final is not None or started) and not same:
        what = "finished" if final is not None else "started"
        held = (
            f"config {old.get('config')}, data {old.get('data')}, overrides {old.get('overrides')}"
            if old is not None
            else "a run that budgeted-sweep did not start"
        )
        raise SweepError(
            f"{run_dir} holds a {what} run with other settings ({held}); allowed: the same "
            f"settings (overrides {extra}), or another --out"
        )
    action = "skip" if final is not None else "resume" if started else "run"
    command = build_command(framework, config, run_dir, data, extra, action == "resume")
    return Plan(fam, schedule, budget, run_dir, spec, command, action, final)


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


def run_cell(plan: Plan, env: dict[str, str]) -> float:
    """Run one cell's command, its output appended to ``<run_dir>/sweep.log``; the wall time."""
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = plan.run_dir / CELL_FILE
    old = json.loads(spec_file.read_text()) if spec_file.is_file() else {}
    record = {**plan.spec, "command": plan.command, "wall_s": old.get("wall_s", 0.0)}
    record["wall_s"] = record["wall_s"] if plan.action == "resume" else 0.0
    spec_file.write_text(json.dumps(record, indent=1) + "\n")
    with (plan.run_dir / "sweep.log").open("a") as log:
        log.write(f"\n$ {show(plan.command)}  # {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        log.write(f"# exactly: {shlex.join(plan.command)}\n")
        log.flush()
        start = time.monotonic()
        code = subprocess.run(
            plan.command, stdout=log, stderr=subprocess.STDOUT, env=env
        ).returncode
        wall = time.monotonic() - start
    record.update(wall_s=record["wall_s"] + wall, exit=code)
    if code == 0:
        plan.final = report.read_final(plan.family, plan.budget, plan.run_dir)
        record["metrics"] = None if plan.final is None else plan.final.metrics
    spec_file.write_text(json.dumps(record, indent=1) + "\n")
    if code != 0:
        lines = [ln for ln in (plan.run_dir / "sweep.log").read_text().splitlines() if ln.strip()]
        raise RuntimeError(
            f"{plan.run_dir.name} failed (exit {code}): {lines[-1].strip() if lines else ''} "
            f"(log: {plan.run_dir / 'sweep.log'}); rerun the sweep to resume it"
        )
    if plan.final is None:
        raise RuntimeError(
            f"{plan.run_dir.name} exited 0 but has no final metric in {plan.run_dir} "
            f"(log: {plan.run_dir / 'sweep.log'})"
        )
    return wall


def save_sweep(out: Path, framework: str, label: str, plans: Sequence[Plan]) -> None:
    """Write ``<out>/sweep.json``: the framework, family and every cell ever planned."""
    record = out / SWEEP_FILE
    cells = json.loads(record.read_text())["cells"] if record.is_file() else []
    for plan in plans:
        if [plan.schedule, plan.budget] not in cells:
            cells.append([plan.schedule, plan.budget])
    out.mkdir(parents=True, exist_ok=True)
    meta = {"framework": framework, "family": label, "cells": cells}
    record.write_text(json.dumps(meta, indent=1) + "\n")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"sweep: error: {message}\n")


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The sweep's arguments and the overrides after ``--``."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = _Parser(prog="budgeted-sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", help=f"one of: {', '.join(FRAMEWORKS)}")
    parser.add_argument("--toy", action="store_true", help="the toy configs and data (CPU)")
    parser.add_argument("--schedules", nargs="+", help="default: every committed one")
    parser.add_argument(
        "--budgets", nargs="+", help="budget fractions, of the committed ones (default: all)"
    )
    parser.add_argument("--out", type=Path, help="sweep folder (default: output/sweep/<framework>)")
    parser.add_argument(
        "--data", type=Path, help="with --toy: the toy set's root (default: as the demos)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv[:cut])
    if args.framework not in FRAMEWORKS:
        parser.error(f"unknown framework {args.framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    if args.data is not None and not args.toy:
        parser.error("--data is for --toy runs; full datasets come from the configs")
    if args.out is None:
        args.out = Path("output/sweep") / (args.framework + ("_toy" if args.toy else ""))
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
    framework = args.framework
    env = dict(os.environ)
    data, present = None, True
    try:
        grid = check_grid(args, extra)
        if args.toy:
            data, present = toy_data(framework, args.data)
            if framework == "detectron2":
                env["DETECTRON2_DATASETS"] = str(data)
        plans = plan_cells(args, grid, extra, data)
    except (SweepError, ImportError) as err:
        print(f"sweep: error: {err}", file=sys.stderr)
        return 2
    if args.toy and not present:
        print(f"[sweep] {'would write' if args.dry_run else 'writing'} the toy set in {data}")
        if not args.dry_run:
            make_toy_data(framework, data)
    if args.dry_run:
        for plan in plans:
            line = (
                f"skip (finished: {metrics_text(plan.final)})" if plan.final else show(plan.command)
            )
            env_note = f"DETECTRON2_DATASETS={data} " if data and framework == "detectron2" else ""
            print(f"{plan.run_dir.name}: {'' if plan.final else env_note}{line}")
        return 0
    save_sweep(args.out, framework, family_label(family(framework, args.toy)), plans)
    total = time.monotonic()
    counts = {"run": 0, "resume": 0, "skip": 0}
    for i, plan in enumerate(plans, 1):
        head = f"[{i}/{len(plans)}] {plan.run_dir.name}:"
        counts[plan.action] += 1
        if plan.action == "skip":
            print(f"{head} skipped, already finished: {metrics_text(plan.final)}", flush=True)
            continue
        verb = "resuming" if plan.action == "resume" else "running"
        print(f"{head} {verb} {show(plan.command)} ...", end="", flush=True)
        try:
            wall = run_cell(plan, env)
        except RuntimeError as err:
            print(" FAILED", flush=True)
            print(f"sweep: error: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(" interrupted", flush=True)
            print(f"sweep: interrupted; rerun the same command to resume {plan.run_dir.name}",
                  file=sys.stderr)  # fmt: skip
            return 130
        print(f" {wall:.1f} s: {metrics_text(plan.final)}", flush=True)
    print(
        f"[sweep] {counts['run']} run, {counts['resume']} resumed, {counts['skip']} skipped in "
        f"{time.monotonic() - total:.0f} s; table: budgeted-report {short(str(args.out))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

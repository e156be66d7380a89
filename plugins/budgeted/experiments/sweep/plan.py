"""A sweep's plan: its cells (schedule, budget, base LR, seed), checked before anything runs,
each with its run folder, its command and what it needs (new: run; started: resume; finished or
diverged: skip); ``--evaluate-from``'s evaluations; and ``--dry-run``'s cost estimate.

Planning writes nothing: it reads the ``--out`` folder's records (:mod:`.records`) and the run
folders through their framework's reader. Raises :class:`~budgeted.errors.SweepError` (one line)
for an argument or a folder it must refuse.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...config_files import config_root
from ...errors import ReportError, SweepError
from ...schedules import schedule_names
from ..families import ConfigFamily
from .commands import axis_overrides, build_command, check_extra, script_command
from .records import (
    CELL_FILE,
    SWEEP_FILE,
    SWEEP_LOCK,
    CellKey,
    Final,
    cell_name,
    family_label,
    holds_run,
    read_final,
    read_record,
    run_status,
)

__all__ = [
    "EVALUATED_WEIGHTS",
    "PRIOR_COST",
    "Plan",
    "check_grid",
    "committed_configs",
    "cost_model",
    "describe",
    "estimate",
    "family_configs",
    "find_script",
    "make_toy_data",
    "parse_budget",
    "parse_lr",
    "parse_seed",
    "plan_cell",
    "plan_cells",
    "plan_evaluations",
    "toy_data",
    "toy_environment",
]


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
    final: Final | None = None
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


SCRIPT_SCHEDULES = ("linear", "step")
"""A script family's schedules without ``--schedules``: the paper's comparison (``--schedules``
takes any registered schedule)."""


def find_script(fam: ConfigFamily) -> Path:
    """A script family's script: under the current folder, else in the checkout this package
    runs from; :class:`SweepError` (one line) where neither holds it (an installed wheel ships
    no ``examples/``).

    Example:
        >>> from budgeted.experiments.families import LENET5_DIGITS_PYTORCH
        >>> find_script(LENET5_DIGITS_PYTORCH).name
        'digits_budget.py'
    """
    checkout = Path(__file__).resolve().parents[4]  # <checkout>/plugins/budgeted/experiments/sweep
    places = list(dict.fromkeys([Path.cwd(), checkout]))
    for place in places:
        if (place / fam.script).is_file():
            return (place / fam.script).resolve()
    raise SweepError(
        f"the {fam.framework} {fam.task} family runs {fam.script}, which is in none of "
        f"{', '.join(str(p) for p in places)}; allowed: run budgeted-sweep in a checkout of "
        "budgeted-training, which has it (a pip-installed package has no examples/)"
    )


def family_configs(fam: ConfigFamily) -> dict[tuple[str, float], Path]:
    """(schedule, budget) -> what trains it: the family's committed config files, or for a
    script family (:attr:`~budgeted.experiments.families.ConfigFamily.script`) its script, for
    every registered schedule at every budget."""
    if not fam.script:
        return committed_configs(fam)
    script = find_script(fam)
    return {(s, b): script for s in schedule_names() for b in fam.fractions}


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


def toy_data(fam: ConfigFamily, data: Path | None) -> tuple[Path, bool]:
    """The toy set's root (the toy configs' default unless ``data``) and whether it exists."""
    if fam.toy_data is not None:
        root = (data or Path(fam.toy_data.root)).resolve()
        return root, (root / fam.toy_data.marker).exists()
    with warnings.catch_warnings():  # torch.jit's FutureWarnings, on importing detectron2
        warnings.simplefilter("ignore", FutureWarning)
        from ...detectron2.data import TOY_DATASETS, datasets_root

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
        from ...toys.coco import make_toy_coco

        make_toy_coco(str(root))


def check_grid(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, float]]:
    """The (schedule, budget) cells, smallest budgets first, after checking the arguments and
    ``--out``; raises :class:`SweepError`."""
    fam = args.family
    configs = family_configs(fam)
    label = family_label(fam)
    default = SCRIPT_SCHEDULES if fam.script else sorted({s for s, _ in configs})
    schedules = list(dict.fromkeys(args.schedules or default))
    budgets = sorted({parse_budget(b, fam) for b in args.budgets or map(str, fam.fractions)})
    for schedule in schedules:
        if fam.script and schedule not in schedule_names():
            raise SweepError(f"schedule {schedule!r} is not a registered schedule; allowed: "
                             f"{', '.join(schedule_names())}")  # fmt: skip
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
        meta = read_record(record)
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
    configs = family_configs(fam)
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
        "config": fam.script or f"configs/{fam.filename(budget, config_schedule)}",
        "data": None if data is None else str(data),
        "overrides": extra,
    }
    if run_dir.exists() and not run_dir.is_dir():
        raise SweepError(f"{run_dir} is a file; allowed: a run folder (move the file away)")
    spec_file = run_dir / CELL_FILE
    old = read_record(spec_file) if spec_file.is_file() else None
    same = old is not None and all(old.get(k) == v for k, v in spec.items())
    final = read_final(fam, budget, run_dir)
    status = run_status(framework, run_dir, final, old.get("status") if same else None)
    done = final is not None or status == "diverged"  # a diverged LR is a result: not retrained
    started = holds_run(framework, run_dir)
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
    if fam.script:  # the script writes nothing before its end: a started run is run again
        command = script_command(config, schedule, budget, fam.full_iters, run_dir, overrides)
    else:
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
            and read_final(fam, cell.budget, source / cell_name(*cell)) is not None
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
        trained = read_record(record).get("overrides") or [] if record.is_file() else []
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


PRIOR_COST: dict[str, tuple[float, float]] = {
    "lenet5_digits_pytorch": (3.85, 0.00305),  # docs/digits.md: 3.9 s at 17 its, 9.1 s at 1,720
}
"""family name -> (seconds per run, seconds per iteration) measured on 2 CPU cores, for
``--dry-run``'s estimate before a run of the sweep has finished (see docs/sweeps.md)."""


def cost_model(plans: Sequence[Plan], out: Path) -> tuple[float, float, str] | None:
    """(seconds per run, seconds per iteration, where from): a least-squares line through the
    finished runs of this sweep (wall time against iterations), else :data:`PRIOR_COST`."""
    points = []
    for cell_file in out.glob(f"*/{CELL_FILE}"):
        with contextlib.suppress(ReportError, KeyError, TypeError, ValueError):
            record = read_record(cell_file)
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


def estimate(plans: Sequence[Plan], out: Path, jobs: int = 1) -> str:
    """``--dry-run``'s first line: the grid's size, what is left, and its estimated cost (with
    ``jobs`` > 1, also that cost shared by ``jobs`` runs at a time: a lower bound where they
    share cores)."""
    todo = [p for p in plans if p.action != "skip"]
    if any("evaluated_from" in p.spec for p in plans):  # --evaluate-from: no training
        plural = "s" if len(plans) != 1 else ""
        head = f"[sweep] grid: {len(plans)} evaluation{plural} ({len(plans) - len(todo)} finished, "
        walls = []
        for cell_file in out.glob(f"*/{CELL_FILE}"):
            with contextlib.suppress(ReportError, TypeError, ValueError):  # as cost_model
                record = read_record(cell_file)
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
    shared = f", about {seconds / jobs / 60:.0f} min at --jobs {jobs}" if jobs > 1 else ""
    return (
        f"{head}; estimated {seconds / 60:.0f} min at {per_run:.0f} s per run + "
        f"{per_iter * 1000:.0f} ms per iteration ({source}; resumed runs cost less){shared}"
    )

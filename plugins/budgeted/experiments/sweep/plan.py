"""A sweep's plan: its cells (schedule, budget, base LR, seed), checked before anything runs,
each with its run folder, command and action (new: run; started: resume; finished or diverged:
skip), and ``--evaluate-from``'s evaluations. Planning writes nothing; it refuses an argument or
a folder with a one-line :class:`~budgeted.errors.SweepError`.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from ...config_files import config_root
from ...errors import SweepError
from ...runs.records import shown
from ...schedules import schedule_names
from ..families import ConfigFamily
from ..own import check_own_budgets, check_same_source, own_overrides
from .commands import (
    SCHEDULER_KEYS,
    axis_overrides,
    build_command,
    check_extra,
    schedule_overrides,
    script_command,
)
from .records import (
    CELL_FILE,
    SEED_LIMIT,
    SWEEP_FILE,
    SWEEP_LOCK,
    CellKey,
    Final,
    cell_name,
    check_no_links,
    family_label,
    holds_run,
    read_cell_record,
    read_final,
    read_record,
    read_sweep,
    run_status,
)

__all__ = [
    "EVALUATED_WEIGHTS", "Plan", "cell_source", "check_grid", "committed_configs", "describe",
    "family_configs", "find_script", "make_toy_data", "parse_budget", "parse_lr", "parse_seed",
    "plan_cell", "plan_cells", "plan_evaluations", "toy_data", "toy_environment",
]  # fmt: skip


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
    """A script family's script: under the current folder, else in the checkout this package runs
    from; :class:`SweepError` (one line) where neither holds it.

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
    """(schedule, budget) -> what trains it: the family's shipped config files, or a script
    family's script for every registered schedule at every budget."""
    if fam.source and not fam.script:
        return {}  # the user's own config trains every cell (cell_source)
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
    """The budget fraction ``text`` names, one of ``fam.fractions`` (of the user's own
    experiment: any fraction in (0, 1]); :class:`SweepError`."""
    allowed = ", ".join(f"{b:g}" for b in fam.fractions)
    if fam.source:
        allowed = "fractions of the full schedule in (0, 1], e.g. 0.05 0.1 0.25"
    try:
        value = float(text)
    except ValueError:
        raise SweepError(f"budget {text!r} is not a number; allowed: {allowed}") from None
    if fam.source:
        if not (math.isfinite(value) and 0 < value <= 1):
            raise SweepError(f"budget {text} is not a fraction in (0, 1]; allowed: {allowed}")
        return round(value, 12)
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
    if int(text) >= SEED_LIMIT:  # what numpy seeds (and the sweep's records take)
        raise SweepError(f"--seeds value {shown(text)} is not below 2**32; allowed: e.g. 0 1 2")
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
    """Write the toy set as the demos do (the family's :class:`ToyData` writer)."""
    if fam.toy_data is not None:
        module, function = fam.toy_data.writer.split(":")
        getattr(importlib.import_module(module), function)(root)
    else:
        from ...toys.coco import make_toy_coco

        make_toy_coco(str(root))


def cell_source(
    fam: ConfigFamily, configs: dict[tuple[str, float], Path], schedule: str, budget: float
) -> tuple[Path, list[str]]:
    """What trains a cell of a config family: (config file, overrides after the user's): the
    shipped config of ``schedule`` at ``budget`` where there is one, else the ``linear`` config with
    :func:`~.commands.schedule_overrides`.

    >>> from budgeted.experiments.families import PSPNET_TOY
    >>> config, switch = cell_source(PSPNET_TOY, committed_configs(PSPNET_TOY), "rex", 0.05)
    >>> config.name, switch
    ('pspnet_r18-toy_cityscapes_budget5.py', ['param_scheduler.0.type=BudgetRexLR'])
    """
    if fam.script:
        return find_script(fam), []
    if fam.source:  # the user's own config: the cell's budget and schedule by the tool's keys
        return Path(fam.source), own_overrides(fam, schedule, budget)
    if (schedule, budget) in configs:
        return configs[schedule, budget], []
    return configs["linear", budget], schedule_overrides(fam.framework, schedule)


def check_schedules(fam: ConfigFamily, configs: dict, schedules: list[str],
                    budgets: list[float], extra: list[str]) -> None:  # fmt: skip
    """Every schedule is registered (or shipped) and trainable at every budget; one trained from
    the linear configs leaves ``extra`` the scheduler's name. Raises :class:`SweepError`."""
    registered = schedule_names()
    key = SCHEDULER_KEYS.get(fam.tool, "")
    clash = [t for t in extra if key and t.split("=", 1)[0] == key]
    if fam.source and not fam.script and clash:  # every cell of one's own config sets it
        raise SweepError(f"override {clash[0]!r} after -- would replace the scheduler each cell "
                         f"sets (--schedules); allowed: no {key} override")  # fmt: skip
    for schedule in schedules:
        own = schedule in fam.schedules or (
            bool(fam.script or fam.source) and schedule in registered
        )
        if not own and schedule not in registered:
            raise SweepError(f"schedule {schedule!r} is not a registered schedule; allowed: "
                             f"{', '.join(registered)}")  # fmt: skip
        if not own and clash:
            raise SweepError(
                f"override {clash[0]!r} after -- would replace the scheduler of --schedules "
                f"{schedule} (trained from the linear configs); allowed: no {key} override, or "
                f"--schedules {' '.join(fam.schedules)} only"
            )
        if fam.source or fam.script:  # one file (config or script) trains every cell
            continue
        needs = schedule if own else "linear"
        missing = [b for b in budgets if (needs, b) not in configs]
        if missing:
            through = "" if own else f", which {schedule!r} trains from"
            raise SweepError(
                f"no committed config for schedule {schedule!r} at budget {missing[0]:g} "
                f"(configs/{fam.filename(missing[0], needs)} does not exist{through}); "
                f"committed: {describe(configs)}"
            )


def check_grid(args: argparse.Namespace, extra: list[str]) -> list[tuple[str, float]]:
    """The (schedule, budget) cells, smallest budgets first, after checking the arguments and
    ``--out``; raises :class:`SweepError`."""
    fam = args.family
    configs = family_configs(fam)
    label = family_label(fam)
    default = SCRIPT_SCHEDULES if fam.script else sorted({s for s, _ in configs})
    schedules = list(dict.fromkeys(args.schedules or default))
    budgets = sorted({parse_budget(b, fam) for b in args.budgets or map(str, fam.fractions)})
    check_schedules(fam, configs, schedules, budgets, extra)
    check_extra(fam.tool, extra, lrs=bool(args.lrs), seeds=bool(args.seeds))
    if fam.source:
        check_own_budgets(fam, budgets)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; allowed: a new folder or a sweep folder")
    record = out / SWEEP_FILE
    if record.is_file():
        meta = read_sweep(out).meta  # every record and cell folder checked
        if (meta["framework"], meta["family"]) != (fam.framework, label):
            raise SweepError(
                f"--out {out} holds a {meta['framework']} sweep of {meta['family']}; allowed: "
                f"a new folder, or a sweep of {fam.framework} {label}"
            )
        if fam.source:
            check_same_source(
                out, meta.get("experiment") or {}, fam, getattr(args, "force_source", False)
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
    """One cell's plan: skip a finished run, resume a started one, else run it;
    ``config_schedule``: whose shipped config it trains (default: the cell's schedule)."""
    framework = fam.framework
    schedule, budget, lr, seed = key
    if config_schedule is None or fam.source:  # one's own config: the cell sets its schedule
        config, switch = cell_source(fam, configs, schedule, budget)
        config_schedule = schedule if not switch else "linear"
    else:
        config, switch = configs[config_schedule, budget], []
    run_dir = out / cell_name(*key)
    check_no_links(run_dir)  # never written (nor read) through a link
    spec = {
        "framework": framework, "schedule": schedule, "budget": budget, "lr": lr, "seed": seed,
        "config": fam.config_path(budget, config_schedule),
        "data": None if data is None else str(data), "overrides": extra,
    }  # fmt: skip
    if run_dir.exists() and not run_dir.is_dir():
        raise SweepError(f"{run_dir} is a file; allowed: a run folder (move the file away)")
    old = read_cell_record(run_dir) or None
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
    overrides = [*extra, *switch, *axis_overrides(fam.tool, lr, seed)]
    if fam.script:  # the script writes nothing before its end: a started run is run again
        command = script_command(config, schedule, budget, fam.full_iters, run_dir, overrides)
    else:
        resume = action == "resume"
        command = build_command(fam.tool, config, run_dir, data, overrides, resume,
                                imports=fam.imports)  # fmt: skip
    final = None if status == "diverged" else final
    return Plan(fam, schedule, budget, lr, seed, run_dir, spec, command, action, final, status)


EVALUATED_WEIGHTS = ("MODEL.WEIGHTS", "model_final.pth")
"""``--evaluate-from``: the weights key the evaluation sets, and the file of a finished run it
loads (Detectron2's; MMEngine runs are evaluated with MMEngine's ``tools/test.py``)."""


def plan_evaluations(
    args: argparse.Namespace, grid: list[CellKey], extra: list[str], data: Path | None
) -> list[Plan]:
    """``--evaluate-from``: each cell's plan to evaluate (``--eval-only``) the final weights of the
    same cell of those sweep folders (finished in exactly one), with the run's overrides, then
    ``extra``, then the weights. Raises :class:`SweepError`."""
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
        read_sweep(source)  # its records, cell folders and final metrics checked
    if args.toy and data is not None and not toy_data(fam, data)[1]:
        raise SweepError(
            f"--data {data} holds no toy set to evaluate on; allowed: a folder with one "
            f"(python tools/make_toy_coco.py --root {data} --seed 2 --num-val 500, say)"
        )
    configs = family_configs(fam)
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
            check_extra(fam.tool, trained)
        except SweepError as err:
            raise SweepError(f"{record}: its trained {err}") from None
        overrides = [*trained, *extra, key, str(runs[0] / name)]
        plan = plan_cell(fam, cell, configs, args.out, data, overrides)
        plan.spec["evaluated_from"] = str(runs[0])
        plan.command = [t for t in plan.command if t != "--resume"]
        plan.command.insert(3, "--eval-only")  # after ``python -c BOOT``
        plans.append(plan)
    return plans

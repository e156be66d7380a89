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
from ..arms import (
    Arm,
    arm_flags,
    param_overrides,
    parse_cell,
    validate_overrides,
)
from ..families import ConfigFamily
from ..own import own_overrides
from .commands import (
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
    CellKey,
    Final,
    cell_name,
    check_no_links,
    holds_run,
    read_cell_record,
    read_final,
    read_record,
    read_sweep,
    run_status,
)

__all__ = [
    "EVALUATED_WEIGHTS", "Plan", "cell_source", "committed_configs", "config_schedule", "describe",
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


DEFAULT_SCHEDULES = ("linear", "step")
"""The schedules without ``--schedules`` of a family that ships no configs (a script family, the
user's own config or script): the paper's comparison (``--schedules`` takes any arm)."""


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


def config_schedule(fam: ConfigFamily, arm: Arm) -> str:
    """Whose shipped config trains an arm's cells: its schedule's where the family ships it
    (``subset``: ``step``'s), else ``linear`` (``schedulefree``: always; its LR schedule goes)."""
    shipped = arm.schedule in fam.schedules and arm.kind != "schedulefree"
    return arm.schedule if shipped else "linear"


def cell_source(
    fam: ConfigFamily, configs: dict[tuple[str, float], Path], schedule: str, budget: float,
    validate_every: int | None = None,
) -> tuple[Path, list[str]]:  # fmt: skip
    """What trains a cell (``schedule``: its text, :mod:`~budgeted.experiments.arms`): (config
    file or script, overrides after the user's). A config family's cell trains the shipped config
    of its schedule at ``budget`` where there is one, else the ``linear`` config with
    :func:`~.commands.schedule_overrides` (``step``: with the family's milestones); then the
    schedule's parameters, the arm's flags (:func:`~budgeted.experiments.arms.arm_flags`) and
    ``--validate-every``'s overrides.

    >>> from budgeted.experiments.families import PSPNET_TOY
    >>> config, switch = cell_source(PSPNET_TOY, committed_configs(PSPNET_TOY), "rex", 0.05)
    >>> config.name, switch
    ('pspnet_r18-toy_cityscapes_budget5.py', ['param_scheduler.0.type=BudgetRexLR'])
    >>> cell_source(PSPNET_TOY, committed_configs(PSPNET_TOY), "subset@adamw", 0.05)[1]
    ['--optimizer', 'adamw', '--subset', '0.05']
    """
    arm = parse_cell(schedule)
    more = [*arm_flags(arm, budget), *validate_overrides(fam.tool, validate_every)]
    if fam.script:
        return find_script(fam), more
    if fam.source:  # the user's own config: the cell's budget and schedule by the tool's keys
        return Path(fam.source), [*own_overrides(fam, schedule, budget), *more]
    base = config_schedule(fam, arm)
    params = dict(arm.params) if arm.kind != "schedulefree" else {}
    switch: list[str] = []
    if base != arm.schedule and arm.kind != "schedulefree":
        switch = schedule_overrides(fam.framework, arm.schedule)
        if arm.schedule == "step" and "milestones" not in params:  # the family's step baseline
            params["milestones"] = fam.step_milestones
    overrides = [*switch, *param_overrides(fam.tool, arm.schedule, params), *more]
    return configs[base, budget], overrides


def plan_cells(
    args: argparse.Namespace, grid: list[CellKey], extra: list[str], data: Path | None
) -> list[Plan]:
    """Each cell's plan; raises :class:`SweepError` for a run folder it must not touch."""
    fam = args.family
    configs = family_configs(fam)
    every = getattr(args, "validate_every", None)
    return [
        plan_cell(fam, key, configs, args.out, data, extra, validate_every=every) for key in grid
    ]


def plan_cell(
    fam: ConfigFamily, key: CellKey, configs: dict[tuple[str, float], Path], out: Path,
    data: Path | None, extra: list[str], shipped: str | None = None,
    validate_every: int | None = None,
) -> Plan:  # fmt: skip
    """One cell's plan: skip a finished run, resume a started one, else run it; ``shipped``: whose
    shipped config it trains (default: :func:`cell_source`'s); ``validate_every``: validate every
    that many iterations (``--validate-every``)."""
    framework = fam.framework
    schedule, budget, lr, seed = key
    arm = parse_cell(schedule)
    if shipped is None or fam.source:  # one's own config: the cell sets its schedule
        config, switch = cell_source(fam, configs, schedule, budget, validate_every)
        shipped = config_schedule(fam, arm)
    else:
        config, switch = configs[shipped, budget], []
    run_dir = out / cell_name(*key)
    check_no_links(run_dir)  # never written (nor read) through a link
    spec = {
        "framework": framework, "schedule": schedule, "budget": budget, "lr": lr, "seed": seed,
        "config": fam.config_path(budget, shipped),
        "data": None if data is None else str(data), "overrides": extra,
        "validate_every": validate_every,
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
    overrides = [*fam.script_args, *extra, *switch, *axis_overrides(fam.tool, lr, seed)]
    if fam.script:  # the script writes nothing before its end: a started run is run again
        command = script_command(
            config, arm.tool_schedule, budget, fam.full_iters, run_dir, overrides
        )
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

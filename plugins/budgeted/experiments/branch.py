"""One run, many budgets: a stable WSD run branched into one cooldown per budget.

    budgeted-branch mmseg --toy --budgets 0.05 0.1 0.25 0.5 1.0 [--cooldown 0.2] \\
        [--decay sqrt] [--seeds 0 1 2] [--lrs 0.1] [--compare] --out output/branch/mmseg_toy \\
        [-- overrides]

``wsd`` is the same for every budget until a budget's cooldown starts, after
``N_B = floor(W + (1 - c)(B - W)) + 1`` iterations. So, per seed and LR, the longest budget's
WSD run saves a checkpoint after each shorter budget's ``N_B``, and each shorter budget resumes
from it with its own WSD config and ``on_resume=branch``. ``--compare`` adds separate ``linear``
runs; the folders are sweep cells (docs/sweeps.md, "One run, many budgets").
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import SweepError
from ..schedules import WSD_DECAYS, BudgetSchedule, arm_text, check_params, schedule_params
from .families import FRAMEWORKS
from .sweep.cli import (
    GRID_ARGUMENTS,
    OWN_ARGUMENTS,
    add_options,
    own_experiment,
    prepare,
    run_locked,
    shipped_family,
    split_argv,
    tool_parser,
)
from .sweep.commands import show
from .sweep.execute import SignalForwarder
from .sweep.grid import check_grid
from .sweep.local import run_cells
from .sweep.plan import Plan, family_configs, plan_cell, toy_environment
from .sweep.records import CellKey

__all__ = ["branch_points", "compute", "main", "save_overrides", "wsd_text"]

WSD = schedule_params("wsd")
"""WSD's defaults: ``--cooldown`` and ``--decay`` default to them."""


def branch_points(iters: dict[float, int], warmup: int, cooldown: float) -> dict[float, int]:
    """``{budget: N_B}``: the iterations after which each budget's cooldown starts.

    >>> branch_points({0.05: 160, 0.1: 320, 1.0: 3200}, warmup=20, cooldown=0.2)
    {0.05: 133, 0.1: 261, 1.0: 2565}
    """
    return {b: math.floor(warmup + (1.0 - cooldown) * (t - warmup)) + 1 for b, t in iters.items()}


def compute(iters: dict[float, int], points: dict[float, int]) -> tuple[int, int]:
    """(iterations of one stable run plus the shorter budgets' cooldowns, of separate runs).

    >>> compute({0.5: 100, 1.0: 200}, {0.5: 81, 1.0: 161})
    (219, 300)
    """
    longest = max(iters)
    branched = iters[longest] + sum(iters[b] - points[b] for b in iters if b != longest)
    return branched, sum(iters.values())


def wsd_text(decay: str = "linear", cooldown: float = WSD["cooldown"]) -> str:
    """The cells' schedule: ``wsd`` with this cooldown shape and fraction, as its one text
    (:func:`~budgeted.schedules.arm_text`: defaults left out); ``ValueError`` (one line) for a
    cooldown the schedule refuses.

    >>> wsd_text("linear"), wsd_text("sqrt"), wsd_text("linear", 0.1)
    ('wsd', 'wsd:decay=sqrt', 'wsd:cooldown=0.1')
    """
    return arm_text("wsd", check_params("wsd", {"cooldown": cooldown, "decay": decay}))


def save_overrides(framework: str, save_at: Sequence[int]) -> list[str]:
    """The overrides that make a run save a checkpoint after each of ``save_at`` iterations.

    >>> save_overrides("mmseg", [30, 61]), save_overrides("detectron2", [])
    (['checkpoint_at=[30,61]'], [])
    """
    if not save_at:
        return []
    if framework == "detectron2":
        return ["SOLVER.BUDGET.SAVE_AT", f"({','.join(map(str, save_at))},)"]
    return [f"checkpoint_at=[{','.join(map(str, save_at))}]"]


def checkpoint_file(framework: str, run_dir: Path, trained: int) -> Path:
    """The checkpoint a run saves after ``trained`` iterations."""
    if framework == "detectron2":
        return run_dir / f"model_{trained - 1:07d}.pth"
    return run_dir / f"iter_{trained}.pth"


_TAKEN = ("--toy", "--task", "--lrs", "--seeds", "--data", "--dry-run", "--keep-going")
"""The sweep's options (:data:`~.sweep.cli.GRID_ARGUMENTS`) the tool takes as they are."""
FULL_ITERS_HELP = "the full schedule in iterations (default: the config's own length)"


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    own, extra = split_argv(argv)
    parser = tool_parser("branch", "budgeted-branch", __doc__)
    config_frameworks = [f for f in FRAMEWORKS if f != "pytorch"]  # branching needs configs
    parser.add_argument("framework", nargs="?", choices=config_frameworks, metavar="framework",
                        help="a shipped family's framework, one of: "
                        f"{', '.join(config_frameworks)} (not with --config)")  # fmt: skip
    parser.add_argument("--budgets", nargs="+", required=True, metavar="F",
                        help="budget fractions (2 or more): the longest trains the stable run, "
                        "each shorter one branches off it")  # fmt: skip
    parser.add_argument("--cooldown", type=float, default=WSD["cooldown"], metavar="C",
                        help="WSD's cooldown, a fraction of each budget's decay (default: "
                        f"{WSD['cooldown']:g})")  # fmt: skip
    parser.add_argument("--decay", choices=list(WSD_DECAYS), default=WSD["decay"],
                        help=f"WSD's cooldown shape (default: {WSD['decay']})")  # fmt: skip
    parser.add_argument("--compare", action="store_true", help="also separate linear runs")
    parser.add_argument("--out", type=Path, required=True, metavar="OUT",
                        help="the sweep folder: a new or empty one, or one of budgeted-sweep's "
                        "or budgeted-branch's of the same family")  # fmt: skip
    add_options(parser, [o for o in GRID_ARGUMENTS if o[0] in _TAKEN])
    group = parser.add_argument_group(
        "your own config", "the stable run and its branches train your config at each budget "
        "(docs/sweeps.md, 'One run, many budgets')",
    )  # fmt: skip
    add_options(group, [(flag, {**kw, "help": FULL_ITERS_HELP} if flag == "--full-iters" else kw)
                        for flag, kw in OWN_ARGUMENTS], skip=("--script",))  # fmt: skip
    parser.set_defaults(script=None)
    args = parser.parse_args(own)
    if args.config is not None:
        own_experiment(parser, args)
        if args.family.tool != args.family.framework:
            parser.error(f"--config {args.config}: branching resumes a checkpoint into another "
                         "budget, which the LazyConfig tool does not; allowed: a Detectron2 "
                         "yaml or an MMEngine config")  # fmt: skip
        return args, extra
    shipped_family(parser, args, script=False)
    args.out = args.out.resolve()
    return args, extra


def plan(args: argparse.Namespace, extra: list[str], data: Path | None) -> list[Plan]:
    """Every cell, in the order they must run (a stable run before its branches), after the
    sweep's own checks of the grid and of ``--out`` (:func:`~.sweep.grid.check_grid`: a folder
    of other files, a sweep of another family, a config changed since its first cells)."""
    fam = args.family
    try:
        text = wsd_text(args.decay, args.cooldown)
    except ValueError as err:
        raise SweepError(f"--cooldown {args.cooldown:g}: {err}") from None
    grid = check_grid(argparse.Namespace(**{
        **vars(args), "schedules": [text, *(["linear"] if args.compare else [])],
        "optimizers": None, "lrs_for": None, "validate_every": None,
    }), extra)  # fmt: skip
    budgets = sorted({key.budget for key in grid})
    if len(budgets) < 2:
        raise SweepError(f"--budgets {' '.join(args.budgets)}: allowed: two budgets or more")
    for budget in budgets:  # each budget's cooldown must train at least one iteration
        try:
            BudgetSchedule(text, fam.iters(budget), fam.warmup).check_steps()
        except ValueError as err:
            raise SweepError(f"budget {budget:g} ({fam.iters(budget)} iterations): {err}") from None
    points = branch_points({b: fam.iters(b) for b in budgets}, fam.warmup, args.cooldown)
    longest, configs = budgets[-1], family_configs(fam)
    plans = []
    for seed in dict.fromkeys(key.seed for key in grid):
        for lr in dict.fromkeys(key.lr for key in grid):
            save_at = save_overrides(fam.framework, [points[b] for b in budgets[:-1]])
            stable = plan_cell(
                fam, CellKey(text, longest, lr, seed), configs, args.out, data, [*extra, *save_at]
            )
            plans.append(stable)
            for budget in budgets[:-1]:
                cell = plan_cell(
                    fam, CellKey(text, budget, lr, seed), configs, args.out, data, extra
                )
                if cell.action == "run":  # a new branch starts from the stable run's checkpoint
                    source = checkpoint_file(fam.framework, stable.run_dir, points[budget])
                    cell.command = with_branch(fam.framework, cell.command, source)
                plans.append(cell)
            if args.compare:
                plans += [
                    plan_cell(fam, CellKey("linear", b, lr, seed), configs, args.out, data, extra)
                    for b in budgets
                ]
    return plans


def with_branch(framework: str, command: list[str], source: Path) -> list[str]:
    """A new run's command, made to start from ``source`` with ``on_resume=branch``."""
    if framework == "detectron2":
        at = command.index("--config-file") + 2
        return [*command[:at], "--resume-from", str(source), *command[at:],
                "SOLVER.BUDGET.ON_RESUME", "branch"]  # fmt: skip
    if "--cfg-options" not in command:
        command = [*command, "--cfg-options"]
    at = command.index("--cfg-options")
    return [*command[:at], "--resume-from", str(source), *command[at:], "budget_on_resume=branch"]


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-branch``: the exit status (2: bad input, one line)."""
    args, extra = _parse(sys.argv[1:] if argv is None else argv)

    def planned() -> tuple[Path | None, bool, tuple]:
        data, present, env = toy_environment(args.family, args.toy, args.data)
        return data, present, (data, present, env, plan(args, extra, data))

    prepared = prepare("branch", args, planned)
    if isinstance(prepared, int):
        return prepared
    lock, (data, present, env, plans) = prepared
    fam = args.family
    budgets = sorted({p.budget for p in plans})
    iters = {b: fam.iters(b) for b in budgets}
    branched, separate = compute(iters, branch_points(iters, fam.warmup, args.cooldown))
    summary = (
        f"[branch] compute: one stable run + cooldowns = {branched} iterations, separate WSD "
        f"runs = {separate} ({branched / separate:.2f}x), per seed and LR"
    )
    if args.dry_run:
        print(summary)
        for p in plans:
            print(f"{p.run_dir.name}: {p.action}: {show(p.command)}")
        return 0

    def run(forwarder: SignalForwarder) -> int:
        start = time.monotonic()
        code = run_cells(args.out, plans, env, forwarder, keep_going=args.keep_going)
        print(f"{summary}; wall {time.monotonic() - start:.0f} s")
        return code

    return run_locked("branch", args, lock, plans, data, present, run)


if __name__ == "__main__":
    sys.exit(main())

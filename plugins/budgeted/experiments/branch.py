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
from ..schedules import WSD_DECAYS
from .families import FRAMEWORKS, ConfigFamily
from .own import own_overrides
from .sweep.cli import (
    GRID_ARGUMENTS,
    add_options,
    add_own_arguments,
    own_experiment,
    prepare,
    run_locked,
    shipped_family,
    split_argv,
    tool_parser,
)
from .sweep.commands import check_extra, schedule_overrides
from .sweep.execute import SignalForwarder
from .sweep.local import run_cells
from .sweep.plan import (
    Plan,
    family_configs,
    parse_budget,
    parse_lr,
    parse_seed,
    plan_cell,
    toy_environment,
)
from .sweep.records import CellKey

__all__ = ["branch_points", "compute", "main", "wsd_text"]


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


def wsd_text(decay: str) -> str:
    """The cells' schedule: ``wsd``, or ``wsd:decay=<decay>`` for another cooldown shape.

    >>> wsd_text("linear"), wsd_text("sqrt")
    ('wsd', 'wsd:decay=sqrt')
    """
    return "wsd" if decay == "linear" else f"wsd:decay={decay}"


def wsd_overrides(
    fam: ConfigFamily, budget: float, cooldown: float, save_at: Sequence[int],
    decay: str = "linear",
) -> list[str]:  # fmt: skip
    """The overrides that turn a linear budget config into WSD (cooldown shape ``decay``) at
    ``budget``, saving ``save_at``."""
    framework = fam.framework
    own = fam.source  # the user's config trains every cell, its schedule set per cell
    out = own_overrides(fam, "wsd", budget) if own else schedule_overrides(framework, "wsd")
    if framework == "detectron2":
        out += ["SOLVER.BUDGET.WSD_COOLDOWN", f"{cooldown}"]
        out += ["SOLVER.BUDGET.WSD_DECAY", decay] if decay != "linear" else []
        if save_at:
            out += ["SOLVER.BUDGET.SAVE_AT", f"({','.join(map(str, save_at))},)"]
        return out
    out.append(f"param_scheduler.0.cooldown={cooldown}")
    out += [f"param_scheduler.0.decay={decay}"] if decay != "linear" else []
    if save_at:
        out.append(f"checkpoint_at=[{','.join(map(str, save_at))}]")
    return out


def checkpoint_file(framework: str, run_dir: Path, trained: int) -> Path:
    """The checkpoint a run saves after ``trained`` iterations."""
    if framework == "detectron2":
        return run_dir / f"model_{trained - 1:07d}.pth"
    return run_dir / f"iter_{trained}.pth"


_TAKEN = ("--toy", "--task", "--lrs", "--seeds", "--data", "--dry-run", "--keep-going")
"""The sweep's options (:data:`~.sweep.cli.GRID_ARGUMENTS`) the tool takes as they are."""


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    own, extra = split_argv(argv)
    parser = tool_parser("branch", "budgeted-branch", __doc__)
    config_frameworks = [f for f in FRAMEWORKS if f != "pytorch"]  # branching needs configs
    parser.add_argument("framework", nargs="?", choices=config_frameworks)
    parser.add_argument("--budgets", nargs="+", required=True, help="budget fractions (2 or more)")
    parser.add_argument("--cooldown", type=float, default=0.2, help="WSD's cooldown fraction c")
    parser.add_argument("--decay", choices=list(WSD_DECAYS), default="linear",
                        help="WSD's cooldown shape (default: linear)")  # fmt: skip
    parser.add_argument("--compare", action="store_true", help="also separate linear runs")
    parser.add_argument("--out", type=Path, required=True)
    add_options(parser, [o for o in GRID_ARGUMENTS if o[0] in _TAKEN])
    add_own_arguments(parser, script=False)
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
    """Every cell, in the order they must run (a stable run before its branches)."""
    fam = args.family
    configs = family_configs(fam)
    if not 0.0 < args.cooldown <= 1.0:
        raise SweepError(f"--cooldown {args.cooldown} is invalid; allowed: a number in (0, 1]")
    budgets = sorted({parse_budget(b, fam) for b in args.budgets})
    if len(budgets) < 2:
        raise SweepError(f"--budgets {' '.join(args.budgets)}: allowed: two budgets or more")
    missing = [b for b in budgets if ("linear", b) not in configs and not fam.source]
    if missing:
        raise SweepError(f"no committed linear config at budget {missing[0]:g}")
    check_extra(fam.tool, extra, lrs=bool(args.lrs), seeds=bool(args.seeds))
    points = branch_points({b: fam.iters(b) for b in budgets}, fam.warmup, args.cooldown)
    longest = budgets[-1]
    lrs = [parse_lr(t) for t in args.lrs] if args.lrs else [None]
    seeds = [parse_seed(t) for t in args.seeds] if args.seeds else [None]
    plans = []
    for seed in seeds:
        for lr in lrs:
            save_at = [points[b] for b in budgets[:-1]]
            stable = plan_cell(
                fam, CellKey(wsd_text(args.decay), longest, lr, seed), configs, args.out, data,
                [*extra, *wsd_overrides(fam, longest, args.cooldown, save_at, args.decay)],
                "linear",
            )  # fmt: skip
            plans.append(stable)
            for budget in budgets[:-1]:
                cell = plan_cell(
                    fam, CellKey(wsd_text(args.decay), budget, lr, seed), configs, args.out, data,
                    [*extra, *wsd_overrides(fam, budget, args.cooldown, [], args.decay)],
                    "linear",
                )  # fmt: skip
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
            print(f"{p.run_dir.name}: {p.action}: {' '.join(p.command[3:])}")
        return 0

    def run(forwarder: SignalForwarder) -> int:
        start = time.monotonic()
        code = run_cells(args.out, plans, env, forwarder, keep_going=args.keep_going)
        print(f"{summary}; wall {time.monotonic() - start:.0f} s")
        return code

    return run_locked("branch", args, lock, plans, data, present, run)


if __name__ == "__main__":
    sys.exit(main())

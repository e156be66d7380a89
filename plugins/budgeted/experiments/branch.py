"""One run, many budgets: a stable WSD run branched into one cooldown per budget.

    budgeted-branch mmseg --toy --budgets 0.05 0.1 0.25 0.5 1.0 [--cooldown 0.2] \\
        [--seeds 0 1 2] [--lrs 0.1] [--compare] --out output/branch/mmseg_toy [-- overrides]

The ``wsd`` schedule (:func:`budgeted.schedules.wsd`: warmup ``W``, the base LR, then a linear
cooldown over the last fraction ``c`` of the decay phase) is the same for every budget until a
budget's cooldown starts, after ``N_B = floor(W + (1 - c)(B - W)) + 1`` iterations. So, per seed
and LR:

1. ``wsd_budget<longest>_...``: the longest budget's WSD run, which also saves a checkpoint after
   ``N_B`` iterations for every shorter budget (``SOLVER.BUDGET.SAVE_AT`` /
   ``checkpoint_at``);
2. ``wsd_budget<B>_...``: each shorter budget's cooldown, resumed from that checkpoint with the
   budget's own WSD config and ``on_resume=branch`` (the core checks that both budgets gave every
   trained iteration the same multiplier): ``B - N_B`` more iterations.

With ``--compare`` the same tool runs separate ``linear`` runs at every budget, seed and LR in
the same folder, so ``budgeted-report OUT`` shows WSD branches and linear side by side (mean ±
std, paired ``linear − wsd``). The folders are sweep cells (``sweep_cell.json``, ``sweep.json``):
finished cells are skipped, interrupted ones resumed, as in ``budgeted-sweep``. At the end the
tool prints the compute of branching against separate WSD runs, in iterations.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import FolderBusyError, ReportError, SweepError
from .families import FRAMEWORKS, ConfigFamily, family
from .own import family_record, own_overrides
from .sweep.cli import _Parser as SweepParser
from .sweep.cli import add_own_arguments, own_experiment, own_only_options
from .sweep.commands import check_extra, schedule_overrides
from .sweep.execute import SignalForwarder, check_writable, save_sweep, sweep_lock
from .sweep.local import run_cells
from .sweep.plan import (
    Plan,
    family_configs,
    make_toy_data,
    parse_budget,
    parse_lr,
    parse_seed,
    plan_cell,
    toy_environment,
)
from .sweep.records import CellKey, family_label

__all__ = ["branch_points", "compute", "main"]


def branch_points(iters: dict[float, int], warmup: int, cooldown: float) -> dict[float, int]:
    """``{budget: N_B}``: the iterations after which each budget's cooldown starts.

    >>> branch_points({0.05: 160, 0.1: 320, 1.0: 3200}, warmup=20, cooldown=0.2)
    {0.05: 133, 0.1: 261, 1.0: 2565}
    """
    return {b: math.floor(warmup + (1.0 - cooldown) * (t - warmup)) + 1 for b, t in iters.items()}


def compute(iters: dict[float, int], points: dict[float, int]) -> tuple[int, int]:
    """(iterations of one stable run plus the shorter budgets' cooldowns, iterations of a separate
    run per budget).

    >>> compute({0.5: 100, 1.0: 200}, {0.5: 81, 1.0: 161})
    (219, 300)
    """
    longest = max(iters)
    branched = iters[longest] + sum(iters[b] - points[b] for b in iters if b != longest)
    return branched, sum(iters.values())


def wsd_overrides(
    fam: ConfigFamily, budget: float, cooldown: float, save_at: Sequence[int]
) -> list[str]:
    """The training tool's overrides that turn a linear budget config (the user's own config:
    itself, :func:`~budgeted.experiments.own.own_overrides`) into WSD at ``budget`` and save the
    branch points."""
    framework = fam.framework
    own = fam.source  # the user's config trains every cell, its schedule set per cell
    out = own_overrides(fam, "wsd", budget) if own else schedule_overrides(framework, "wsd")
    if framework == "detectron2":
        out += ["SOLVER.BUDGET.WSD_COOLDOWN", f"{cooldown}"]
        if save_at:
            out += ["SOLVER.BUDGET.SAVE_AT", f"({','.join(map(str, save_at))},)"]
        return out
    out.append(f"param_scheduler.0.cooldown={cooldown}")
    if save_at:
        out.append(f"checkpoint_at=[{','.join(map(str, save_at))}]")
    return out


def checkpoint_file(framework: str, run_dir: Path, trained: int) -> Path:
    """The checkpoint a run saves after ``trained`` iterations."""
    if framework == "detectron2":
        return run_dir / f"model_{trained - 1:07d}.pth"
    return run_dir / f"iter_{trained}.pth"


class _Parser(SweepParser):
    label = "branch"


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = _Parser(prog="budgeted-branch", description=__doc__.split("\n\n")[0])
    config_frameworks = [f for f in FRAMEWORKS if f != "pytorch"]  # branching needs configs
    parser.add_argument("framework", nargs="?", choices=config_frameworks)
    parser.add_argument("--toy", action="store_true", help="the toy configs and data (CPU)")
    parser.add_argument("--task", help="mmpretrain: cifar10 or imagenet")
    parser.add_argument("--budgets", nargs="+", required=True, help="budget fractions (2 or more)")
    parser.add_argument("--cooldown", type=float, default=0.2, help="WSD's cooldown fraction c")
    parser.add_argument("--lrs", nargs="+", metavar="LR")
    parser.add_argument("--seeds", nargs="+", metavar="SEED")
    parser.add_argument("--compare", action="store_true", help="also separate linear runs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, help="with --toy: the toy set's root")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--keep-going", action="store_true")
    add_own_arguments(parser, script=False)
    args = parser.parse_args(argv[:cut])
    if args.config is not None:
        own_experiment(parser, args)
        if args.family.tool != args.family.framework:
            parser.error(f"--config {args.config}: branching resumes a checkpoint into another "
                         "budget, which the LazyConfig tool does not; allowed: a Detectron2 "
                         "yaml or an MMEngine config")  # fmt: skip
        return args, argv[cut + 1 :]
    if args.framework is None:
        parser.error("the following arguments are required: framework (or --config)")
    if own_only_options(args):
        parser.error(f"{own_only_options(args)[0]} is for your own config; allowed: --config "
                     "PATH with it, or leave it out")  # fmt: skip
    if args.data is not None and not args.toy:
        parser.error("--data is for --toy runs; full datasets come from the configs")
    try:
        args.family = family(args.framework, args.toy, args.task)
    except ValueError as err:
        parser.error(str(err))
    args.out = args.out.resolve()
    return args, argv[cut + 1 :]


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
                fam, CellKey("wsd", longest, lr, seed), configs, args.out, data,
                [*extra, *wsd_overrides(fam, longest, args.cooldown, save_at)], "linear",
            )  # fmt: skip
            plans.append(stable)
            for budget in budgets[:-1]:
                cell = plan_cell(
                    fam, CellKey("wsd", budget, lr, seed), configs, args.out, data,
                    [*extra, *wsd_overrides(fam, budget, args.cooldown, [])], "linear",
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
    lock = sweep_lock(args.out)
    try:
        if not args.dry_run:
            lock.check()
        data, present, env = toy_environment(args.family, args.toy, args.data)
        plans = plan(args, extra, data)
        if not args.dry_run:
            check_writable(args.out, None if present else data)
            lock.acquire()
    except (SweepError, ReportError, FolderBusyError, ValueError) as err:
        print(f"branch: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the lock file: unreadable, say
        print(f"branch: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
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
    with lock, SignalForwarder() as forwarder:
        try:
            if args.toy and not present:
                make_toy_data(fam, data)
            experiment = family_record(fam) if fam.source else None
            save_sweep(args.out, fam.framework, family_label(fam), plans, experiment)
            start = time.monotonic()
            code = run_cells(args.out, plans, env, forwarder, keep_going=args.keep_going)
        except OSError as err:  # checked writable before; a disk that filled up, say
            print(f"branch: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
            return 1
        print(f"{summary}; wall {time.monotonic() - start:.0f} s")
        return code


if __name__ == "__main__":
    sys.exit(main())

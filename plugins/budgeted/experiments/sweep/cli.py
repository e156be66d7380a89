"""Run the paper's comparison: one training run per (schedule, budget, base LR, seed).

``budgeted-sweep``'s command line: plan (:mod:`.plan`), then ``--dry-run`` or run (:mod:`.execute`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from ...errors import FolderBusyError, ReportError, SweepError
from ...safety.locks import FolderLock
from ...schedules.units import BUDGET_FRACTIONS
from ..arms import parse_cell
from ..families import FRAMEWORKS, ConfigFamily, family
from ..own import OWN_FRAMEWORKS, family_record, own_family
from .commands import short, show
from .cost import estimate
from .execute import SignalForwarder, check_writable, save_sweep, skip_text, sweep_lock
from .grid import check_grid
from .local import THREAD_VARIABLES, jobs_environment, run_cells
from .plan import (
    DEFAULT_SCHEDULES,
    Plan,
    make_toy_data,
    plan_cells,
    plan_evaluations,
    toy_environment,
)
from .records import family_label
from .slurm import run_on_slurm, show_options
from .slurm_options import SLURM_FLAGS, add_slurm_arguments, check_cluster, slurm_options
from .status import status_main
from .warm import check_preload, preload

T = TypeVar("T")

__all__ = [
    "add_own_arguments", "build_parser", "main", "own_experiment", "own_only_options", "parse_args",
    "print_dry_run",
]  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line (``<label>: error: ...``), exit status 2; the
    parser of every experiments tool (``budgeted-sweep``, ``-branch``, ``-rank``, ``-report``)."""

    label = "sweep"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.label}: error: {message}\n")


def tool_parser(label: str, prog: str, doc: str) -> _Parser:
    """The parser of ``prog``: its description the first paragraph of ``doc``, its usage errors
    one line ``<label>: error: ...``."""
    parser = _Parser(prog=prog, description=doc.split("\n\n")[0])
    parser.label = label
    return parser


Option = tuple[str, dict[str, Any]]
"""One option as data: its flag and ``add_argument``'s keywords."""


def add_options(parser: Any, options: Sequence[Option], skip: Sequence[str] = ()) -> None:
    """``parser.add_argument(flag, **keywords)`` for each option but those in ``skip``."""
    for flag, keywords in options:
        if flag not in skip:
            parser.add_argument(flag, **keywords)


OWN_ARGUMENTS: tuple[Option, ...] = (
    ("--config", dict(type=Path, metavar="PATH", help="your config: a Detectron2 yaml or "
     "LazyConfig, or any MMEngine config (MMSeg, MMDet, MMPretrain, MMAction2, or your "
     "codebase's)")),
    ("--script", dict(type=Path, metavar="PATH", help="your plain-PyTorch training script, "
     "following the contract of docs/sweeps.md (--budget, --schedule, --full-iters, --lr, "
     "--seed, --out; a final metrics file)")),
    ("--framework", dict(dest="own_framework", choices=OWN_FRAMEWORKS, metavar="NAME",
     help="with --config, where the file does not tell: detectron2, mmseg, mmdet, mmpretrain, "
     "mmaction or mmengine")),
    ("--full-iters", dict(type=int, metavar="N", help="the full schedule in iterations "
     "(default: the config's own length; required with --script)")),
    ("--metric", dict(default="", metavar="KEY", help="the logged key the report reads "
     "(default: the framework's: bbox/AP, mIoU, accuracy/top1, ...)")),
    ("--import", dict(dest="imports", action="append", default=[], metavar="MODULE",
     help="a module imported in every cell's process before the config is built (your "
     "dataset registrations); repeatable")),
    ("--force-source", dict(action="store_true", help="go on in a sweep folder although the "
     "config or script changed since its first cells")),
)  # fmt: skip
"""The options of the user's own experiment (``budgeted-sweep``'s and ``budgeted-branch``'s)."""
GRID_ARGUMENTS: tuple[Option, ...] = (
    ("--toy", dict(action="store_true", help="the toy configs and data (CPU)")),
    ("--task", dict(help="where a framework ships several families: mmpretrain cifar10 or "
     "imagenet")),
    ("--schedules", dict(nargs="+", metavar="ARM", help="the arms: any registered schedule, "
     "with parameters as NAME:KEY=VALUE[,KEY=VALUE...] (wsd:decay=sqrt, sgdr:restarts=2; without "
     "shipped configs: the linear configs with its scheduler name), schedulefree (the optimizer's "
     "schedule-free form) or subset (the step baseline on a budget-sized random subset); "
     f"default: the family's shipped ones, {' '.join(DEFAULT_SCHEDULES)} without shipped "
     "configs (--config, --script; docs/sweeps.md, 'Arms')")),
    ("--optimizers", dict(nargs="+", metavar="NAME", help="train each arm with each of these "
     "optimizers (sgd, adamw, amsgrad; cells ARM@NAME); plain-PyTorch scripts and MMEngine "
     "codebases only (default: the config's or script's own)")),
    ("--lrs-for", dict(action="append", metavar="WORD=LR[,LR...]", help="the base LRs of the "
     "cells whose text, arm or optimizer is WORD (e.g. adamw=0.001,0.003), instead of --lrs; "
     "repeatable")),
    ("--validate-every", dict(metavar="K", help="every cell validates every K iterations "
     "(TEST.EVAL_PERIOD, train.eval_period, the tools' --validate-every), for budgeted-report "
     "--best-progress")),
    ("--budgets", dict(nargs="+", metavar="F", help="budget fractions: a shipped family's "
     "committed ones (default: all), or with --config / --script any in (0, 1] of the full "
     f"schedule (default: {' '.join(f'{b:g}' for b in BUDGET_FRACTIONS)})")),
    ("--lrs", dict(nargs="+", metavar="LR", help="base LRs, one cell each (SOLVER.BASE_LR / "
     "optim_wrapper.optimizer.lr; default: the config's)")),
    ("--seeds", dict(nargs="+", metavar="SEED", help="seeds, one cell each (SEED / "
     "randomness.seed; default: the config's)")),
    ("--out", dict(type=Path, help="sweep folder (default: output/sweep/<framework>)")),
    ("--data", dict(type=Path, help="with --toy: the toy set's root (default: as the demos)")),
    ("--evaluate-from", dict(type=Path, nargs="+", metavar="SWEEP", help="train nothing: "
     "evaluate each cell's final weights from these sweep folders (--eval-only; Detectron2) on "
     "--data's test set, into --out")),
    ("--dry-run", dict(action="store_true", help="print the commands, run nothing")),
    ("--keep-going", dict(action="store_true", help="go on after a failed run (a diverged LR of "
     "a grid, say); exit 1 at the end")),
    ("--executor", dict(choices=("local", "slurm"), default="local", help="local: the cells on "
     "this machine (default); slurm: each cell a Slurm job (submitit; docs/sweeps.md)")),
    ("--jobs", dict(type=int, default=1, metavar="N", help="--executor local: N cells at once "
     "on this machine, each with cores // N threads (OMP_NUM_THREADS, MKL_NUM_THREADS; "
     "default: 1, one cell at a time)")),
    ("--preload", dict(nargs="+", metavar="MODULE", help="--executor local: import these "
     "modules once in the sweep and fork every cell from it, so no cell imports them again "
     "(e.g. torch torch._dynamo; docs/sweeps.md, 'Start-up')")),
)  # fmt: skip
"""The sweep's grid and run options (``budgeted-branch`` takes some of them)."""


STATUS_HELP = ("print where each cell of the sweep folder OUT stands (done, running, queued, ...: "
               "docs/sweeps.md) and run nothing; takes no other argument")  # fmt: skip
"""The sweep's ``--status``; a tool that prints more passes its own."""


def add_own_arguments(
    parser: argparse.ArgumentParser, script: bool = True, status: str = STATUS_HELP
) -> None:
    """The options of the user's own experiment (:data:`OWN_ARGUMENTS`) and ``--status``
    (``script``: whether ``--script`` is offered; ``status``: its help)."""
    own = parser.add_argument_group(
        "your own experiment", "every cell trains your config or script at its budget and "
        "schedule (docs/sweeps.md, 'Sweep your own config')",
    )  # fmt: skip
    add_options(own, OWN_ARGUMENTS, skip=() if script else ("--script",))
    if not script:
        parser.set_defaults(script=None)
    parser.add_argument("--status", type=Path, metavar="OUT", help=status)


def build_parser() -> _Parser:
    """``budgeted-sweep``'s parser: every option it takes (``--status`` included), with its help."""
    parser = tool_parser("sweep", "budgeted-sweep", __doc__)
    parser.add_argument(
        "framework", nargs="?",
        help=f"a shipped family's framework, one of: {', '.join(FRAMEWORKS)} (not with --status, "
        "--config or --script)",
    )  # fmt: skip
    add_own_arguments(parser)
    add_options(parser, GRID_ARGUMENTS)
    add_slurm_arguments(parser)
    return parser


def _status_only(parser: _Parser, argv: list[str]) -> None:
    """``--status OUT`` takes no other argument: one line naming the others."""
    rest, skip = [], False
    for token in argv:
        if skip or token == "--status" or token.startswith("--status="):
            skip = token == "--status" and not skip
            continue
        rest.append(token)
    if rest:
        parser.error(f"--status takes only the sweep folder; got also {' '.join(rest)}; "
                     "allowed: budgeted-sweep --status OUT")  # fmt: skip


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the tool's arguments, the overrides after ``--``)."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    return argv[:cut], argv[cut + 1 :]


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The sweep's arguments and the overrides after ``--`` (``args.status``: the folder of
    ``--status OUT``, nothing else given; else None)."""
    parser = build_parser()
    own, extra = split_argv(argv)
    args = parser.parse_args(own)
    if args.status is not None:
        _status_only(parser, list(argv))
        return args, []
    check_executor(parser, args)
    if args.config is not None or args.script is not None:
        own_experiment(parser, args)
        return args, extra
    shipped_family(parser, args, script=True)
    if args.out is None:
        name = "_".join(filter(None, (args.framework, args.task, "toy" if args.toy else "")))
        args.out = Path("output/sweep") / name
    args.out = args.out.resolve()
    return args, extra


def check_executor(parser: _Parser, args: argparse.Namespace) -> None:
    """The options of one executor given for the other: one line naming the option."""
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs} is invalid; allowed: a whole number >= 1 (cells at "
                     "once on this machine)")  # fmt: skip
    local = (("--jobs", args.jobs != 1 and str(args.jobs)),
             ("--preload", args.preload and " ".join(args.preload)))  # fmt: skip
    for flag, value in local:
        if value and args.executor != "local":
            parser.error(f"{flag} is the local executor's; allowed: --executor local {flag} "
                         f"{value}, or leave {flag} out")  # fmt: skip
    if args.executor != "slurm":
        given = [flag for flag, dest in SLURM_FLAGS.items()
                 if getattr(args, dest) != parser.get_default(dest)]  # fmt: skip
        if given:
            parser.error(f"{given[0]} is for --executor slurm; allowed: --executor slurm "
                         f"{given[0]} ..., or leave it out")  # fmt: skip


def shipped_family(parser: _Parser, args: argparse.Namespace, script: bool) -> None:
    """A shipped family's arguments checked and its family in ``args.family``."""
    own = "--config PATH or --script PATH" if script else "--config PATH"
    if args.framework is None:
        flags = "--config / --script" if script else "--config"
        parser.error(f"the following arguments are required: framework (or {flags})")
    own_only = own_only_options(args)
    if own_only:
        parser.error(f"{own_only[0]} is for your own experiment; allowed: {own} with "
                     f"{own_only[0]}, or leave it out")  # fmt: skip
    try:
        args.family = family(args.framework, args.toy, args.task)
    except ValueError as err:
        parser.error(str(err))
    if args.data is not None and not args.toy:
        parser.error("--data is for --toy runs; full datasets come from the configs")


def own_only_options(args: argparse.Namespace) -> list[str]:
    """The options of one's own experiment given without ``--config`` / ``--script``."""
    given = (("--framework", args.own_framework), ("--full-iters", args.full_iters),
             ("--metric", args.metric), ("--import", args.imports),
             ("--force-source", args.force_source))  # fmt: skip
    return [flag for flag, value in given if value]


def own_experiment(parser: _Parser, args: argparse.Namespace) -> None:
    """``--config`` / ``--script``: the family of the user's own file (its framework, full
    schedule and warmup read from it), the sweep folder named after it."""
    if args.config is not None and args.script is not None:
        parser.error("--config and --script are two experiments; allowed: one of them")
    given = "--config" if args.config is not None else "--script"
    clash = [f for f, v in (("a framework", args.framework), ("--toy", args.toy),
             ("--task", args.task), ("--data", args.data)) if v]  # fmt: skip
    if clash:
        parser.error(f"{given} sweeps your own experiment: {clash[0]} is for the shipped "
                     f"families; allowed: {given} PATH without it")  # fmt: skip
    if args.script is not None and args.own_framework is not None:
        parser.error("--framework is for --config; a --script is plain PyTorch")
    if args.full_iters is not None and args.full_iters < 1:
        parser.error(f"--full-iters {args.full_iters} is invalid; allowed: a whole number >= 1")
    try:
        args.family = own_family(
            args.config or args.script, args.own_framework, args.full_iters, args.metric,
            tuple(args.imports), script=args.script is not None,
        )  # fmt: skip
    except SweepError as err:
        parser.error(str(err))
    args.framework = args.family.framework
    if args.out is None:
        args.out = Path("output/sweep") / Path(args.family.source).stem
    args.out = args.out.resolve()


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-sweep``: plan, then run, skip or resume every cell; the exit status (``argv``:
    default ``sys.argv[1:]``; the training tool's overrides after ``--``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parse_args(argv)  # one's own config is loaded here
        if args.status is None:
            return _sweep(args, extra)
    except KeyboardInterrupt:  # before the cells run (loading, planning, writing the toy set)
        print("sweep: interrupted before any cell ran; run the same command again", file=sys.stderr)
        return 130
    return status_main(args.status)


PLANNING_ERRORS = (SweepError, ReportError, FolderBusyError, ImportError, ValueError)
"""What planning refuses with (one line, exit status 2)."""


def prepare(
    label: str, args: argparse.Namespace, plan: Callable[[], tuple[Path | None, bool, T]]
) -> tuple[FolderLock, T] | int:
    """Plan (``plan()``: the toy set's root, whether it exists, the plan; writing nothing), then,
    unless ``--dry-run``, check that the folders can be written and take the sweep's lock: (the
    lock, the plan), or 2 after one line ``<label>: error: ...``."""
    lock = sweep_lock(args.out)
    try:
        if not args.dry_run:
            lock.check()
        data, present, planned = plan()
        if not args.dry_run:
            check_writable(args.out, None if present else data)
            lock.acquire()  # the first write; another sweep may have taken it meanwhile
    except PLANNING_ERRORS as err:
        print(f"{label}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the lock file: unreadable, say
        print(f"{label}: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
        return 2
    return lock, planned


def run_locked(
    label: str, args: argparse.Namespace, lock: FolderLock, plans: Sequence[Plan],
    data: Path | None, present: bool, run: Callable[[SignalForwarder], int],
) -> int:  # fmt: skip
    """Under the sweep's lock, signals forwarded: write a missing toy set and ``sweep.json``, then
    ``run(forwarder)``: its exit status, or 1 after one line where a write fails."""
    fam = args.family
    with lock, SignalForwarder() as forwarder:
        try:
            if args.toy and not present:
                print(f"[{label}] writing the toy set in {data}", flush=True)
                make_toy_data(fam, data)
            experiment = family_record(fam) if fam.source else None
            save_sweep(args.out, fam.framework, family_label(fam), plans, experiment)
            return run(forwarder)
        except OSError as err:
            print(f"{label}: error: cannot write {err.filename}: {err.strerror}", file=sys.stderr)
            return 1


def _plan(args: argparse.Namespace, extra: list[str]) -> tuple[Path | None, bool, tuple]:
    grid = check_grid(args, extra)
    data, present, env = toy_environment(args.family, args.toy, args.data)
    if args.evaluate_from is not None:
        plans = plan_evaluations(args, grid, extra, data)
    else:
        plans = plan_cells(args, grid, extra, data)
    options = None
    if args.executor == "slurm":
        if args.evaluate_from is not None:
            raise SweepError("--evaluate-from runs on this machine; allowed: --executor "
                             "local (the default) with --evaluate-from")  # fmt: skip
        options = slurm_options(args)
        check_cluster(options)
    preloaded = None
    if args.preload:
        check_preload(args.preload, [plan.command for plan in plans])
        if not args.dry_run:  # imported before anything is written: a failing one is refused
            cell_env = jobs_environment(env, args.jobs)[0]
            preloaded = preload(args.preload, cell_env, THREAD_VARIABLES)
    return data, present, (data, present, env, plans, options, preloaded)


def _sweep(args: argparse.Namespace, extra: list[str]) -> int:
    prepared = prepare("sweep", args, lambda: _plan(args, extra))
    if isinstance(prepared, int):
        return prepared
    lock, (data, present, env, plans, options, preloaded) = prepared
    for note in schedule_notes(args.family, plans):
        print(f"[sweep] note: {note}", flush=True)
    if args.dry_run:
        print_dry_run(args, plans, lock, data, present)
        if options is not None:
            todo = sum(1 for plan in plans if plan.action != "skip")
            print(f"[sweep] --executor slurm: would submit the {todo} cell(s) not finished (and "
                  f"not queued) as a job array: {show_options(options)}")  # fmt: skip
        return 0

    def run(forwarder: SignalForwarder) -> int:
        if options is not None:
            return run_on_slurm(args.out, plans, data, extra, env, options, args.detach)
        cell_env, note = jobs_environment(env, args.jobs)
        if note:
            print(note, flush=True)
        if preloaded is not None:  # imported while planning (_plan)
            print(f"[sweep] preloaded {' '.join(args.preload)} in {preloaded:.1f} s; every cell "
                  "is forked from this process", flush=True)  # fmt: skip
            forwarder.warm = True
        return run_cells(args.out, plans, cell_env, forwarder, args.keep_going, args.jobs)

    return run_locked("sweep", args, lock, plans, data, present, run)


def schedule_notes(fam: ConfigFamily, plans: Sequence[Plan]) -> list[str]:
    """What the cells of the planned schedules do not keep of one's own config's schedule
    (:attr:`~budgeted.experiments.families.ConfigFamily.notes`), each once."""
    planned = {parse_cell(plan.schedule).schedule for plan in plans}
    return [note for schedule, note in fam.notes.items() if schedule in planned]


def print_dry_run(
    args: argparse.Namespace, plans: Sequence[Plan], lock: FolderLock, data: Path | None,
    present: bool,
) -> None:  # fmt: skip
    """``--dry-run``: the estimate, a running sweep's note, then each cell's command or why it
    is skipped."""
    print(estimate(plans, args.out, args.jobs))
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

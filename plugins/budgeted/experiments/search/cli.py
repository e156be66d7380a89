"""Answer "which schedule and base LR do I run at my budget?" for a search budget of a few runs.

``budgeted-search``'s command line: the experiment (a shipped script family, or ``--config`` /
``--script``: your own, as ``budgeted-sweep`` takes it), the target budget, the search space and
the search budget; then the search (:mod:`.run`) and its answer (:mod:`.answer`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import SweepError
from ..arms import cell_texts, check_arm, parse_cell
from ..own import family_record, own_family
from ..sweep.cli import (
    GRID_ARGUMENTS,
    add_options,
    add_own_arguments,
    check_executor,
    own_experiment,
    prepare,
    run_locked,
    shipped_family,
    split_argv,
    tool_parser,
)
from ..sweep.commands import check_extra
from ..sweep.plan import DEFAULT_SCHEDULES, toy_environment
from ..sweep.slurm_options import add_slurm_arguments, check_cluster, slurm_options
from .answer import answer, plot, print_answer, print_plan, save_answer, save_search, status_main
from .methods import METHODS, Proposer
from .run import SEARCH_FILE, Search, run_search
from .space import SearchBudget, parse_lr_range
from .study import STUDY_NAME, check_study, open_study, storage_text

__all__ = ["build_parser", "main"]

SEARCH_OPTIONS = (
    ("--budget", dict(metavar="F", help="the target budget: a fraction in (0, 1] of the full "
     "schedule (e.g. 0.1)")),
    ("--budget-iters", dict(type=int, metavar="N", help="the target budget in iterations "
     "(instead of --budget; at most the full schedule)")),
    ("--lr-range", dict(nargs=2, metavar=("LO", "HI"), help="the base LRs searched, on a log "
     "scale (required; the ladder widens it a step where the best lands at an edge)")),
    ("--search-budget", dict(default="4x", metavar="B", help="what the search may spend: Nx (N "
     "target runs' iterations), N (iterations) or a duration (90m, 2h); default: 4x")),
    ("--method", dict(choices=METHODS, default="ladder", help="ladder (default): complete runs "
     "up a ladder of budgets, the best LR's trend extrapolated (fair to budget-aware "
     "schedules); asha: Optuna's TPE and successive-halving pruner on the target runs' "
     "validations (the anchors' way); random: Optuna's random sampler")),
    ("--search-seed", dict(type=int, default=0, metavar="S", help="every run's seed and the "
     "samplers' (default: 0)")),
    ("--storage", dict(metavar="URL", help="the Optuna storage: a journal file's path or a "
     "database URL (sqlite:///PATH, postgresql://...); default: OUT/study.journal")),
    ("--study-name", dict(default=STUDY_NAME, metavar="NAME", help=f"the study's name in the "
     f"storage (default: {STUDY_NAME})")),
    ("--plot", dict(type=Path, metavar="FILE", help="also draw every trial by LR and budget, "
     "the LR trend and the choice (matplotlib: the [plot] extra)")),
)  # fmt: skip
"""``budgeted-search``'s own options."""
SHARED = ("--task", "--schedules", "--optimizers", "--out", "--dry-run", "--executor", "--jobs",
          "--preload")  # fmt: skip
"""The sweep's options a search takes, as the sweep takes them."""


def build_parser() -> Any:
    """``budgeted-search``'s parser."""
    parser = tool_parser("search", "budgeted-search", __doc__)
    parser.add_argument(
        "framework",
        nargs="?",
        help="a shipped script family: pytorch (with "
        "--task digits or mnist5k); or leave out and give --config / --script",
    )
    add_own_arguments(
        parser,
        status="print the search folder OUT's answer so far (its spend, "
        "trend, choice and runner-up) and run nothing; takes no other argument",
    )
    add_options(parser, SEARCH_OPTIONS)
    out_help = "search folder (default: output/search/<your file's name, or pytorch_TASK>)"
    add_options(parser, [(k, {**o, "help": out_help} if k == "--out" else o)
                         for k, o in GRID_ARGUMENTS if k in SHARED])  # fmt: skip
    add_slurm_arguments(parser)
    parser.set_defaults(toy=False, data=None, lrs=None, seeds=None, lrs_for=None,
                        validate_every=None, evaluate_from=None, keep_going=True)  # fmt: skip
    return parser


def _experiment(parser: Any, args: argparse.Namespace) -> None:
    """The family of the experiment: one's own, or a shipped script family as the own script it
    is (so that every budget fraction is a cell of it)."""
    if args.config is not None or args.script is not None:
        if args.out is None:  # beside, never inside, a sweep of the same file
            args.out = Path("output/search") / Path(args.config or args.script).stem
        own_experiment(parser, args)
        return
    shipped_family(parser, args, script=True)
    fam = args.family
    if not fam.script:
        parser.error(f"{args.framework} ships configs at fixed budgets; a search trains any "
                     f"budget: allowed: --config <its full-schedule config> (e.g. "
                     f"configs/{fam.filename(1.0)}), or pytorch --task digits|mnist5k")  # fmt: skip
    from ..sweep.plan import find_script

    script = find_script(fam)
    own = own_family(script, full_iters=fam.full_iters, script=True)
    args.family = replace(own, script_args=fam.script_args, title=fam.title)
    if args.out is None:
        args.out = Path("output/search") / "_".join(filter(None, (args.framework, args.task)))
    args.out = args.out.resolve()


def _target(args: argparse.Namespace) -> float:
    """The target budget as a fraction; :class:`SweepError`."""
    fam = args.family
    if (args.budget is None) == (args.budget_iters is None):
        raise SweepError("the target budget is missing or given twice; allowed: --budget F (a "
                         "fraction in (0, 1]) or --budget-iters N")  # fmt: skip
    if args.budget_iters is not None:
        if not 0 < args.budget_iters <= fam.full_iters:
            raise SweepError(f"--budget-iters {args.budget_iters} is outside the full schedule; "
                             f"allowed: 1 to {fam.full_iters} iterations")  # fmt: skip
        return round(args.budget_iters / fam.full_iters, 12)
    try:
        value = float(args.budget)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 1):
        raise SweepError(f"--budget {args.budget} is not a fraction in (0, 1] of the full "
                         f"schedule ({fam.full_iters} iterations); allowed: e.g. 0.1")  # fmt: skip
    if round(value * fam.full_iters) <= fam.warmup:
        raise SweepError(f"--budget {args.budget} is {round(value * fam.full_iters)} iterations, "
                         f"not longer than the warmup of {fam.warmup}; allowed: a budget of more "
                         f"than {fam.warmup / fam.full_iters:.3g}")  # fmt: skip
    return round(value, 12)


def _schedules(args: argparse.Namespace) -> tuple[str, ...]:
    texts = cell_texts(list(dict.fromkeys(args.schedules or DEFAULT_SCHEDULES)), args.optimizers)
    for text in texts:
        check_arm(parse_cell(text), args.family.framework)
    return tuple(texts)


def fingerprint(args: argparse.Namespace, proposer: Proposer) -> dict[str, Any]:
    """What a search is, as its study and ``search.json`` record it: a study made for another
    fingerprint is refused (the search budget may change: a search goes on with more)."""
    record = family_record(args.family)
    return {
        "experiment": args.family.source, "sha256": record["sha256"],
        "script_args": list(args.family.script_args), "full_iters": args.family.full_iters,
        "metric": args.family.metric, "overrides": list(args.extra), "target": proposer.target,
        "method": proposer.method, "schedules": list(proposer.schedules),
        "lr_range": [proposer.low, proposer.high], "seed": proposer.seed,
    }  # fmt: skip


def plan_search(args: argparse.Namespace, extra: list[str]) -> Search:
    """The search the arguments describe, checked, writing nothing; its study is opened when the
    search runs (:class:`SweepError`)."""
    args.extra = extra
    if args.lr_range is None:
        raise SweepError("--lr-range LO HI is required: the base LRs to search; allowed: e.g. "
                         "--lr-range 0.01 1 (SGD), --lr-range 1e-4 1e-2 (AdamW)")  # fmt: skip
    low, high = parse_lr_range(args.lr_range)
    target = _target(args)
    fam = args.family
    target_iters = fam.iters(target)
    budget = SearchBudget.parse(args.search_budget, target_iters)
    try:
        schedules = _schedules(args)
    except ValueError as err:
        raise SweepError(str(err)) from None
    if not 0 <= args.search_seed < 2**32:
        raise SweepError(f"--search-seed {args.search_seed} is invalid; allowed: 0 to 2**32 - 1")
    proposer = Proposer(args.method, target, target_iters, fam.full_iters, fam.warmup, schedules,
                        low, high, budget.iters, args.search_seed)  # fmt: skip
    if args.method == "asha" and args.executor != "local":
        raise SweepError("--method asha stops runs as their validations come in, on this "
                         "machine; allowed: --executor local with asha, or --method ladder / "
                         "random on Slurm")  # fmt: skip
    _check_budget(args, proposer, budget)
    check_extra(fam.tool, extra, lrs=True, seeds=True)
    _check_folder(args)
    check_study(storage_text(args.out, args.storage), args.study_name, fingerprint(args, proposer))
    if args.plot is not None:  # matplotlib there, and no file of another's in the way
        from ..report.cli import check_outputs

        check_outputs(None, args.plot, [args.out], advice=True)
    options = None
    if args.executor == "slurm":
        options = slurm_options(args)
        check_cluster(options)
    env = toy_environment(fam, False, None)[2]
    return Search(fam, args.out, proposer, budget, None, extra, env, args.jobs, options,
                  tuple(args.preload or ()), family_record(fam))  # fmt: skip


def _check_budget(args: argparse.Namespace, proposer: Proposer, budget: SearchBudget) -> None:
    """The search budget buys an answer: a ladder, or one target run (``asha``, ``random``)."""
    if args.method != "ladder" or budget.iters is None or proposer.ladder(budget.runs).fits:
        return
    least = math.ceil(proposer.ladder(math.inf).smallest_runs() * 100) / 100
    raise SweepError(
        f"--search-budget {budget.text} ({budget.runs:.2f} target runs) buys no ladder of "
        f"{len(proposer.schedules)} schedule(s) over --lr-range {args.lr_range[0]} "
        f"{args.lr_range[1]}; the smallest useful search budget is {least:g}x; allowed: "
        f"--search-budget {least:g}x or more, fewer --schedules or a narrower --lr-range"
    )


def _check_folder(args: argparse.Namespace) -> None:
    """``--out`` is a new folder, or a search folder of this experiment."""
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file; allowed: a new folder or a search folder")
    if out.is_dir() and any(out.iterdir()) and not (out / SEARCH_FILE).is_file():
        raise SweepError(f"--out {out} is a folder holding other files and no {SEARCH_FILE}; "
                         "allowed: a new or empty folder, or a search folder")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-search``: plan, then search, then answer; the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    own, extra = split_argv(argv)
    try:
        args = parser.parse_args(own)
        if args.status is not None:
            return status_main(args.status)
        check_executor(parser, args)
        _experiment(parser, args)
        return _search(args, extra)
    except KeyboardInterrupt:
        print("search: interrupted before any run; run the same command again", file=sys.stderr)
        return 130


def _search(args: argparse.Namespace, extra: list[str]) -> int:
    prepared = prepare("search", args, lambda: (None, True, plan_search(args, extra)))
    if isinstance(prepared, int):
        return prepared
    lock, search = prepared
    if args.dry_run:
        print_plan(search)
        return 0

    def run(forwarder: Any) -> int:
        save_search(search, fingerprint(args, search.proposer), args.storage, args.study_name)
        p = search.proposer
        search.study = open_study(storage_text(args.out, args.storage), args.study_name,
                                  fingerprint(args, p), p.sampler(), p.pruner())  # fmt: skip
        code = run_search(search, forwarder)
        found = answer(search)
        save_answer(search, found)
        print_answer(found)
        if args.plot is not None:
            plot(search, found, args.plot)
        return code

    return run_locked("search", args, lock, [], None, True, run)

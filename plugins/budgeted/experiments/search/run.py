"""Running a search: rounds of sweep cells, each cell one trial of the search's Optuna study.

Each round asks the method (:mod:`.methods`) for the next cells given the trials so far, makes
them trials of the study, runs them as a sweep runs its cells (the same folders, records,
executors, ``--jobs``, ``--preload``, Slurm, signals), and tells the study what each came to.
A trial whose cell has not ended (a signal, a failed try) stays RUNNING in the study; run again,
the search runs those cells first (a finished cell is read, not trained again), so nothing is
spent twice.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...safety.preemption import PREEMPTED_EXIT_CODE, signal_name
from ..families import ConfigFamily
from ..sweep.execute import SignalForwarder, save_sweep
from ..sweep.local import THREAD_VARIABLES, jobs_environment, run_cells
from ..sweep.plan import Plan, family_configs, plan_cell
from ..sweep.records import CellKey, cell_name, family_label, metrics_of, read_cell_record
from .ladder import Cell, Trial
from .methods import Proposer, lr_text
from .space import SearchBudget
from .study import add_result, distributions, trials

__all__ = ["SEARCH_FILE", "Search", "run_search"]

SEARCH_FILE = "search.json"
"""The search's record in its folder: what it searches (its fingerprint), its storage."""


@dataclass
class Search:
    """One search, planned (:mod:`.cli`) and run here.

    Args:
        family: the experiment's family (the user's own, or a shipped script's).
        out: the search folder (a sweep folder too).
        proposer: the method and its space.
        budget: the search budget.
        study: the Optuna study (None before it is opened: a new search's dry run).
        extra: the training tool's overrides after ``--``.
        env: the cells' environment.
        jobs: cells at once (local); ``options``: Slurm's (None: local).
        preload: modules the cells are forked after (local).
        experiment: the family's record, for ``sweep.json``.
    """

    family: ConfigFamily
    out: Path
    proposer: Proposer
    budget: SearchBudget
    study: Any
    extra: list[str]
    env: dict[str, str]
    jobs: int = 1
    options: Any = None
    preload: Sequence[str] = ()
    experiment: dict | None = None

    @property
    def metric(self) -> str:
        """The metric the search maximises (its name as the report shows it)."""
        return metrics_of(self.family)[0][0]

    def plan(self, cell: Cell) -> Plan:
        """The sweep's plan of ``cell`` (skip a finished one, resume a started one)."""
        key = CellKey(cell.schedule, cell.budget, cell.lr, cell.seed)
        return plan_cell(self.family, key, family_configs(self.family), self.out, None,
                         self.extra, validate_every=self.proposer.validate_every())  # fmt: skip

    def trials(self) -> list[Trial]:
        """The study's ended trials."""
        return [] if self.study is None else trials(self.study, self.family.full_iters)

    def runs(self, found: Sequence[Trial]) -> float:
        """The search budget in target runs; a time budget converted at the seconds an iteration
        took so far (before any run: the leanest ladder's worth, which times the first rung)."""
        if self.budget.iters is not None:
            return self.budget.runs
        seconds = iters = 0.0
        for t in found:
            wall = read_cell_record(self.out / _folder(t)).get("wall_s")
            if isinstance(wall, (int, float)) and wall > 0:
                seconds, iters = seconds + wall, iters + t.iterations
        if not seconds or not iters:
            return self.proposer.ladder(math.inf).smallest_runs()
        assert self.budget.seconds is not None
        return self.budget.seconds / (seconds / iters * self.proposer.target_iters)


def _folder(t: Trial | Cell) -> str:
    return cell_name(t.schedule, t.budget, t.lr, t.seed)


def _running(study: Any) -> list[tuple[int, Cell]]:
    """The study's RUNNING trials (asked, not told: their cells run first)."""
    import optuna

    return [
        (
            t.number,
            Cell(
                t.params["schedule"], t.params["budget"], t.user_attrs["lr"], t.user_attrs["seed"]
            ),
        )
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if "lr" in t.user_attrs and {"schedule", "budget"} <= set(t.params)
    ]


def ask(search: Search, cell: Cell | None) -> tuple[int, Cell]:
    """A new trial of ``cell`` (the ladder's, its parameters enqueued as Optuna does), or of the
    sampler's schedule and LR at the target budget (None): its number and cell."""
    p = search.proposer
    dists = distributions(list(p.schedules), p.low, p.high)
    if cell is not None:
        import optuna

        dists["lr"] = optuna.distributions.FloatDistribution(
            min(cell.lr, p.low), max(cell.lr, p.high), log=True
        )
        search.study.enqueue_trial({"schedule": cell.schedule, "lr": cell.lr,
                                    "budget": cell.budget})  # fmt: skip
        trial = search.study.ask(dists)
    else:
        trial = search.study.ask()
        schedule = trial.suggest_categorical("schedule", list(p.schedules))
        lr = trial.suggest_float("lr", p.low, p.high, log=True)
        trial.suggest_float("budget", p.target, p.target)
        cell = Cell(schedule, p.target, lr_text(lr), p.seed)
    for key, value in (("lr", cell.lr), ("seed", cell.seed), ("cell", _folder(cell))):
        trial.set_user_attr(key, value)
    return trial.number, cell


def _slots(search: Search) -> int:
    """How many trials a round of ``asha`` or ``random`` starts (the ladder: a whole rung)."""
    local = search.options is None and search.proposer.method != "ladder"
    return search.jobs if local else 10**9


def run_search(search: Search, forwarder: SignalForwarder) -> int:
    """Run the search to its end, or a signal; the exit status: 0, 1 after a failed run (rerun
    to retry it), 75 / 130 after a signal (rerun to go on)."""
    env, note = jobs_environment(search.env, search.jobs)
    if note:
        print(note, flush=True)
    if search.preload and search.options is None:
        from ..sweep.warm import preload

        seconds = preload(list(search.preload), env, THREAD_VARIABLES)
        print(f"[search] preloaded {' '.join(search.preload)} in {seconds:.1f} s", flush=True)
        forwarder.warm = True
    while forwarder.signum is None:
        found = search.trials()
        asked = _running(search.study)
        if not asked:
            spent = sum(t.iterations for t in found)
            cells = search.proposer.next_cells(found, 0, spent, search.runs(found))
            asked = [ask(search, cell) for cell in cells[: _slots(search)]]
        if not asked:
            return 0
        plans = [search.plan(cell) for _, cell in asked]
        save_sweep(search.out, search.family.framework, family_label(search.family), plans,
                   search.experiment)  # fmt: skip
        code, pruned = _execute(search, plans, [n for n, _ in asked], env, forwarder)
        ended = [_tell(search, n, cell, plan.run_dir.name in pruned)
                 for (n, cell), plan in zip(asked, plans)]  # fmt: skip
        if code in STOPPED or forwarder.signum is not None:
            why = signal_name(forwarder.signum) if forwarder.signum else "a signal"
            print(f"search: stopped by {why}; run the same command to go on", file=sys.stderr)
            return code if code in STOPPED else forwarder.exit_code
        failed = [plan.run_dir.name for plan, state in zip(plans, ended) if state == "failed"]
        if failed:
            print(f"search: error: {len(failed)} run(s) failed: {', '.join(failed)}; their logs "
                  "say why (<run>/sweep.log); run the same command to retry them",
                  file=sys.stderr)  # fmt: skip
            return 1
    return forwarder.exit_code


STOPPED = (PREEMPTED_EXIT_CODE, 130)
"""The executors' exit statuses after a signal (the run goes on when run again)."""


def _tell(search: Search, number: int, cell: Cell, pruned: bool) -> str:
    """Tell the study what trial ``number``'s cell came to: ``told``; or ``failed`` /
    ``pending`` (no result yet: the trial stays RUNNING, its cell run again next time)."""
    if pruned:
        add_result(search.study, number, None, pruned=True)
        return "told"
    plan = search.plan(cell)  # what its folder holds now
    if plan.action != "skip":
        return "failed" if read_cell_record(plan.run_dir).get("status") == "failed" else "pending"
    value = None if plan.final is None else plan.final.metrics.get(search.metric)
    add_result(search.study, number, value)
    return "told"


def _execute(
    search: Search, plans: list[Plan], numbers: list[int], env: dict[str, str],
    forwarder: SignalForwarder,
) -> tuple[int, set[str]]:  # fmt: skip
    """Run the round's cells: the executor's exit status, the folders ``asha``'s pruner
    stopped."""
    if search.options is not None:
        from ..sweep.slurm import run_on_slurm

        code = run_on_slurm(search.out, plans, None, search.extra, env, search.options, False)
        return code, set()
    watch = PrunerWatch(search, plans, numbers) if search.proposer.method == "asha" else None
    code = run_cells(search.out, plans, env, forwarder, True, search.jobs, watch)
    return code, set() if watch is None else watch.pruned


class PrunerWatch:
    """``asha``: each running cell's validations told to its trial as they are logged (Optuna's
    ``trial.report``); a cell whose trial the pruner prunes is stopped."""

    def __init__(self, search: Search, plans: list[Plan], numbers: list[int]) -> None:
        from ...runs import reader
        from .compat import live_trial

        self.search = search
        self.reader = reader(search.family.framework)
        self.trials = {p.run_dir.name: live_trial(search.study, n) for p, n in zip(plans, numbers)}
        self.key = dict(metrics_of(search.family))[search.metric]
        self.scale = 100.0 if search.family.framework in ("mmdet", "mmaction", "pytorch") else 1.0
        if search.family.metric:
            self.scale = 1.0
        self.reported: dict[str, int] = {}
        self.pruned: set[str] = set()

    def __call__(self, run_dir: Path) -> bool:
        """Whether the cell in ``run_dir`` must stop now."""
        trial = self.trials.get(run_dir.name)
        if trial is None:
            return False
        try:
            found = self.reader.evaluations(run_dir)
        except Exception:  # a log line being written: read at the next look
            return False
        last = self.reported.get(run_dir.name, -1)
        for at, metrics in found:
            value = metrics.get(self.key)
            if at <= last or value is None or at >= self.search.proposer.target_iters:
                continue
            trial.report(self.scale * value, at)
            self.reported[run_dir.name] = at
            if trial.should_prune():
                self.pruned.add(run_dir.name)
                return True
        return False

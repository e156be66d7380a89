"""What ``budgeted-search`` itself costs between its trials: Optuna's sampler, pruner and storage
and the method's planning, against the trials' own wall time, on the digits.

    python benchmarks/search_overhead.py [--budget 0.1] [--out output/bench/search]

Each method searches the linear arm's LR at ``--budget`` of the digits (``budgeted-search
pytorch --task digits``, its cells forked after ``--preload``), in this process, with every call
into the search's own work between trials timed: the method's next cells, ``study.ask`` and the
trials' parameters, telling the study, and ``asha``'s live reports (``trial.report``,
``should_prune``). Target: that time at most 1 % of the trials' summed wall time
(``sweep_cell.json``'s ``wall_s``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from budgeted.experiments.search import cli, methods, run

TIMED: dict[str, float] = {}


def timed(owner: Any, name: str) -> Callable[[], None]:
    """Time every call of ``owner.name`` into :data:`TIMED`; a function that undoes it."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMED[name] = TIMED.get(name, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


def trial_seconds(out: Path) -> float:
    """The trials' summed wall time, from their cells' records."""
    return sum(
        json.loads(p.read_text()).get("wall_s") or 0.0 for p in out.glob("*/sweep_cell.json")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="0.1")
    parser.add_argument("--out", type=Path, default=Path("output/bench/search"))
    args = parser.parse_args()
    print("| method | trials | trials' wall s | search's own s | share |")
    print("| --- | --- | --- | --- | --- |")
    for method in methods.METHODS:
        out = args.out / method
        shutil.rmtree(out, ignore_errors=True)
        TIMED.clear()
        undo = [timed(methods.Proposer, "next_cells"), timed(run, "ask"), timed(run, "_tell"),
                timed(run.PrunerWatch, "__call__")]  # fmt: skip
        try:
            code = cli.main([
                "pytorch", "--task", "digits", "--budget", args.budget, "--schedules", "linear",
                "--lr-range", "0.01", "3", "--method", method, "--out", str(out),
                "--preload", "torch", "budgeted",
            ])  # fmt: skip
        finally:
            for step in undo:
                step()
        assert code == 0, f"{method}: exit status {code}"
        own, trials = sum(TIMED.values()), trial_seconds(out)
        count = len(list(out.glob("*/sweep_cell.json")))
        print(f"| {method} | {count} | {trials:.1f} | {own:.3f} | {100 * own / trials:.2f} % |")


if __name__ == "__main__":
    main()

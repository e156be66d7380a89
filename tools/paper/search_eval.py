#!/usr/bin/env python
"""``budgeted-search`` measured against the committed paper grid (docs/search.md): every method
of tools/paper/search_grid.toml at every target budget, task and search seed, each choice's
regret over the grid's seeds 0-2 and the compute each search spent.

    python tools/paper/search_eval.py                # output/search_eval, then docs/search/
    python tools/paper/search_eval.py --dry-run      # the searches' commands, nothing run

Each search is one ``budgeted-search pytorch --task SET`` (its cells forked from a process that
imported the grid's ``preload`` once), ``jobs`` searches at a time; a search that finished is
read, not run again, so a stopped run goes on where it stopped. A choice the grid does not hold
is trained at seeds 0-2 by one ``budgeted-sweep`` per set (``OUT/SET/truth``) as the grid was
(``--validate-every`` every 5 % of the full schedule). Then ``docs/search/<set>.csv`` (one row
per search) and the tables of docs/search.md (:func:`tables`).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tomllib

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FULL = {"digits": 1720, "mnist5k": 1250}
"""Each set's full schedule (tools/paper/grid.toml)."""
VALIDATE = 0.05
"""The grid's periodic validation, as a fraction of the full schedule (tools/paper/grid.toml)."""
COLUMNS = ["set", "task", "target", "method", "search_seed", "schedule", "lr", "spent_runs",
           "grid_runs", "grid_share", "trials", "pruned", "choice_mean", "choice_std",
           "from_grid", "best_mean", "best_std", "best", "regret"]  # fmt: skip


def grid_means(set_name: str) -> dict[tuple[str, float, float], list[float]]:
    """(schedule, budget, LR) -> the grid's top-1 of seeds 0-2 (docs/paper/SET_arms.csv)."""
    found: dict[tuple[str, float, float], list[float]] = defaultdict(list)
    with open(REPO / "docs" / "paper" / f"{set_name}_arms.csv") as f:
        for row in csv.DictReader(f):
            if row["status"] == "finished" and row["top-1"]:
                key = (row["schedule"], float(row["budget"]), float(row["lr"]))
                found[key].append(float(row["top-1"]))
    return found


def search_argv(grid: dict, out: Path, set_name: str, task: str, target: float, method: str,
                seed: int) -> list[str]:  # fmt: skip
    """The ``budgeted-search`` command of one search."""
    low, high = grid["lr_range"]
    return [
        str(BIN / "budgeted-search"), "pytorch", "--task", set_name, "--budget", str(target),
        "--schedules", *grid["tasks"][task], "--lr-range", str(low), str(high),
        "--method", method, "--search-seed", str(seed), "--search-budget", grid["search_budget"],
        "--out", str(out), "--preload", *grid["preload"],
    ]  # fmt: skip


def run(argv: list[str], log: Path) -> int:
    """Run ``argv``, its output appended to ``log``; its exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": str(BIN)}
        import os

        return subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT,
                              env={**os.environ, **env}).returncode  # fmt: skip


def searches(grid: dict, out: Path) -> list[dict[str, Any]]:
    """Every search of the grid: its keys, folder and command."""
    found = []
    for set_name in grid["sets"]:
        for task in grid["tasks"]:
            for target in grid["targets"]:
                for method in grid["methods"]:
                    for seed in grid["search_seeds"]:
                        folder = out / set_name / task / f"{target:g}" / method / f"seed{seed}"
                        found.append({
                            "set": set_name, "task": task, "target": target, "method": method,
                            "search_seed": seed, "out": folder,
                            "argv": search_argv(grid, folder, set_name, task, target, method, seed),
                        })  # fmt: skip
    return found


def truth(out: Path, set_name: str, schedule: str, target: float, lr: float) -> list[float]:
    """The top-1 of ``schedule`` at ``lr`` and ``target`` over seeds 0-2, trained as the grid was
    (``OUT/SET/truth``)."""
    folder = out / set_name / "truth"
    every = str(round(VALIDATE * FULL[set_name]))
    argv = [str(BIN / "budgeted-sweep"), "--script", str(REPO / "examples" / "digits_budget.py"),
            "--full-iters", str(FULL[set_name]), "--schedules", schedule, "--budgets", str(target),
            "--lrs", str(lr), "--seeds", "0", "1", "2", "--jobs", "3", "--validate-every", every,
            "--out", str(folder), "--", "--data", set_name]  # fmt: skip
    if run(argv, folder.parent / "truth.log") != 0:
        raise SystemExit(f"search_eval: the truth runs of {schedule} at {lr} failed: see "
                         f"{folder.parent / 'truth.log'}")  # fmt: skip
    from budgeted.experiments.sweep.records import cell_name

    values = []
    for seed in (0, 1, 2):
        record = json.loads((folder / cell_name(schedule, target, lr, seed) / "sweep_cell.json")
                            .read_text())  # fmt: skip
        values.append(record["metrics"]["top-1"] if record["metrics"] else 0.0)
    return values


def evaluate(grid: dict, out: Path, search: dict, means: dict) -> dict[str, Any]:
    """One search's row: its choice, spend and regret."""
    answer = json.loads((search["out"] / "search_answer.json").read_text())
    choice = answer["choice"]
    target = search["target"]
    schedules = grid["tasks"][search["task"]]
    column = {k: v for k, v in means.items() if k[0] in schedules and k[1] == target}
    best_key = max(column, key=lambda k: statistics.mean(column[k]))
    best = column[best_key]
    key = (choice["schedule"], target, float(choice["lr"]))
    from_grid = key in column
    values = column[key] if from_grid else truth(out, search["set"], *key)
    grid_runs = sum(len(v) for v in column.values())
    return {
        "set": search["set"], "task": search["task"], "target": target,
        "method": search["method"], "search_seed": search["search_seed"],
        "schedule": choice["schedule"], "lr": choice["lr"], "spent_runs": answer["spent_runs"],
        "grid_runs": grid_runs,
        "grid_share": round(answer["spent_runs"] / grid_runs, 4),
        "trials": answer["trials"], "pruned": answer["pruned"],
        "choice_mean": round(statistics.mean(values), 3),
        "choice_std": round(statistics.stdev(values), 3), "from_grid": from_grid,
        "best_mean": round(statistics.mean(best), 3), "best_std": round(statistics.stdev(best), 3),
        "best": f"{best_key[0]} @ {best_key[2]:g}",
        "regret": round(statistics.mean(best) - statistics.mean(values), 3),
    }  # fmt: skip


def tables(rows: list[dict[str, Any]]) -> str:
    """docs/search.md's tables: per set and task, a row per method and a column per target:
    regret mean over the search seeds [their min, max], compute spent (target runs, share of
    the grid column), and the choices."""
    lines = []
    keyed = defaultdict(list)
    for row in rows:
        keyed[(row["set"], row["task"], float(row["target"]), row["method"])].append(row)
    sets = list(dict.fromkeys(r["set"] for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    targets = sorted({float(r["target"]) for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for set_name in sets:
        for task in tasks:
            head = [f"{100 * t:g} %" for t in targets]
            what = "the linear arm's LR" if task == "lr" else "the schedule and its LR"
            lines += [f"**{set_name}, {what}**", "", "| method | " + " | ".join(head) + " |",
                      "| --- | " + " | ".join("---" for _ in head) + " |"]  # fmt: skip
            for method in methods:
                cells = []
                for target in targets:
                    group = keyed.get((set_name, task, target, method), [])
                    if not group:
                        cells.append("-")
                        continue
                    regrets = [float(r["regret"]) for r in group]
                    spent = statistics.mean(float(r["spent_runs"]) for r in group)
                    share = statistics.mean(float(r["grid_share"]) for r in group)
                    picks = ", ".join(f"{r['schedule']}@{float(r['lr']):g}" for r in group)
                    cells.append(f"{statistics.mean(regrets):+.2f} [{min(regrets):+.2f}, "
                                 f"{max(regrets):+.2f}]; {spent:.2f}x = {100 * share:.0f} %; "
                                 f"{picks}")  # fmt: skip
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
            best = []
            for target in targets:
                group = [r for m in methods for r in keyed.get((set_name, task, target, m), [])]
                if group:
                    r = group[0]
                    best.append(f"{r['best']}: {float(r['best_mean']):.2f} ± "
                                f"{float(r['best_std']):.2f}")  # fmt: skip
                else:
                    best.append("-")
            lines += ["| grid best (3 seeds) | " + " | ".join(best) + " |", ""]
    return "\n".join(lines + summary(rows, methods))


def summary(rows: list[dict[str, Any]], methods: list[str]) -> list[str]:
    """One row per method over every set, task and target: the mean regret [min, max], how many
    searches came within one std of the grid's best (its seed spread), the mean spend."""
    lines = [f"**Every set, task and target ({len(rows) // len(methods)} searches a method)**", "",
             "| method | regret: mean [min, max] | within the grid best's std | spent |",
             "| --- | --- | --- | --- |"]  # fmt: skip
    for method in methods:
        group = [r for r in rows if r["method"] == method]
        regrets = [float(r["regret"]) for r in group]
        within = sum(float(r["regret"]) <= float(r["best_std"]) for r in group)
        spent = statistics.mean(float(r["spent_runs"]) for r in group)
        span = f"{statistics.mean(regrets):+.2f} [{min(regrets):+.2f}, {max(regrets):+.2f}]"
        lines.append(f"| {method} | {span} | {within} of {len(group)} | {spent:.2f}x |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tools/paper/search_grid.toml")
    parser.add_argument("--out", type=Path, default=REPO / "output/search_eval")
    parser.add_argument("--docs", type=Path, default=REPO / "docs/search")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    grid = tomllib.loads(args.grid.read_text())
    todo = searches(grid, args.out)
    if args.dry_run:
        for search in todo:
            print(" ".join(search["argv"]))
        return 0

    def one(search: dict) -> int:  # a finished search, run again, reads its study and ends
        return run(search["argv"], search["out"].parent / f"{search['out'].name}.log")

    with ThreadPoolExecutor(grid["jobs"]) as pool:
        codes = list(pool.map(one, todo))
    failed = [s["out"] for s, c in zip(todo, codes) if c != 0]
    if failed:
        print(f"search_eval: {len(failed)} searches failed: {failed[0]} (its .log says why)",
              file=sys.stderr)  # fmt: skip
        return 1
    args.docs.mkdir(parents=True, exist_ok=True)
    rows = []
    for set_name in grid["sets"]:
        means = grid_means(set_name)
        set_rows = [evaluate(grid, args.out, s, means) for s in todo if s["set"] == set_name]
        with open(args.docs / f"{set_name}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, COLUMNS)
            writer.writeheader()
            writer.writerows(set_rows)
        rows += set_rows
    print(tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""``make paper``: the paper's comparison on the two real data sets, from one fixed grid
(tools/paper/grid.toml), then docs/paper.md's tables and figures (tools/paper/report.py).

Each sweep of the grid runs once per data set, as one ``budgeted-sweep`` of
``examples/digits_budget.py`` (``--task digits`` / ``--task mnist5k``; the batch-size sweep as
``--script`` with its own ``--full-iters``: the same number of images as the full schedule),
``--jobs`` runs at a time, every cell forked from a sweep that imported ``preload`` once. A sweep's
cells that finished are skipped, so a stopped ``make paper`` goes on where it stopped. Wall time
per sweep (summed over the invocations that ran cells) goes to ``OUT/timing.json``::

    python tools/paper/run.py                       # output/paper, then docs/paper.md
    python tools/paper/run.py --grid G --out O --doc D
    python tools/paper/run.py --dry-run             # the sweeps' commands, nothing run

Exit status: 0 when every sweep and the report are done; otherwise the first failing sweep's (2:
refused before anything ran; 75 or 130: stopped by a signal, run again to go on).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "digits_budget.py"
BATCH = 32
"""The script's batch size, the one the sets' full schedules are counted in."""
GRID_KEYS = {"budgets", "seeds", "jobs", "preload", "sets", "sweeps"}
SWEEP_KEYS = {"name", "title", "schedules", "lrs", "lrs_for", "optimizers", "validate_every",
              "batch_size"}  # fmt: skip


def load_grid(path: Path) -> dict:
    """The grid file, its keys checked (one line naming an unknown key)."""
    grid = tomllib.loads(path.read_text())
    unknown = set(grid) - GRID_KEYS | {k for s in grid.get("sweeps", ()) for k in s} - SWEEP_KEYS
    if unknown or not grid.get("sets") or not grid.get("sweeps"):
        allowed = ", ".join(sorted(GRID_KEYS | SWEEP_KEYS))
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} or no sets / sweeps; "
                         f"allowed: {allowed}")  # fmt: skip
    return grid


def sweep_argv(grid: dict, name: str, data: dict, sweep: dict, out: Path) -> list[str]:
    """``budgeted-sweep``'s arguments for ``sweep`` on the set ``name``.

    >>> grid = {"budgets": [0.1], "seeds": [0], "jobs": 2, "preload": ["torch"]}
    >>> argv = sweep_argv(grid, "digits", {"task": "digits", "full_iters": 1720},
    ...                   {"name": "b", "schedules": ["linear"], "lrs": [0.1], "batch_size": 128},
    ...                   Path("o"))
    >>> argv[0], argv[2:4], argv[-4:]
    ('--script', ['--full-iters', '430'], ['--data', 'digits', '--batch-size', '128'])
    """
    full_iters, batch = data["full_iters"], sweep.get("batch_size", BATCH)
    if batch == BATCH:
        head = ["pytorch", "--task", data["task"]]
    else:  # the user's-script route: its own full schedule, the same images as batch 32's
        head = ["--script", str(SCRIPT), "--full-iters", str(round(full_iters * BATCH / batch))]
    argv = [*head, "--schedules", *sweep["schedules"], "--budgets", *map(str, grid["budgets"]),
            "--lrs", *map(str, sweep["lrs"]), "--seeds", *map(str, grid["seeds"]),
            "--jobs", str(grid["jobs"]), "--keep-going",
            "--out", str(out / name / sweep["name"])]  # fmt: skip
    for word, lrs in sweep.get("lrs_for", {}).items():
        argv += ["--lrs-for", f"{word}={','.join(map(str, lrs))}"]
    if sweep.get("optimizers"):
        argv += ["--optimizers", *sweep["optimizers"]]
    if sweep.get("validate_every"):
        argv += ["--validate-every", str(max(1, round(sweep["validate_every"] * full_iters)))]
    if grid.get("preload"):
        argv += ["--preload", *grid["preload"]]
    if batch != BATCH:
        argv += ["--", "--data", name, "--batch-size", str(batch)]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tools" / "paper" / "grid.toml")
    parser.add_argument("--out", type=Path, default=Path("output/paper"))
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "paper.md")
    parser.add_argument("--dry-run", action="store_true", help="print the sweeps; run nothing")
    args = parser.parse_args(argv)
    try:
        grid = load_grid(args.grid)
    except (OSError, ValueError) as err:  # tomllib.TOMLDecodeError is a ValueError
        sys.exit(f"paper: error: {err}")
    timing_file = args.out / "timing.json"
    timing = json.loads(timing_file.read_text()) if timing_file.is_file() else {}
    sweep_tool = [sys.executable, "-m", "budgeted.experiments.sweep"]
    for name, data in grid["sets"].items():
        for sweep in grid["sweeps"]:
            command = [*sweep_tool, *sweep_argv(grid, name, data, sweep, args.out)]
            print(f"[paper] {name} / {sweep['name']}: {shlex.join(command[1:])}", flush=True)
            if args.dry_run:
                continue
            start = time.monotonic()
            code = subprocess.run(command).returncode
            key = f"{name}/{sweep['name']}"
            timing[key] = round(timing.get(key, 0.0) + time.monotonic() - start, 1)
            args.out.mkdir(parents=True, exist_ok=True)
            timing_file.write_text(json.dumps(timing, indent=1) + "\n")
            if code not in (0, 1, 3):  # 1: a run failed (kept going); 3: a run diverged (a result)
                print(f"[paper] the sweep stopped (exit {code}); run again to go on",
                      file=sys.stderr)  # fmt: skip
                return code
    if args.dry_run:
        return 0
    print(f"[paper] every sweep done in {sum(timing.values()):.0f} s of wall time", flush=True)
    sys.path.insert(0, str(Path(__file__).parent))
    import report  # tools/paper/report.py

    return report.main(["--grid", str(args.grid), "--out", str(args.out), "--doc", str(args.doc)])


if __name__ == "__main__":
    sys.exit(main())

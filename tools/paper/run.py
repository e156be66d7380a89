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

Exit status: 0 when every sweep and the report are done; 2: a grid or ``timing.json`` refused (one
line, nothing run); otherwise the first failing sweep's (2: refused before anything ran; 75 or
130: stopped by a signal, run again to go on). SIGINT, SIGTERM and SIGUSR1 are forwarded to the
running sweep (which forwards them to its cells) and waited for; Ctrl-C ends with one line and
exit status 130, SIGTERM with 75.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tomllib

from budgeted.experiments.sweep.execute import SignalForwarder, start_child
from budgeted.safety import atomic_write_text
from budgeted.safety.preemption import signal_name

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "digits_budget.py"
BATCH = 32
"""The script's batch size, the one the sets' full schedules are counted in."""
GRID_KEYS = {"budgets", "seeds", "jobs", "preload", "sets", "sweeps"}
SWEEP_KEYS = {"name", "title", "schedules", "lrs", "lrs_for", "optimizers", "validate_every",
              "batch_size"}  # fmt: skip
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""A set's or sweep's name: a folder name under ``--out`` (never ``..``, never a path)."""
TIMING = "timing.json"
"""The file under ``--out`` of each sweep's wall time: ``{"SET/SWEEP": seconds}``."""


def load_grid(path: Path) -> dict:
    """The grid file, its keys and names checked: one line naming an unknown key, a set or sweep
    name that is no folder name (``../x`` would write outside ``--out``) or is given twice, or a
    set without its task and full schedule.

    Raises:
        ValueError: one line.
    """
    grid = tomllib.loads(path.read_text())
    sets, sweeps = grid.get("sets"), grid.get("sweeps")
    if not (isinstance(sets, dict) and sets and isinstance(sweeps, list) and sweeps
            and all(isinstance(s, dict) for s in [*sets.values(), *sweeps])):  # fmt: skip
        raise ValueError(f"{path}: no [sets.NAME] tables or [[sweeps]]; allowed: both")
    unknown = set(grid) - GRID_KEYS | {k for s in sweeps for k in s} - SWEEP_KEYS
    missing = {"budgets", "seeds", "jobs"} - set(grid) | {
        f"sweeps.{k}" for s in sweeps for k in ("name", "schedules", "lrs") if k not in s
    }
    if unknown or missing:
        allowed = ", ".join(sorted(GRID_KEYS | SWEEP_KEYS))
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}, missing keys "
                         f"{sorted(missing)}; allowed: {allowed}")  # fmt: skip
    names = [*sets, *(s.get("name") for s in sweeps)]
    for name in names:
        if not (isinstance(name, str) and NAME.fullmatch(name)) or names.count(name) > 1:
            raise ValueError(f"{path}: the set or sweep name {name!r} is no folder name or is "
                             "given twice; allowed: letters, digits, _ and -, once")  # fmt: skip
    for name, data in sets.items():
        full, words = data.get("full_iters"), (data.get("title"), data.get("task"))
        if not all(isinstance(w, str) for w in words) or not (isinstance(full, int) and full >= 1):
            raise ValueError(f"{path}: set {name!r} needs title, task (texts) and full_iters (a "
                             "whole number >= 1)")  # fmt: skip
    return grid


def read_timing(out: Path) -> dict[str, float]:
    """``OUT/timing.json``: each sweep's wall time so far (none yet: empty).

    Raises:
        ValueError: the file is not what :func:`main` writes (cut short, say; one line).
    """
    path = out / TIMING
    if not path.exists():
        return {}
    try:
        timing: Any = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        timing = f"unreadable ({type(err).__name__})"
    good = isinstance(timing, dict) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")
        for v in timing.values()
    )
    if not good:
        what = timing if isinstance(timing, str) else "not an object of seconds"
        raise ValueError(f"{path} is {what}; allowed: the {TIMING} run.py writes ({{\"SET/SWEEP\": "
                         "seconds}), or no file: remove it to time the sweeps anew")  # fmt: skip
    return timing


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


def run_sweep(command: list[str]) -> tuple[int, int | None]:
    """Run one sweep in a process group of its own, SIGINT, SIGTERM and SIGUSR1 forwarded to it
    (:class:`~budgeted.experiments.sweep.execute.SignalForwarder`: SIGINT as SIGTERM, a second
    SIGINT as SIGKILL) until it ends; it dies with this process too (``start_child``).

    Returns:
        (its exit status, the first signal that came or None).
    """
    with SignalForwarder() as forwarder:
        child = subprocess.Popen(command, preexec_fn=start_child)
        forwarder.children.append(child)
        if forwarder.signum is not None:  # came while the sweep was being started
            os.killpg(child.pid, signal.SIGTERM)
        code = child.wait()
        forwarder.release(child)
    return code, forwarder.signum


def main(argv: list[str] | None = None) -> int:
    """``make paper``: every sweep, then the report; the exit status (module docstring)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # outside a sweep (which the forwarder stops): loading, the report
        print("paper: interrupted; run the same command again to go on", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=Path, default=REPO / "tools" / "paper" / "grid.toml")
    parser.add_argument("--out", type=Path, default=Path("output/paper"))
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "paper.md")
    parser.add_argument("--dry-run", action="store_true", help="print the sweeps; run nothing")
    args = parser.parse_args(argv)
    try:
        grid = load_grid(args.grid)
        timing = read_timing(args.out)
    except (OSError, ValueError) as err:  # tomllib.TOMLDecodeError is a ValueError
        print(f"paper: error: {err}", file=sys.stderr)
        return 2
    sweep_tool = [sys.executable, "-m", "budgeted.experiments.sweep"]
    for name, data in grid["sets"].items():
        for sweep in grid["sweeps"]:
            command = [*sweep_tool, *sweep_argv(grid, name, data, sweep, args.out)]
            print(f"[paper] {name} / {sweep['name']}: {shlex.join(command[1:])}", flush=True)
            if args.dry_run:
                continue
            start = time.monotonic()
            code, signum = run_sweep(command)
            key = f"{name}/{sweep['name']}"
            timing[key] = round(timing.get(key, 0.0) + time.monotonic() - start, 1)
            args.out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.out / TIMING, json.dumps(timing, indent=1) + "\n")
            if signum is not None:
                print(f"paper: interrupted by {signal_name(signum)}: the sweep {key} stopped "
                      f"(exit {code}); run the same command again to go on",
                      file=sys.stderr)  # fmt: skip
                return 130 if signum == signal.SIGINT else 75
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

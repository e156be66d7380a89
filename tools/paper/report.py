#!/usr/bin/env python
"""docs/paper.md's tables and figures, from the paper grid's sweeps (tools/paper/run.py).

The doc is prose written by people around generated blocks::

    <!-- paper:digits-arms -->
    ... replaced by this tool ...
    <!-- /paper:digits-arms -->

Each block is a pure function of the sweeps it reads (:func:`blocks`), through the report
package's public readers (``load_sweep``, ``group_sweeps``; JSON only); everything outside the
blocks is kept byte for byte. A doc that does not exist is created with every block; a block the
tool does not make, or a marker without its end, is one line and the doc is left as it was.
Beside the doc (``<doc stem>/``): one figure per set (top-1 mean ± std against budget, one line per
arm at its best LR) and the per-run CSV of every sweep (``budgeted-report --csv``'s rows).

    python tools/paper/report.py                  # output/paper -> docs/paper.md
    python tools/paper/report.py --grid G --out O --doc D
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import run  # tools/paper/run.py: the grid
from tables import arms_table, batch_table, best_table, cost_table, optimizers_table

from budgeted.experiments.report import Group, group_sweeps, load_sweep, write_csv
from budgeted.safety import atomic_write_text

BLOCK = re.compile(r"<!-- paper:([\w-]+) -->\n.*?<!-- /paper:\1 -->", re.S)
MARKER = re.compile(r"<!-- (/?)paper:([\w-]+) -->")


def load(out: Path, data: str, sweep: str) -> Group | None:
    """The sweep ``out/<data>/<sweep>`` as one report group; None before it has run."""
    path = out / data / sweep
    if not (path / "sweep.json").is_file():
        return None
    return group_sweeps([load_sweep(path)])[0]


def arm_order(grid: dict) -> list[str]:
    """The arms sweep's schedules, in the grid's order (the tables' rows)."""
    return next((s["schedules"] for s in grid["sweeps"] if s["name"] == "arms"), [])


def blocks(grid: dict, out: Path, figures: Path | None = None) -> dict[str, str]:
    """Every block's text, in the doc's order (``figures``: where the figures are, relative to
    the doc, for their links; they are drawn by :func:`write_figures`)."""
    texts: dict[str, str] = {}
    for data, info in grid["sets"].items():
        groups = {s["name"]: load(out, data, s["name"]) for s in grid["sweeps"]}
        arms = groups.get("arms")
        order = arm_order(grid)
        link = f"\n\n![{info['title']}]({figures}/{data}.png)" if figures else ""
        texts[f"{data}-arms"] = arms_table(arms, order) + link
        texts[f"{data}-best"] = best_table(arms, order)
        texts[f"{data}-optimizers"] = optimizers_table(arms, groups.get("optimizers"))
        texts[f"{data}-batch"] = batch_table(arms, groups.get("batch128"))
    texts["cost"] = cost_table(grid, out, run.read_timing(out))
    return texts


def skeleton(names: list[str]) -> str:
    """A new doc: a heading and an empty block for each name."""
    parts = ["# The paper on two real data sets\n"]
    for name in names:
        parts.append(f"\n## {name}\n\n<!-- paper:{name} -->\n<!-- /paper:{name} -->\n")
    return "".join(parts)


def fill(doc: str, texts: dict[str, str]) -> str:
    """``doc`` with each block's text replaced.

    Raises:
        ValueError: a marker without its pair, or a block the tool does not make (one line).

    >>> fill("a\\n<!-- paper:x -->\\nold\\n<!-- /paper:x -->\\nb\\n", {"x": "new"})
    'a\\n<!-- paper:x -->\\nnew\\n<!-- /paper:x -->\\nb\\n'
    """
    names = [m.group(1) for m in BLOCK.finditer(doc)]
    markers = [m.group(2) for m in MARKER.finditer(doc)]
    if sorted(markers) != sorted(n for n in names for _ in (0, 1)):
        raise ValueError("a <!-- paper:NAME --> marker has no matching <!-- /paper:NAME -->; "
                         "allowed: each block opened and closed once")  # fmt: skip
    unknown = [n for n in names if n not in texts]
    if unknown:
        raise ValueError(f"block {unknown[0]!r} is not one this tool writes; allowed: "
                         f"{', '.join(texts)}")  # fmt: skip
    return BLOCK.sub(
        lambda m: f"<!-- paper:{m.group(1)} -->\n{texts[m.group(1)]}\n<!-- /paper:{m.group(1)} -->",
        doc,
    )


def write_figures(grid: dict, out: Path, folder: Path) -> list[Path]:
    """One figure per set (:func:`tables.figure`) and each sweep's per-run CSV, in ``folder``."""
    from tables import figure

    written = []
    for data, info in grid["sets"].items():
        for sweep in grid["sweeps"]:
            group = load(out, data, sweep["name"])
            if group is None:
                continue
            write_csv([group], folder / f"{data}_{sweep['name']}.csv")
            if sweep["name"] == "arms":
                figure_file = folder / f"{data}.png"
                written.append(figure(group, info["title"], figure_file, arm_order(grid)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", type=Path, default=run.REPO / "tools" / "paper" / "grid.toml")
    parser.add_argument("--out", type=Path, default=Path("output/paper"))
    parser.add_argument("--doc", type=Path, default=run.REPO / "docs" / "paper.md")
    args = parser.parse_args(argv)
    folder = args.doc.parent / args.doc.stem
    try:
        grid = run.load_grid(args.grid)
        texts = blocks(grid, args.out, Path(args.doc.stem))
    except (OSError, ValueError) as err:  # a grid, or a timing.json cut short
        print(f"paper: error: {err} (nothing was written)", file=sys.stderr)
        return 2
    doc = args.doc.read_text() if args.doc.is_file() else skeleton(list(texts))
    try:
        new = fill(doc, texts)
    except ValueError as err:
        print(f"paper: error: {args.doc}: {err} (nothing was written)", file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    write_figures(grid, args.out, folder)
    atomic_write_text(args.doc, new)
    print(f"[paper] {args.doc}: {len(texts)} blocks; figures and CSVs in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

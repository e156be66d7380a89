"""Rank architectures with small budgets (the paper's appendix A, budgeted training for NAS).

    budgeted-rank r18w8=output/nas/r18w8 r18w16=output/nas/r18w16 r34w16=output/nas/r34w16 \\
        [--full 0.25] [--metric mIoU]

Each ``NAME=SWEEP`` is one architecture's sweep folder (the same schedules, budgets, LR grid and
seeds).
Per schedule and budget, Kendall's tau-b (scipy) between the architectures' ranking there (mean
over seeds at the best base LR) and at the full budget (``--full``, default: the largest every
sweep finished); then the metric per architecture and the normalized metric (docs/sweeps.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ReportError
from .report.cli import read_input
from .report.model import Group, group_sweeps
from .stats import Summary, summarize
from .sweep.cli import tool_parser
from .sweep.records import number_text

__all__ = ["Architectures", "kendall_tau", "load_architectures", "main", "markdown"]


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Kendall's tau-b between two scorings of the same items, and its two-sided p-value
    (``scipy.stats.kendalltau``): ``tau = (C - D) / sqrt((C + D + T_x)(C + D + T_y))``.

    >>> kendall_tau([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 40.0, 30.0])[0]
    0.6666666666666669
    """
    if importlib.util.find_spec("scipy") is None:
        raise ReportError(
            "budgeted-rank needs scipy, which is not installed; install it with "
            'pip install "budgeted-training[rank]"'
        )
    from scipy.stats import kendalltau

    result = kendalltau(list(x), list(y))
    return float(result.statistic), float(result.pvalue)


@dataclass
class Architectures:
    """Named architectures, each one sweep's report group, of one framework."""

    framework: str
    groups: dict[str, Group]

    @property
    def schedules(self) -> list[str]:
        found = [set(g.schedules) for g in self.groups.values()]
        return [s for s in next(iter(self.groups.values())).schedules if all(s in f for f in found)]

    @property
    def budgets(self) -> list[float]:
        return sorted(set.intersection(*(set(g.budgets) for g in self.groups.values())))

    def score(self, name: str, metric: str, schedule: str, budget: float) -> Summary | None:
        """The metric of one architecture: mean ± std over seeds at the sweep's best base LR."""
        group = self.groups[name]
        best = group.best(metric, schedule, budget)
        if best is None:
            return None
        return summarize(list(group.values(metric, schedule, budget, best[0]).values()))

    def full_budget(self, metric: str, asked: float | None) -> float:
        """``asked``, or the largest budget at which every architecture and schedule finished."""
        complete = [
            b
            for b in self.budgets
            if all(
                self.score(n, metric, s, b) is not None for n in self.groups for s in self.schedules
            )
        ]
        if asked is None:
            if not complete:
                raise ReportError(
                    "no budget has finished runs of every architecture and schedule; allowed: "
                    "sweeps with at least one common budget finished"
                )
            return complete[-1]
        if asked not in complete:
            raise ReportError(
                f"--full {asked:g} is not a budget every architecture and schedule finished; "
                f"allowed: {', '.join(f'{b:g}' for b in complete) or 'none yet'}"
            )
        return asked


def load_architectures(named: Mapping[str, Path], metric: str = "") -> Architectures:
    """Read each ``name -> sweep folder``: a folder of its own per architecture, all of one
    framework and grid (:func:`check_same_grid`), one config family each; ``metric``: that metric
    alone, read as ``budgeted-report --metric`` reads it (:func:`~.report.cli.read_input`).
    Raises :class:`ReportError`."""
    folders: dict[Path, list[str]] = {}
    for name, path in named.items():
        folders.setdefault(path.resolve(), []).append(name)
    for folder, names in folders.items():
        if len(names) > 1:
            raise ReportError(
                f"architectures {', '.join(names)} are the same sweep folder {folder}; allowed: "
                "one sweep folder per architecture (a ranking of one sweep against itself says "
                "nothing)"
            )
    groups: dict[str, Group] = {}
    for name, path in named.items():
        found = group_sweeps(read_input(path, metric))
        if len(found) > 1:
            raise ReportError(f"{name}={path} holds {len(found)} config families; allowed: one "
                              "sweep (one family) per architecture")  # fmt: skip
        groups[name] = found[0]
    frameworks = {g.framework for g in groups.values()}
    if len(frameworks) > 1:
        raise ReportError(
            f"the sweeps are of {', '.join(sorted(frameworks))}; allowed: sweeps of one framework"
        )
    check_same_grid(groups)
    return Architectures(frameworks.pop(), groups)


GRID_AXES: dict[str, tuple[Callable[[Group], list], str]] = {
    "base-LR grids": (lambda g: g.lrs, "--lrs, so that every architecture's best LR is chosen "
                      "from the same grid"),
    "schedules": (lambda g: g.schedules, "--schedules: each is ranked on its own"),
    "budgets": (lambda g: g.budgets, "--budgets: each budget ranks every architecture"),
    "seeds": (lambda g: g.seeds, "--seeds: each score is a mean over the same seeds"),
}  # fmt: skip
"""What every architecture's sweep must plan alike (axis -> its values in a group, what to
pass alike), in the order :func:`check_same_grid` compares them."""


def check_same_grid(groups: Mapping[str, Group]) -> None:
    """Refuse sweeps of different grids (:data:`GRID_AXES`: base LRs, schedules, budgets, seeds):
    each architecture's score is its best LR's mean over its seeds at a schedule and budget, and
    one chosen from another grid, or over other seeds, is another protocol
    (:class:`ReportError`, naming the first axis that differs)."""
    for axis, (values, alike) in GRID_AXES.items():
        grids = {name: " ".join(_value(v) for v in values(g)) for name, g in groups.items()}
        if len(set(grids.values())) > 1:
            shown = "; ".join(f"{name}: {grid}" for name, grid in grids.items())
            raise ReportError(f"the sweeps searched different {axis} ({shown}); allowed: sweeps "
                              f"of the same {alike}")  # fmt: skip


def _value(value: float | int | str | None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) or value is None:
        return "the config's" if value is None else str(value)
    return number_text(value)


def _fmt(summary: Summary | None, digits: int) -> str:
    return "-" if summary is None else summary.text(digits)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(archs: Architectures, metric: str, full: float) -> str:
    """The tau table, the metric per architecture and the normalized metric, in Markdown."""
    names = list(archs.groups)
    schedules, budgets = archs.schedules, archs.budgets
    lines = [
        f"### Architecture ranking by {metric}: each budget against the full budget {full:g} "
        f"({len(names)} architectures: {', '.join(names)})",
        "",
        "#### Kendall's tau (tau-b, two-sided p; scipy.stats.kendalltau) between the ranking at "
        f"each budget and at {full:g}",
        "",
        _row(["budget", *schedules]),
        "|---:|" + "---:|" * len(schedules),
    ]
    for budget in (b for b in budgets if b != full):  # the full budget against itself: 1
        cells = []
        for schedule in schedules:
            pairs = [
                (archs.score(n, metric, schedule, budget), archs.score(n, metric, schedule, full))
                for n in names
            ]
            pairs = [(a.mean, b.mean) for a, b in pairs if a is not None and b is not None]
            if len(pairs) < 2:
                cells.append("-")
                continue
            tau, p = kendall_tau([a for a, _ in pairs], [b for _, b in pairs])
            cells.append("nan" if math.isnan(tau) else f"{tau:+.2f} (p {p:.2f}, n {len(pairs)})")
        lines.append(_row([f"{budget:g}", *cells]))
    columns = [(s, b) for s in schedules for b in budgets]
    head = _row(["architecture", *(f"{s} {b:g}" for s, b in columns)])
    rule = "|---|" + "---:|" * len(columns)
    lines += ["", f"#### {metric} per architecture (mean ± std (n) over seeds at the best LR)", ""]
    lines += [head, rule]
    digits = max(g.digits(metric) for g in archs.groups.values())
    for name in names:
        lines.append(_row([name, *(_fmt(archs.score(name, metric, s, b), digits)
                                   for s, b in columns)]))  # fmt: skip
    lines += ["", f"#### {metric} normalized: the mean at a budget / the mean at {full:g}", ""]
    lines += [head, rule]
    for name in names:
        cells = []
        for schedule, budget in columns:
            score, ref = (
                archs.score(name, metric, schedule, budget),
                archs.score(name, metric, schedule, full),
            )
            ok = score is not None and ref is not None and ref.mean != 0
            cells.append(f"{score.mean / ref.mean:.3f}" if ok else "-")
        lines.append(_row([name, *cells]))
    return "\n".join(lines)


def _named(items: Sequence[str], parser: argparse.ArgumentParser) -> dict[str, Path]:
    named: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"{item!r} is invalid; allowed: NAME=SWEEP_FOLDER")
        if name in named:
            parser.error(f"architecture {name!r} is given twice; allowed: one sweep per name")
        named[name] = Path(path)
    if len(named) < 3:
        parser.error(f"{len(named)} architectures given; allowed: three or more (NAME=SWEEP)")
    return named


def main(argv: Sequence[str] | None = None) -> int:
    """``budgeted-rank``: print the ranking tables; the exit status (2: bad input, one line)."""
    parser = tool_parser("rank", "budgeted-rank", __doc__)
    parser.add_argument(
        "sweeps", nargs="+", metavar="NAME=SWEEP", help="one sweep per architecture"
    )
    parser.add_argument("--full", type=float, help="the reference budget (default: the largest)")
    parser.add_argument(
        "--metric", metavar="KEY",
        help="rank by this metric, as budgeted-report --metric reads it: one the report shows "
        "(mIoU, box AP, top-1), or any key of the runs' final evaluation, as logged (default: "
        "the sweeps' first)",
    )  # fmt: skip
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    named = _named(args.sweeps, parser)
    try:
        archs = load_architectures(named, args.metric or "")
        every = [[name for name, _ in g.metrics] for g in archs.groups.values()]
        metrics = [name for name in every[0] if all(name in names for names in every)]
        if not metrics:
            shown = "; ".join(", ".join(names) for names in every)
            raise ReportError(f"the sweeps report no metric in common ({shown}); allowed: "
                              "sweeps of one metric")  # fmt: skip
        metric = metrics[0]
        full = archs.full_budget(metric, args.full)
        text = markdown(archs, metric, full)
    except (ReportError, ImportError) as err:
        print(f"rank: error: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

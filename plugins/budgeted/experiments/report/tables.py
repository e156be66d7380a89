"""The report's tables: Markdown per metric (every cell; with several base LRs or seeds the
best-LR, paired-difference and normalized tables), where the best evaluation fell (the paper's
Table 4), and the CSV of every run.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from ...runs import reader
from ...safety import atomic_write
from ..families import FAMILIES
from ..stats import paired_difference, summarize, verdict
from ..sweep.records import NOTHING_PREDICTED, CellKey, cell_name, family_label, number_text
from .model import Group

__all__ = ["COMPARISONS", "CSV_HEADER", "best_progress", "family_text", "markdown", "write_csv"]


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: int) -> list[str]:
    """A Markdown table whose first ``right`` columns are right-aligned (numbers)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * right + "---|" * (len(head) - right)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _lr_text(lr: float | None) -> str:
    return "config's" if lr is None else number_text(lr)


def _iterations(group: Group, budget: float) -> str:
    iters = sorted(
        {c.final.iters for k, c in group.cells.items() if k.budget == budget and c.final}
    )
    return "/".join(str(i) for i in iters) or "-"


def _cell_text(group: Group, metric: str, schedule: str, budget: float, lr: float | None) -> str:
    """One cell of the every-run table: ``mean ± std (n)`` of its finished runs, `` *`` where
    runs that ended undecayed are among them, ``, k diverged`` beside; ``diverged`` where every
    run that ended diverged; ``-`` where none finished."""
    values = list(group.values(metric, schedule, budget, lr).values())
    diverged = group.with_status("diverged", schedule, budget, lr)
    if not values:
        return "diverged" if diverged else "-"
    undecayed = " *" if group.with_status("undecayed", schedule, budget, lr) else ""
    text = summarize(values).text(group.digits(metric))
    return f"{text}{undecayed}{f', {diverged} diverged' if diverged else ''}"


def family_text(group: Group) -> tuple[str, str]:
    """The group's config family as a heading names it, and a note on it: a shipped family's
    budget configs as ``<prefix>*``, the note what the ``*`` stands for; the user's config or
    script as is, no note."""
    fam = next((f for f in FAMILIES.values() if family_label(f) == group.family
                and f.framework == group.framework and not f.script), None)  # fmt: skip
    if fam is None:
        return group.family, ""
    example = Path(fam.filename(group.budgets[0] if group.budgets else fam.fractions[0])).name
    return f"{group.family}*", f"; `*`: the budget, one config each ({example}, ...)"


def _status_notes(group: Group) -> list[str]:
    """The notes under the every-run table that name the runs that diverged or ended
    undecayed (neither is ever a best LR)."""
    lines = []
    for status, what in (
        ("diverged", "diverged (a non-finite training loss): no result, and their base LR is "
         "never picked as the best"),
        ("undecayed", "ended undecayed (the time budget ran out before the LR decayed): their "
         "metrics are marked *, and their base LR is never picked as the best"),
    ):  # fmt: skip
        names = sorted(cell_name(*k) for k, c in group.cells.items() if c.status == status)
        if names:
            lines += ["", f"{len(names)} run(s) {what}: {', '.join(names)}."]
    return lines


def markdown(group: Group) -> str:
    """The report's tables for ``group``, one section per metric (module docstring)."""
    blocks = []
    done = sum(c.final is not None for c in group.cells.values())
    diverged = sum(c.status == "diverged" for c in group.cells.values())
    also = f", {diverged} diverged" if diverged else ""
    lrs, seeds = group.lrs, group.seeds
    axes = len(lrs) > 1 or lrs != [None] or len(seeds) > 1 or seeds != [None]
    for metric, _ in group.metrics:
        columns = [(s, lr) for s in group.schedules for lr in group.lrs_of(s)]
        head = [
            "budget", "iterations",
            *(s if lr is None else f"{s} lr={number_text(lr)}" for s, lr in columns),
        ]  # fmt: skip
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}", _iterations(group, budget)]
            row += [_cell_text(group, metric, schedule, budget, lr) for schedule, lr in columns]
            rows.append(row)
        family, note = family_text(group)
        lines = [
            f"### {metric}: {group.framework} {family} "
            f"({', '.join(str(p) for p in group.sources)}; {done}/{len(group.cells)} runs "
            f"finished{also}{note})",
            "",
            *_table(head, rows, len(head)),
            *_status_notes(group),
        ]
        empty = [
            cell_name(*k)
            for k, c in group.cells.items()
            if c.final and metric in c.final.no_predictions
        ]
        if empty:
            lines += [
                "",
                f"{len(empty)} finished run(s) predicted nothing at the final evaluation ({metric} "
                f"{NOTHING_PREDICTED[group.framework]}): counted as {metric} 0: "
                f"{', '.join(sorted(empty))}.",
            ]
        if axes:
            lines += ["", *_best_tables(group, metric)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


COMPARISONS = (("linear", "step"), ("linear", "poly"), ("linear", "wsd"), ("rex", "linear"))
"""The paired differences the report shows, where both schedules are in the sweep (with
``--optimizers``: both with the same optimizer, ``linear@adamw`` against ``step@adamw``)."""


def _best_tables(group: Group, metric: str) -> list[str]:
    """The best-LR, paired-difference and normalized tables of ``metric``."""
    lines = [
        f"#### {metric} at the best base LR per budget and schedule (the paper's protocol: mean "
        '± std over seeds (n) @ LR; "edge": the best LR is at the edge of the grid, widen it)',
        "",
    ]
    best: dict[tuple[str, float], tuple[float | None, bool]] = {}
    digits = group.digits(metric)
    rows = []
    for budget in group.budgets:
        row = [f"{budget:g}"]
        for schedule in group.schedules:
            found = group.best(metric, schedule, budget)
            if found is None:
                row.append("-")
                continue
            best[schedule, budget] = found
            values = list(group.values(metric, schedule, budget, found[0]).values())
            edge = " (edge)" if found[1] else ""
            row.append(f"{summarize(values).text(digits)} @ {_lr_text(found[0])}{edge}")
        rows.append(row)
    lines += _table(["budget", *group.schedules], rows, 1 + len(group.schedules))
    pairs = [
        (a + at, b + at)
        for at in dict.fromkeys(s[s.index("@") :] if "@" in s else "" for s in group.schedules)
        for a, b in COMPARISONS
        if a + at in group.schedules and b + at in group.schedules
    ]  # the arms' pairs per optimizer: linear@adamw against step@adamw
    if pairs:
        lines += [
            "",
            f"#### {metric}: paired differences at each schedule's best LR (seed k against seed "
            "k; mean [95 % t-interval] (pairs))",
            "",
        ]
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}"]
            for a, b in pairs:
                if (a, budget) not in best or (b, budget) not in best:
                    row += ["-", "-"]
                    continue
                interval = paired_difference(
                    group.values(metric, a, budget, best[a, budget][0]),
                    group.values(metric, b, budget, best[b, budget][0]),
                )
                row += [interval.text(digits) if interval else "-", verdict(interval, a, b)]
            rows.append(row)
        head = ["budget", *(c for a, b in pairs for c in (f"{a} − {b}", "verdict"))]
        lines += _table(head, rows, 1)
    reference = max((b for _, b in best), default=None)  # the largest budget that has results
    means = {
        key: summarize(list(group.values(metric, key[0], key[1], lr).values())).mean
        for key, (lr, _) in best.items()
    }
    top = max((m for (_, b), m in means.items() if b == reference), default=None)
    if top:
        what = "the full budget" if reference == 1.0 else f"budget {reference:g}, the largest run"
        lines += [
            "",
            f"#### {metric} normalized: mean at the best LR / the best schedule's at {what} "
            f"({top:.{digits}f})",
            "",
        ]
        rows = [
            [f"{budget:g}", *(
                f"{means[s, budget] / top:.3f}" if (s, budget) in means else "-"
                for s in group.schedules
            )]
            for budget in group.budgets
        ]  # fmt: skip
        lines += _table(["budget", *group.schedules], rows, 1 + len(group.schedules))
    return lines


def best_progress(group: Group) -> str:
    """Where the best periodic evaluation fell (iteration / the run's length), per budget and
    schedule at the best base LR, mean over seeds (the paper's Table 4; 1.00 without periodic
    evaluation)."""
    runs = reader(group.framework)
    blocks = []
    for metric, key in group.metrics:
        rows = []
        for budget in group.budgets:
            row = [f"{budget:g}"]
            for schedule in group.schedules:
                fractions = []
                for cell in group.best_cells(metric, schedule, budget):
                    evals = [(it, m[key]) for it, m in runs.evaluations(cell.run_dir) if key in m]
                    if evals:
                        at = max(evals, key=lambda e: e[1])[0]
                        fractions.append(at / cell.final.iters)
                row.append(summarize(fractions).text() if fractions else "-")
            rows.append(row)
        blocks.append("\n".join([
            f"#### {metric}: where the best evaluation fell (fraction of training, at the best "
            "LR; mean ± std over seeds (n))",
            "",
            *_table(["budget", *group.schedules], rows, 1 + len(group.schedules)),
        ]))  # fmt: skip
    return "\n\n".join(blocks)


CSV_HEADER = ("framework", "family", "schedule", "budget", "lr", "seed", "iterations")
"""The first columns of :func:`write_csv`'s file (and how an earlier report's CSV is recognized);
then one column per metric, ``wall_s``, ``run_dir`` and ``status`` (:func:`run_status`)."""


def write_csv(groups: Sequence[Group], path: Path) -> None:
    """One row per run (axes, iterations, each metric, wall time, its folder relative to the
    CSV's, status), written atomically."""
    metrics = list(dict.fromkeys(m for g in groups for m, _ in g.metrics))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow([*CSV_HEADER, *metrics, "wall_s", "run_dir", "status"])
        for group in groups:
            for key, cell in sorted(group.cells.items(), key=lambda kv: _sort_key(kv[0])):
                final = cell.final
                values = [final.metrics.get(m) if final else None for m in metrics]
                writer.writerow(
                    [group.framework, group.family, key.schedule, f"{key.budget:g}",
                     "" if key.lr is None else number_text(key.lr),
                     "" if key.seed is None else key.seed,
                     final.iters if final else "", *("" if v is None else v for v in values),
                     "" if cell.wall_s is None else f"{cell.wall_s:.1f}",
                     _run_dir_text(cell.run_dir, path),
                     cell.status or ""]
                )  # fmt: skip


def _run_dir_text(run_dir: Path, csv_path: Path) -> str:
    """``run_dir`` relative to the CSV's folder, where a report reads it back
    (:func:`~.model.read_report_csv`); empty where it lies outside that folder (a report of the
    CSV then has its metrics, not its logs).

    >>> _run_dir_text(Path("out/sweep/linear_budget1"), Path("out/sweep/runs.csv"))
    'linear_budget1'
    >>> _run_dir_text(Path("out/sweep/linear_budget1"), Path("docs/runs.csv"))
    ''
    """
    try:
        return str(run_dir.resolve().relative_to(csv_path.parent.resolve()))
    except ValueError:
        return ""


def _sort_key(key: CellKey) -> tuple:
    return (key.budget, key.schedule, -1 if key.lr is None else key.lr,
            -1 if key.seed is None else key.seed)  # fmt: skip

"""A sweep folder read as data: ``sweep.json``, each cell's ``sweep_cell.json``, each cell's
final metrics and what it came to. The sweep, ``budgeted-report`` and ``budgeted-rank`` read it
here; a run folder through its framework's :class:`~budgeted.runs.RunFolderReader`.

A sweep folder is untrusted: :func:`read_sweep` checks every value, keeps every path inside the
folder (:func:`check_no_links`) and every final metric in its tool's range; else one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import ReportError
from ...runs import reader
from ...runs.records import cell_record_problem, non_finite_loss, number, shown
from ...schedules import schedule_names
from ..arms import SPECIAL_ARMS, folder_text, parse_cell
from ..families import FAMILIES, ConfigFamily, budget_tag
from .metrics import (
    LOGGED_AS_FRACTION,
    METRICS,
    NAN_LOGGED,
    NOTHING_PREDICTED,
    Final,
    metrics_of,
    read_final,
)

__all__ = [
    "CELL_FILE", "LOGGED_AS_FRACTION", "METRICS", "NAN_LOGGED", "NOTHING_PREDICTED", "SEED_LIMIT",
    "SWEEP_FILE", "SWEEP_LOCK", "Cell", "CellKey", "CellRecord", "Final", "Sweep", "SweepRecords",
    "cell_key", "cell_name", "check_no_links", "divergence", "family_label", "family_of",
    "holds_run", "load_sweep", "metrics_of", "metrics_text", "number_text", "read_cell_record",
    "read_final", "read_record", "read_sweep", "run_status",
]  # fmt: skip

SWEEP_FILE = "sweep.json"
"""The sweep folder's record: framework, config family, planned cells."""
CELL_FILE = "sweep_cell.json"
"""Each cell folder's record: config, overrides, command, wall time."""
SWEEP_LOCK = ".sweep.lock"
"""The lock file a running sweep holds (``flock``) in its ``--out`` folder."""
SEED_LIMIT = 2**32
"""Seeds are integers in [0, ``SEED_LIMIT``), numpy's (Detectron2's SEED, randomness.seed)."""


class CellKey(NamedTuple):
    """What one run of a sweep trains: a schedule at a budget, with a base LR and a seed (None:
    the config's own)."""

    schedule: str
    budget: float
    lr: float | None = None
    seed: int | None = None


@dataclass
class Cell:
    """One run of a sweep; ``final`` is None until it has finished (and for a run that diverged);
    ``status``: :func:`run_status`."""

    key: CellKey
    run_dir: Path
    final: Final | None = None
    wall_s: float | None = None
    status: str | None = None

    @property
    def schedule(self) -> str:
        return self.key.schedule

    @property
    def budget(self) -> float:
        return self.key.budget


@dataclass
class Sweep:
    """A sweep folder: what it trains, its cells (planned and started) and the metrics its
    report shows (:func:`metrics_of`)."""

    path: Path
    framework: str
    family: str
    cells: list[Cell] = field(default_factory=list)
    metrics: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        self.metrics = self.metrics or METRICS.get(self.framework, ())


def number_text(value: float) -> str:
    """``value`` as short as it reads back exactly (``:g``, else ``repr``).

    >>> number_text(0.03), number_text(1e-05), number_text(0.12345678)
    ('0.03', '1e-05', '0.12345678')
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def cell_name(
    schedule: str, budget: float, lr: float | None = None, seed: int | None = None
) -> str:
    """The cell's folder name: its text (``: = , @`` written ``-``), budget tag and, where the
    sweep sets them, LR and seed.

    >>> cell_name("linear", 0.05), cell_name("step", 0.005), cell_name("poly", 0.1, 0.03, 2)
    ('linear_budget5', 'step_budget0p5', 'poly_budget10_lr0.03_seed2')
    >>> cell_name("wsd:decay=sqrt@adamw", 0.01)
    'wsd-decay-sqrt-adamw_budget1'
    """
    name = f"{folder_text(schedule)}_budget{budget_tag(budget)}"
    if lr is not None:
        name += f"_lr{number_text(lr)}"
    if seed is not None:
        name += f"_seed{seed}"
    return name


def family_label(family: ConfigFamily) -> str:
    """How a sweep records its config family: the budget files' path prefix (a script: its path).

    >>> from budgeted.experiments.families import LENET5_MNIST5K_PYTORCH, PSPNET_TOY
    >>> family_label(PSPNET_TOY), family_label(LENET5_MNIST5K_PYTORCH)
    ('configs/mmseg/toy/pspnet_r18-toy_cityscapes_budget', 'examples/digits_budget.py --data mnist5k')
    """  # noqa: E501
    script = " ".join([family.script, *family.script_args]) if family.script else ""
    return family.source or script or f"configs/{family.folder}/{family.prefix}"


def read_record(path: Path) -> dict[str, Any]:
    """A sweep record (``sweep.json``, ``sweep_cell.json``) as a dict; :class:`ReportError` in one
    line where it is not one (damaged, hand-edited, another file).

    >>> import tempfile
    >>> bad = Path(tempfile.mkdtemp()) / SWEEP_FILE
    >>> _ = bad.write_text('{"framework": ')
    >>> read_record(bad)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    budgeted.errors.ReportError: ... is not a sweep record: not valid JSON (line 1, column 15: ...
    """
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        problem = f"not UTF-8 text ({err.reason})"
    except json.JSONDecodeError as err:
        problem = f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
    except (ValueError, RecursionError) as err:  # an integer of 5000 digits; nested too deep
        problem = f"not JSON a reader can take ({type(err).__name__})"
    else:
        problem = _record_problem(path.name, value)
    if problem is not None:
        raise _not_a_record(path, problem)
    return value


def _record_problem(name: str, value: Any) -> str | None:
    """What is wrong with a parsed sweep record (``name``: :data:`SWEEP_FILE` or
    :data:`CELL_FILE`), in words; None if nothing is."""
    needed = ("framework", "family", "cells") if name == SWEEP_FILE else ("schedule", "budget")
    missing = [k for k in needed if not isinstance(value, dict) or k not in value]
    if missing:
        return f"no {', '.join(missing)}"
    if name == SWEEP_FILE:
        if not all(isinstance(value[k], str) for k in ("framework", "family")):
            return "its framework or family is not a name"
        cells = value["cells"]
        if not isinstance(cells, list) or not all(
            isinstance(c, list) and 2 <= len(c) <= 4 for c in cells
        ):
            return "its cells are not [schedule, budget(, lr, seed)] lists"
        for cell in cells:
            try:
                cell_key(*cell)
            except ValueError as err:
                return f"its cell {shown(cell)}: {err}"
        return None
    try:
        cell_key(value["schedule"], value["budget"], value.get("lr"), value.get("seed"))
    except ValueError as err:
        return f"its {err}"
    return cell_record_problem(value)


def _not_a_record(path: Path, problem: str) -> ReportError:
    """The one line of a sweep record that is not one (:func:`read_record`'s)."""
    return ReportError(
        f"{path} is not a sweep record: {problem}; allowed: a JSON object written by "
        "budgeted-sweep (move the file away to start that sweep or cell over)"
    )


def read_cell_record(run_dir: Path) -> dict[str, Any]:
    """A cell folder's ``sweep_cell.json`` (:func:`read_record`); {} where it has none."""
    path = run_dir / CELL_FILE
    return read_record(path) if path.is_file() else {}


def metrics_text(metrics: Any) -> str:
    """The numbers of a cell's metrics (a :class:`Final`'s, a record's), as the tools print them.

    >>> metrics_text({"box AP": 40.123, "mask AP": 36.5}), metrics_text(None)
    ('box AP 40.12, mask AP 36.50', '')
    """
    if not isinstance(metrics, dict):
        return ""
    return ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if isinstance(v, (int, float)))


def family_of(label: str, framework: str = "", experiment: Any = None) -> ConfigFamily:
    """The config family a sweep records as ``label``; with ``experiment`` (the user's own, as
    :func:`budgeted.experiments.own.family_record` wrote it), that one, read without loading."""
    if experiment is not None:
        from ..own import family_from_record

        return family_from_record(framework, label, experiment)
    for fam in FAMILIES.values():
        if family_label(fam) == label:
            return fam
    known = ", ".join(family_label(f) for f in FAMILIES.values())
    raise ReportError(f"unknown config family {label!r}; allowed: {known}")


def run_status(framework: str, run_dir: Path, final: Final | None, recorded: Any) -> str | None:
    """What a run came to: ``"diverged"`` (recorded so, or its log holds a non-finite training
    loss), None (not finished), ``"undecayed"`` (recorded so) or ``"finished"``; ``recorded``: the
    ``status`` of its ``sweep_cell.json``."""
    if recorded == "diverged":
        return "diverged"
    if final is None:
        return None
    if divergence(framework, run_dir) is not None:
        return "diverged"
    return "undecayed" if recorded == "undecayed" else "finished"


def divergence(framework: str, run_dir: Path) -> str | None:
    """Where the run's log shows it diverged (``the training loss logged at iteration 3 is
    nan``); None where every logged loss is finite."""
    point = non_finite_loss(reader(framework).train_curve(run_dir))
    if point is None:
        return None
    return f"the training loss logged at iteration {point['iteration']:g} is {point['loss']}"


def holds_run(framework: str, run_dir: Path) -> bool:
    """Whether the training tool of ``framework`` has left a run (checkpoints, logs) there."""
    return run_dir.is_dir() and bool(reader(framework).holds_run(run_dir))


def check_no_links(path: Path) -> None:
    """Refuse (:class:`ReportError`, one line) a path of a sweep folder that is, or holds, a
    symbolic link: a sweep folder is read and written only inside it."""
    links = [path] if path.is_symlink() else []
    for folder, dirs, files in os.walk(path) if not links else ():
        links += [Path(folder, n) for n in sorted(dirs + files) if Path(folder, n).is_symlink()]
        if links:
            break
    if links:
        raise ReportError(
            f"{links[0]} is a symbolic link (to {os.readlink(links[0])}); allowed: plain files "
            "and folders inside the sweep folder (a sweep folder is read and written only "
            "inside it; move the link away)"
        )


class CellRecord(NamedTuple):
    """A cell as :func:`read_sweep` read it: its ``sweep_cell.json`` ({} without), final metrics."""

    key: CellKey
    run_dir: Path
    record: dict[str, Any]
    final: Final | None


class SweepRecords(NamedTuple):
    """A sweep folder, checked (:func:`read_sweep`): its ``sweep.json``, family, cells."""

    path: Path
    meta: dict[str, Any]
    family: ConfigFamily
    cells: list[CellRecord]


def _budget_problem(fam: ConfigFamily, budget: float) -> str | None:
    if budget in fam.fractions or fam.source:  # the user's own: any fraction in (0, 1]
        return None
    budgets = ", ".join(f"{b:g}" for b in fam.fractions)
    return f"budget {budget:g} is not a budget of {family_label(fam)} ({budgets})"


def _cell_problem(
    record: dict[str, Any], key: CellKey, folder: str, fam: ConfigFamily
) -> str | None:
    """What is wrong with a cell record of a sweep of ``fam`` in the cell folder ``folder``."""
    if cell_name(*key) != folder:
        return (
            f"its schedule, budget, lr and seed are those of the cell {cell_name(*key)}, not of "
            f"its folder {folder}"
        )
    if record.get("framework", fam.framework) != fam.framework:
        return f"its framework {shown(record['framework'])} is not the sweep's ({fam.framework})"
    problem = _budget_problem(fam, key.budget)
    if problem is not None:
        return f"its {problem}"
    names = [name for name, _ in metrics_of(fam)]
    metrics = record.get("metrics") or {}
    low, high = (-math.inf, math.inf) if fam.metric else (0, 100)
    if not all(name in names and low <= value <= high for name, value in metrics.items()):
        return f"its metrics {shown(metrics)} are not {', '.join(names)} in [{low}, {high}]"
    return None


def read_sweep(path: Path, metric: str = "") -> SweepRecords:
    """Read and check a sweep folder (module docstring; :class:`ReportError`: one line);
    ``metric``: that logged key as the final metric (``budgeted-report --metric``)."""
    record = path / SWEEP_FILE
    if not record.is_file():
        raise ReportError(
            f"{path} is not a sweep folder (no {SWEEP_FILE}); allowed: a folder written by "
            "budgeted-sweep --out"
        )
    for name in (SWEEP_FILE, SWEEP_LOCK):
        check_no_links(path / name)
    meta = read_record(record)
    framework = meta["framework"]
    experiment = meta.get("experiment")
    if framework not in METRICS and experiment is None:
        raise ReportError(
            f"{record} names framework {framework!r}; allowed: {', '.join(sorted(METRICS))}"
        )
    try:
        fam = family_of(meta["family"], framework, experiment)
    except ReportError as err:
        if experiment is None:
            raise
        raise _not_a_record(record, str(err)) from None
    if fam.framework != framework:
        raise _not_a_record(record, f"its framework {framework!r} is not that of its family "
                                    f"{meta['family']} ({fam.framework})")  # fmt: skip
    keys: list[CellKey] = []
    for cell in meta["cells"]:
        key = cell_key(*cell)  # read_record checked them
        problem = _budget_problem(fam, key.budget)
        if problem is not None:
            raise _not_a_record(record, f"its cell {shown(cell)}: {problem}")
        keys += [key] if key not in keys else []
    planned = {cell_name(*key) for key in keys}
    records = {}
    for child in sorted(path.iterdir()):
        spec_file = child / CELL_FILE
        if child.name not in planned and not spec_file.is_file():
            continue
        check_no_links(child)
        if not spec_file.is_file():
            continue
        spec = read_record(spec_file)
        key = cell_key(spec["schedule"], spec["budget"], spec.get("lr"), spec.get("seed"))
        problem = _cell_problem(spec, key, child.name, fam)
        if problem is not None:
            raise _not_a_record(spec_file, problem)
        records[key] = spec
        keys += [key] if key not in keys else []
    folders = [(key, path / cell_name(*key)) for key in keys]
    fam = dataclasses.replace(fam, metric=metric) if metric else fam  # records checked above
    cells = [CellRecord(k, d, records.get(k, {}), read_final(fam, k.budget, d)) for k, d in folders]
    return SweepRecords(path, meta, fam, cells)


def load_sweep(path: Path, metric: str = "") -> Sweep:
    """Read a sweep folder (:func:`read_sweep`): planned cells (``sweep.json``) plus started ones,
    with final metrics and what each came to (:func:`run_status`)."""
    found = read_sweep(path, metric)
    sweep = Sweep(path, found.meta["framework"], found.meta["family"], [], metrics_of(found.family))
    for key, run_dir, spec, final in found.cells:
        status = run_status(sweep.framework, run_dir, final, spec.get("status"))
        final = None if status == "diverged" else final  # not a result: in no mean, no best
        sweep.cells.append(Cell(key, run_dir, final, spec.get("wall_s"), status))
    return sweep


def cell_key(schedule: Any, budget: Any, lr: Any = None, seed: Any = None) -> CellKey:
    """A cell's key from a record's values; ``ValueError`` naming a value that is not a cell's
    text (a registered schedule or an arm: :func:`~budgeted.experiments.arms.parse_cell`), a
    fraction in (0, 1], a positive LR or None, an integer seed in [0, 2**32) or None.

    >>> cell_key("linear", 0.1, 0.03, 1.5)
    Traceback (most recent call last):
    ValueError: seed 1.5 is not an integer in [0, 2**32) or null
    """
    try:
        parse_cell(schedule)
    except ValueError as err:
        name = re.split("[:@]", schedule)[0] if isinstance(schedule, str) else None
        if name in schedule_names() or name in SPECIAL_ARMS:  # a known arm, a bad value
            raise ValueError(f"schedule {shown(schedule)}: {err}") from None
        registered = ", ".join(schedule_names())
        raise ValueError(
            f"schedule {shown(schedule)} is not a registered schedule ({registered}), "
            "schedulefree or subset (NAME[:KEY=VALUE,...][@OPTIMIZER])"
        ) from None
    fraction, base_lr = number(budget), number(lr)
    if fraction is None or not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise ValueError(f"budget {shown(budget)} is not a budget fraction in (0, 1]")
    if lr is not None and (base_lr is None or not (math.isfinite(base_lr) and base_lr > 0)):
        raise ValueError(f"lr {shown(lr)} is not a positive number or null")
    if seed is not None and (
        not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < SEED_LIMIT
    ):
        raise ValueError(f"seed {shown(seed)} is not an integer in [0, 2**32) or null")
    return CellKey(schedule, fraction, base_lr, seed)

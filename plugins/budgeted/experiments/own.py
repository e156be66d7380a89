"""Your own experiment: the sweep's cells from the user's own config (``--config``: Detectron2
yaml or LazyConfig, any MMEngine config) or training script (``--script``, docs/sweeps.md).

:func:`own_family` makes a :class:`~budgeted.experiments.families.ConfigFamily` of that one file;
every cell trains it with its budget and schedule set by the tool's own keys
(:func:`own_overrides`), everything else the user's. The sweep folder records
:func:`family_record`, read back by :func:`family_from_record` without loading the config.

Example:
    >>> own_overrides(ConfigFamily("own", "detectron2", "", "", "", 400, 10, {}, (),
    ...                            "my.yaml", "", source="/w/my.yaml"), "cosine", 0.25)
    ['SOLVER.BUDGET.FULL_ITERS', '400', 'SOLVER.BUDGET.FRACTION', '0.25', 'SOLVER.LR_SCHEDULER_NAME', 'BudgetCosine']
"""  # noqa: E501

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, NamedTuple

from .._require import missing_line
from ..errors import ReportError, SweepError
from ..runs.records import shown
from ..schedules import schedule_info
from ..schedules.units import budget_iters
from .arms import param_overrides, parse_cell
from .families import FRAMEWORKS, ConfigFamily

__all__ = [
    "OWN_FRAMEWORKS", "check_own_budgets", "check_same_source", "family_from_record",
    "family_record", "framework_of", "own_family", "own_overrides", "source_digest",
]  # fmt: skip

MMENGINE_SCOPES = ("mmseg", "mmdet", "mmpretrain", "mmaction")
"""The MMEngine codebases a config's ``default_scope`` names, each a framework of the sweep."""
OWN_FRAMEWORKS = (*FRAMEWORKS, "mmengine")
"""What ``--framework`` takes: the shipped frameworks, and ``mmengine`` for a config of another
MMEngine codebase (its metric then comes from ``--metric``)."""
_LAZY_NAMES = {"lr_multiplier", "train", "dataloader", "optimizer"}
_MMENGINE_NAMES = {"_base_", "train_cfg", "param_scheduler", "optim_wrapper", "default_scope"}
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def source_digest(path: Path) -> str:
    """The sha256 of the user's config or script, as a sweep folder records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _top_level_names(path: Path) -> set[str]:
    """The names a Python file binds at its top level (assignments and imports), read with
    ``ast`` (nothing is run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as err:
        raise SweepError(
            f"--config {path} is not valid Python ({err}); allowed: a Detectron2 "
            "LazyConfig or an MMEngine config"
        ) from None
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def framework_of(path: Path, given: str | None = None) -> str:
    """The framework of the user's config: ``detectron2`` (a yaml, or a LazyConfig binding
    ``lr_multiplier`` and ``train``), else the MMEngine codebase of its ``default_scope``
    (``mmengine`` without one); ``given`` (``--framework``) wins. Raises :class:`SweepError`."""
    if given is not None:
        if given not in OWN_FRAMEWORKS or given == "pytorch":
            raise SweepError(
                f"--framework {given!r} is not a config framework; allowed: "
                f"{', '.join(f for f in OWN_FRAMEWORKS if f != 'pytorch')}"
            )
        return given
    if path.suffix in (".yaml", ".yml"):
        return "detectron2"
    if path.suffix != ".py":
        raise SweepError(
            f"--config {path} is neither a .yaml nor a .py file; allowed: a "
            "Detectron2 yaml or LazyConfig, or an MMEngine config"
        )
    names = _top_level_names(path)
    lazy, mmengine = names >= _LAZY_NAMES, bool(names & _MMENGINE_NAMES)
    if lazy and not mmengine:
        return "detectron2"
    if mmengine and not lazy:
        return "mmengine"  # the codebase: its default_scope, once loaded (own_family)
    bound = ", ".join(sorted(names & (_LAZY_NAMES | _MMENGINE_NAMES))) or "neither kind of name"
    raise SweepError(
        f"--config {path}: cannot tell a Detectron2 LazyConfig from an MMEngine config (it "
        f"binds {bound}"
        "); allowed: --framework detectron2 or --framework mmseg (mmdet, mmpretrain, mmaction, "
        "mmengine)"
    )


def _shortened(err: BaseException) -> str:
    """A loader's own message on one line, at most 300 characters."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _why(err: BaseException) -> str:
    """Why the user's code failed, on one line: its error's message, or that it exits."""
    if isinstance(err, SystemExit):
        return f"it exits (SystemExit {shown(err.code)})"
    return _shortened(err)


def _import_all(imports: tuple[str, ...]) -> None:
    """Import the user's modules from the current folder (as each cell's ``python -c`` does)
    or ``PYTHONPATH``."""
    if imports and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    dont_write = sys.dont_write_bytecode  # planning writes nothing (no __pycache__ beside them)
    sys.dont_write_bytecode = True
    try:
        for name in imports:
            _import_one(name)
    finally:
        sys.dont_write_bytecode = dont_write


def _import_one(name: str) -> None:
    """Import the user's module ``name``; any error of theirs is one line (``sys.exit()`` in it
    too: the sweep goes on only with the module imported)."""
    try:
        with warnings.catch_warnings():  # torch.jit's FutureWarning, importing detectron2
            warnings.simplefilter("ignore", FutureWarning)
            importlib.import_module(name)
    except (Exception, SystemExit) as err:
        raise SweepError(
            f"--import {name} fails: {_why(err)}; allowed: a module "
            "importable from the current folder or PYTHONPATH"
        ) from None


class Loaded(NamedTuple):
    """What a config says, read before any cell runs."""

    full: Any
    """The full schedule in iterations (checked by :func:`_check_full`)."""
    full_key: str
    """Where it was read: ``train_cfg.max_iters``, ``SOLVER.MAX_ITER``, ``--full-iters``, ..."""
    warmup: int
    said: str
    """Its scheduler (Detectron2) or codebase (MMEngine's ``default_scope``)."""
    milestones: tuple[float, ...] = ()
    """A yaml's step milestones, as fractions of the full schedule."""
    notes: tuple[tuple[str, str], ...] = ()
    """(schedule, what its cells do not keep of the config's own schedule)."""


def _detectron2_yaml(path: Path, full_iters: int | None) -> Loaded:
    """A Detectron2 yaml config: its ``SOLVER.STEPS`` are the step baseline's milestones
    (``WarmupMultiStepLR``: 60000, 80000 of 90000 -> 2/3, 8/9)."""
    from ..detectron2 import load_config

    cfg = load_config(str(path), [])
    solver = cfg.SOLVER
    key, full = ("--full-iters", full_iters) if full_iters else _yaml_full(solver)
    steps = solver.STEPS if solver.LR_SCHEDULER_NAME == "WarmupMultiStepLR" else ()
    milestones = tuple(round(s / solver.MAX_ITER, 6) for s in steps if 0 < s < solver.MAX_ITER)
    scheduler = str(solver.LR_SCHEDULER_NAME)
    power, ending = solver.get("POLY_LR_POWER", 0.9), solver.get("POLY_LR_CONSTANT_ENDING", 0.0)
    notes = ()
    if scheduler == "WarmupPolyLR" and (power, ending) != (0.9, 0.0):  # said, not converted
        notes = (("poly", (
            f"a poly cell is the core's poly (power 0.9) to 0, not your WarmupPolyLR "
            f"(SOLVER.POLY_LR_POWER {power}, POLY_LR_CONSTANT_ENDING {ending}); --schedules "
            "poly:power=P sets its power"
        )),)  # fmt: skip
    return Loaded(full, key, int(solver.WARMUP_ITERS), scheduler, milestones, notes)


def _yaml_full(solver: Any) -> tuple[str, Any]:
    """Where a yaml states its full schedule, and the value: ``SOLVER.BUDGET.FULL_ITERS``, else
    ``SOLVER.MAX_ITER``."""
    if solver.BUDGET.FULL_ITERS:
        return "SOLVER.BUDGET.FULL_ITERS", solver.BUDGET.FULL_ITERS
    return "SOLVER.MAX_ITER", solver.MAX_ITER


def _detectron2_lazy(path: Path, full_iters: int | None) -> Loaded:
    """A Detectron2 LazyConfig; the cells' edit tried on a copy (refused before any cell runs)."""
    import copy

    from detectron2.config import LazyConfig

    from ..detectron2.lazy import apply_budget, lazy_warmup

    cfg = LazyConfig.load(str(path))
    key, full = "train.max_iter", cfg.train.max_iter
    if full_iters:
        key, full = "--full-iters", full_iters
    _check_full(full, key)
    warmup, _, _ = lazy_warmup(cfg.lr_multiplier, full)
    said = str(cfg.lr_multiplier.get("_target_", ""))
    apply_budget(copy.deepcopy(cfg), None, "linear", full)
    return Loaded(full, key, warmup, said)


def _mmengine(path: Path, full_iters: int | None) -> Loaded:
    """An MMEngine config; the cells' edit tried on a copy (refused before any cell runs)."""
    from mmengine.config import Config

    from ..mmengine.own_schedule import (
        apply_own_schedule,
        full_schedule_iters,
        lr_warmup,
        poly_power,
    )

    cfg = Config.fromfile(str(path))
    key, stated = ("--full-iters", full_iters) if full_iters else _mmengine_full(cfg)
    try:
        full = full_iters or full_schedule_iters(cfg)
    except OverflowError:  # an integer past a float's range: the line below names it
        full = stated
    _check_full(full, key)
    warmup, _ = lr_warmup(cfg)
    apply_own_schedule(cfg.copy(), "linear", full)
    dropped = poly_power(cfg)[1]
    notes = (("poly", dropped),) if dropped else ()
    return Loaded(full, key, warmup, str(cfg.get("default_scope") or ""), (), notes)


def _mmengine_full(cfg: Any) -> tuple[str, Any]:
    """Where an MMEngine config states its full schedule, and the value, in the order of
    :func:`~budgeted.mmengine.own_schedule.full_schedule_iters`."""
    train_cfg = cfg.get("train_cfg") or {}
    if cfg.get("full_schedule_iters") is not None:
        return "full_schedule_iters", cfg.full_schedule_iters
    if train_cfg.get("max_iters") is not None:
        return "train_cfg.max_iters", train_cfg.max_iters
    return "train_cfg.max_epochs x iterations per epoch", train_cfg.get("max_epochs")


FULL_LIMIT = 2**40
"""A full schedule is fewer iterations than this (an integer past it is a typo)."""


def _check_full(full: Any, key: str) -> None:
    """The full schedule (read from ``key``) is a whole number of iterations in [1,
    :data:`FULL_LIMIT`); else :class:`SweepError`, one line naming the key."""
    if isinstance(full, bool) or not isinstance(full, int) or not 0 < full < FULL_LIMIT:
        raise SweepError(
            f"full schedule {shown(full)} ({key}) is not a whole number of iterations in [1, "
            "2**40); allowed: such a number (--full-iters N sets it)"
        )


def _load(path: Path, framework: str, full_iters: int | None) -> Loaded:
    """What the config says (:data:`Loaded`); the loader's own error as one line."""
    loader = (
        _mmengine
        if framework != "detectron2"
        else (_detectron2_lazy if path.suffix == ".py" else _detectron2_yaml)
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return loader(path, full_iters)
    except SweepError:
        raise
    except ImportError as err:  # its framework's extra named (budgeted._require)
        raise SweepError(missing_line(f"--config {path}", err, framework)) from None
    except (Exception, SystemExit) as err:  # the user's config, through its framework's loader
        raise SweepError(f"--config {path} does not load: {_why(err)}") from None


def own_family(
    path: Path, framework: str | None = None, full_iters: int | None = None, metric: str = "",
    imports: tuple[str, ...] = (), script: bool = False,
) -> ConfigFamily:  # fmt: skip
    """The family of the user's own config (``script``: their training script) at ``path``;
    ``full_iters`` defaults to the config's own length (required for a script), ``metric`` to the
    framework's. Raises :class:`SweepError`: one line naming the file and what is allowed."""
    path = path.resolve()
    if not path.is_file():
        what = "--script" if script else "--config"
        raise SweepError(
            f"{what} {path} is not a file; allowed: your own "
            f"{'training script' if script else 'config file'}"
        )
    bad = [m for m in imports if not _MODULE.fullmatch(m)]
    if bad:
        raise SweepError(f"--import {bad[0]!r} is not a module name; allowed: e.g. my_datasets")
    if script and imports:  # a cell runs `python SCRIPT`: nothing would import them
        raise SweepError(
            f"--import {imports[0]} is for --config (each cell imports it before its config is "
            "built); a --script imports its own modules; allowed: --script PATH without --import"
        )
    if script:
        if full_iters is None:
            raise SweepError(
                f"--script {path} needs --full-iters N: a script states no full "
                "schedule; allowed: the full schedule's iterations"
            )
        return _family("pytorch", path, full_iters, 0, metric, imports, script=True)
    framework = framework_of(path, framework)
    _import_all(imports)
    loaded = _load(path, framework, full_iters)
    said = loaded.said
    if framework == "mmengine" and said in MMENGINE_SCOPES:
        framework = said
    if framework == "mmengine" and not metric:
        raise SweepError(
            f"--config {path} is an MMEngine config of no codebase the report "
            f"knows (default_scope {said or 'unset'}); allowed: --metric KEY, the "
            "key its evaluator logs (e.g. accuracy/top1)"
        )
    return _family(framework, path, loaded.full, loaded.warmup, metric, imports, False,
                   loaded.milestones, loaded.full_key, dict(loaded.notes))  # fmt: skip


def _family(
    framework: str, path: Path, full: Any, warmup: Any, metric: str, imports: tuple[str, ...],
    script: bool = False, milestones: tuple[float, ...] = (), full_key: str = "--full-iters",
    notes: dict[str, str] | None = None,
) -> ConfigFamily:  # fmt: skip
    """The :class:`ConfigFamily` of an own experiment, its values checked (``full_key``: where
    the full schedule was read; ``notes``: :attr:`ConfigFamily.notes`)."""
    _check_full(full, full_key)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < full:
        raise SweepError(
            f"warmup {shown(warmup)} is not a whole number of iterations in [0, "
            f"{full}) (the full schedule)"
        )
    return ConfigFamily(
        name="own", framework=framework, folder="", prefix="", ext=path.suffix, full_iters=full,
        warmup=warmup, schedules={}, step_milestones=milestones, title=path.name,
        paper="the user's own experiment", script=str(path) if script else "", source=str(path),
        metric=metric, imports=tuple(imports), notes=dict(notes or {}),
    )  # fmt: skip


def check_own_budgets(fam: ConfigFamily, budgets: list[float]) -> None:
    """Every budget is longer than the config's warmup (the decay needs an iteration)."""
    for budget in budgets:
        iters = budget_iters(fraction=budget, full_iters=fam.full_iters)
        if iters <= fam.warmup:
            raise SweepError(
                f"budget {budget:g} is {iters} iterations of the full {fam.full_iters}, not "
                f"longer than the config's warmup of {fam.warmup}; allowed: budgets of more "
                f"than {fam.warmup / fam.full_iters:.3g} of the full schedule"
            )


def check_same_source(out: Path, recorded: dict, fam: ConfigFamily, force: bool) -> None:
    """A sweep of one's own config or script goes on only with the same full schedule, metric
    and file (sha256; ``--force-source`` goes on with an edited one). Raises
    :class:`SweepError`."""
    now = family_record(fam)
    for key in ("full_iters", "warmup"):
        if recorded.get(key) != now[key]:
            raise SweepError(
                f"--out {out} holds cells of a {key.replace('_', ' ')} of {recorded.get(key)} "
                f"iterations; {fam.source} now has {now[key]}; allowed: the same (--full-iters "
                f"{recorded.get('full_iters')}), or another --out"
            )
    if recorded.get("metric", "") != now["metric"]:  # its cells' records name their metric
        then, asked = (_metric_words(m) for m in (recorded.get("metric", ""), now["metric"]))
        raise SweepError(
            f"--out {out} holds cells reported by {then}, not {asked}; allowed: {then} as "
            "before (budgeted-report --metric KEY reports another key they logged), or another "
            "--out"
        )
    if recorded.get("sha256") != source_digest(Path(fam.source)) and not force:
        raise SweepError(
            f"{fam.source} changed since the first cells of --out {out} (sha256 "
            f"{str(recorded.get('sha256'))[:12]}... then, {now['sha256'][:12]}... now); "
            "allowed: the file as it was, another --out, or --force-source to go on with it"
        )


def _metric_words(metric: Any) -> str:
    """How a refusal names a sweep's metric: ``--metric KEY``, or the framework's."""
    return f"--metric {shown(metric)}" if metric else "the framework's metric (no --metric)"


def own_overrides(fam: ConfigFamily, schedule: str, budget: float) -> list[str]:
    """What turns the user's config into a cell: its ``budget`` and ``schedule`` (a cell's text,
    :mod:`~budgeted.experiments.arms`: its parameters too; with the config's warmup), in the
    training tool's syntax (``SOLVER.BUDGET.*``; ``--budget``, ``--schedule``, ``--full-iters``,
    a script's and a LazyConfig's ``--schedule`` the arm's text, ``budgeted-train-seg``'s the
    schedule's name with ``param_scheduler.0.KEY=VALUE``, none with ``--schedule-free``)."""
    text = f"{budget:.12g}"
    arm = parse_cell(schedule)
    if fam.tool == "detectron2":
        label = schedule_info(arm.schedule).label
        step = (
            arm.schedule == "step" and fam.step_milestones
        )  # the config's own STEPS, as fractions
        return [
            "SOLVER.BUDGET.FULL_ITERS", str(fam.full_iters), "SOLVER.BUDGET.FRACTION", text,
            "SOLVER.LR_SCHEDULER_NAME", f"Budget{label}",
            *(["SOLVER.BUDGET.STEP_MILESTONES", str(fam.step_milestones)] if step else []),
            *param_overrides(fam.tool, arm.schedule, arm.params),
        ]  # fmt: skip
    full = ["--budget", text, "--full-iters", str(fam.full_iters)]
    if fam.tool in ("pytorch", "detectron2-lazy"):  # --schedule takes the arm's text as it is
        return [*full[:2], "--schedule", arm.tool_schedule, *full[2:]]
    if arm.kind == "schedulefree":  # budgeted-train-seg: --schedule-free is its LR schedule
        return full
    params = param_overrides(fam.tool, arm.schedule, arm.params)  # set on the one it makes
    return [*full[:2], "--schedule", arm.schedule, *full[2:], *params]


def family_record(fam: ConfigFamily) -> dict[str, Any]:
    """What ``sweep.json`` keeps of an own experiment (``"experiment"``), to read it back."""
    return {
        "source": fam.source, "script": bool(fam.script), "sha256": source_digest(Path(fam.source)),
        "full_iters": fam.full_iters, "warmup": fam.warmup, "metric": fam.metric,
        "imports": list(fam.imports),
    }  # fmt: skip


def family_from_record(framework: str, label: str, record: Any) -> ConfigFamily:
    """The family a sweep folder's ``"experiment"`` record describes, every value checked
    (:class:`ReportError`, one line); the config is not loaded."""

    def bad(what: str) -> ReportError:
        return ReportError(f"its experiment's {what}")

    if not isinstance(record, dict):
        raise bad(f"record {shown(record)} is not an object")
    source = record.get("source")
    if not isinstance(source, str) or source != label or not Path(source).is_absolute():
        raise bad(f"source {shown(source)} is not the sweep's family ({shown(label)})")
    metric, imports = record.get("metric", ""), record.get("imports", [])
    if not isinstance(metric, str) or len(metric) > 200:
        raise bad(f"metric {shown(metric)} is not a key")
    if not isinstance(imports, list) or not all(
        isinstance(m, str) and _MODULE.fullmatch(m) for m in imports
    ):
        raise bad(f"imports {shown(imports)} are not module names")
    if framework not in OWN_FRAMEWORKS or (framework == "mmengine" and not metric):
        raise bad(f"framework {shown(framework)} is not one of {', '.join(OWN_FRAMEWORKS)}")
    script = record.get("script") is True
    if script != (framework == "pytorch"):
        raise bad(f"script {shown(record.get('script'))} does not fit framework {framework}")
    try:
        return _family(framework, Path(source), record.get("full_iters"), record.get("warmup"),
                       metric, tuple(imports), script, full_key="full_iters")  # fmt: skip
    except SweepError as err:
        raise bad(str(err)) from None

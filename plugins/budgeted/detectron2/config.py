"""Detectron2's yacs config with the budget: the ``SOLVER.BUDGET`` keys (one table,
:data:`BUDGET_KEYS`, and the schedules' parameters, :func:`param_key`), :func:`load_config` and
:func:`split_overrides`. ``SOLVER.MAX_ITER`` is the budget; ``SOLVER.WARMUP_*``, ``BASE_LR`` and
``GAMMA`` keep their Detectron2 meaning. See docs/detectron2.md.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from detectron2.config import CfgNode, get_cfg

from ..config_files import find_config
from ..control.plan import length_agrees, planned_iters
from ..safety import checkpoint_iterations
from ..schedules import check_on_resume, schedule_info, schedule_names

__all__ = [
    "MODEL_ZOO_PREFIX", "NATIVE_KEYS", "add_budget_config", "budget_max_iter", "cfg_value",
    "check_budget_keys", "check_grad_norm_config", "load_config", "lookup", "max_iter_agrees",
    "on_resume", "param_key", "resolve_budget", "split_overrides", "stated_max_iter"
]  # fmt: skip

NATIVE_KEYS: dict[tuple[str, str], str] = {("step", "gamma"): "SOLVER.GAMMA"}
"""(core schedule, parameter) -> the Detectron2 key that already holds it."""

MODEL_ZOO_PREFIX = "model-zoo://"
"""A ``_BASE_`` starting with this names a config of the installed Detectron2 model zoo."""

logger = logging.getLogger("budgeted.detectron2.config")


def param_key(schedule: str, param: str) -> str:
    """The config key of parameter ``param`` of core schedule ``schedule``:
    ``SOLVER.BUDGET.<SCHEDULE>_<PARAM>``, except where Detectron2 already has one
    (:data:`NATIVE_KEYS`).

    Example:
        >>> param_key("poly", "power"), param_key("step", "gamma")
        ('SOLVER.BUDGET.POLY_POWER', 'SOLVER.GAMMA')
    """
    return NATIVE_KEYS.get((schedule, param)) or (
        f"SOLVER.BUDGET.{schedule.upper()}_{param.upper()}"
    )


def cfg_value(value: Any) -> Any:
    """A yaml list as the tuple yacs keeps."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True)
class BudgetKey:
    """One ``SOLVER.BUDGET`` key: its default and, where checked with the budget
    (:func:`check_budget_keys`), its rule and what the message says is allowed."""

    default: Any
    test: Callable[[Any], bool] | None = None
    allowed: str = ""


def _whole(least: int, what: str) -> dict[str, Any]:
    """The rule of a whole-number key: at least ``least``; ``what`` it counts."""
    test = lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= least  # noqa: E731
    return {"test": test, "allowed": f"a whole number >= {least} {what}"}


BUDGET_KEYS: dict[str, BudgetKey] = {
    "FULL_ITERS": BudgetKey(0, **_whole(0, "(0: SOLVER.MAX_ITER is the budget as it is)")),
    "FRACTION": BudgetKey(
        1.0,
        lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0,
        "a number > 0 (the budget as a fraction of SOLVER.BUDGET.FULL_ITERS, e.g. 0.1)",
    ),
    "IMS_PER_BATCH": BudgetKey(
        0, **_whole(0, "(the batch size FULL_ITERS is counted at; 0: SOLVER.IMS_PER_BATCH)")
    ),
    "WRITER_PERIOD": BudgetKey(20, **_whole(1, "(iterations between metric writes)")),
    "GRAD_NORM_PERIOD": BudgetKey(
        0, **_whole(0, "(iterations between full-gradient-norm evaluations; 0: off)")
    ),
    "GRAD_NORM_BATCHES": BudgetKey(2, **_whole(1, "(training batches in the fixed subset)")),
    "ON_RESUME": BudgetKey("refuse"),  # or "replan": resume a checkpoint of another MAX_ITER
    "SAVE_AT": BudgetKey(()),  # extra checkpoints after these iteration counts (branch points)
    "SECONDS": BudgetKey(0.0),  # > 0: a wall-clock budget of training seconds (MAX_ITER: a cap)
    "CLOCK_SYNC_PERIOD": BudgetKey(1),  # share rank 0's clock every N iterations
}
"""The ``SOLVER.BUDGET`` keys besides the schedules' parameters: the one table their defaults
(:func:`add_budget_config`) and their checks (:func:`check_budget_keys`) are made from."""

KEYS: dict[str, Any] = {key: row.default for key, row in BUDGET_KEYS.items()}
"""The ``SOLVER.BUDGET`` keys of :data:`BUDGET_KEYS` with their defaults."""

STATES_BUDGET = ("FULL_ITERS", "FRACTION", "IMS_PER_BATCH")
"""The keys that change the ``MAX_ITER`` ``SOLVER.BUDGET`` states."""


def add_budget_config(cfg: CfgNode) -> CfgNode:
    """Add the ``SOLVER.BUDGET`` node (Detectron2's ``add_xxx_config`` convention), in place: the
    keys of every schedule registered now, with the core's defaults; keys already there keep
    their values (calling it again adds the keys of schedules registered since).

    Example:
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.POLY_POWER
        (0, 0.9)
    """
    if "BUDGET" not in cfg.SOLVER:
        cfg.SOLVER.BUDGET = CfgNode()
    keys = {key: KEYS[key] for key in STATES_BUDGET}
    for name in schedule_names():
        for param, default in schedule_info(name).defaults.items():
            key = param_key(name, param)
            if key.startswith("SOLVER.BUDGET."):
                keys[key[len("SOLVER.BUDGET.") :]] = cfg_value(default)
    for key, value in {**keys, **KEYS}.items():
        if key not in cfg.SOLVER.BUDGET:
            cfg.SOLVER.BUDGET[key] = value
    return cfg


def budget_max_iter(cfg: CfgNode) -> float | None:
    """The ``SOLVER.MAX_ITER`` that ``SOLVER.BUDGET`` states, unrounded (None: ``FULL_ITERS``
    0), at ``SOLVER.BUDGET.IMS_PER_BATCH`` (:func:`~budgeted.control.plan.planned_iters`)."""
    b = cfg.SOLVER.get("BUDGET")
    if b is None or not b.get("FULL_ITERS", 0):
        return None
    s = cfg.SOLVER
    return planned_iters(b.FRACTION, b.FULL_ITERS, b.get("IMS_PER_BATCH", 0), s.IMS_PER_BATCH)


max_iter_agrees = length_agrees
"""Whether a ``SOLVER.MAX_ITER`` trains the budget :func:`budget_max_iter` states."""


def stated_max_iter(cfg: CfgNode) -> float | None:
    """:func:`budget_max_iter`, with a bad budget as a one-line ``ValueError``."""
    b = cfg.SOLVER.BUDGET
    try:
        return budget_max_iter(cfg)
    except ValueError as err:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={b.FRACTION!r} x SOLVER.BUDGET.FULL_ITERS={b.FULL_ITERS}: "
            f"{err}"
        ) from None


def _check_int(key: str, value: Any, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{key}={value!r} is invalid; allowed: {what}")


def _check_keys(b: Any, keys: Sequence[str]) -> None:
    """Each of ``keys`` of ``SOLVER.BUDGET`` ``b`` (absent: its default) against its rule."""
    for key in keys:
        row = BUDGET_KEYS[key]
        value = b.get(key, row.default)
        if row.test is not None and not row.test(value):
            raise ValueError(f"SOLVER.BUDGET.{key}={value!r} is invalid; allowed: {row.allowed}")


def check_grad_norm_config(cfg: CfgNode) -> None:
    """Validate ``SOLVER.BUDGET.GRAD_NORM_PERIOD`` and ``GRAD_NORM_BATCHES`` (one-line
    ``ValueError``).

    Example:
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.GRAD_NORM_PERIOD = -1
        >>> try:
        ...     check_grad_norm_config(cfg)
        ... except ValueError as err:
        ...     print(str(err)[:66])
        SOLVER.BUDGET.GRAD_NORM_PERIOD=-1 is invalid; allowed: a whole num
    """
    _check_keys(cfg.SOLVER.get("BUDGET") or {}, ("GRAD_NORM_PERIOD", "GRAD_NORM_BATCHES"))


def check_budget_keys(cfg: CfgNode) -> None:
    """Validate ``SOLVER.BUDGET``'s keys (:data:`BUDGET_KEYS`) and the solver keys they count
    in (``MAX_ITER``, ``IMS_PER_BATCH``), changing nothing (one-line ``ValueError``).

    Example:
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FRACTION = 0.1  # of what? FULL_ITERS is 0
        >>> try:
        ...     check_budget_keys(cfg)
        ... except ValueError as err:
        ...     print(str(err)[:70])
        SOLVER.BUDGET.FRACTION=0.1 needs SOLVER.BUDGET.FULL_ITERS (the full sc
    """
    b = cfg.SOLVER.get("BUDGET")
    if b is None:
        return
    fraction, full = b.get("FRACTION", 1.0), b.get("FULL_ITERS", 0)
    _check_keys(b, ("FRACTION", "FULL_ITERS", "IMS_PER_BATCH"))
    _check_int("SOLVER.IMS_PER_BATCH", cfg.SOLVER.IMS_PER_BATCH, 1, "a whole number >= 1")
    _check_int("SOLVER.MAX_ITER", cfg.SOLVER.MAX_ITER, 1, "a whole number >= 1")
    _check_keys(b, ("WRITER_PERIOD",))
    checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", b.get("SAVE_AT", ()), example="(3040, 6080)")
    check_grad_norm_config(cfg)
    if full == 0 and fraction != 1.0:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={fraction!r} needs SOLVER.BUDGET.FULL_ITERS (the full "
            "schedule's length, e.g. 90000); allowed: set FULL_ITERS, or leave FRACTION at 1.0 "
            "and state the budget as SOLVER.MAX_ITER"
        )


def resolve_budget(cfg: CfgNode, *, max_iter_given: bool = False) -> CfgNode:
    """Set ``SOLVER.MAX_ITER`` from ``SOLVER.BUDGET`` (in place) and validate the budget keys
    (:func:`check_budget_keys`). With ``FULL_ITERS > 0``: ``MAX_ITER`` becomes
    :func:`budget_max_iter` (rounded), unless ``max_iter_given`` (``SOLVER.MAX_ITER`` was
    overridden explicitly): then ``MAX_ITER`` wins and ``FRACTION`` is restated to match it.

    Example:
        >>> cfg = add_budget_config(get_cfg())
        >>> cfg.SOLVER.BUDGET.FULL_ITERS, cfg.SOLVER.BUDGET.FRACTION = 400, 0.25
        >>> resolve_budget(cfg).SOLVER.MAX_ITER
        100
    """
    check_budget_keys(cfg)
    b = cfg.SOLVER.BUDGET
    max_iter, full = cfg.SOLVER.MAX_ITER, b.FULL_ITERS
    was_frozen = cfg.is_frozen()
    cfg.defrost()
    if full > 0 and max_iter_given:
        ratio = cfg.SOLVER.IMS_PER_BATCH / (b.get("IMS_PER_BATCH", 0) or cfg.SOLVER.IMS_PER_BATCH)
        b.FRACTION = max_iter * ratio / full
        logger.info("SOLVER.MAX_ITER=%d given explicitly: SOLVER.BUDGET.FRACTION is now %g of "
                    "%d", max_iter, b.FRACTION, full)  # fmt: skip
    elif full > 0:
        stated = stated_max_iter(cfg)
        if not max_iter_agrees(max_iter, stated):
            cfg.SOLVER.MAX_ITER = max(1, round(stated))
    if was_frozen:
        cfg.freeze()
    return cfg


def on_resume(cfg: CfgNode) -> str:
    """``SOLVER.BUDGET.ON_RESUME``: ``"refuse"`` (the default), ``"replan"`` or ``"branch"``
    (:meth:`budgeted.schedules.BudgetSchedule.resume`); any other value: one-line
    :class:`BudgetConfigError`.

    Example:
        >>> on_resume(add_budget_config(get_cfg()))
        'refuse'
    """
    value = cfg.SOLVER.get("BUDGET", CfgNode()).get("ON_RESUME", "refuse")
    return check_on_resume(value, "SOLVER.BUDGET.ON_RESUME")


# --- the yaml files -------------------------------------------------------------------------

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")


def split_overrides(opts: Sequence[str]) -> list[str]:
    """Command-line overrides as Detectron2's flat ``[KEY, VALUE, ...]`` list, from its
    ``KEY VALUE`` pairs and ``KEY=VALUE`` tokens, mixed: a token in a key position that starts
    with a config key and ``=`` is split at its first ``=``; a value is never split. A key
    without a value: one-line ``ValueError``.

    Example:
        >>> split_overrides(["SOLVER.LR_SCHEDULER_NAME=BudgetCosine", "SEED", "1"])
        ['SOLVER.LR_SCHEDULER_NAME', 'BudgetCosine', 'SEED', '1']
        >>> split_overrides(["OUTPUT_DIR=./out/a=b"])
        ['OUTPUT_DIR', './out/a=b']
    """
    out: list[str] = []
    tokens = list(opts)
    i = 0
    while i < len(tokens):
        token = str(tokens[i])
        key, eq, value = token.partition("=")
        if eq and _KEY.fullmatch(key):
            out += [key, value]
            i += 1
        elif i + 1 < len(tokens):
            out += [token, str(tokens[i + 1])]
            i += 2
        else:
            raise ValueError(
                f"overrides must be KEY VALUE pairs or KEY=VALUE; {token!r} has no value "
                f"(overrides: {list(opts)})"
            )
    return out


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = yaml.safe_load(f) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ValueError(f"config {path!r} is not valid yaml{where}: {problem}") from None
    except UnicodeDecodeError:
        raise ValueError(f"config {path!r} is not a text (yaml) file") from None
    if not isinstance(data, dict):
        raise ValueError(f"config {path!r} is not a yaml mapping")
    return data


def _chain(path: str) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """Our yaml files from the base down to ``path``, and the model-zoo config at the root."""
    files: list[tuple[str, dict[str, Any]]] = []
    zoo: str | None = None
    seen: set[str] = set()
    current: str | None = os.path.abspath(os.path.expanduser(path))
    while current is not None:
        if current in seen:
            raise ValueError(f"config {path!r}: _BASE_ cycle through {current!r}")
        seen.add(current)
        if not os.path.isfile(current):
            raise ValueError(f"config file {current!r} does not exist")
        data = _read_yaml(current)
        files.append((current, data))
        base = data.pop("_BASE_", None)
        if base is None:
            current = None
        elif not isinstance(base, str):
            raise ValueError(f"config {current!r}: _BASE_ must be one path, got {base!r}")
        elif base.startswith(MODEL_ZOO_PREFIX):
            zoo, current = base[len(MODEL_ZOO_PREFIX) :], None
        else:
            base = os.path.expanduser(base)
            current = base if os.path.isabs(base) else os.path.join(os.path.dirname(current), base)
    return zoo, files[::-1]


def lookup(cfg: CfgNode, key: str) -> tuple[bool, Any]:
    """Whether ``cfg`` has the dotted ``key``, and its value.

    Example:
        >>> lookup(add_budget_config(get_cfg()), "SOLVER.BUDGET.FRACTION")
        (True, 1.0)
    """
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, CfgNode) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _as_float(cfg: CfgNode, key: str, value: str) -> str:
    """``"0"`` for a float key becomes ``"0.0"`` (yacs refuses int for float)."""
    node = lookup(cfg, key)[1]
    if isinstance(node, float) and isinstance(value, str) and value.lstrip("-").isdigit():
        return f"{value}.0"
    return value


def _states_budget(data: dict[str, Any]) -> bool:
    """Whether a yaml file sets a key that changes the ``MAX_ITER`` ``SOLVER.BUDGET`` states."""
    solver = data.get("SOLVER") or {}
    budget = solver.get("BUDGET") or {}
    return "IMS_PER_BATCH" in solver or any(k in budget for k in STATES_BUDGET)


def _merge_files(cfg: CfgNode, path: str) -> None:
    """Merge the ``_BASE_`` chain of ``path`` into ``cfg``; the budget checks of the files."""
    zoo, files = _chain(path)
    if zoo is not None:
        from detectron2 import model_zoo

        try:
            zoo_file = model_zoo.get_config_file(zoo)
        except RuntimeError:
            raise ValueError(
                f"config {path!r}: {MODEL_ZOO_PREFIX}{zoo} is not in the installed Detectron2 "
                "model zoo"
            ) from None
        cfg.merge_from_file(zoo_file)
    # the deepest file that sets SOLVER.MAX_ITER, and the deepest that states the budget
    max_at: tuple[int, str, Any] | None = None
    budget_at = -1
    for i, (file, data) in enumerate(files):
        if "MAX_ITER" in (data.get("SOLVER") or {}):
            max_at = (i, file, data["SOLVER"]["MAX_ITER"])
        if _states_budget(data):
            budget_at = i
        if data.get("VERSION", cfg.VERSION) != cfg.VERSION:
            raise ValueError(f"config {file!r}: VERSION {data['VERSION']} is not {cfg.VERSION}")
        try:
            cfg.merge_from_other_cfg(CfgNode(data))
        except (KeyError, ValueError, AssertionError) as err:
            raise ValueError(f"config {file!r}: {err.args[0] if err.args else err}") from None
    b = cfg.SOLVER.BUDGET
    if max_at is None or max_at[0] < budget_at or not isinstance(b.FULL_ITERS, int):
        return  # the budget is stated below any MAX_ITER: it wins (resolve_budget sets it)
    file, max_iter = max_at[1], max_at[2]
    if b.FULL_ITERS > 0 and not max_iter_agrees(max_iter, stated_max_iter(cfg)):
        raise ValueError(
            f"config {file!r} sets SOLVER.MAX_ITER={max_iter} but SOLVER.BUDGET.FRACTION="
            f"{b.FRACTION} x FULL_ITERS={b.FULL_ITERS} gives {round(stated_max_iter(cfg))}; state "
            "the budget once (set FULL_ITERS: 0 to use MAX_ITER as it is)"
        )


def load_config(path: str | os.PathLike[str], opts: Sequence[str] = ()) -> CfgNode:
    """The merged, unfrozen ``CfgNode`` of a yaml config (a file, or a shipped config's bare
    name; ``_BASE_`` a relative path or ``model-zoo://<path>``), budget keys added, overrides
    ``opts`` applied last, the budget stated once (docs/detectron2.md, "Config keys"). A bad
    file, key or value is a one-line ``ValueError``.

    Example:
        >>> cfg = load_config("mask_rcnn_budget10.yaml", ["SOLVER.BUDGET.FRACTION=0.25"])
        >>> cfg.SOLVER.MAX_ITER, cfg.SOLVER.LR_SCHEDULER_NAME
        (22500, 'BudgetLinear')
    """
    try:
        path = os.fspath(find_config(path, "detectron2", kinds=(".yaml",)))
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None
    if path.endswith(".py"):
        raise ValueError(
            f"config {path!r} is a LazyConfig (python) file; allowed here: a yaml config "
            "(train LazyConfigs with tools/lazyconfig_train_net.py)"
        )
    cfg = get_cfg()
    add_budget_config(cfg)
    _merge_files(cfg, path)
    flat = split_overrides(opts)
    keys = flat[0::2]
    flat = [x for k, v in zip(keys, flat[1::2]) for x in (k, _as_float(cfg, k, v))]
    try:
        cfg.merge_from_list(flat)
    except (KeyError, AssertionError, ValueError) as err:
        raise ValueError(f"bad override in {flat}: {err}") from None
    given = "SOLVER.MAX_ITER" in keys
    budget_given = any(k in ("SOLVER.BUDGET.FRACTION", "SOLVER.BUDGET.FULL_ITERS") for k in keys)
    if given and budget_given and cfg.SOLVER.BUDGET.FULL_ITERS > 0:
        stated = stated_max_iter(cfg)
        if not max_iter_agrees(cfg.SOLVER.MAX_ITER, stated):
            raise ValueError(
                f"SOLVER.MAX_ITER={cfg.SOLVER.MAX_ITER} disagrees with SOLVER.BUDGET.FRACTION="
                f"{cfg.SOLVER.BUDGET.FRACTION} x FULL_ITERS={cfg.SOLVER.BUDGET.FULL_ITERS} = "
                f"{round(stated)}; state the budget once"
            )
    return resolve_budget(cfg, max_iter_given=given)

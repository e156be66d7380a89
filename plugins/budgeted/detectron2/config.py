"""Our yaml configs for Detectron2: :func:`load_config` (``_BASE_`` chains, the model zoo,
overrides, the budget stated once) and :func:`split_overrides`.

The ``SOLVER.BUDGET`` keys themselves (defaults, arithmetic, checks) are
:mod:`budgeted.detectron2.budget_keys`; their names are re-exported here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import yaml
from detectron2.config import CfgNode, get_cfg

from ..config_files import find_config
from .budget_keys import (
    NATIVE_KEYS,
    add_budget_config,
    budget_max_iter,
    check_budget_keys,
    check_grad_norm_config,
    max_iter_agrees,
    on_resume,
    param_key,
    resolve_budget,
    stated_max_iter,
)

__all__ = [
    "MODEL_ZOO_PREFIX",
    "NATIVE_KEYS",
    "add_budget_config",
    "budget_max_iter",
    "check_budget_keys",
    "check_grad_norm_config",
    "load_config",
    "max_iter_agrees",
    "on_resume",
    "param_key",
    "resolve_budget",
    "split_overrides",
    "stated_max_iter",
]

MODEL_ZOO_PREFIX = "model-zoo://"
"""A ``_BASE_`` starting with this names a config of the installed Detectron2 model zoo."""


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")


def split_overrides(opts: Sequence[str]) -> list[str]:
    """Command-line overrides as Detectron2's flat ``KEY VALUE`` list.

    Accepts Detectron2's ``KEY VALUE`` pairs and ``KEY=VALUE`` tokens, mixed. A token in a key
    position that starts with a config key and ``=`` is split at its first ``=`` (so
    ``OUTPUT_DIR=./out/a=b`` keeps ``./out/a=b``); a token in a value position is never split.

    Args:
        opts (Sequence[str]): the trailing command-line tokens.

    Returns:
        list[str]: ``[KEY, VALUE, KEY, VALUE, ...]``.

    Raises:
        ValueError: one line when a key has no value.

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


def _as_float(cfg: CfgNode, key: str, value: str) -> str:
    """``"0"`` for a float key becomes ``"0.0"`` (yacs refuses int for float)."""
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, CfgNode) or part not in node:
            return value
        node = node[part]
    if isinstance(node, float) and isinstance(value, str) and value.lstrip("-").isdigit():
        return f"{value}.0"
    return value


# keys whose value changes the MAX_ITER that SOLVER.BUDGET states
_BUDGET_KEYS = ("FRACTION", "FULL_ITERS", "IMS_PER_BATCH")


def _states_budget(data: dict[str, Any]) -> bool:
    solver = data.get("SOLVER") or {}
    budget = solver.get("BUDGET") or {}
    return "IMS_PER_BATCH" in solver or any(k in budget for k in _BUDGET_KEYS)


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
    """The fully merged ``CfgNode`` of a yaml config (budget keys added, bases resolved).

    ``path`` is a file, or the bare name of a shipped config (``mask_rcnn_budget10.yaml``, looked
    up under ``configs/detectron2``, its ``toy/`` and ``lazy/`` folders; a name without its
    extension is the yaml file of that stem, a LazyConfig of the same stem aside). ``_BASE_`` is
    a path relative to the file (what Detectron2 itself reads), or ``model-zoo://<path>`` for a
    config of the installed Detectron2 model zoo. ``opts`` are overrides (``KEY VALUE`` pairs or
    ``KEY=VALUE``, see :func:`split_overrides`), applied last.

    With ``SOLVER.BUDGET.FULL_ITERS > 0`` the budget is stated once: a file that sets
    ``SOLVER.MAX_ITER`` against the budget it states is refused; a budget stated below a
    ``MAX_ITER`` (in a file that inherits it, or an override) restates ``MAX_ITER``; an override
    ``SOLVER.MAX_ITER N`` restates ``FRACTION``. Plain Detectron2 yaml files load too.

    Args:
        path (str or PathLike): the yaml file, or a shipped config's bare name.
        opts (Sequence[str]): command-line overrides.

    Returns:
        CfgNode: the merged config, not frozen.

    Raises:
        ValueError: one line naming the bad file, key or value.

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

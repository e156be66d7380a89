"""Budget keys for Detectron2's yacs config, and :func:`load_config` for our yaml files.

``SOLVER.MAX_ITER`` is the budget ``T``, ``SOLVER.WARMUP_ITERS`` the warmup ``W``;
``SOLVER.WARMUP_FACTOR``, ``SOLVER.WARMUP_METHOD``, ``SOLVER.BASE_LR`` and ``SOLVER.GAMMA`` (the
factor of ``BudgetStep``) keep their Detectron2 meaning. ``SOLVER.BUDGET`` adds the rest:

- ``FULL_ITERS``: length of the full schedule (90000 for Mask R-CNN 1x); 0 means "not stated":
  ``SOLVER.MAX_ITER`` is then taken as it is;
- ``FRACTION``: the budget as a fraction of it; with ``FULL_ITERS > 0``,
  ``MAX_ITER = round(FRACTION * FULL_ITERS)``;
- the schedule parameters (defaults taken from :mod:`budgeted.core`);
- ``WRITER_PERIOD``: how often :class:`BudgetTrainer` writes metrics (Detectron2 hard-codes 20).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import yaml
from detectron2.config import CfgNode, get_cfg

from ..budget import budget_iters
from ..core import schedule_params

__all__ = ["MODEL_ZOO_PREFIX", "add_budget_config", "load_config", "resolve_budget"]

MODEL_ZOO_PREFIX = "model-zoo://"
"""A ``_BASE_`` starting with this names a config of the installed Detectron2 model zoo."""

logger = logging.getLogger(__name__)


def add_budget_config(cfg: CfgNode) -> CfgNode:
    """Add the ``SOLVER.BUDGET`` node (Detectron2's ``add_xxx_config`` convention)."""
    if "BUDGET" in cfg.SOLVER:
        return cfg
    b = cfg.SOLVER.BUDGET = CfgNode()
    b.FULL_ITERS = 0
    b.FRACTION = 1.0
    b.COSINE_ETA = float(schedule_params("cosine")["eta"])
    b.POLY_POWER = float(schedule_params("poly")["power"])
    htd = schedule_params("htd")
    b.HTD_LOWER = float(htd["lower"])
    b.HTD_UPPER = float(htd["upper"])
    b.HTD_ETA = float(htd["eta"])
    b.STEP_MILESTONES = tuple(float(m) for m in schedule_params("step")["milestones"])
    b.EXP_END_FACTOR = float(schedule_params("exp")["end_factor"])
    b.WRITER_PERIOD = 20
    return cfg


def resolve_budget(cfg: CfgNode, *, max_iter_given: bool = False) -> CfgNode:
    """Set ``SOLVER.MAX_ITER`` from ``SOLVER.BUDGET`` (in place) and validate the budget keys.

    With ``FULL_ITERS > 0``: ``MAX_ITER = round(FRACTION * FULL_ITERS)``, unless
    ``max_iter_given`` (``SOLVER.MAX_ITER`` was overridden explicitly), in which case ``MAX_ITER``
    wins and ``FRACTION`` becomes ``MAX_ITER / FULL_ITERS``.
    """
    b = cfg.SOLVER.BUDGET
    fraction, full = b.FRACTION, b.FULL_ITERS
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not fraction > 0:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={fraction!r} is invalid; allowed: a number > 0 "
            "(the budget as a fraction of SOLVER.BUDGET.FULL_ITERS, e.g. 0.1)"
        )
    if isinstance(full, bool) or not isinstance(full, int) or full < 0:
        raise ValueError(
            f"SOLVER.BUDGET.FULL_ITERS={full!r} is invalid; allowed: a whole number >= 0 "
            "(0: SOLVER.MAX_ITER is the budget as it is)"
        )
    max_iter = cfg.SOLVER.MAX_ITER
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"SOLVER.MAX_ITER={max_iter!r} is invalid; allowed: a whole number >= 1")
    was_frozen = cfg.is_frozen()
    cfg.defrost()
    if full > 0 and max_iter_given:
        cfg.SOLVER.BUDGET.FRACTION = max_iter / full
        logger.info(
            "SOLVER.MAX_ITER=%d given explicitly: SOLVER.BUDGET.FRACTION is now %g of %d",
            max_iter,
            max_iter / full,
            full,
        )
    elif full > 0:
        try:
            cfg.SOLVER.MAX_ITER = budget_iters(fraction=float(fraction), full_iters=full)
        except ValueError as err:
            raise ValueError(
                f"SOLVER.BUDGET.FRACTION={fraction!r} x SOLVER.BUDGET.FULL_ITERS={full}: {err}"
            ) from None
    elif fraction != 1.0:
        raise ValueError(
            f"SOLVER.BUDGET.FRACTION={fraction!r} needs SOLVER.BUDGET.FULL_ITERS (the full "
            "schedule's length, e.g. 90000); allowed: set FULL_ITERS, or leave FRACTION at 1.0 "
            "and state the budget as SOLVER.MAX_ITER"
        )
    if was_frozen:
        cfg.freeze()
    return cfg


def _read_yaml(path: str) -> dict[str, Any]:
    with open(path) as f:
        data = yaml.safe_load(f) or {}
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


def _opts_keys(opts: Sequence[str]) -> list[str]:
    if len(opts) % 2:
        raise ValueError(f"overrides must be KEY VALUE pairs; got an odd number: {list(opts)}")
    return list(opts[0::2])


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


def load_config(path: str, opts: Sequence[str] = ()) -> CfgNode:
    """The fully merged ``CfgNode`` of one of our yaml configs (budget keys added, base resolved).

    ``_BASE_`` is a path relative to the file, or ``model-zoo://<path>`` for a config of the
    installed Detectron2 model zoo (e.g. ``COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml``).
    ``opts`` are ``KEY VALUE`` overrides, applied last; then :func:`resolve_budget`.
    Plain Detectron2 yaml files load too.
    """
    cfg = get_cfg()
    add_budget_config(cfg)
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
    file_max_iter: tuple[str, int] | None = None
    for file, data in files:
        if "MAX_ITER" in (data.get("SOLVER") or {}):
            file_max_iter = (file, data["SOLVER"]["MAX_ITER"])
        if data.get("VERSION", cfg.VERSION) != cfg.VERSION:
            raise ValueError(f"config {file!r}: VERSION {data['VERSION']} is not {cfg.VERSION}")
        try:
            cfg.merge_from_other_cfg(CfgNode(data))
        except KeyError as err:
            raise ValueError(f"config {file!r}: {err.args[0]}") from None
    keys = _opts_keys(opts)
    opts = [_as_float(cfg, k, v) for k, v in zip(opts[0::2], opts[1::2])]
    opts = [x for pair in zip(keys, opts) for x in pair]
    try:
        cfg.merge_from_list(opts)
    except (KeyError, AssertionError, ValueError) as err:
        raise ValueError(f"bad override in {list(opts)}: {err}") from None
    given = "SOLVER.MAX_ITER" in keys
    budget_given = any(k.startswith("SOLVER.BUDGET.F") for k in keys)
    if given and budget_given and cfg.SOLVER.BUDGET.FULL_ITERS > 0:
        derived = budget_iters(
            fraction=cfg.SOLVER.BUDGET.FRACTION, full_iters=cfg.SOLVER.BUDGET.FULL_ITERS
        )
        if derived != cfg.SOLVER.MAX_ITER:
            raise ValueError(
                f"SOLVER.MAX_ITER={cfg.SOLVER.MAX_ITER} disagrees with SOLVER.BUDGET.FRACTION="
                f"{cfg.SOLVER.BUDGET.FRACTION} x FULL_ITERS={cfg.SOLVER.BUDGET.FULL_ITERS} = "
                f"{derived}; state the budget once"
            )
    if not given and file_max_iter is not None and cfg.SOLVER.BUDGET.FULL_ITERS > 0:
        derived = budget_iters(
            fraction=cfg.SOLVER.BUDGET.FRACTION, full_iters=cfg.SOLVER.BUDGET.FULL_ITERS
        )
        if derived != file_max_iter[1]:
            raise ValueError(
                f"config {file_max_iter[0]!r} sets SOLVER.MAX_ITER={file_max_iter[1]} but "
                f"SOLVER.BUDGET.FRACTION={cfg.SOLVER.BUDGET.FRACTION} x FULL_ITERS="
                f"{cfg.SOLVER.BUDGET.FULL_ITERS} = {derived}; state the budget once "
                "(set FULL_ITERS: 0 to use MAX_ITER as it is)"
            )
    return resolve_budget(cfg, max_iter_given=given)

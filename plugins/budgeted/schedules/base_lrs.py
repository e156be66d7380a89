"""A resumed checkpoint's base LRs against the config's: the one rule every adapter applies.

A budget scheduler trains ``base_lr * m(t)`` per param group; on resume the frameworks take the
base LRs from the checkpoint (Detectron2: the LR scheduler's ``base_lrs``; MMEngine: each
scheduler's ``base_values`` and the optimizer's ``initial_lr``), not from the config. A file whose
base LRs were edited, or a config whose LR changed since, would train every remaining iteration
at other LRs than the run it continues, silently. :func:`check_base_lrs` refuses that in one line,
per param group (groups with their own multipliers, ``BIAS_LR_FACTOR`` or ``paramwise_cfg``,
compared with what the config gives that group), before anything is written; where every group
differs by the same ratio it names the config value that run was planned with.
:func:`base_lr_in_use` is the base LR a diverged run's line reports.

Torch-free: the adapters hand in plain numbers.

Example:
    >>> check_base_lrs([0.01, 0.02], [0.01, 0.02], subject="checkpoint 'a.pth'",
    ...                saved_key="base_lrs", config_key="SOLVER.BASE_LR", fix="...")
    >>> try:
    ...     check_base_lrs([0.1], [0.01], subject="checkpoint 'a.pth'", saved_key="base_lrs",
    ...                    config_key="SOLVER.BASE_LR", config_value=0.01, fix="start anew")
    ... except BudgetMismatchError as err:
    ...     print(str(err)[:96])
    checkpoint 'a.pth' has base LR 0.1 in param group 0 of 1 (base_lrs), where the config gives 0.01
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from ..errors import BudgetMismatchError

__all__ = [
    "REL_TOL", "ConfiguredLRs", "base_lr_in_use", "build_without_weights", "check_base_lrs"
]  # fmt: skip

T = TypeVar("T")

REL_TOL = 1e-6
"""How far a saved base LR may be from the config's (relative): float rounding, never an edit."""


class ConfiguredLRs(NamedTuple):
    """What a config gives each param group: ``lrs`` (in the optimizer's order), and the
    config's LR key and value they come from (``SOLVER.BASE_LR``, 0.02)."""

    lrs: list[float]
    key: str
    value: float | None


def build_without_weights(build: Callable[[], T]) -> T | None:
    """``build()`` (a model and its optimizer, say) on torch's meta device, parameters without
    storage (milliseconds and no memory, whatever the model's size), else on the CPU; None where
    it fails both ways (the framework says why when it builds them for real)."""
    import torch

    for device in ("meta", "cpu"):
        try:
            with torch.device(device), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the real build says them again
                return build()
        except Exception:  # the user's model code: any failure leaves the check to the run
            continue
    return None


def _number(value: Any) -> float | None:
    """``value`` as a float where it is a real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _same(saved: float, configured: float) -> bool:
    return math.isclose(saved, configured, rel_tol=REL_TOL, abs_tol=1e-12)


def check_base_lrs(
    saved: Any,
    configured: Sequence[float],
    *,
    subject: str,
    saved_key: str,
    config_key: str,
    fix: str,
    config_value: float | None = None,
) -> None:
    """Refuse (one line) a checkpoint whose base LRs ``saved`` are not ``configured``.

    Args:
        saved: the checkpoint's base LRs, one per param group (untrusted: anything).
        configured (Sequence[float]): what the config gives each param group, in order (its
            base LR times the group's multiplier, after any batch or world-size scaling).
        subject (str): what the line starts with, the checkpoint named
            (``"cannot resume: checkpoint 'out/model_0000003.pth'"``).
        saved_key (str): where ``saved`` is in the checkpoint, for the line.
        config_key (str): the config's LR key (``"SOLVER.BASE_LR"``).
        fix (str): what else to do (start a new run from its weights ...).
        config_value (float, optional): the value of ``config_key``; with it, the line names
            the value the checkpoint's run was planned with.

    Raises:
        BudgetMismatchError: one line naming the checkpoint, the group, both base LRs and what
            to do.
    """
    values = list(saved) if isinstance(saved, (list, tuple)) else None
    if values is None or len(values) != len(configured):
        held = f"{len(values)} param groups" if values is not None else f"{saved!r}"
        raise BudgetMismatchError(
            f"{subject} holds base LRs for {held} ({saved_key}) where the config builds "
            f"{len(configured)} param groups: it is not a checkpoint of this model and "
            f"optimizer; {fix}"
        )
    numbers = [_number(v) for v in values]
    key = f"{config_key}={config_value:g}" if config_value is not None else config_key
    for group, (raw, number) in enumerate(zip(values, numbers)):
        if number is None or not math.isfinite(number) or number < 0:
            raise BudgetMismatchError(
                f"{subject} has base LR {raw!r} in param group {group} of {len(values)} "
                f"({saved_key}), where the config gives {configured[group]:g} ({key}): not a "
                f"finite number >= 0, the file was damaged or edited; resume from another "
                f"checkpoint, or {fix}"
            )
    wrong = [g for g, (s, c) in enumerate(zip(numbers, configured)) if not _same(s, c)]  # type: ignore[arg-type]
    if not wrong:
        return
    group = wrong[0]
    s, c = numbers[group], configured[group]
    assert s is not None
    ratios = [n / k for n, k in zip(numbers, configured) if k and n is not None]
    one_ratio = bool(ratios) and len(ratios) == len(configured)
    one_ratio = one_ratio and all(math.isclose(r, ratios[0], rel_tol=REL_TOL) for r in ratios)
    if one_ratio and config_value is not None:
        planned = (
            f"every group's base LR is {ratios[0]:g} x the config's, as if the run was planned "
            f"with {config_key}={config_value * ratios[0]:g}: resume with that"
        )
    elif one_ratio:
        planned = (
            f"every group's base LR is {ratios[0]:g} x the config's; resume with the "
            f"{config_key} that run was planned with"
        )
    else:
        planned = (
            "the groups' base LRs are not one multiple of the config's (the file was edited); "
            "resume from another checkpoint"
        )
    given = key
    if config_value is not None and not _same(c, config_value):
        given += " with that group's multiplier"
    raise BudgetMismatchError(
        f"{subject} has base LR {s:g} in param group {group} of {len(values)} ({saved_key}), "
        f"where the config gives {c:g} ({given}): resuming it would train every remaining "
        "iteration at other LRs than the run it continues (the file was edited, or the "
        f"config's LR changed since); {planned}, or {fix}"
    )


def base_lr_in_use(values: Sequence[Any]) -> float | None:
    """The base LR to report of the param groups' ``values``: the first that is not finite
    (a NaN base LR is what a diverged run should name), else the largest; None with none.

    Example:
        >>> base_lr_in_use([0.01, float("nan"), 0.02]), base_lr_in_use([0.01, 0.02])
        (nan, 0.02)
    """
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    if not numbers:
        return None
    return next((n for n in numbers if not math.isfinite(n)), max(numbers))

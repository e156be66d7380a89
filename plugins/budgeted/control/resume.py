"""The resume route: a resumed checkpoint checked before anything is written, in the words of
the tool that resumes it.

The accessor (``budgeted.runs.<framework>``) says where the framework keeps what is checked:
``saved_base_lrs(checkpoint)`` (every record of the base LRs: :class:`~budgeted.runs.SavedLRs`)
and ``load_checkpoint(path)`` (untrusted, as data). :class:`ResumeCheck` decides, one rule for
every framework: each saved record of the base LRs must be what the config gives each param
group (:func:`~budgeted.schedules.base_lrs.check_base_lrs`), the config's LRs built without
weights (:func:`configured_lrs`).

Example:
    >>> import torch
    >>> from budgeted.runs import SavedLRs
    >>> def build():
    ...     return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.02)
    >>> planned = configured_lrs(build, "SOLVER.BASE_LR", 0.02)
    >>> planned.lrs
    [0.02]
    >>> check = ResumeCheck("model_0000009.pth", "checkpoint 'model_0000009.pth'", "do X")
    >>> check.base_lrs([SavedLRs(None, "base_lrs", [0.02])], lambda record: planned)
    >>> check.base_lrs([SavedLRs(None, "base_lrs", [0.04])], lambda record: planned)
    Traceback (most recent call last):
    budgeted.errors.BudgetMismatchError: checkpoint 'model_0000009.pth' has base LR 0.04 ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..runs import SavedLRs
from ..schedules.base_lrs import ConfiguredLRs, build_without_weights, check_base_lrs

__all__ = ["ResumeCheck", "configured_lrs"]


def configured_lrs(build: Callable[[], Any], key: str, value: Any) -> ConfiguredLRs | None:
    """The LR the config gives each param group of the optimizer ``build()`` makes (built
    without weights: :func:`~budgeted.schedules.base_lrs.build_without_weights`), named by the
    config's LR ``key`` and its ``value`` (not a number: None); None where it cannot be built."""
    built = build_without_weights(build)
    if built is None:
        return None
    number = float(value) if isinstance(value, (int, float)) else None
    return ConfiguredLRs([float(group["lr"]) for group in built.param_groups], key, number)


@dataclass(frozen=True)
class ResumeCheck:
    """The checks of the checkpoint at ``path``, resumed: its refusals start with ``subject``
    (how the tool names the file: ``"--resume-from 'out/model_0000009.pth'"``) and end with
    ``fix`` (what else to do: start a new run from its weights, ...)."""

    path: str
    subject: str
    fix: str

    def base_lrs(
        self,
        records: Iterable[SavedLRs],
        planned: Callable[[SavedLRs], ConfiguredLRs | None],
        error: type[ValueError] | None = None,
    ) -> None:
        """Refuse (one line) a checkpoint whose base LRs are not the config's.

        Args:
            records: the accessor's ``saved_base_lrs(checkpoint)``.
            planned: what the config gives the param groups of a record (None: not checked,
                another optimizer than the config's, which the runner refuses).
            error: the class of the refusal (default: the core's ``BudgetMismatchError``).

        Raises:
            BudgetMismatchError: one line naming the file, the group, both base LRs and ``fix``.
        """
        for record in records:
            lrs = planned(record)
            if lrs is None:
                continue
            subject = f"{self.subject}: its {record.owner}" if record.owner else self.subject
            try:
                check_base_lrs(record.values, lrs.lrs, subject=subject, saved_key=record.where,
                               config_key=lrs.key, config_value=lrs.value,
                               fix=self.fix)  # fmt: skip
            except ValueError as err:
                if error is None:
                    raise
                raise error(str(err)) from None

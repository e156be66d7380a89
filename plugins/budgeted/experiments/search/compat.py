"""The one place the search reads Optuna's private names (docs/development.md, "Framework
internals live in compat.py").

Optuna's ask-and-tell interface hands out a ``Trial`` at ``study.ask()``; a trial asked by an
earlier process (a search resumed after a signal) is in the storage as a ``FrozenTrial``, whose
``Trial`` needs its storage id, which Optuna 5.1 keeps private (``FrozenTrial._trial_id``). The
search needs that ``Trial`` only to report intermediate values (``--method asha``).
tests/experiments/test_search_compat.py fails when Optuna changes it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OPTUNA_VERSION", "live_trial"]

OPTUNA_VERSION = "5.1.0"
"""The Optuna version :func:`live_trial` was written for."""


def live_trial(study: Any, number: int) -> Any:
    """The ``optuna.trial.Trial`` of the study's trial ``number`` (asked by this process or an
    earlier one), to ``report`` and ``should_prune`` with."""
    import optuna

    frozen = study.get_trials(deepcopy=False)[number]
    return optuna.trial.Trial(study, frozen._trial_id)

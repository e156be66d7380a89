"""A search's Optuna study: where its trials are stored and how a cell is one trial.

The study is Optuna's own (``optuna.create_study``): its storage is a journal file in the search
folder by default (``study.journal``; Optuna's journal storage, safe for many processes on a
shared file system), or ``--storage URL`` (``sqlite:///PATH``, ``postgresql://...``, any
SQLAlchemy URL Optuna takes, or a journal file's path). Each cell of the search is one trial:
its parameters ``schedule``, ``lr`` and ``budget``, its user attributes ``cell`` (the cell's
folder), ``lr`` (as the cell takes it) and ``seed``, its value the cell's final metric (a pruned
trial: its intermediate values, the last at the iteration it was stopped).
``optuna-dashboard <storage>`` shows it; :func:`trials` reads it back.

The study records what the search is (``budgeted-search``'s fingerprint: the experiment, its
source's sha256, the target, the method, the space); a study made for another search is refused
in one line.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ..._require import require
from ...errors import SweepError
from .ladder import Trial

__all__ = [
    "JOURNAL", "STUDY_NAME", "add_result", "check_study", "distributions", "open_storage",
    "open_study", "storage_text", "trials",
]  # fmt: skip

JOURNAL = "study.journal"
"""The default storage: Optuna's journal file in the search folder."""
STUDY_NAME = "budgeted-search"
"""The study's name in its storage (``--study-name`` picks another)."""


def _optuna() -> Any:
    require("budgeted.experiments.search", "optuna")
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    return optuna


def storage_text(out: Path, given: str | None) -> str:
    """What the search records as its storage: ``given``, or the journal file in ``out``."""
    return given if given else str(out / JOURNAL)


def open_storage(text: str, create: bool) -> Any:
    """The Optuna storage ``text`` names (a URL, or a journal file's path); one line where it
    cannot be opened (:class:`SweepError`). ``create``: a journal file may be made."""
    optuna = _optuna()
    try:
        if "://" not in text:
            from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

            path = Path(text)
            if not create and not path.is_file():
                raise SweepError(f"--storage {text}: no such journal file")
            if path.exists() and not path.is_file():
                raise SweepError(
                    f"--storage {text} is not a file; allowed: a journal file's path or a "
                    "database URL (sqlite:///PATH, postgresql://...)"
                )
            return optuna.storages.JournalStorage(
                JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path)))
            )
        return optuna.storages.RDBStorage(text)
    except SweepError:
        raise
    except Exception as err:  # SQLAlchemy's, the driver's, a bad URL: one line
        reason = " ".join(str(err).split())[:300]
        raise SweepError(
            f"--storage {text} cannot be opened ({type(err).__name__}: {reason}); allowed: a "
            "journal file's path, or a database URL Optuna opens (sqlite:///PATH, "
            "postgresql://USER@HOST/DB, ...)"
        ) from None


def check_study(text: str, name: str, fingerprint: dict[str, Any]) -> None:
    """Before anything is written: the storage ``text`` opens (a new journal file needs none),
    and a study ``name`` in it was made for this ``fingerprint`` (:class:`SweepError` naming
    the first field that differs); Optuna is installed (else one line naming the extra)."""
    _optuna()
    if "://" not in text and not Path(text).exists():
        return
    storage = open_storage(text, create=False)
    optuna = _optuna()
    names = {s.study_name for s in optuna.study.get_all_study_summaries(storage)}
    if name in names:
        _check_fingerprint(optuna.load_study(study_name=name, storage=storage), name, text,
                           fingerprint)  # fmt: skip


def _check_fingerprint(study: Any, name: str, text: str, fingerprint: dict[str, Any]) -> None:
    held = study.user_attrs.get("search")
    if held is None:
        raise SweepError(f"the study {name!r} in {text} was not made by budgeted-search; "
                         "allowed: another --study-name or --storage")  # fmt: skip
    for key, value in fingerprint.items():
        if held.get(key) != value:
            raise SweepError(
                f"the study {name!r} in {text} was made for another search (its {key} is "
                f"{held.get(key)!r}, this one's {value!r}); allowed: the same search, another "
                "--study-name, or another --out"
            )


def open_study(
    text: str, name: str, fingerprint: dict[str, Any], sampler: Any = None, pruner: Any = None
) -> Any:
    """Create the study in the storage ``text`` names, or load it where it exists (made for this
    ``fingerprint``: :class:`SweepError` otherwise)."""
    optuna = _optuna()
    storage = open_storage(text, create=True)
    study = optuna.create_study(
        storage=storage, study_name=name, direction="maximize", load_if_exists=True,
        sampler=sampler, pruner=pruner,
    )  # fmt: skip
    if study.user_attrs.get("search") is None and not study.trials:
        study.set_user_attr("search", fingerprint)
    _check_fingerprint(study, name, text, fingerprint)
    return study


def distributions(schedules: list[str], low: float, high: float) -> dict[str, Any]:
    """The trials' parameters as Optuna distributions: ``schedule`` (categorical), ``lr`` (log,
    over ``[low, high]``) and ``budget`` (log, a fraction)."""
    optuna = _optuna()
    return {
        "schedule": optuna.distributions.CategoricalDistribution(schedules),
        "lr": optuna.distributions.FloatDistribution(low, high, log=True),
        "budget": optuna.distributions.FloatDistribution(1e-9, 1.0, log=True),
    }


def add_result(study: Any, number: int, value: float | None, pruned: bool = False) -> None:
    """Tell the study what trial ``number``'s cell came to: its value (None: failed or diverged,
    the trial FAILs), or ``pruned`` (stopped early)."""
    optuna = _optuna()
    if pruned:
        study.tell(number, state=optuna.trial.TrialState.PRUNED)
    elif value is None or not math.isfinite(value):
        study.tell(number, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(number, value)


def trials(study: Any, full_iters: int) -> list[Trial]:
    """Every ended trial of the study, as the methods read them: a failed one's value None, its
    iterations its budget's; a pruned one's value None, its iterations those of its last
    intermediate value (``full_iters``: the full schedule the budgets are fractions of)."""
    optuna = _optuna()
    state = optuna.trial.TrialState
    found = []
    for t in study.get_trials(deepcopy=False, states=(state.COMPLETE, state.FAIL, state.PRUNED)):
        if not {"schedule", "budget"} <= set(t.params) or "lr" not in t.user_attrs:
            continue
        budget = t.params["budget"]
        if t.state == state.PRUNED:
            iterations = max(t.intermediate_values, default=0)
        else:
            iterations = round(budget * full_iters)
        value = t.value if t.state == state.COMPLETE else None
        found.append(Trial(t.params["schedule"], budget, t.user_attrs["lr"],
                           int(t.user_attrs.get("seed", 0)), value, iterations))  # fmt: skip
    return found

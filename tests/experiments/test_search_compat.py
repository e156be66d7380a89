"""The search's one private Optuna name (budgeted.experiments.search.compat) still means what it
meant: a trial asked by an earlier process, made a ``Trial`` again, reports and is pruned as the
one ``study.ask()`` returned."""

from __future__ import annotations

import importlib.metadata

import optuna
import pytest

from budgeted.experiments.search.compat import OPTUNA_VERSION, live_trial

pytestmark = pytest.mark.unit


def test_optuna_is_the_version_compat_was_written_for():
    assert importlib.metadata.version("optuna") == OPTUNA_VERSION, (
        "Optuna changed: check budgeted/experiments/search/compat.py against it, then update "
        "OPTUNA_VERSION"
    )


def test_a_trial_of_an_earlier_process_reports_and_is_pruned_like_an_asked_one(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize",
                                pruner=pruner)  # fmt: skip
    for value in (10.0, 20.0):  # two complete trials set the rung's bar
        trial = study.ask()
        trial.report(value, 1)
        assert not trial.should_prune()  # the pruner records the rung's values as it is asked
        study.tell(trial, value)
    asked = study.ask()  # asked here; "an earlier process" loads the study anew
    again = optuna.load_study(study_name="s", storage=storage, pruner=pruner)
    trial = live_trial(again, asked.number)
    assert isinstance(trial, optuna.trial.Trial) and trial.number == asked.number
    trial.report(1.0, 1)  # far below both: pruned at the first rung
    assert trial.should_prune()
    assert again.get_trials()[asked.number].intermediate_values == {1: 1.0}

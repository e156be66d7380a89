"""``budgeted.transformers.BudgetCallback``'s arguments and budget, without a trainer: bad
input is one line; ``import transformers`` inside the package is the library; a missing
transformers is one line naming the extra."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import sys
import types

import pytest

from budgeted._require import MissingFrameworkError
from budgeted.errors import BudgetConfigError
from budgeted.transformers import BudgetCallback, BudgetTrainer, callback

pytestmark = pytest.mark.unit


def test_the_budget_in_steps():
    assert BudgetCallback().steps(1000) == 1000  # the trainer's own length
    assert BudgetCallback(fraction=0.25).steps(1000) == 250  # of the trainer's length
    assert BudgetCallback(fraction=0.1, full_iters=1720).steps(1000) == 172
    assert BudgetCallback(total_iters=300).steps(1000) == 300
    assert (
        BudgetCallback("cosine", warmup_iters=0).describe(90)
        == "cosine over 90 of 90 steps, warmup 0"
    )
    assert (
        BudgetCallback(time="2m").describe(10) == "linear over 120 s (at most 10 steps), warmup 500"
    )


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"fraction": 0.5, "time": 60}, "fraction and time given; allowed: one of"),
        ({"total_iters": 5, "fraction": 0.5}, "total_iters and fraction given"),
        ({"full_iters": 100}, "full_iters without fraction given; allowed: one of total_iters="),
        ({"time": "soon"}, "time budget 'soon' is invalid; allowed: a duration > 0"),
        ({"total_iters": 1.5}, "total_iters"),
        ({"schedule": "nope"}, "nope"),
        ({"on_resume": "maybe"}, "maybe"),
        ({"schedule": "step", "milestones": (0.9, 0.1)}, "milestones"),
    ],
)
def test_bad_arguments_are_one_line(kwargs, words):
    with pytest.raises(ValueError) as bad:
        BudgetCallback(**kwargs)
    assert words in str(bad.value) and len(str(bad.value).splitlines()) == 1


def test_a_budget_longer_than_the_trainer_is_one_line():
    with pytest.raises(BudgetConfigError) as bad:
        BudgetCallback(total_iters=500).steps(400)
    assert str(bad.value) == (
        "BudgetCallback: a budget of 500 steps is longer than the trainer's 400 "
        "(TrainingArguments.max_steps, or num_train_epochs x steps per epoch); allowed: "
        "a trainer of at least 500 steps"
    )


def test_the_package_imports_the_library_not_itself():
    assert callback.Trainer.__module__ == "transformers.trainer"
    assert importlib.import_module("transformers").__file__.endswith("transformers/__init__.py")
    assert BudgetTrainer.__mro__[2].__module__ == "transformers.trainer"


def test_a_missing_transformers_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "transformers" else real(name, *a),
    )
    monkeypatch.delitem(sys.modules, "budgeted.transformers")
    with pytest.raises(MissingFrameworkError) as missing:
        importlib.import_module("budgeted.transformers")
    assert str(missing.value) == (
        "budgeted.transformers needs 'transformers', which is not installed; install it with "
        'pip install "budgeted-training[transformers]"'
    )


def test_a_datasets_folder_standing_in_for_the_library_is_one_line(monkeypatch, tmp_path):
    import transformers.trainer

    from budgeted.transformers import BudgetTrainerMixin, compat

    assert compat.shadowing_datasets_folder() is None  # this environment: no datasets at all
    folder = types.ModuleType("datasets")  # what a folder without __init__.py imports as
    folder.__path__ = [str(tmp_path / "datasets")]
    monkeypatch.setattr(transformers.trainer, "datasets", folder, raising=False)
    assert compat.shadowing_datasets_folder() == str(tmp_path / "datasets")
    with pytest.raises(BudgetConfigError) as bad:
        BudgetTrainerMixin.train(object())
    assert str(bad.value).startswith(f"the folder {tmp_path}/datasets stands in for the datasets")


def test_the_docstring_examples():
    for module in (callback, importlib.import_module("budgeted.transformers.compat")):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__

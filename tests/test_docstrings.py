"""The examples in the framework-free modules' docstrings run and print what they say.

(The adapters' examples run in their own test files, beside their frameworks.)
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import budgeted

pytestmark = pytest.mark.unit

ADAPTERS = (
    "budgeted.detectron2", "budgeted.mmengine", "budgeted.lightning", "budgeted.transformers",
    "budgeted.toys.mmpretrain",
)  # fmt: skip
"""Modules whose examples need their framework: they run in the adapters' own test files."""
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(budgeted.__path__, "budgeted.")
    if not info.name.startswith(ADAPTERS)
)


def test_every_framework_free_module_is_covered():
    layers = {name.split(".")[1] for name in MODULES}
    assert {"schedules", "safety", "runs", "experiments", "toys"} <= layers
    assert {"budgeted.schedules.budget", "budgeted.safety.loading"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"

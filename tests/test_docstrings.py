"""The examples in the framework-free modules' docstrings run and print what they say.

(The adapters' examples run in their own test files, beside their frameworks.)
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import budgeted

MODULES = sorted(
    info.name for info in pkgutil.iter_modules(budgeted.__path__, "budgeted.") if not info.ispkg
)


def test_every_framework_free_module_is_covered():
    assert {"budgeted.core", "budgeted.stats", "budgeted.report", "budgeted.budget"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"

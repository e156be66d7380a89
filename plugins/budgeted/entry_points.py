"""The console scripts ``pip install`` puts on the PATH (setup.py's ``console_scripts``).

Each imports its tool only when it runs, so a script whose framework is not installed says so in
one line (``budgeted-train-net: budgeted.detectron2 needs 'detectron2', which is not installed;
install it with ...``, exit status 1) instead of an import traceback, ``--help`` included.

>>> sorted(SCRIPTS)[:2]
['budgeted-branch', 'budgeted-lazy-train-net']
"""

from __future__ import annotations

import importlib
import sys

from ._require import MissingFrameworkError

__all__ = ["SCRIPTS", "main"]

SCRIPTS: dict[str, tuple[str, str]] = {
    "budgeted-train-net": ("budgeted.detectron2.cli", "run"),
    "budgeted-lazy-train-net": ("budgeted.detectron2.lazy_cli", "run"),
    "budgeted-train-seg": ("budgeted.mmengine.cli", "main"),
    "budgeted-sweep": ("budgeted.sweep", "main"),
    "budgeted-report": ("budgeted.report", "main"),
    "budgeted-branch": ("budgeted.branch", "main"),
    "budgeted-rank": ("budgeted.rank", "main"),
}
"""Console script -> (module, function): the function takes ``sys.argv[1:]`` and returns the
exit status."""


def main(script: str) -> int:
    """Run console script ``script``: import its tool, call it; a missing framework is one line."""
    module, function = SCRIPTS[script]
    try:
        tool = importlib.import_module(module)
    except MissingFrameworkError as err:
        print(f"{script}: {err}", file=sys.stderr)
        return 1
    return getattr(tool, function)()


def train_net() -> int:
    """``budgeted-train-net``: Detectron2's ``tools/train_net.py`` with budgets."""
    return main("budgeted-train-net")


def lazy_train_net() -> int:
    """``budgeted-lazy-train-net``: Detectron2's ``tools/lazyconfig_train_net.py`` with budgets."""
    return main("budgeted-lazy-train-net")


def train_seg() -> int:
    """``budgeted-train-seg``: MMEngine codebases' ``tools/train.py`` with budgets."""
    return main("budgeted-train-seg")


def sweep() -> int:
    """``budgeted-sweep``: a grid of schedules x budgets x LRs x seeds."""
    return main("budgeted-sweep")


def report() -> int:
    """``budgeted-report``: the tables and verdicts of finished sweeps."""
    return main("budgeted-report")


def branch() -> int:
    """``budgeted-branch``: every budget from one run's checkpoints."""
    return main("budgeted-branch")


def rank() -> int:
    """``budgeted-rank``: do small budgets rank schedules as large ones do."""
    return main("budgeted-rank")

"""The console scripts ``pip install`` puts on the PATH (setup.py's ``console_scripts``).

Each imports its tool only when it runs, so a script whose framework is not installed says so in
one line (``budgeted-train-net: budgeted.detectron2 needs 'detectron2', which is not installed;
install it with ...``, exit status 1) instead of an import traceback, ``--help`` included. The
training scripts catch SIGTERM / SIGUSR1 from their first line (a preemption while torch imports
ends the run with status 75, nothing written) and ignore them once the run is over (a late signal
cannot turn a finished run's status into 143); ``tools/train_net.py`` and the other tools are
these same functions.

>>> sorted(SCRIPTS)[:2]
['budgeted-branch', 'budgeted-lazy-train-net']
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from ._require import MissingFrameworkError
from .safety.preemption import PreemptionGuard, ignore_late_signals

__all__ = ["GUARDED_FROM_THE_START", "SCRIPTS", "TRAINING", "main"]

SCRIPTS: dict[str, tuple[str, str]] = {
    "budgeted-train-net": ("budgeted.detectron2.cli", "run"),
    "budgeted-lazy-train-net": ("budgeted.detectron2.lazy_cli", "run"),
    "budgeted-train-seg": ("budgeted.mmengine.cli", "main"),
    "budgeted-sweep": ("budgeted.experiments.sweep", "main"),
    "budgeted-report": ("budgeted.experiments.report", "main"),
    "budgeted-branch": ("budgeted.experiments.branch", "main"),
    "budgeted-rank": ("budgeted.experiments.rank", "main"),
    "budgeted-search": ("budgeted.experiments.search", "main"),
}
"""Console script -> (module, function): the function takes ``sys.argv[1:]`` and returns the
exit status."""

TRAINING = frozenset({"budgeted-train-net", "budgeted-lazy-train-net", "budgeted-train-seg"})
"""The scripts that train: late preemption signals are ignored once their run is over."""

GUARDED_FROM_THE_START = frozenset({"budgeted-train-net", "budgeted-lazy-train-net"})
"""The scripts whose preemption guard this module installs before importing the tool
(``budgeted-train-seg`` installs its own as it starts)."""


def main(script: str) -> int:
    """Run console script ``script``: import its tool, call it; a missing framework is one line."""
    module, function = SCRIPTS[script]
    if script in GUARDED_FROM_THE_START:
        PreemptionGuard().__enter__()  # never left: see ignore_late_signals below
    try:
        try:
            tool = importlib.import_module(module)
        except MissingFrameworkError as err:
            print(f"{script}: {err}", file=sys.stderr)
            return 1
        return getattr(tool, function)()
    finally:
        if script in TRAINING:
            ignore_late_signals()


def _script(name: str, what: str) -> Callable[[], int]:
    """The console-script function of ``name``: ``main(name)``."""

    def script() -> int:
        return main(name)

    script.__doc__ = f"``{name}``: {what}"
    return script


train_net = _script("budgeted-train-net", "Detectron2's ``tools/train_net.py`` with budgets.")
lazy_train_net = _script(
    "budgeted-lazy-train-net", "Detectron2's ``tools/lazyconfig_train_net.py`` with budgets."
)
train_seg = _script("budgeted-train-seg", "MMEngine codebases' ``tools/train.py`` with budgets.")
sweep = _script("budgeted-sweep", "a grid of schedules x budgets x LRs x seeds.")
report = _script("budgeted-report", "the tables and verdicts of finished sweeps.")
branch = _script("budgeted-branch", "every budget from one run's checkpoints.")
rank = _script("budgeted-rank", "do small budgets rank schedules as large ones do.")
search = _script("budgeted-search", "the schedule and base LR to run at one budget.")

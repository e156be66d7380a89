"""``budgeted-search``: the schedule and base LR to run at one budget, for a few runs' compute.

    budgeted-search pytorch --task digits --budget 0.1 --schedules linear cosine \\
        --lr-range 0.01 1 --search-budget 4x --out output/search/digits10

A search is a sweep folder whose cells a method chose one round at a time, each cell a trial of
an Optuna study (docs/search.md). The parts: :mod:`.space` (the LR lattice, the search budget),
:mod:`.ladder` (the budget ladder: the default method, fair to budget-aware schedules),
:mod:`.methods` (``ladder``, ``asha``, ``random``), :mod:`.study` (the Optuna study and its
storage), :mod:`.run` (the rounds, on the sweep's executors), :mod:`.answer` (the answer, its
record and plot), :mod:`.cli`.
"""

from __future__ import annotations

from .cli import main
from .ladder import Ladder
from .methods import METHODS

__all__ = ["METHODS", "Ladder", "main"]

"""tools/paper/search_eval.py: a search's regret is the committed grid's best mean at its target
minus its choice's mean over the grid's seeds (read from the grid where it holds the choice),
its spend a share of the grid's column; docs/search.md's tables are what :func:`tables` makes of
the committed docs/search/*.csv."""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "paper"))
import search_eval  # noqa: E402  # tools/paper/search_eval.py

pytestmark = pytest.mark.unit


def test_regret_and_share_come_from_the_committed_grid(tmp_path):
    grid = {"tasks": {"lr": ["linear"]}}
    answer = {"choice": {"schedule": "linear", "lr": 0.03}, "spent_runs": 3.0, "trials": 11,
              "pruned": 0}  # fmt: skip
    (tmp_path / "search_answer.json").write_text(json.dumps(answer))
    search = {"set": "digits", "task": "lr", "target": 0.1, "method": "ladder",
              "search_seed": 0, "out": tmp_path}  # fmt: skip
    means = search_eval.grid_means("digits")
    row = search_eval.evaluate(grid, tmp_path, search, means)
    best = max(statistics.mean(v) for k, v in means.items() if k[:2] == ("linear", 0.1))
    chosen = statistics.mean(means["linear", 0.1, 0.03])
    assert row["from_grid"] and row["regret"] == pytest.approx(best - chosen, abs=1e-3)
    assert row["grid_runs"] == 12 and row["grid_share"] == pytest.approx(3.0 / 12, abs=1e-4)
    assert row["best"] == "linear @ 0.1"


def test_the_docs_tables_are_those_of_the_committed_rows():
    rows = []
    for path in sorted((REPO / "docs" / "search").glob("*.csv")):
        with path.open() as f:
            rows += list(csv.DictReader(f))
    assert len(rows) == 108, len(rows)
    assert search_eval.tables(rows) in (REPO / "docs" / "search.md").read_text()

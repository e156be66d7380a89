"""The README is for users (issue 31, item 7): at most 200 lines, "use it in your own" code within
its first 60, every relative link to a file that exists; its results are the real-data digits
table (issue 33, item 5), whose figures are those of docs/digits.md's results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
LINES = README.splitlines()


def section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section, up to the next ``## ``."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_short_and_says_how_to_use_it_early() -> None:
    assert len(LINES) <= 200
    (first,) = [i for i, line in enumerate(LINES, 1) if line.startswith("## Use it in your own")]
    assert first <= 60


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local and [link for link in local if not (REPO / link).exists()] == []


def test_the_results_are_the_digits_table_of_docs_digits() -> None:
    """Each row of the README's table (budget, five schedules at their best LR, two verdicts)
    is a row of docs/digits.md's results, figure for figure."""
    results = section(README, "Results")
    assert "tools/digits_grid.sh" in results and "docs/digits.md" in results
    rows = [line for line in results.splitlines() if re.match(r"\| \d+ % \|", line)]
    assert [row.split("|")[1].strip() for row in rows] == ["1 %", "2 %", "5 %", "10 %", "25 %",
                                                           "100 %"]  # fmt: skip
    digits = section((REPO / "docs/digits.md").read_text(), "Results")
    for row in rows:
        assert row in digits

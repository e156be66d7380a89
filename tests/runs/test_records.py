"""budgeted.runs.records: the JSON-lines logs of run folders."""

from __future__ import annotations

import pytest

from budgeted.runs.records import read_json_lines

pytestmark = pytest.mark.unit


def test_a_line_cut_short_by_a_crash_and_non_objects_are_left_out(tmp_path):
    log = tmp_path / "metrics.json"
    log.write_text('{"iteration": 0}\n[1, 2]\n\n{"iteration": 1, "lr": 0.1}\n{"iterat')
    assert read_json_lines(log) == [{"iteration": 0}, {"iteration": 1, "lr": 0.1}]


def test_an_empty_log_has_no_records(tmp_path):
    (tmp_path / "scalars.json").write_text("")
    assert read_json_lines(tmp_path / "scalars.json") == []

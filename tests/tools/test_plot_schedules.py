"""tools/plot_schedules.py: the multiplier table and the Figure-2 style plot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from budgeted import lr_multiplier

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "plot_schedules.py"


@pytest.fixture(scope="module")
def plot_schedules():
    spec = importlib.util.spec_from_file_location("plot_schedules", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_table_rows_are_the_core_multipliers(plot_schedules):
    lines = plot_schedules.multiplier_table(900, 500, points=4).splitlines()
    names = lines[0].split()[1:]
    assert names == [
        "linear",
        "cosine",
        "poly",
        "htd",
        "step",
        "exp",
        "constant",
        "wsd",
        "rex",
        "sgdr",
    ]
    for line in lines[1:]:
        t, *values = line.split()
        expected = [lr_multiplier(name, int(t), 900) for name in names]
        assert [float(v) for v in values] == pytest.approx(expected, abs=5e-5)


def test_main_writes_a_png(plot_schedules, tmp_path, capsys):
    out = tmp_path / "schedules.png"
    plot_schedules.main(["--budgets", "0.01", "0.1", "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "0.1 of 90000 = 9000 iterations" in capsys.readouterr().out


def test_a_budget_shorter_than_the_warmup_is_refused(plot_schedules, tmp_path, capsys):
    with pytest.raises(SystemExit):
        plot_schedules.main(["--budgets", "0.005", "--out", str(tmp_path / "x.png")])
    assert "warmup=500 is not shorter than the budget total=450" in capsys.readouterr().err

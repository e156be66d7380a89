"""The sweep's seams (issue 31): plan / execute / command line, and the sweep's records read by
its own records module, so that the sweep's path never goes through the report."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import budgeted.experiments.sweep as sweep

pytestmark = pytest.mark.unit

SWEEP = Path(sweep.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports (relative imports resolved inside budgeted.experiments)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ["budgeted", "experiments", "sweep"][: 3 - node.level + 1] if node.level else []
            found.add(".".join([*base, *([node.module] if node.module else [])]))
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_the_sweep_imports_nothing_of_the_report():
    found = {
        f"{path.name}: {name}"
        for path in sorted(SWEEP.glob("*.py"))
        for name in _imports(path)
        if "report" in name.split(".")
    }
    assert found == set()


def test_the_sweep_is_split_along_plan_execute_and_command_line():
    assert {p.stem for p in SWEEP.glob("*.py")} == {
        "__init__", "__main__", "cli", "commands", "compat", "cost", "execute", "grid", "local",
        "metrics", "plan", "records",
        "slurm", "slurm_job", "slurm_options", "status", "warm",
    }  # fmt: skip
    for planning in ("plan.py", "grid.py"):
        assert not any("execute" in name or "cli" in name for name in _imports(SWEEP / planning))
    assert not any(name.endswith(".cli") for name in _imports(SWEEP / "execute.py"))
    assert not any(name.endswith(".local") for name in _imports(SWEEP / "execute.py"))


def test_the_report_and_the_old_paths_read_the_same_records():
    import budgeted.experiments.report as report
    from budgeted.experiments.sweep import records

    for name in ("read_record", "load_sweep", "read_final", "run_status", "CellKey", "cell_name"):
        assert getattr(report, name) is getattr(records, name), name
    assert sweep.SWEEP_LOCK == records.SWEEP_LOCK == ".sweep.lock"

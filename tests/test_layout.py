"""The package's layout holds: floors no import runs up, without import cycles, adapters that load
only what they use, modules and functions small enough to read in one sitting, and no framework
internals reached by walking the call stack. (Old import paths: tests/test_public_api.py.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "plugins" / "budgeted"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
NOT_FOR_ADAPTERS = ("toys", "sweep", "report", "plots", "launch", "launcher")
"""What importing an adapter must not load: toy data writers, the sweep, the report, plots and
launchers (module names, or a package on the way to one)."""
STACK_WALKERS = ("_getframe", "f_back", "f_locals", "inspect.stack", "inspect.currentframe")
FLOORS = (
    "errors version _require _legacy config_files optimizers compat",
    "safety/",
    "runs.records toys/",
    "schedules/",
    "runs/",
    "control/",
    "pytorch torch_optimizers trainer_budget",
    "detectron2/ mmengine/ lightning/ transformers/",
    "experiments/",
    "entry_points",
)
"""The package's floors, lowest first: a module imports from a floor below its own, from its own
package, or from a module beside it (``errors`` from ``compat``); packages (``name/``) on one
floor never import each other. A module is on the floor of the longest entry naming it or a
package above it (``runs.records`` on the third, the rest of ``runs/`` on the fifth)."""
FACE = "budgeted"
"""The package face, above every floor and importable from any: it is every module's parent
package, run before any of them (``detectron2/solver.py`` reads ``SCHEDULES`` from it)."""


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (a function-level
    import counts: it is a cycle all the same)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        found |= {c for c in candidates if c in known and c != name}
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                cycles.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


@pytest.mark.unit
def test_no_import_cycles():
    mods = modules()
    graph = {name: imported_modules(name, path, set(mods)) for name, path in mods.items()}
    for name in graph:  # a package re-exporting its own submodules is not a cycle
        graph[name] = {d for d in graph[name] if not d.startswith(name + ".")}
    assert import_cycles(graph) == []


def place(name: str) -> tuple[int, str] | None:
    """The floor of module ``name`` (0: the lowest of :data:`FLOORS`) and the entry that puts it
    there; None for a module on no floor."""
    if name == FACE:
        return len(FLOORS), FACE
    parts = name.split(".")[1:]
    for cut in range(len(parts), 0, -1):
        for level, entries in enumerate(FLOORS):
            for entry in entries.split():
                if entry.rstrip("/") == ".".join(parts[:cut]):
                    return level, entry
    return None


def runs_up(importer: str, imported: str) -> bool:
    """Whether ``importer`` importing ``imported`` goes up a floor, or across to another package
    on its floor (``detectron2/`` to ``mmengine/``)."""
    (low, home), (high, there) = place(importer), place(imported)
    if imported == FACE or high < low or home == there:
        return False
    return high > low or home.endswith("/") or there.endswith("/")


@pytest.mark.unit
def test_no_import_runs_up_a_layer():
    mods = modules()
    assert [name for name in mods if place(name) is None] == []
    upward = {
        (name, imported)
        for name, path in mods.items()
        for imported in imported_modules(name, path, set(mods))
        if runs_up(name, imported)
    }
    assert upward == set()


@pytest.mark.unit
def test_the_floors_see_an_import_up_or_across():
    assert runs_up("budgeted.safety.loading", "budgeted.runs.records")
    assert runs_up("budgeted.detectron2.solver", "budgeted.mmengine.checkpoint")
    assert runs_up("budgeted.runs.records", "budgeted.toys.coco")
    assert not runs_up("budgeted.errors", "budgeted.compat")
    assert not runs_up("budgeted.runs.mmengine", "budgeted.runs.detectron2")
    assert not runs_up("budgeted.detectron2.solver", "budgeted")


@pytest.mark.unit
def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "adapter",
    ["budgeted.detectron2", "budgeted.mmengine", "budgeted.lightning", "budgeted.transformers"],
)
def test_an_adapter_loads_no_toy_sweep_report_plot_or_launcher(adapter):
    code = (
        f"import json, sys, {adapter}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('budgeted'))))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = json.loads(run.stdout)
    assert adapter in loaded
    unwanted = [m for m in loaded if set(m.split(".")) & set(NOT_FOR_ADAPTERS)]
    assert unwanted == [], loaded


@pytest.mark.unit
def test_no_module_over_500_lines_and_no_function_over_80():
    long_modules, long_functions = {}, []
    for name, path in modules().items():
        text = path.read_text()
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            long_modules[name] = lines
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name}: {length}")
    assert long_modules == {}
    assert long_functions == []


@pytest.mark.unit
def test_no_stack_walking():
    """Framework internals are reached through documented routes, never the call stack."""
    found = [
        f"{name}: {walker}"
        for name, path in modules().items()
        for walker in STACK_WALKERS
        if walker in path.read_text()
    ]
    assert found == []

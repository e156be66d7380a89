"""Every public name of the flat package (commit a55f40f, before the layers) still imports from its
old path, and is the same object at its new home.

The names are those the old modules offered (``budgeted.core``, ``budgeted.checkpoints``, ...);
every public name of the adapters' modules (``budgeted.detectron2.*``, ``budgeted.mmengine.*``)
still imports from them (tests/adapters_public_api_a55f40f.json). The new home of the schedule math
is :mod:`budgeted.schedules` and of run safety :mod:`budgeted.safety` (each layer's one import
point); every other old module is an alias of the module :data:`budgeted._legacy.MOVED` names.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import runpy
import sys
from pathlib import Path

import pytest

from budgeted._legacy import MOVED

pytestmark = pytest.mark.unit

PUBLIC_API: dict[str, tuple[str, ...]] = {
    "budgeted": (
        "BUDGET_FRACTIONS",
        "BudgetLR",
        "BudgetMismatchError",
        "BudgetSchedule",
        "BudgetTimeLR",
        "SCHEDULES",
        "__version__",
        "budget_iters",
        "lr_multiplier",
        "on_schedule_registered",
        "register_schedule",
        "schedule_info",
        "schedule_names",
    ),
    "budgeted._require": ("MissingFrameworkError", "require"),
    "budgeted.branch": ("branch_points", "compute", "main"),
    "budgeted.budget": ("budget_iters",),
    "budgeted.checkpoints": (
        "DamagedCheckpointError",
        "NUMPY_GLOBALS",
        "PICKLE_ALLOWED",
        "RestrictedUnpickler",
        "TORCH_ALLOWED",
        "UnsafeCheckpointError",
        "atomic_save",
        "atomic_write",
        "atomic_write_text",
        "check_later_checkpoints_kept",
        "checkpoint_iteration",
        "checkpoint_iterations",
        "is_zip_checkpoint",
        "load_checkpoint",
        "newest_intact_checkpoint",
        "remove_stale_temporaries",
        "save_weights_subset",
    ),
    "budgeted.clock": (
        "DECAYED_PROGRESS",
        "TimeBudget",
        "TimeBudgetReached",
        "TrainingClock",
        "parse_duration",
    ),
    "budgeted.config_files": ("SEARCH_FOLDERS", "config_root", "find_config"),
    "budgeted.core": (
        "BudgetMismatchError",
        "BudgetReplanError",
        "BudgetSchedule",
        "ScheduleInfo",
        "check_params",
        "constant",
        "cosine",
        "exp",
        "full_params",
        "get_schedule",
        "htd",
        "linear",
        "lr_multiplier",
        "name_keys",
        "on_schedule_registered",
        "poly",
        "register_schedule",
        "rex",
        "same_params",
        "schedule_info",
        "schedule_names",
        "schedule_params",
        "step",
        "wsd",
    ),
    "budgeted.entry_points": ("GUARDED_FROM_THE_START", "SCRIPTS", "TRAINING", "main"),
    "budgeted.families": (
        "ConfigFamily",
        "FAMILIES",
        "FRAMEWORKS",
        "I3D",
        "I3D_TOY",
        "MASK_RCNN",
        "MASK_RCNN_TOY",
        "MMDET_MASK_RCNN",
        "MMDET_MASK_RCNN_TOY",
        "PSPNET",
        "PSPNET_TOY",
        "RESNET18_CIFAR10",
        "RESNET18_CIFAR10_TOY",
        "RESNET18_IMAGENET",
        "RESNET18_IMAGENET_TOY",
        "ToyData",
        "budget_tag",
        "family",
        "parse_budget_tag",
    ),
    "budgeted.grad_norm": (
        "first_batches",
        "full_gradient_norm",
        "model_devices",
        "preserved_rng",
        "unwrap_model",
    ),
    "budgeted.locks": ("FolderBusyError", "FolderLock", "unwritable"),
    "budgeted.preemption": (
        "DIVERGED_EXIT_CODE",
        "PREEMPTED_EXIT_CODE",
        "PREEMPTION_SIGNALS",
        "Preempted",
        "PreemptionGuard",
        "UNDECAYED_EXIT_CODE",
        "active_guard",
        "ignore_late_signals",
        "restore_default_signals",
        "signal_name",
    ),
    "budgeted.pytorch": ("BudgetLR", "BudgetMismatchError", "BudgetReplanError", "BudgetTimeLR"),
    "budgeted.rank": ("Architectures", "kendall_tau", "load_architectures", "main", "markdown"),
    "budgeted.records": (
        "CELL_STATUSES",
        "CURVE_KEYS",
        "RecordError",
        "cell_record_problem",
        "curve",
        "non_finite_loss",
        "number",
        "read_json_lines",
    ),
    "budgeted.report": (
        "CELL_FILE",
        "COMPARISONS",
        "CSV_HEADER",
        "Cell",
        "CellKey",
        "Final",
        "Group",
        "MARKED_PLOT_FORMATS",
        "METRICS",
        "PLOT_ENDINGS",
        "PLOT_MARK",
        "RUNS_MODULES",
        "ReportError",
        "SWEEP_FILE",
        "Sweep",
        "best_progress",
        "cell_name",
        "check_outputs",
        "divergence",
        "family_label",
        "family_of",
        "group_sweeps",
        "holds_run",
        "load_sweep",
        "main",
        "markdown",
        "number_text",
        "plot_files",
        "read_final",
        "read_record",
        "run_status",
        "runs_module",
        "write_csv",
        "written_by_report",
    ),
    "budgeted.stats": (
        "Interval",
        "Summary",
        "best_lr",
        "paired_difference",
        "summarize",
        "t_quantile_975",
        "verdict",
    ),
    "budgeted.sweep": (
        "FRAMEWORKS",
        "Plan",
        "RESERVED",
        "SweepError",
        "TRAIN_TOOLS",
        "build_command",
        "committed_configs",
        "main",
        "parse_budget",
    ),
    "budgeted.sweep_plots": ("plot_sweeps",),
    "budgeted.toy_cifar": (
        "BASE_FOLDER",
        "LABEL_NAMES",
        "MAX_TEST",
        "MAX_TRAIN",
        "TOY_MARKER",
        "TOY_ROOT",
        "make_toy_cifar10",
    ),
    "budgeted.toy_coco": (
        "TOY_CATEGORIES",
        "TOY_DATASETS",
        "TOY_SPLITS",
        "datasets_root",
        "make_toy_coco",
        "write_toy_coco",
    ),
    "budgeted.toys": (),
    "budgeted.toys.digits": (
        "CLASSES",
        "DIGITS_ROOT",
        "DigitsSplit",
        "MARKER",
        "MEAN",
        "NUM_IMAGES",
        "SCALE",
        "SIDE",
        "SPLIT_SEED",
        "STD",
        "TRAIN_SIZE",
        "VAL_SIZE",
        "digits_split",
        "load_digits_arrays",
        "stratified_split",
        "upscale",
        "write_digits",
    ),
    "budgeted.version": (),
}
"""Old module -> its public names at a55f40f (the adapters' modules left out)."""

LAYER_HOMES = {
    "budgeted.core": "budgeted.schedules",
    "budgeted.budget": "budgeted.schedules",
    "budgeted.clock": "budgeted.schedules",
    "budgeted.checkpoints": "budgeted.safety",
    "budgeted.preemption": "budgeted.safety",
    "budgeted.locks": "budgeted.safety",
}
"""Old module -> the layer that re-exports its names: the one place to import them from now."""

CASES = [(module, name) for module, names in PUBLIC_API.items() for name in names]


def new_home(module: str) -> str:
    """Where an old module's names live now: its layer's package, else its alias's target."""
    return LAYER_HOMES.get(module) or MOVED.get(module, module)


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_every_old_module_imports(module):
    assert importlib.import_module(module) is not None


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}:{n}" for m, n in CASES])
def test_a_public_name_imports_from_its_old_path_and_is_the_one_at_its_new_home(module, name):
    scope: dict[str, object] = {}
    exec(f"from {module} import {name} as old", scope)  # the statement a user's script holds
    new = getattr(importlib.import_module(new_home(module)), name)
    assert scope["old"] is new


def test_the_layers_import_points_name_what_they_export():
    for layer in ("budgeted.schedules", "budgeted.safety"):
        package = importlib.import_module(layer)
        missing = [name for name in package.__all__ if not hasattr(package, name)]
        assert missing == [], layer


ADAPTERS_API = json.loads((Path(__file__).parent / "adapters_public_api_a55f40f.json").read_text())
"""The public names of every adapter module at commit a55f40f (before the layers)."""


@pytest.mark.parametrize("module", sorted(ADAPTERS_API))
def test_every_public_name_of_an_adapter_module_still_imports_from_it(module):
    imported = importlib.import_module(module)
    missing = [name for name in ADAPTERS_API[module] if not hasattr(imported, name)]
    assert missing == []


def _runs_as_main(module: str) -> bool:
    """Whether ``python -m module`` runs something: a package with a ``__main__``, or a module
    with an ``if __name__ == "__main__":`` block."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations is not None:
        return importlib.util.find_spec(f"{module}.__main__") is not None
    return '__name__ == "__main__"' in Path(spec.origin).read_text()


RUNNABLE = sorted(old for old, new in MOVED.items() if _runs_as_main(new))
"""The old module paths whose new module runs with ``python -m`` (the tools)."""


def _run_as_main(module: str, monkeypatch: pytest.MonkeyPatch, *argv: str) -> object:
    """``python -m module argv...`` in this process (runpy, what ``-m`` runs): its exit code.
    The old name is not imported yet, as in the fresh interpreter ``python -m`` starts (once
    imported, a module's ``__spec__`` is its new name's)."""
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(sys, "argv", [module, *argv])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    return stop.value.code


@pytest.mark.filterwarnings("ignore:'budgeted.experiments.:RuntimeWarning")  # imported before
@pytest.mark.parametrize("old", RUNNABLE)
def test_an_old_tool_path_runs_with_python_m_as_its_new_module_does(old, monkeypatch, capsys):
    """issue 40/2: ``python -m budgeted.sweep`` ran ``_AliasFinder`` with no ``get_code``."""
    assert {"budgeted.sweep", "budgeted.report", "budgeted.rank", "budgeted.branch"} <= set(
        RUNNABLE
    )
    helps = []
    for module in (old, MOVED[old]):
        assert _run_as_main(module, monkeypatch, "--help") == 0
        helps.append(capsys.readouterr().out)
    assert helps[0] == helps[1] and helps[0].startswith("usage: budgeted-")


def test_an_old_path_of_a_package_without_main_says_so_in_one_line(monkeypatch):
    monkeypatch.delitem(sys.modules, "budgeted.core", raising=False)
    monkeypatch.setattr(sys, "argv", ["budgeted.core"])
    with pytest.raises(ImportError) as refused:
        runpy.run_module("budgeted.core", run_name="__main__", alter_sys=True)
    assert str(refused.value) == (
        "No module named budgeted.schedules.__main__; 'budgeted.core' is 'budgeted.schedules' "
        "now, a package that cannot be directly executed"
    )

"""import budgeted.detectron2: registration only, and one line without Detectron2."""

from __future__ import annotations

import subprocess
import sys

import pytest
from d2_testutils import REPO


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )


@pytest.mark.e2e
def test_importing_registers_schedulers_and_no_dataset() -> None:
    out = python(
        "import budgeted.detectron2 as bd2\n"
        "from detectron2.data import DatasetCatalog\n"
        "assert 'BudgetLinear' in bd2.LR_SCHEDULER_REGISTRY\n"
        "assert not [n for n in DatasetCatalog.list() if n.startswith('toy_coco')]\n"
        "bd2.register_toy_coco()\n"
        "assert 'toy_coco_train' in DatasetCatalog.list()\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.e2e
def test_without_detectron2_the_import_fails_in_one_line_naming_the_extra() -> None:
    out = python(
        "import sys\n"
        "sys.modules['detectron2'] = None  # as if it were not installed\n"
        "try:\n"
        "    import budgeted.detectron2\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("\n") == 1
    assert out.stdout.startswith("budgeted.detectron2 needs 'detectron2', which is not installed")
    assert 'pip install "budgeted-training[detectron2]"' in out.stdout


@pytest.mark.e2e
def test_lazy_names_are_the_objects_they_always_were_whatever_was_imported_first() -> None:
    """``launch``, ``register_toy_coco``, ``check_datasets`` and ``FullGradNormHook`` load their
    modules on first use; ``budgeted.detectron2.launch`` stays the function even after the tool
    (which imports the launcher module) was imported first."""
    out = python(
        "import sys, budgeted.detectron2 as bd2\n"
        "assert 'budgeted.detectron2.launcher' not in sys.modules\n"
        "import budgeted.detectron2.cli\n"
        "from budgeted.detectron2 import launch, FullGradNormHook, check_datasets\n"
        "from budgeted.detectron2 import register_toy_coco\n"
        "assert callable(launch) and launch.__module__ == 'budgeted.detectron2.launcher'\n"
        "assert bd2.launch is launch and FullGradNormHook.__name__ == 'FullGradNormHook'\n"
        "assert check_datasets.__module__ == register_toy_coco.__module__\n"
        "from budgeted.detectron2.launch import FAILURE_GRACE_S  # the old module path\n"
        "assert FAILURE_GRACE_S > 0\n"
    )
    assert out.returncode == 0, out.stderr[-2000:]

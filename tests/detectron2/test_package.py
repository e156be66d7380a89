"""import budgeted.detectron2: registration only, and one line without Detectron2."""

from __future__ import annotations

import subprocess
import sys

from d2_testutils import REPO


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False
    )


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

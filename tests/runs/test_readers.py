"""budgeted.runs: the run-folder reader protocol and its registry, the one route by which the
experiments read run folders."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

import budgeted.runs
from budgeted.errors import RecordError
from budgeted.experiments.families import PSPNET_TOY
from budgeted.experiments.sweep.records import holds_run, read_final
from budgeted.runs import RunFolderReader, reader, readers, register_reader

pytestmark = pytest.mark.unit

EXPERIMENTS = Path(budgeted.runs.__file__).resolve().parents[1] / "experiments"


def test_every_framework_of_a_sweep_has_a_reader_that_keeps_the_protocol():
    from budgeted.experiments.sweep.records import METRICS

    assert set(METRICS) <= set(readers())
    for framework in METRICS:
        found = reader(framework)
        assert isinstance(found, RunFolderReader), framework
        assert found.final_metrics("/no/such/run") is None
        assert found.train_curve("/no/such/run") == [] and not found.holds_run("/no/such/run")
    assert reader("detectron2").__name__ == "budgeted.runs.detectron2"
    assert reader("mmengine") is reader("mmseg") is sys.modules["budgeted.runs.mmengine"]


def test_an_unknown_framework_is_one_line_naming_the_known_ones():
    with pytest.raises(RecordError) as err:
        reader("caffe")
    assert str(err.value) == (
        f"no run-folder reader for framework 'caffe'; allowed: {', '.join(readers())}"
    )
    assert {"detectron2", "mmengine", "mmseg", "mmdet", "mmpretrain", "mmaction"} <= set(readers())


def test_a_registered_module_without_the_protocol_is_refused_in_one_line(monkeypatch):
    half = types.ModuleType("half_reader")
    half.holds_run = lambda folder: False
    half.final_metrics = lambda folder: None
    monkeypatch.setitem(sys.modules, "half_reader", half)
    monkeypatch.setitem(budgeted.runs._READERS, "half", "half_reader")
    with pytest.raises(RecordError, match=r"^half_reader is not a run-folder reader \(no "
                       r"train_curve, evaluations\); allowed: a module with"):  # fmt: skip
        reader("half")


def test_the_experiments_read_run_folders_through_the_registered_reader(monkeypatch, tmp_path):
    """A reader registered for a framework is the one the sweep's records ask: a third framework
    needs one module and one registration, no change in the experiments."""
    asked = []

    class Reader:
        def holds_run(self, folder):
            asked.append(("holds_run", Path(folder)))
            return True

        def final_metrics(self, folder):
            asked.append(("final_metrics", Path(folder)))
            return {"mIoU": 41.5}

        def train_curve(self, folder):
            return [{"iteration": 1.0, "loss": 2.0}]

        def evaluations(self, folder):
            return []

    assert isinstance(Reader(), RunFolderReader)
    monkeypatch.setitem(budgeted.runs._READERS, "mmseg", "unused")
    register_reader("mmseg", Reader())
    final = read_final(PSPNET_TOY, 0.05, tmp_path)
    assert final is not None and final.metrics == {"mIoU": 41.5}
    assert final.iters == PSPNET_TOY.iters(0.05)
    assert holds_run("mmseg", tmp_path)
    assert asked == [("final_metrics", tmp_path), ("holds_run", tmp_path)]


def test_the_experiments_import_no_run_folder_module_by_name():
    """Only budgeted.runs (the protocol and registry) and budgeted.runs.records (the
    framework-free log helpers) are imported by the experiments."""
    by_name = ("budgeted.runs.detectron2", "budgeted.runs.mmengine")
    kept = EXPERIMENTS / "report" / "__init__.py"  # RUNS_MODULES, kept for old callers
    found = []
    for path in sorted(EXPERIMENTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
            if "runs" in module and module.split(".")[-1] in ("detectron2", "mmengine"):
                found.append(f"{path.name}: {module}")
            named = isinstance(node, ast.Constant) and node.value in by_name
            if named and path != kept:
                found.append(f"{path.name}: {node.value!r}")
    assert found == []


@pytest.fixture
def register_mine():
    """Registers a reader as framework ``mine`` for one test."""
    yield lambda found: register_reader("mine", found)
    budgeted.runs._READERS.pop("mine", None)


def _script_reader(checkpoint: Path) -> types.SimpleNamespace:
    """A reader of a user's own framework whose runs keep one checkpoint, ``last.pth``."""
    from budgeted.runs import pytorch

    return types.SimpleNamespace(
        holds_run=pytorch.holds_run, final_metrics=pytorch.final_metrics,
        train_curve=pytorch.train_curve, evaluations=pytorch.evaluations,
        resume_checkpoint=lambda folder: checkpoint if checkpoint.exists() else None,
        saved_schedulers=pytorch.saved_schedulers,
    )  # fmt: skip


def test_saved_budget_reads_the_budget_a_scheduler_saved_through_the_reader(
    tmp_path, register_mine
):
    import torch

    from budgeted.pytorch import BudgetLR
    from budgeted.schedules import BudgetSchedule

    path = tmp_path / "last.pth"
    register_mine(_script_reader(path))
    assert budgeted.runs.saved_budget("mine", tmp_path) is None  # nothing saved yet
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    scheduler = BudgetLR(optimizer, "cosine", total_iters=90, warmup_iters=10)
    torch.save({"scheduler": scheduler.state_dict()}, path)
    found, saved = budgeted.runs.saved_budget("mine", tmp_path)
    assert found == str(path)
    assert BudgetSchedule.from_state(saved["budget"]) == BudgetSchedule("cosine", 90, 10)
    torch.save({"scheduler": {"last_epoch": 3}}, path)  # a scheduler that is not budget-aware
    assert budgeted.runs.saved_budget("mine", tmp_path) == (str(path), None)


def test_saved_budget_never_runs_a_checkpoint(tmp_path, register_mine):
    import pickle

    from budgeted.errors import UnsafeCheckpointError

    path = tmp_path / "last.pth"
    register_mine(_script_reader(path))
    path.write_bytes(pickle.dumps(types.SimpleNamespace(x=1)))
    with pytest.raises(UnsafeCheckpointError, match=r"last\.pth"):
        budgeted.runs.saved_budget("mine", tmp_path)


def test_saved_budget_reads_nothing_outside_the_run_folder(tmp_path, register_mine):
    import torch

    outside = tmp_path / "elsewhere.pth"
    torch.save({"scheduler": {"budget": {"total": 9}}}, outside)
    run = tmp_path / "run"
    run.mkdir()
    register_mine(_script_reader(outside))
    with pytest.raises(RecordError, match="outside the run folder"):
        budgeted.runs.saved_budget("mine", run)
    (run / "last.pth").symlink_to(outside)
    register_mine(_script_reader(run / "last.pth"))
    with pytest.raises(RecordError, match="through a link"):
        budgeted.runs.saved_budget("mine", run)

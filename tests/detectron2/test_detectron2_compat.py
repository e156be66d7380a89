"""budgeted.detectron2.compat: each private framework name it reads or sets is still there, of
the kind it was written for (Detectron2 0.6, fvcore 0.1.5). A failure here means the
framework changed: the function of compat.py it names needs a new route."""

from __future__ import annotations

import inspect

import pytest
import torch
from d2_testutils import TINY, TOY_CONFIG
from detectron2.engine import DefaultTrainer, SimpleTrainer, defaults, hooks
from detectron2.utils import comm
from detectron2.utils.events import CommonMetricPrinter
from fvcore.common.checkpoint import Checkpointer

from budgeted.detectron2 import BudgetTrainer, SafeCheckpointer, compat, load_config


@pytest.mark.unit
def test_the_versions_are_the_installed_ones() -> None:
    from importlib.metadata import version

    import detectron2
    import fvcore  # noqa: F401

    assert detectron2.__version__ == compat.DETECTRON2_VERSION
    assert version("fvcore") == compat.FVCORE_VERSION


@pytest.mark.unit
def test_compiled_ops_are_detectron2s_private_extension_module() -> None:
    assert compat.has_compiled_ops() in (True, False)
    assert "from detectron2 import _C" in inspect.getsource(compat.has_compiled_ops)


@pytest.mark.integration
def test_a_trainers_hooks_are_its_live_private_list() -> None:
    model = torch.nn.Linear(1, 1)
    trainer = SimpleTrainer(model, [], torch.optim.SGD(model.parameters(), lr=0.1))
    hook = hooks.IterationTimer()
    trainer.register_hooks([hook])
    assert compat.trainer_hooks(trainer) is trainer._hooks and trainer._hooks == [hook]
    assert compat.trainer_hooks(object()) == []


@pytest.mark.unit
def test_a_periodic_writers_writers_and_period() -> None:
    printer = CommonMetricPrinter(max_iter=10)
    hook = hooks.PeriodicWriter([printer], period=7)
    assert compat.writers_of(hook) == [printer] and compat.writer_period(hook) == 7
    assert "_last_write" in vars(printer) and printer._last_write is None  # before any write
    printer._last_write = (3, 1.0)
    compat.forget_last_write(printer)
    assert printer._last_write is None
    source = inspect.getsource(CommonMetricPrinter._get_eta)
    assert "self._last_write" in source  # its ETA estimate reads it


@pytest.mark.unit
def test_a_best_checkpointers_checkpointer_is_private_and_replaced() -> None:
    params = inspect.signature(hooks.BestCheckpointer.__init__).parameters
    assert "checkpointer" in params
    assert "self._checkpointer = checkpointer" in inspect.getsource(hooks.BestCheckpointer)

    class Hook:
        def __init__(self, old: object) -> None:
            self._checkpointer = old
            self.checkpointer = old

    old, new = object(), object()
    hook = Hook(old)
    compat.replace_checkpointer(hook, old, new)
    assert hook._checkpointer is new and hook.checkpointer is new


@pytest.mark.unit
def test_the_local_process_group_is_a_private_module_global_of_comm() -> None:
    assert "_LOCAL_PROCESS_GROUP" in vars(comm) and comm._LOCAL_PROCESS_GROUP is None
    assert "_LOCAL_PROCESS_GROUP" in inspect.getsource(comm.get_local_rank)
    sentinel = object()
    compat.set_local_process_group(sentinel)
    try:
        assert comm._LOCAL_PROCESS_GROUP is sentinel
    finally:
        comm._LOCAL_PROCESS_GROUP = None


@pytest.mark.unit
def test_default_trainer_wraps_its_model_with_the_module_level_create_ddp_model() -> None:
    init = inspect.getsource(DefaultTrainer.__init__)
    assert "create_ddp_model(model, broadcast_buffers=False)" in init
    assert "device_ids" in inspect.getsource(defaults.create_ddp_model)
    stock = defaults.create_ddp_model
    with compat.ddp_without_device_ids():
        assert defaults.create_ddp_model.keywords == {"device_ids": None}
    assert defaults.create_ddp_model is stock


@pytest.mark.unit
def test_default_trainer_holds_its_inner_trainer_and_last_eval_results_privately() -> None:
    assert "self._trainer = " in inspect.getsource(DefaultTrainer.__init__)
    assert "self._last_eval_results = " in inspect.getsource(DefaultTrainer.build_hooks)
    assert "_last_eval_results" in inspect.getsource(DefaultTrainer.train)


@pytest.mark.integration
def test_a_budget_trainer_gives_its_inner_trainer_hooks_and_writers(toy_root, tmp_path) -> None:
    cfg = load_config(TOY_CONFIG, [*TINY, "OUTPUT_DIR", str(tmp_path)])
    trainer = BudgetTrainer(cfg)
    inner = compat.inner_trainer(trainer)
    assert isinstance(inner, SimpleTrainer) and inner.optimizer is trainer.optimizer
    writers = [h for h in compat.trainer_hooks(trainer) if isinstance(h, hooks.PeriodicWriter)]
    assert compat.writer_period(writers[0]) == cfg.SOLVER.BUDGET.WRITER_PERIOD
    assert compat.last_eval_results(trainer) is None


@pytest.mark.unit
def test_a_checkpointer_reads_its_files_with_its_private_load_file() -> None:
    assert list(inspect.signature(Checkpointer._load_file).parameters) == ["self", "f"]
    assert "self._load_file(" in inspect.getsource(Checkpointer.load)
    assert SafeCheckpointer._load_file is SafeCheckpointer.read_file

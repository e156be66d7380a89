"""The resume route (:mod:`budgeted.control.resume`) over each framework's accessor: the saved
base LRs a checkpoint holds (``saved_base_lrs``) against the config's, refused in one line in
the words each tool said before the route was one; MMEngine's checkpoints loaded by the reader
with the globals it declares by name."""

from __future__ import annotations

import pickle

import pytest
import torch

from budgeted.control.resume import ResumeCheck, configured_lrs
from budgeted.errors import BudgetMismatchError, BudgetResumeError
from budgeted.runs import SavedLRs
from budgeted.runs import detectron2 as d2
from budgeted.runs import mmengine as mm
from budgeted.schedules.base_lrs import ConfiguredLRs

D2_PATH = "out/model_0000004.pth"
D2_CHECK = ResumeCheck(
    D2_PATH,
    f"--resume-from {D2_PATH!r}",
    f"start a new run from its weights: MODEL.WEIGHTS {D2_PATH}",
)
D2_PLANNED = ConfiguredLRs([0.02, 0.02], "SOLVER.BASE_LR", 0.02)
MM_PATH = "w/iter_4.pth"
MM_CHECK = ResumeCheck(
    MM_PATH,
    f"cannot resume from {MM_PATH}",
    f"start a new run from its weights with --cfg-options load_from={MM_PATH} (without --resume)",
)
MM_PLANNED = {  # (optimizer, scheduler's view or the optimizer's own groups) -> the config's LRs
    (None, True): ConfiguredLRs([0.01, 0.01], "optim_wrapper.optimizer.lr", 0.01),
    (None, False): ConfiguredLRs([0.01], "optim_wrapper.optimizer.lr", 0.01),
    ("head", True): ConfiguredLRs([0.1], "optim_wrapper.head.optimizer.lr", 0.1),
    ("head", False): ConfiguredLRs([0.1], "optim_wrapper.head.optimizer.lr", 0.1),
}
SAME = (
    "resuming it would train every remaining iteration at other LRs than the run it continues "
    "(the file was edited, or the config's LR changed since)"
)


def mm_planned(record: SavedLRs) -> ConfiguredLRs | None:
    return MM_PLANNED.get((record.group, record.where == "base_values"))


@pytest.mark.unit
def test_a_detectron2_checkpoint_of_other_base_lrs_is_refused_in_detectron2s_words():
    saved = {
        "trainer": {"hooks": {"LRScheduler": {"base_lrs": [0.02, 0.04]}}},
        "optimizer": {"param_groups": [{"initial_lr": 0.02}, {"initial_lr": 0.02}]},
    }
    records = d2.saved_base_lrs(saved)
    assert [r.where for r in records] == [
        "the LR scheduler's base_lrs",
        "the optimizer param groups' initial_lr",
    ]
    with pytest.raises(BudgetResumeError) as err:
        D2_CHECK.base_lrs(records, lambda _: D2_PLANNED, BudgetResumeError)
    assert str(err.value) == (
        f"--resume-from {D2_PATH!r} has base LR 0.04 in param group 1 of 2 (the LR scheduler's "
        f"base_lrs), where the config gives 0.02 (SOLVER.BASE_LR=0.02): {SAME}; the groups' base "
        "LRs are not one multiple of the config's (the file was edited); resume from another "
        f"checkpoint, or start a new run from its weights: MODEL.WEIGHTS {D2_PATH}"
    )
    with pytest.raises(BudgetResumeError) as err:
        D2_CHECK.base_lrs(
            d2.saved_base_lrs({"optimizer": {"param_groups": [{"initial_lr": 0.03}]}}),
            lambda _: D2_PLANNED,
            BudgetResumeError,
        )
    assert str(err.value) == (
        f"--resume-from {D2_PATH!r} holds base LRs for 1 param groups (the optimizer param "
        "groups' initial_lr) where the config builds 2 param groups: it is not a checkpoint of "
        f"this model and optimizer; start a new run from its weights: MODEL.WEIGHTS {D2_PATH}"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("saved", "line"),
    [
        (
            {"param_schedulers": [{"base_values": [0.01, 0.02], "param_name": "lr"}]},
            "its param_scheduler[0] has base LR 0.02 in param group 1 of 2 (base_values), where "
            f"the config gives 0.01 (optim_wrapper.optimizer.lr=0.01): {SAME}; the groups' base "
            "LRs are not one multiple of the config's (the file was edited); resume from another "
            "checkpoint, or start a new run",
        ),
        (
            {"optimizer": {"param_groups": [{"lr": 0.03}]}},
            "its optimizer has base LR 0.03 in param group 0 of 1 (param groups' lr), where the "
            f"config gives 0.01 (optim_wrapper.optimizer.lr=0.01): {SAME}; every group's base LR "
            "is 3 x the config's, as if the run was planned with optim_wrapper.optimizer.lr=0.03: "
            "resume with that, or start a new run",
        ),
        (
            {
                "optimizer": {"head": {"param_groups": [{"initial_lr": 0.2}]}},
                "param_schedulers": {"head": [{"base_values": [0.1]}]},
            },
            "its optimizer['head'] has base LR 0.2 in param group 0 of 1 (param groups' "
            "initial_lr), where the config gives 0.1 (optim_wrapper.head.optimizer.lr=0.1): "
            f"{SAME}; every group's base LR is 2 x the config's, as if the run was planned with "
            "optim_wrapper.head.optimizer.lr=0.2: resume with that, or start a new run",
        ),
    ],
)
def test_an_mmengine_checkpoint_of_other_base_lrs_is_refused_in_mmengines_words(saved, line):
    with pytest.raises(BudgetMismatchError) as err:
        MM_CHECK.base_lrs(mm.saved_base_lrs(saved), mm_planned)
    assert str(err.value) == (
        f"cannot resume from {MM_PATH}: {line} from its weights with --cfg-options "
        f"load_from={MM_PATH} (without --resume)"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "saved",
    [None, [], {"trainer": ["junk"]}, {"optimizer": "junk"}, {"optimizer": {"x": 1}},
     {"param_schedulers": "junk", "optimizer": {"param_groups": ["junk"]}}],
)  # fmt: skip
def test_untrusted_checkpoints_that_hold_no_base_lrs_have_no_records(saved):
    assert d2.saved_base_lrs(saved) == [] and mm.saved_base_lrs(saved) == []


@pytest.mark.unit
def test_the_config_lrs_are_built_without_weights_and_none_where_they_cannot_be():
    def build() -> torch.optim.Optimizer:
        layer = torch.nn.Linear(2, 1)
        return torch.optim.SGD([{"params": [layer.weight]}, {"params": [layer.bias], "lr": 0.2}],
                               lr=0.1)  # fmt: skip

    assert configured_lrs(build, "optimizer.lr", 0.1) == ([0.1, 0.2], "optimizer.lr", 0.1)
    assert configured_lrs(build, "optimizer.lr", "${lr}").value is None

    def broken() -> torch.optim.Optimizer:
        raise RuntimeError("needs a GPU")

    assert configured_lrs(broken, "optimizer.lr", 0.1) is None


@pytest.mark.unit
def test_the_mmengine_reader_loads_its_checkpoints_with_the_globals_it_names(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer

    path = tmp_path / "iter_4.pth"
    buffer = HistoryBuffer()
    buffer.update(1.0)
    buffer.update(2.0)
    torch.save({"meta": {"iter": 4}, "message_hub": {"loss": buffer}}, path)
    loaded = mm.load_checkpoint(path)
    assert loaded["meta"] == {"iter": 4} and loaded["message_hub"]["loss"].mean() == 1.5
    assert sorted(mm.extra_globals()) == sorted(mm.EXTRA_GLOBALS)
    assert mm.history_buffer_getattr(HistoryBuffer, "mean") is HistoryBuffer.mean
    with pytest.raises(pickle.UnpicklingError, match="refused getattr"):
        mm.history_buffer_getattr(HistoryBuffer, "update")

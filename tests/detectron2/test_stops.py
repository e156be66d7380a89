"""budgeted.detectron2.stops and .output_dir on their own: the checks on a resumed checkpoint's
position (an untrusted file: any shape), a full disk seen through torch's error, and the
modules' examples. The tools' behaviour is tested through them in test_untrusted_files.py,
test_preempted_training.py and test_time_budget.py."""

from __future__ import annotations

import doctest
import errno

import pytest

from budgeted.detectron2 import output_dir, stops
from budgeted.detectron2.stops import check_position, is_disk_full

pytestmark = pytest.mark.unit

HINT = "MODEL.WEIGHTS {path}"


def checkpoint(iteration=3, top=3, last_epoch=4, **scheduler):
    state = {"last_epoch": last_epoch, **scheduler}
    return {"model": {}, "iteration": top,
            "trainer": {"iteration": iteration, "hooks": {"LRScheduler": state}}}  # fmt: skip


@pytest.mark.parametrize("module", [stops, output_dir])
def test_the_examples_in_the_docstrings_run(module) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_a_consistent_checkpoint_and_an_earlier_deadline_final_are_resumable() -> None:
    check_position(checkpoint(), "c.pth", what="--resume-from", weights_hint=HINT)
    # a time budget's model_final.pth as saved before: the trainer one iteration ahead
    final = checkpoint(iteration=5, top=4, last_epoch=5, time_budget={"seconds": 6.0},
                       clock={"elapsed": 6.2})  # fmt: skip
    check_position(final, "f.pth", what="--resume-from", weights_hint=HINT)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"model": {}}, "holds weights only"),
        ({"model": {}, "trainer": {"iteration": "3"}}, "holds weights only"),
        (checkpoint(last_epoch=15), "LR scheduler has stepped 15 times"),
        (checkpoint(iteration=6, top=6), "its iteration is 6, its trainer's 6"),
        (checkpoint(top="x"), "its iteration is 'x', its trainer's 3"),
        # not spent: no earlier deadline final
        (checkpoint(iteration=5, top=4, last_epoch=5, time_budget={"seconds": 60.0},
                    clock={"elapsed": 6.2}), "its iteration is 4, its trainer's 5"),
    ],
)  # fmt: skip
def test_a_checkpoint_that_is_no_resumable_state_is_one_line(data, expected) -> None:
    with pytest.raises(ValueError) as err:
        check_position(data, "c.pth", what="--resume-from", weights_hint=HINT)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_any_shape_of_trainer_state_is_checked_without_a_traceback() -> None:
    odd = {"model": {}, "iteration": 3, "trainer": {"iteration": 3, "hooks": ["LRScheduler"]}}
    check_position(odd, "c.pth", what="--resume", weights_hint=HINT)  # nothing to compare
    odd["trainer"]["hooks"] = {"LRScheduler": {"time_budget": "x", "clock": 5}}
    check_position(odd, "c.pth", what="--resume", weights_hint=HINT)


def test_a_full_disk_is_recognised_behind_torchs_runtime_error() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            # as torch.save raises it: the OSError only as the context
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")  # noqa: B904
    except RuntimeError as err:
        assert is_disk_full(err)
    assert not is_disk_full(RuntimeError("unexpected pos")) and not is_disk_full(OSError(5, "x"))

"""The rules of a scheduler state read from a checkpoint (budgeted.schedules.state), torch-free."""

from __future__ import annotations

import numpy as np
import pytest

from budgeted.errors import BudgetResumeError
from budgeted.schedules.state import ELAPSED, STATE_FIX, STEPS, base_values, check_state

pytestmark = pytest.mark.unit

RULES = {"last_epoch": STEPS, "base_lrs": base_values(2), "clock.elapsed": ELAPSED}


class Scalar:
    """A one-element array, as torch's 0-d tensors are: ``.item()`` gives the number."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


def test_a_state_a_run_writes_passes_numpy_and_0d_values_included():
    check_state({"last_epoch": np.int64(3), "base_lrs": [0.1, Scalar(0.0)],
                 "clock": {"elapsed": np.float64(2.5)}}, RULES, owner="S")  # fmt: skip


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ([1, 2], "is a list; allowed: the dict S.state_dict() writes"),
        ({5: 1}, "has a key 5, not a name; allowed: the keys S.state_dict() writes"),
        ({"__class__": 1}, "has a key '__class__', which would replace S.__class__; allowed: the "
         "keys S.state_dict() writes"),
        ({"last_epoch": True, "base_lrs": [0.1, 0.1], "clock": {"elapsed": 0}}, "has "
         "last_epoch=True; allowed: an integer >= 0 (the steps taken)"),
        ({"last_epoch": 1, "base_lrs": [0.1, Scalar(float("inf"))], "clock": {"elapsed": 0}},
         "has base_lrs=[0.1, "),
        ({"last_epoch": 1, "base_lrs": [0.1, 0.1], "clock": 7}, "has no clock.elapsed; allowed: "
         "a finite number >= 0 (the training seconds spent)"),
    ],
)  # fmt: skip
def test_each_broken_rule_is_one_line_naming_the_key(state, said):
    with pytest.raises(BudgetResumeError) as err:
        check_state(state, RULES, owner="S")
    line = str(err.value)
    assert line.startswith(f"cannot resume: the checkpoint's S state {said}")
    assert line.endswith(f"; {STATE_FIX}") and "\n" not in line


def test_a_reserved_name_and_an_optional_key_are_checked_only_where_given():
    optional = {"_step_count": STEPS}
    good = {"last_epoch": 1, "base_lrs": [0.1, 0.1], "clock": {"elapsed": 0}}
    check_state(good, RULES, owner="S", optional=optional, reserved={"step"})
    with pytest.raises(BudgetResumeError, match=r"has _step_count=-1; allowed: an integer >= 0"):
        check_state({**good, "_step_count": -1}, RULES, owner="S", optional=optional)
    with pytest.raises(BudgetResumeError, match=r"has a key 'step', which would replace S\.step"):
        check_state({**good, "step": 1}, RULES, owner="S", reserved={"step"})

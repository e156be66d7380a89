"""Fixtures shared by every test folder."""

from __future__ import annotations

import pytest

import budgeted
from budgeted.core import schedule_names

TEST_SCHEDULE = "sqrt"
"""A schedule registered by the tests (not built in): it must reach every adapter by itself."""


def _sqrt_decay(p: float, floor: float = 0.0) -> float:
    """``floor + (1 - floor) sqrt(1 - p)``."""
    return floor + (1.0 - floor) * (1.0 - p) ** 0.5


@pytest.fixture(scope="session")
def sqrt_schedule() -> str:
    """Register ``sqrt`` (parameter ``floor`` in [0, 1)) once per test session; its name."""
    if TEST_SCHEDULE not in schedule_names():
        budgeted.register_schedule(
            TEST_SCHEDULE,
            rules={"floor": (lambda v: isinstance(v, float) and 0 <= v < 1, "a number in [0, 1)")},
        )(_sqrt_decay)
    return TEST_SCHEDULE

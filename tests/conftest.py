"""Fixtures shared by every test folder."""

from __future__ import annotations

import logging
import os
from collections import Counter

import pytest

import budgeted
from budgeted.schedules.core import schedule_names


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``make test`` runs two workers), one compute thread per worker and
    per process it starts: the toy models gain nothing from a second thread, and two workers
    with torch's default two threads each oversubscribe two cores (measured: 4x slower)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = "1"
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadfile``: a worker takes the next whole file when it is
    nearly done): the longest files first and the quick ones last, so that the two workers end
    together, not one of them on a long file alone. tests/tools/ first (whole sweeps: the
    longest files, with few tests), then files by their number of ``slow`` tests (real
    trainers), most first; file order among equals.

    Measured (2026-11-27, 812 tests, this 2-core machine): with tests/tools/ first and the rest
    in file order the workers were busy 1043 s and 894 s (test_snippets.py, 165 s, ran last,
    alone); this order, replayed on the same per-file times, gives 962 s and 975 s.
    """
    if "PYTEST_XDIST_WORKER" in os.environ:
        slow_tests = Counter(item.path for item in items if item.get_closest_marker("slow"))
        items.sort(
            key=lambda item: (not item.nodeid.startswith("tests/tools/"), -slow_tests[item.path])
        )  # stable: file order among equals, and each file's tests stay in order


@pytest.fixture(autouse=True)
def _drop_log_handlers_on_closed_streams():
    """After each test: drop logging handlers whose stream pytest has closed. A framework
    logger set up first inside a test that captured output (``capsys``/``capfd``) keeps writing
    to that test's closed stream, and every later message on it prints a "Logging error"
    traceback to the then-current stderr (seen when test files run in another order)."""
    yield
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in list(getattr(logger, "handlers", ())):
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and getattr(stream, "closed", False):
                logger.removeHandler(handler)


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

"""Fixtures shared by every test folder."""

from __future__ import annotations

import logging
import os

import pytest

import budgeted
from budgeted.core import schedule_names


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
    """Under pytest-xdist: tests/tools/ first (whole sweeps: the longest files, with few tests),
    then the rest in file order, so that the two workers do not end on one long file alone."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(key=lambda item: not item.nodeid.startswith("tests/tools/"))  # stable


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

"""Fixtures shared by every test folder."""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Callable

import pytest
import tiers

import budgeted
from budgeted.schedules import schedule_names


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (``make test`` runs three workers), one compute thread per worker and
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
    together, not one of them on a long file alone: files by their number of ``e2e`` tests
    (subprocesses: seconds to minutes each), then of ``integration`` tests, most first; file
    order among equals.
    """
    if "PYTEST_XDIST_WORKER" in os.environ:
        e2e = Counter(item.path for item in items if item.get_closest_marker("e2e"))
        integration = Counter(item.path for item in items if item.get_closest_marker("integration"))
        items.sort(key=lambda item: (-e2e[item.path], -integration[item.path]))
        # stable: file order among equals, and each file's tests stay in order


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


VARIANTS = {  # (schedule, params) -> its multiplier m(p), written out from the formulas
    ("wsd", "linear"): lambda p: min(1.0, (1 - p) / 0.25),
    ("wsd", "sqrt"): lambda p: 1.0 if p <= 0.75 else 1 - math.sqrt((p - 0.75) / 0.25),
    ("wsd", "cosine"): lambda p: (
        1.0 if p <= 0.75 else (1 + math.cos(math.pi * (p - 0.75) / 0.25)) / 2
    ),
    ("sgdr", 0): lambda p: (1 + math.cos(math.pi * p)) / 2,
    ("sgdr", 2): lambda p: 0.0 if p >= 1 else (1 + math.cos(math.pi * (3 * p % 1))) / 2,
}


@pytest.fixture(params=sorted(VARIANTS, key=str), ids=lambda v: f"{v[0]}-{v[1]}")
def schedule_variant(request) -> tuple[str, dict, Callable[[float], float]]:
    """Each cooldown shape of ``wsd`` (``cooldown=0.25``) and ``sgdr`` with 0 and 2 restarts: (the
    schedule, its parameters, the formula of its multiplier over the progress ``p``)."""
    schedule, value = request.param
    params = {"cooldown": 0.25, "decay": value} if schedule == "wsd" else {"restarts": value}
    return schedule, params, VARIANTS[request.param]


# --- the test tiers (tests/tiers.py): one marker per test, checked while it runs -------------

tiers.install()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test carries exactly one tier marker (unit, integration, e2e)."""
    for item in session.items:
        tiers.tier_of(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """Count from the start of the setup: fixtures built for this test count as its own."""
    tiers.STARTED.clear()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Fail a test that did what its tier rules out (a process from a unit test, ...)."""
    result = yield
    problem = tiers.problem(tiers.tier_of(item))
    if problem:
        pytest.fail(problem, pytrace=False)
    return result

"""One torch thread in the in-process Trainer tests (the toy model gains nothing from a second,
and two threads on two shared cores run 20x slower under load)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

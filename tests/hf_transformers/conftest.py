"""One torch thread in the in-process Trainer tests (the toy model gains nothing from a second,
and two threads on two shared cores run 20x slower under load), and no torch.distributed
variables: a test of another framework run earlier in the same worker may leave ``LOCAL_RANK``
and the like in ``os.environ`` (MMEngine's runner sets them), and the HF Trainer then starts
``torch.distributed`` (a user's one-process script has none)."""

from __future__ import annotations

import pytest
import torch

DISTRIBUTED = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
               "MASTER_PORT")  # fmt: skip


@pytest.fixture(autouse=True)
def _one_thread_one_process(monkeypatch):
    for name in DISTRIBUTED:
        monkeypatch.delenv(name, raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

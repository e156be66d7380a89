"""budgeted.safety.locks: one process at a time in a folder, a dead holder's lock taken over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from budgeted.safety.locks import FolderBusyError, FolderLock

pytestmark = pytest.mark.e2e

BUSY = "{folder} is in use: {holder} holds {lock}"
HOLD = (
    "import sys, time; from budgeted.safety.locks import FolderLock; "
    "FolderLock(sys.argv[1], '.t.lock', '').acquire(); print('held', flush=True); "
    "sys.stdin.read()"
)


def test_check_writes_nothing_and_a_live_holder_is_named(tmp_path: Path):
    FolderLock(tmp_path / "new", ".t.lock", BUSY).check()
    assert not (tmp_path / "new").exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "held\n"
        for step in ("check", "acquire"):
            with pytest.raises(FolderBusyError) as err:
                getattr(FolderLock(tmp_path, ".t.lock", BUSY), step)()
            assert str(err.value) == (
                f"{tmp_path} is in use: pid {holder.pid} holds {tmp_path / '.t.lock'}"
            )
    finally:
        holder.communicate("")  # the holder ends, and its lock with it
    with FolderLock(tmp_path, ".t.lock", BUSY) as lock:  # a dead holder's lock is taken over
        assert lock.held and (tmp_path / ".t.lock").read_text().strip().isdigit()
    assert not lock.held

"""budgeted.control.folder: the one output-folder claim of both tools, in each tool's words.

Every line is compared with the literal line the tools printed before the claim moved here
(Detectron2's ``preflight.py``/``cli.py``, MMEngine's ``input_checks.py``/``cli.py``,
``runs/mmengine.py``); a refusal writes nothing (the sha256 of every file unchanged, none added).
The lock holder is a second lock of this process (``flock`` locks an open file, not a process).
"""

from __future__ import annotations

import doctest
import hashlib
import os
from pathlib import Path

import pytest

from budgeted.control import folder as folder_module
from budgeted.control.folder import OutputFolder
from budgeted.errors import FolderBusyError
from budgeted.runs import detectron2, mmengine
from budgeted.safety.locks import FolderLock

pytestmark = pytest.mark.unit

TORN = ".model_0000009.pth.tmp-0123abcd"
"""A temporary file a killed checkpoint write leaves (``atomic_write``'s name)."""


def digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def d2(path: Path, key: str = "OUTPUT_DIR") -> OutputFolder:
    return OutputFolder(path, detectron2, key)


def mm(path: Path) -> OutputFolder:
    return OutputFolder(path, mmengine, "--work-dir")


def test_the_examples_in_the_docstring_run() -> None:
    result = doctest.testmod(folder_module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_an_unwritable_folder_is_one_line_in_each_tools_words(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = blocker / "run"
    before = digests(tmp_path)
    with pytest.raises(ValueError) as err:
        d2(run, "train.output_dir").check_writable()
    assert str(err.value) == (
        f"train.output_dir {run} cannot be written ({blocker}: Not a directory); allowed: a "
        "folder this run can write (set another train.output_dir, e.g. train.output_dir "
        "./output/run) (nothing was written)"
    )
    with pytest.raises(ValueError) as err:
        mm(run).check_writable()
    assert str(err.value) == (
        f"work dir {run} cannot be written ({blocker}: Not a directory); allowed: a --work-dir "
        "where this user can create files (nothing was written)"
    )
    assert digests(tmp_path) == before
    d2(tmp_path / "new" / "run").check_writable()  # a writable parent: fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_folder_another_run_trains_in_is_refused_and_left_alone(tmp_path: Path) -> None:
    holder = FolderLock(tmp_path, detectron2.LOCK_NAME, "")
    holder.acquire()
    (tmp_path / TORN).write_bytes(b"torn")  # not the claimant's to remove: the holder's
    before = digests(tmp_path)
    lock = tmp_path / ".train_net.lock"
    try:
        for step in ("check_not_in_use", "claim"):
            with pytest.raises(FolderBusyError) as err:
                getattr(d2(tmp_path), step)()
            assert str(err.value) == (
                f"OUTPUT_DIR {tmp_path} is in use: pid {os.getpid()} is training there (it "
                f"holds {lock}); wait for it to end, stop it, or set another OUTPUT_DIR "
                "(nothing was written)"
            )
            assert digests(tmp_path) == before
    finally:
        holder.release()
    mm(tmp_path).check_not_in_use()  # another tool's lock file: not this tool's lock


def test_a_busy_work_dir_is_refused_by_every_rank_together(tmp_path: Path) -> None:
    holder = mmengine.WorkDirLock(tmp_path)
    holder.acquire()
    before = digests(tmp_path)
    try:
        with pytest.raises(FolderBusyError) as err:  # rank 0: its own line, naming the holder
            mm(tmp_path).claim(here=True, agree=int)
        assert str(err.value) == (
            f"work dir {tmp_path} is in use: pid {os.getpid()} is training there (it holds "
            f"{tmp_path / '.train_seg.lock'}); wait for it to end, stop it, or choose another "
            "--work-dir (nothing was written)"
        )
        with pytest.raises(FolderBusyError) as err:  # another rank: rank 0 failed
            mm(tmp_path).claim(here=False, agree=lambda failed: 1)
        assert str(err.value) == f"work dir {tmp_path} is in use (rank 0 found it locked)"
    finally:
        holder.release()
    assert digests(tmp_path) == before
    (tmp_path / TORN).write_bytes(b"torn")
    other = mm(tmp_path)
    assert other.claim(here=False, agree=int) == [] and not other.lock.held  # rank 0 removes
    assert (tmp_path / TORN).exists()


def test_a_new_run_in_a_folder_that_holds_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text("{}\n")
    (tmp_path / "iter_8.pth").write_bytes(b"")
    before = digests(tmp_path)
    with pytest.raises(ValueError) as err:
        d2(tmp_path).check_new_run(resume=False)
    assert str(err.value) == (
        f"OUTPUT_DIR {str(tmp_path)!r} already holds a run; pass --resume to continue it, or set "
        "another OUTPUT_DIR (e.g. OUTPUT_DIR ./output/new_run) to start a new one"
    )
    with pytest.raises(ValueError) as err:
        mm(tmp_path).check_new_run(resume=False)
    assert str(err.value) == (
        f"work dir {tmp_path} already holds a run (iter_8.pth); pass --resume to continue it, "
        "or choose another --work-dir (nothing is overwritten)"
    )
    assert digests(tmp_path) == before
    d2(tmp_path).check_new_run(resume=True)
    mm(tmp_path).check_new_run(resume=True)
    d2(tmp_path / "new").check_new_run(resume=False)


@pytest.mark.parametrize(
    ("claimed", "line"),
    [
        (d2, "removed 2 temporary file(s) a killed checkpoint write left in {folder}: {names}"),
        (mm, "removed 2 temporary file(s) that a killed checkpoint write left in {folder}: "
             "{names}"),
    ],
    ids=["detectron2", "mmengine"],
)  # fmt: skip
def test_a_claim_locks_and_removes_only_killed_writes_temporaries(tmp_path, claimed, line):
    folder = tmp_path / "run"
    folder.mkdir()
    torn = [TORN, ".metrics.json.tmp-89abcdef"]
    for name in [*torn, "model_0000004.pth", ".notes.tmp-x"]:
        (folder / name).write_bytes(b"data")
    run = claimed(folder)
    removed = run.claim()
    assert removed == sorted(torn) and run.lock.held
    assert run.removed_line(removed) == line.format(folder=folder, names=", ".join(sorted(torn)))
    assert run.removed_line([]) is None
    kept = {".notes.tmp-x", "model_0000004.pth", run.lock.path.name}
    assert {p.name for p in folder.iterdir()} == kept
    with pytest.raises(FolderBusyError):
        claimed(folder).claim()
    run.release()
    again = claimed(folder)
    assert again.claim() == [] and again.lock.held  # released: the next run claims it
    again.release()


def test_a_new_folder_is_made_and_no_folder_or_a_url_is_not_claimed(tmp_path, monkeypatch):
    run = d2(tmp_path / "a" / "b")
    assert run.claim() == [] and (tmp_path / "a" / "b" / ".train_net.lock").is_file()
    run.release()
    monkeypatch.chdir(tmp_path / "a")
    for path in ("", "s3://bucket/run"):
        nowhere = OutputFolder(path, detectron2, "OUTPUT_DIR")
        assert nowhere.claim() == [] and not nowhere.lock.held
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b"]

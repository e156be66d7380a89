"""budgeted.checkpoints: untrusted files loaded without running them, damaged files named in one
line, checkpoints and records written atomically. Real payloads (pickles that run a command when
unpickled), real numpy 1.x and 2.x pickles, real truncated files, real kills during a write."""

from __future__ import annotations

import base64
import codecs
import collections
import os
import pickle
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from budgeted.checkpoints import (
    DamagedCheckpointError,
    UnsafeCheckpointError,
    atomic_save,
    atomic_write,
    atomic_write_text,
    check_later_checkpoints_kept,
    checkpoint_iterations,
    load_checkpoint,
    newest_intact_checkpoint,
    save_weights_subset,
)
from budgeted.preemption import restore_default_signals


class Payload:
    """Unpickling this runs ``touch marker``; pickling it runs nothing."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


class Rot13:
    """Pickles as ``_codecs.encode(text, "rot13")``: an allowed global, a refused use of it."""

    def __reduce__(self):
        return (codecs.encode, ("abc", "rot13"))


def payload_files(folder: Path, marker: Path) -> dict[str, Path]:
    """The payload in every form a checkpoint file takes."""
    data = {"model": {"w": np.ones(2, np.float32)}, "__author__": "x", "x": Payload(marker)}
    files = {}
    for proto in range(6):  # a model-zoo style .pkl, every pickle protocol
        files[f"pkl-protocol{proto}"] = folder / f"evil{proto}.pkl"
        files[f"pkl-protocol{proto}"].write_bytes(pickle.dumps(data, protocol=proto))
    files["pth (zip)"] = folder / "evil.pth"
    torch.save({"model": {"w": torch.ones(2)}, "x": Payload(marker)}, files["pth (zip)"])
    files["pth (torch's legacy format)"] = folder / "evil_legacy.pth"
    torch.save({"x": Payload(marker)}, files["pth (torch's legacy format)"],
               _use_new_zipfile_serialization=False)  # fmt: skip
    files["plain pickle named .pth"] = folder / "pickled.pth"
    files["plain pickle named .pth"].write_bytes(pickle.dumps(data))
    return files


def test_the_payloads_are_real(tmp_path: Path) -> None:
    """Loaded the unsafe way, each file runs its command (so the refusals below mean something)."""
    files = payload_files(tmp_path, tmp_path / "ran")
    for name, path in files.items():
        (tmp_path / "ran").unlink(missing_ok=True)
        load = (
            "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))"
            if name.startswith("pkl") or name.startswith("plain")
            else "import sys, torch; torch.load(sys.argv[1], weights_only=False)"
        )
        subprocess.run([sys.executable, "-c", load, str(path)], check=False, capture_output=True)
        assert (tmp_path / "ran").exists(), name


@pytest.mark.parametrize("form", [
    "pkl-protocol0", "pkl-protocol2", "pkl-protocol4", "pkl-protocol5", "pth (zip)",
    "pth (torch's legacy format)", "plain pickle named .pth",
])  # fmt: skip
def test_a_payload_is_refused_in_one_line_naming_file_and_global(tmp_path, form) -> None:
    marker = tmp_path / "ran"
    path = payload_files(tmp_path, marker)[form]
    with pytest.raises(UnsafeCheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"refusing to load {str(path)!r}: it names the global posix.system")
    assert isinstance(err.value, ValueError)
    assert not marker.exists()


def test_an_allowed_global_put_to_another_use_is_refused(tmp_path) -> None:
    path = tmp_path / "rot13.pkl"
    path.write_bytes(pickle.dumps({"model": Rot13()}, protocol=2))
    with pytest.raises(UnsafeCheckpointError, match=r"_codecs\.encode.*'rot13'"):
        load_checkpoint(path)


# real numpy 2.4 pickles (protocols 2 and 5) of a small model-zoo dict: numpy 2 names its
# reconstructors numpy._core.*, which numpy 1.x (the pinned 1.23) lacks
NUMPY2_PICKLES = {
    2: "gAJ9cQAoWAUAAABtb2RlbHEBfXECKFgLAAAAY29udi53ZWlnaHRxA2NudW1weS5fY29yZS5tdWx0aWFycmF5Cl9yZW"
    "NvbnN0cnVjdApxBGNudW1weQpuZGFycmF5CnEFSwCFcQZjX2NvZGVjcwplbmNvZGUKcQdYAQAAAGJxCFgGAAAAbGF0aW"
    "4xcQmGcQpScQuHcQxScQ0oSwFLAksDhnEOY251bXB5CmR0eXBlCnEPWAIAAABmNHEQiYiHcRFScRIoSwNYAQAAADxxE0"
    "5OTkr/////Sv////9LAHRxFGKJaAdYGwAAAAAAAAAAAMKAPwAAAEAAAEBAAADCgEAAAMKgQHEVaAmGcRZScRd0cRhiWA"
    "kAAABjb252LmJpYXNxGWgEaAVLAIVxGmgLh3EbUnEcKEsBSwKFcR1oD1gCAAAAZjhxHomIh3EfUnEgKEsDaBNOTk5K//"
    "///0r/////SwB0cSFiiWgHWBMAAAAAAAAAAADDoD8AAAAAAADDsMK/cSJoCYZxI1JxJHRxJWJYFgAAAGJuLm51bV9iYX"
    "RjaGVzX3RyYWNrZWRxJmNudW1weS5fY29yZS5tdWx0aWFycmF5CnNjYWxhcgpxJ2gPWAIAAABpOHEoiYiHcSlScSooSw"
    "NoE05OTkr/////Sv////9LAHRxK2JoB1gIAAAABwAAAAAAAABxLGgJhnEtUnEuhnEvUnEwWAQAAABoYWxmcTFoBGgFSw"
    "CFcTJoC4dxM1JxNChLAUsChXE1aA9YAgAAAGYycTaJiIdxN1JxOChLA2gTTk5OSv////9K/////0sAdHE5YoloB1gEAA"
    "AAADwAPHE6aAmGcTtScTx0cT1idVgKAAAAX19hdXRob3JfX3E+WAcAAABudW1weSAycT9YEwAAAG1hdGNoaW5nX2hldX"
    "Jpc3RpY3NxQIh1Lg==",
    5: "gAWV5wEAAAAAAAB9lCiMBW1vZGVslH2UKIwLY29udi53ZWlnaHSUjBNudW1weS5fY29yZS5udW1lcmljlIwLX2Zyb2"
    "1idWZmZXKUk5QolhgAAAAAAAAAAAAAAAAAgD8AAABAAABAQAAAgEAAAKBAlIwFbnVtcHmUjAVkdHlwZZSTlIwCZjSUiY"
    "iHlFKUKEsDjAE8lE5OTkr/////Sv////9LAHSUYksCSwOGlIwBQ5R0lFKUjAljb252LmJpYXOUaAYolhAAAAAAAAAAAA"
    "AAAAAA4D8AAAAAAADwv5RoCowCZjiUiYiHlFKUKEsDaA5OTk5K/////0r/////SwB0lGJLAoWUaBF0lFKUjBZibi5udW"
    "1fYmF0Y2hlc190cmFja2VklIwWbnVtcHkuX2NvcmUubXVsdGlhcnJheZSMBnNjYWxhcpSTlGgKjAJpOJSJiIeUUpQoSw"
    "NoDk5OTkr/////Sv////9LAHSUYkMIBwAAAAAAAACUhpRSlIwEaGFsZpRoBiiWBAAAAAAAAAAAPAA8lGgKjAJmMpSJiI"
    "eUUpQoSwNoDk5OTkr/////Sv////9LAHSUYksChZRoEXSUUpR1jApfX2F1dGhvcl9flIwHbnVtcHkgMpSME21hdGNoaW"
    "5nX2hldXJpc3RpY3OUiHUu",
}


@pytest.mark.parametrize("protocol", [2, 5])
def test_a_model_zoo_pkl_written_by_numpy_2_loads(tmp_path, protocol) -> None:
    path = tmp_path / "model_final.pkl"
    path.write_bytes(base64.b64decode(NUMPY2_PICKLES[protocol]))
    data = load_checkpoint(path)
    assert data["__author__"] == "numpy 2" and data["matching_heuristics"] is True
    model = data["model"]
    assert model["conv.weight"].dtype == np.float32 and model["conv.weight"].shape == (2, 3)
    assert model["conv.weight"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert model["conv.bias"].tolist() == [0.5, -1.0] and model["half"].dtype == np.float16
    assert int(model["bn.num_batches_tracked"]) == 7


@pytest.mark.parametrize("protocol", range(6))
def test_a_model_zoo_pkl_written_by_this_numpy_loads(tmp_path, protocol) -> None:
    weights = collections.OrderedDict(w=np.arange(4, dtype=np.float32), n=np.int64(3))
    data = {"model": weights, "__author__": "Detectron2 Model Zoo", "matching_heuristics": True,
            "extra": {"ids": {1, 2}, "frozen": frozenset([3]), "raw": b"\x00\xff",
                      "buf": bytearray(b"ab")}}  # fmt: skip
    path = tmp_path / "zoo.pkl"
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    loaded = load_checkpoint(path)
    assert loaded["model"]["w"].tolist() == [0, 1, 2, 3] and loaded["model"]["n"] == 3
    assert loaded["extra"] == data["extra"]


def test_a_torch_checkpoint_with_numpy_arrays_loads(tmp_path) -> None:
    torch.save({"model": {"w": torch.ones(2), "a": np.zeros(3, np.float32)}, "it": 3},
               tmp_path / "c.pth")  # fmt: skip
    data = load_checkpoint(tmp_path / "c.pth")
    assert data["model"]["w"].tolist() == [1, 1] and data["model"]["a"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("damage", ["truncated .pth", "truncated .pkl", "empty", "garbage",
                                    "missing", "a folder"])  # fmt: skip
def test_an_unreadable_file_is_named_in_one_line(tmp_path, damage) -> None:
    pth, pkl = tmp_path / "model_0000007.pth", tmp_path / "model.pkl"
    torch.save({"model": {"w": torch.ones(1000)}}, pth)
    pkl.write_bytes(pickle.dumps({"model": {"w": np.ones(1000)}}))
    path = {
        "truncated .pth": pth,
        "truncated .pkl": pkl,
        "empty": tmp_path / "empty.pth",
        "garbage": tmp_path / "garbage.pkl",
        "missing": tmp_path / "missing.pth",
        "a folder": tmp_path,
    }[damage]
    if damage.startswith("truncated"):
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"this is not a pickle")
    with pytest.raises(DamagedCheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"checkpoint {str(path)!r} ")
    assert len(message) < 300


def test_newest_intact_checkpoint_skips_torn_unsafe_and_temporary_files(tmp_path) -> None:
    for it in (3, 7, 11, 15):
        torch.save({"iteration": it}, tmp_path / f"model_{it:07d}.pth")
    assert newest_intact_checkpoint(tmp_path, "model_*.pth") == tmp_path / "model_0000015.pth"
    torch.save({"iteration": 99}, tmp_path / "model_final.pth")
    assert newest_intact_checkpoint(tmp_path, "model_*.pth") == tmp_path / "model_final.pth"
    (tmp_path / "model_final.pth").write_bytes(b"PK\x03\x04")  # torn
    write = tmp_path / "model_0000015.pth"
    write.write_bytes(write.read_bytes()[:10])  # torn
    torch.save({"x": Payload(tmp_path / "ran")}, tmp_path / "model_0000011.pth")  # unsafe
    (tmp_path / ".model_0000019.pth.tmp-0123abcd").write_bytes(b"half")  # a write in progress
    found = newest_intact_checkpoint(tmp_path, "model_*.pth")
    assert found == tmp_path / "model_0000007.pth" and not (tmp_path / "ran").exists()
    assert newest_intact_checkpoint(tmp_path, "model_*.pth", exclude=[found]) == (
        tmp_path / "model_0000003.pth"
    )
    assert newest_intact_checkpoint(tmp_path / "nope", "model_*.pth") is None


def test_a_resume_that_would_overwrite_intact_later_checkpoints_is_refused(tmp_path) -> None:
    for it in (3, 7):
        torch.save({"iteration": it}, tmp_path / f"model_{it:07d}.pth")
    torch.save({"iteration": 9}, tmp_path / "model_final.pth")
    found = sorted(tmp_path.glob("model_*.pth"))

    def check(source: Path, at: float) -> None:
        check_later_checkpoints_kept(source, at, found, folder_key="OUTPUT_DIR")

    check(tmp_path / "model_final.pth", 9)  # itself: nothing later
    with pytest.raises(ValueError) as err:
        check(tmp_path / "model_0000003.pth", 3)
    assert str(err.value) == (
        f"--resume-from model_0000003.pth would overwrite later checkpoints in {tmp_path} "
        "(model_0000007.pth, model_final.pth) as training goes on; allowed: resume into another "
        f"OUTPUT_DIR (with --resume-from {tmp_path / 'model_0000003.pth'}), or move those "
        "checkpoints away first"
    )
    for name in ("model_0000007.pth", "model_final.pth"):  # torn later ones: theirs to replace
        (tmp_path / name).write_bytes(b"PK\x03\x04")
    check(tmp_path / "model_0000003.pth", 3)
    torch.save({"x": Payload(tmp_path / "ran")}, tmp_path / "model_final.pth")  # unsafe: kept
    with pytest.raises(ValueError, match="would overwrite later checkpoints"):
        check(tmp_path / "model_0000003.pth", 3)
    assert not (tmp_path / "ran").exists()


def test_atomic_write_leaves_the_old_file_when_the_write_fails(tmp_path) -> None:
    path = tmp_path / "record.json"
    atomic_write_text(path, '{"v": 1}')
    with pytest.raises(RuntimeError), atomic_write(path, "w") as f:
        f.write('{"v": 2, "half')
        raise RuntimeError("killed mid-write")
    assert path.read_text() == '{"v": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]  # no temporary file
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain open() would make it
    atomic_save({"w": torch.arange(3)}, tmp_path / "m.pth")
    assert load_checkpoint(tmp_path / "m.pth")["w"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="mode 'a' is invalid"), atomic_write(path, "a"):
        pass


WRITER = """
import sys, time
from budgeted.checkpoints import atomic_write
path, size = sys.argv[1], int(sys.argv[2])
for i in range(1, 1000000):
    with atomic_write(path) as f:
        for chunk in range(size // 65536):
            f.write(bytes([i % 256]) * 65536)
            if i > 1 and chunk == 1:
                print("writing", i, flush=True)
                time.sleep(600)  # killed here, in the middle of the write

"""


def test_a_kill_during_the_write_never_tears_the_file(tmp_path) -> None:
    """SIGKILL a process in the middle of rewriting a file: the file is the previous version,
    whole, each time; the torn write is a temporary file no glob for checkpoints matches."""
    path, size = tmp_path / "model.pth", 8 * 65536
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER))
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path), str(size)], stdout=subprocess.PIPE,
            text=True, preexec_fn=restore_default_signals,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while "writing" not in (proc.stdout.readline() if proc.stdout else ""):  # mid-write
            assert proc.poll() is None and time.monotonic() < deadline
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        data = path.read_bytes()
        assert len(data) == size and len(set(data)) == 1  # one whole version
        (torn,) = tmp_path.glob(".model.pth.tmp-*")  # the write it interrupted, beside it
        assert torn.stat().st_size < size
        assert list(tmp_path.glob("*.pth")) == [path]  # never taken for a checkpoint
        torn.unlink()


def test_a_safe_load_keeps_the_globals_allowed_before_it(tmp_path):
    import collections

    import torch

    from budgeted.checkpoints import load_checkpoint

    before = list(torch.serialization.get_safe_globals())
    marker = (collections.Counter, "collections.Counter")
    torch.serialization.add_safe_globals([marker])
    try:
        path = tmp_path / "w.pth"
        torch.save({"w": torch.zeros(2)}, path)
        load_checkpoint(path)
        assert marker in torch.serialization.get_safe_globals()
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(before)


@pytest.mark.parametrize("layout", ["model", "state_dict"])
def test_save_weights_subset_keeps_the_sources_layout_and_names(tmp_path, layout) -> None:
    weights = {"backbone.a": torch.ones(2), "backbone.b.c": torch.zeros(1), "head.w": torch.ones(3)}
    atomic_save({layout: weights, "meta": {"iter": 7}}, tmp_path / "full.pth")
    assert save_weights_subset(tmp_path / "full.pth", tmp_path / "bb.pth", "backbone.") == 2
    saved = load_checkpoint(tmp_path / "bb.pth")
    assert list(saved) == [layout] and sorted(saved[layout]) == ["backbone.a", "backbone.b.c"]


def test_save_weights_subset_refuses_a_payload_and_writes_nothing(tmp_path) -> None:
    marker = tmp_path / "payload_ran"
    evil = tmp_path / "evil.pth"
    evil.write_bytes(pickle.dumps({"model": Payload(marker)}))
    with pytest.raises(UnsafeCheckpointError):
        save_weights_subset(evil, tmp_path / "bb.pth", "backbone.")
    assert not marker.exists() and not (tmp_path / "bb.pth").exists()


@pytest.mark.parametrize(
    ("values", "counts"),
    [((6080, 3040, 6080), [3040, 6080]), ([np.int64(8)], [8]), ((), [])],
)
def test_checkpoint_iterations_are_plain_sorted_counts(values, counts):
    got = checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", values)
    assert got == counts and all(type(n) is int for n in got)


@pytest.mark.parametrize(
    ("values", "allow_empty"),
    [(4, True), ([0], True), ([40, -8], True), ([True], True), ([2.5], True), (["x"], True),
     ("12", True), ([], False)],
)  # fmt: skip
def test_checkpoint_iterations_refuse_anything_else_in_one_line(values, allow_empty):
    with pytest.raises(ValueError) as err:
        checkpoint_iterations("checkpoint_at", values, allow_empty=allow_empty)
    assert str(err.value) == (
        f"checkpoint_at={values!r} is invalid; allowed: a list of iteration counts > 0, "
        "e.g. [3040, 6080]"
    )

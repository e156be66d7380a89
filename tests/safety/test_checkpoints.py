"""budgeted.safety (loading, writing, checkpoint_files): untrusted files loaded without running
them, damaged files named in one line, checkpoints and records written atomically. Real payloads
(pickles that run a command when unpickled), real numpy 1.x and 2.x pickles, real truncated files,
real kills during a write."""

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

from budgeted.safety import (
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
from budgeted.safety.preemption import restore_default_signals


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


@pytest.mark.e2e
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


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
def test_a_torch_checkpoint_with_numpy_arrays_loads(tmp_path) -> None:
    torch.save({"model": {"w": torch.ones(2), "a": np.zeros(3, np.float32)}, "it": 3},
               tmp_path / "c.pth")  # fmt: skip
    data = load_checkpoint(tmp_path / "c.pth")
    assert data["model"]["w"].tolist() == [1, 1] and data["model"]["a"].tolist() == [0, 0, 0]


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
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
from budgeted.safety.writing import atomic_write
path, size = sys.argv[1], int(sys.argv[2])
for i in range(1, 1000000):
    with atomic_write(path) as f:
        for chunk in range(size // 65536):
            f.write(bytes([i % 256]) * 65536)
            if i > 1 and chunk == 1:
                print("writing", i, flush=True)
                time.sleep(600)  # killed here, in the middle of the write

"""


@pytest.mark.e2e
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


@pytest.mark.unit
def test_a_safe_load_keeps_the_globals_allowed_before_it(tmp_path):
    import collections

    import torch

    from budgeted.safety import load_checkpoint

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


@pytest.mark.unit
@pytest.mark.parametrize("layout", ["model", "state_dict"])
def test_save_weights_subset_keeps_the_sources_layout_and_names(tmp_path, layout) -> None:
    weights = {"backbone.a": torch.ones(2), "backbone.b.c": torch.zeros(1), "head.w": torch.ones(3)}
    atomic_save({layout: weights, "meta": {"iter": 7}}, tmp_path / "full.pth")
    assert save_weights_subset(tmp_path / "full.pth", tmp_path / "bb.pth", "backbone.") == 2
    saved = load_checkpoint(tmp_path / "bb.pth")
    assert list(saved) == [layout] and sorted(saved[layout]) == ["backbone.a", "backbone.b.c"]


@pytest.mark.unit
def test_save_weights_subset_refuses_a_payload_and_writes_nothing(tmp_path) -> None:
    marker = tmp_path / "payload_ran"
    evil = tmp_path / "evil.pth"
    evil.write_bytes(pickle.dumps({"model": Payload(marker)}))
    with pytest.raises(UnsafeCheckpointError):
        save_weights_subset(evil, tmp_path / "bb.pth", "backbone.")
    assert not marker.exists() and not (tmp_path / "bb.pth").exists()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("values", "counts"),
    [((6080, 3040, 6080), [3040, 6080]), ([np.int64(8)], [8]), ((), [])],
)
def test_checkpoint_iterations_are_plain_sorted_counts(values, counts):
    got = checkpoint_iterations("SOLVER.BUDGET.SAVE_AT", values)
    assert got == counts and all(type(n) is int for n in got)


@pytest.mark.unit
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


# --- every refusal and every damaged file in its whole line (issue 35: mutation check) ----------


class CallOf:
    """Pickles as ``fn(*args)``: a global the file names, called as the file says."""

    def __init__(self, fn, *args) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def legacy_torch_file(body: bytes) -> bytes:
    """torch's legacy (pre-1.6) format: its magic number, version and system-info pickles, then
    ``body`` as the pickle of the checkpoint itself."""
    from torch.serialization import MAGIC_NUMBER, PROTOCOL_VERSION

    sys_info = {"protocol_version": PROTOCOL_VERSION, "little_endian": True,
                "type_sizes": {"short": 2, "int": 4, "long": 4}}  # fmt: skip
    head = b"".join(pickle.dumps(v, protocol=2) for v in (MAGIC_NUMBER, PROTOCOL_VERSION, sys_info))
    return head + body


TORCH_WHAT = "tensors, builtin containers and scalars, OrderedDict, numpy arrays and scalars"
PICKLE_WHAT = "numpy arrays and scalars, OrderedDict, set, frozenset, bytearray"
NOTHING_RAN = (
    "; loading it could run code from the file, so nothing of it was loaded (use only "
    "checkpoints you trust, and never weights_only=False)"
)
TORCH_REFUSES = "; it is not loaded (use only checkpoints you trust, and never weights_only=False)"


def write_unsafe(path: Path, form: str) -> str:
    """Write the checkpoint ``form`` names to ``path``; the one line its loading must raise."""
    p = repr(str(path))
    if form == "pickle naming one global":
        path.write_bytes(pickle.dumps({"c": collections.Counter(a=1)}, protocol=2))
        return f"refusing to load {p}: it names the global collections.Counter, outside the " \
               f"allow-list ({PICKLE_WHAT}){NOTHING_RAN}"  # fmt: skip
    if form == "zip naming two globals":  # the pre-check names every one
        torch.save({"a": CallOf(os.system, "true"), "b": CallOf(os.listdir, ".")}, path)
        return f"refusing to load {p}: it names the globals posix.listdir, posix.system, " \
               f"outside the allow-list ({TORCH_WHAT}){NOTHING_RAN}"  # fmt: skip
    if form == "legacy naming a global":  # torch's own refusal, reduced to the global it names
        torch.save({"a": CallOf(os.system, "true")}, path, _use_new_zipfile_serialization=False)
        return f"refusing to load {p}: it names the global posix.system, outside the " \
               f"allow-list ({TORCH_WHAT}){NOTHING_RAN}"  # fmt: skip
    if form == "legacy with an opcode torch refuses":  # INST: builds any class by name
        path.write_bytes(legacy_torch_file(b"\x80\x02(i__builtin__\nobject\n."))
        return f"refusing to load {p}: torch's weights-only loader refuses it (Unsupported " \
               f"operand 105){TORCH_REFUSES}"  # fmt: skip
    if form == "a Python 2 name":  # __builtin__.reduce, named as Python 3 names it
        path.write_bytes(b"c__builtin__\nreduce\np0\n.")
        return f"refusing to load {p}: it names the global functools.reduce, outside " \
               f"the allow-list ({PICKLE_WHAT}){NOTHING_RAN}"  # fmt: skip
    if form == "a persistent reference":  # shown up to its first 40 characters
        path.write_bytes(b"P" + b"0123456789" * 5 + b"\n.")
        return f"refusing to load {p}: it holds a persistent reference " \
               f"('{'0123456789' * 4}'), which a plain checkpoint pickle never holds"  # fmt: skip
    if form.startswith("_codecs.encode"):
        args = {"_codecs.encode as rot13": ("abc", "rot13"),
                "_codecs.encode without an encoding": ("abc",)}[form]  # fmt: skip
        path.write_bytes(pickle.dumps({"b": CallOf(codecs.encode, *args)}, protocol=2))
        encoding = args[1] if len(args) > 1 else "utf-8"
        return f"refusing to load {p}: it calls _codecs.encode with encoding {encoding!r}, " \
               "which a checkpoint never does (only 'latin1', for bytes); nothing of it was " \
               "loaded"  # fmt: skip
    raise AssertionError(form)


UNSAFE_FORMS = [
    "pickle naming one global", "zip naming two globals", "legacy naming a global",
    "legacy with an opcode torch refuses", "a Python 2 name", "a persistent reference",
    "_codecs.encode as rot13", "_codecs.encode without an encoding",
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize("form", UNSAFE_FORMS)
def test_each_refusal_is_one_whole_line(tmp_path, form) -> None:
    path = tmp_path / "model_0000009.pth"
    expected = write_unsafe(path, form)
    with pytest.raises(UnsafeCheckpointError) as err:
        load_checkpoint(path)
    assert str(err.value) == expected


@pytest.mark.unit
def test_a_refusal_torch_gives_no_reason_for_is_still_one_line(tmp_path) -> None:
    path = tmp_path / "legacy.pth"
    path.write_bytes(legacy_torch_file(b"\x80\x02}K\x01a."))  # APPEND onto a dict
    with pytest.raises(UnsafeCheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert message.startswith(f"refusing to load {str(path)!r}: torch's weights-only loader ")
    assert message.endswith(TORCH_REFUSES) and "\n" not in message


LONG = 161
"""Reasons longer than 160 characters are cut to 157 and ``...``."""


def write_damaged(path: Path, form: str) -> str:
    """Write the damaged file ``form`` names to ``path``; the reason its line must give."""
    if form == "empty":
        path.write_bytes(b"")
        return "Ran out of input"
    if form == "garbage":  # the reason without its full stop
        path.write_bytes(b"<html>not a checkpoint</html>")
        return "invalid load key, '<'"
    if form == "a zip archive cut short":
        torch.save({"w": torch.ones(1000)}, path)
        path.write_bytes(path.read_bytes()[:2000])
        return "PytorchStreamReader failed reading zip archive: failed finding central directory"
    if form == "a legacy checkpoint of only its header":  # an EOFError without a message
        path.write_bytes(legacy_torch_file(b""))
        return "EOFError"
    if form == "a legacy checkpoint cut in its tensor data":
        torch.save({"w": torch.ones(1000)}, path, _use_new_zipfile_serialization=False)
        path.write_bytes(path.read_bytes()[:-10])
        return "unexpected EOF, expected 10 more bytes"
    if form in ("a reason of 160 characters", "a reason of 161 characters"):
        name = "x" * (133 if "160" in form else 134)  # numpy: "data type '<name>' not understood"
        path.write_bytes(pickle.dumps({"d": CallOf(np.dtype, name)}, protocol=2))
        reason = f"data type '{name}' not understood"
        return reason if len(reason) < LONG else reason[:157] + "..."
    if form == "bytes that are not latin-1":
        path.write_bytes(pickle.dumps({"b": CallOf(codecs.encode, "\u0100", "latin1")}, 2))
        return "'latin-1' codec can't encode character '\\u0100' in position 0: ordinal not in " \
               "range(256)"  # fmt: skip
    if form == "an unknown error handler":
        path.write_bytes(pickle.dumps({"b": CallOf(codecs.encode, "\u0100", "latin1", "x")}, 2))
        return "unknown error handler name 'x'"
    raise AssertionError(form)


DAMAGED_FORMS = [
    "empty", "garbage", "a zip archive cut short", "a legacy checkpoint of only its header",
    "a legacy checkpoint cut in its tensor data", "a reason of 160 characters",
    "a reason of 161 characters", "bytes that are not latin-1", "an unknown error handler",
]  # fmt: skip


@pytest.mark.unit
@pytest.mark.parametrize("form", DAMAGED_FORMS)
def test_each_damaged_file_is_one_whole_line_with_the_reason(tmp_path, form) -> None:
    path = tmp_path / "model_0000009.pth"
    reason = write_damaged(path, form)
    with pytest.raises(DamagedCheckpointError) as err:
        load_checkpoint(path)
    assert str(err.value) == f"checkpoint {str(path)!r} cannot be read (truncated or damaged: " \
                             f"{reason})"  # fmt: skip


@pytest.mark.unit
@pytest.mark.skipif(not Path("/proc/self/mem").is_file(), reason="needs Linux's /proc/self/mem")
def test_a_file_that_gives_an_io_error_is_damaged_in_one_line() -> None:
    with pytest.raises(DamagedCheckpointError) as err:
        load_checkpoint("/proc/self/mem")  # a file whose first bytes cannot be read: EIO
    assert str(err.value) == (
        "checkpoint '/proc/self/mem' cannot be read (truncated or damaged: [Errno 5] "
        "Input/output error)"
    )


@pytest.mark.unit
def test_a_legacy_checkpoint_cut_or_corrupted_anywhere_is_damaged_never_a_traceback(tmp_path):
    """torch's legacy reader raises struct.error, AssertionError, TypeError, ... on such files
    (found while triaging the mutation check): each must be the one-line damaged error."""
    torch.save({"w": torch.ones(2)}, tmp_path / "whole.pth", _use_new_zipfile_serialization=False)
    whole = (tmp_path / "whole.pth").read_bytes()
    path = tmp_path / "model_0000009.pth"
    cuts = [whole[:n] for n in range(len(whole) // 3, len(whole), 8)]
    flips = [whole[:i] + bytes([whole[i] ^ 1]) + whole[i + 1 :] for i in (181, 228, 323)]
    for data in cuts + flips:
        path.write_bytes(data)
        with pytest.raises(ValueError) as err:  # damaged (or, cut inside a name, unsafe)
            load_checkpoint(path)
        assert isinstance(err.value, (DamagedCheckpointError, UnsafeCheckpointError))
        assert "\n" not in str(err.value)


@pytest.mark.unit
@pytest.mark.parametrize("encoding", ["latin1", "latin-1", "latin_1", "LATIN1"])
def test_bytes_pickled_by_protocol_2_load_under_each_spelling_of_latin_1(tmp_path, encoding):
    path = tmp_path / "zoo.pkl"
    path.write_bytes(pickle.dumps({"raw": CallOf(codecs.encode, "a\xff", encoding)}, protocol=2))
    assert load_checkpoint(path) == {"raw": b"a\xff"}


@pytest.mark.unit
def test_a_python_2_pickle_with_non_ascii_text_loads(tmp_path) -> None:
    """Detectron 1 / Caffe2 model-zoo files are Python 2 pickles: their ``str`` is bytes, read
    as latin-1 (here the protocol-2 pickle Python 2 writes of ``{"__author__": "\\xe9"}``)."""
    path = tmp_path / "model_final.pkl"
    path.write_bytes(b"\x80\x02}q\x00U\n__author__q\x01U\x01\xe9q\x02s.")
    assert load_checkpoint(path) == {"__author__": "\xe9"}


@pytest.mark.unit
def test_a_plain_pickle_of_a_number_is_not_taken_for_torchs_legacy_format(tmp_path) -> None:
    path = tmp_path / "n.pkl"
    path.write_bytes(pickle.dumps(5))
    assert load_checkpoint(path) == 5


@pytest.mark.unit
@pytest.mark.parametrize("legacy", [False, True])
def test_map_location_reaches_torch(tmp_path, legacy) -> None:
    path = tmp_path / "model.pth"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=not legacy)
    assert load_checkpoint(path, map_location="meta")["w"].device.type == "meta"


@pytest.mark.unit
def test_torchs_variable_to_force_unsafe_loads_does_not_reach_the_safe_loader(
    tmp_path, monkeypatch
) -> None:
    """``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` turns every ``torch.load`` that does not say
    ``weights_only`` into an unsafe one; ours says it, so a payload is still refused (a legacy
    file: torch's own check is the only one)."""
    marker = tmp_path / "ran"
    path = payload_files(tmp_path, marker)["pth (torch's legacy format)"]
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(UnsafeCheckpointError, match=r"names the global posix\.system"):
        load_checkpoint(path)
    assert not marker.exists()


@pytest.mark.unit
def test_extra_globals_are_allowed_wherever_a_checkpoint_is_read(tmp_path) -> None:
    """An adapter's own class (here ``collections.Counter``, outside the pickle allow-list)
    loads once allowed, for each reader; the unpickler used alone allows only its own list."""
    from budgeted.safety import RestrictedUnpickler

    extra = {"collections.Counter": collections.Counter}
    old, new = tmp_path / "iter_4.pth", tmp_path / "iter_8.pth"
    old.write_bytes(pickle.dumps({"model": {"a.w": np.ones(1)}}, protocol=2))
    new.write_bytes(pickle.dumps({"model": {"a.w": np.ones(1)}, "c": collections.Counter()}, 2))
    assert load_checkpoint(new, extra_globals=extra)["c"] == collections.Counter()
    assert newest_intact_checkpoint(tmp_path) == old  # iter_8.pth is unsafe without it
    assert newest_intact_checkpoint(tmp_path, extra_globals=extra) == new
    assert save_weights_subset(new, tmp_path / "a.pth", "a.", extra_globals=extra) == 1
    with open(old, "rb") as f:  # no allow-list given: PICKLE_ALLOWED only
        assert RestrictedUnpickler(f, old).load()["model"]["a.w"].tolist() == [1.0]
    with open(new, "rb") as f, pytest.raises(UnsafeCheckpointError, match=r"collections\.Counter"):
        RestrictedUnpickler(f, new).load()
    (tmp_path / "evil").mkdir()  # a refusal lists the globals allowed, the extra ones too
    evil_pkl, evil_pth = tmp_path / "evil" / "evil.pkl", tmp_path / "evil" / "evil.pth"
    evil_pkl.write_bytes(pickle.dumps({"x": CallOf(os.system, "true")}, protocol=2))
    torch.save({"x": CallOf(os.system, "true")}, evil_pth)
    for path, what in ((evil_pkl, PICKLE_WHAT), (evil_pth, TORCH_WHAT)):
        with pytest.raises(UnsafeCheckpointError) as err:
            load_checkpoint(path, extra_globals=extra)
        assert f"outside the allow-list ({what}, collections.Counter);" in str(err.value)


@pytest.mark.unit
def test_checkpoints_are_ordered_by_the_iteration_in_their_names_not_alphabetically(tmp_path):
    """``iter_10.pth`` comes after ``iter_9.pth`` (MMEngine's names are not zero-padded); a name
    without a number sorts first, a ``final`` one last."""
    from budgeted.safety import checkpoint_iteration

    assert [checkpoint_iteration(n) for n in ("latest.pth", "iter_9.pth", "model_final.pth")] == [
        -1.0, 9.0, float("inf")
    ]  # fmt: skip
    for it in (9, 10):
        torch.save({"iteration": it}, tmp_path / f"iter_{it}.pth")
    assert newest_intact_checkpoint(tmp_path) == tmp_path / "iter_10.pth"  # default: *.pth
    (tmp_path / "iter_10.pth").rename(tmp_path / "iter_10.pkl")
    assert newest_intact_checkpoint(tmp_path) == tmp_path / "iter_9.pth"


@pytest.mark.unit
def test_a_refused_resume_names_the_later_checkpoints_in_order_three_at_most(tmp_path) -> None:
    source = tmp_path / "iter_4.pth"
    for it in (4, 9, 10, 11, 12):
        torch.save({"iteration": it}, tmp_path / f"iter_{it}.pth")

    def refusal(names: list[str]) -> str:
        with pytest.raises(ValueError) as err:
            check_later_checkpoints_kept(source, 4, [tmp_path / n for n in names],
                                         folder_key="work_dir")  # fmt: skip
        return str(err.value).split(" (")[1].split(")")[0]

    assert refusal(["iter_10.pth", "iter_11.pth", "iter_9.pth"]) == (
        "iter_9.pth, iter_10.pth, iter_11.pth"
    )
    assert refusal(["iter_12.pth", "iter_10.pth", "iter_11.pth", "iter_9.pth"]) == (
        "iter_9.pth, iter_10.pth, iter_11.pth, ..."
    )
    copy = tmp_path / "copy" / "iter_4.pth"  # the same iteration elsewhere: not a later one
    copy.parent.mkdir()
    torch.save({"iteration": 4}, copy)
    check_later_checkpoints_kept(copy, 4, [source], folder_key="work_dir")


@pytest.mark.unit
def test_checkpoint_iterations_allow_a_single_count_of_one(tmp_path) -> None:
    assert checkpoint_iterations("at", [1], allow_empty=False) == [1]


@pytest.mark.unit
def test_save_weights_subset_refuses_in_one_whole_line(tmp_path) -> None:
    src, dst = tmp_path / "full.pth", tmp_path / "part.pth"
    atomic_save({f"m{i:02d}.w": torch.ones(1) for i in range(12)}, src)  # bare weights
    assert save_weights_subset(src, dst, "m03.") == 1
    assert list(load_checkpoint(dst)) == ["model"]  # Detectron2's layout, which MODEL.WEIGHTS reads
    with pytest.raises(ValueError) as err:
        save_weights_subset(src, dst, "m03.")
    assert str(err.value) == f"{str(dst)!r} already exists; remove it or choose another file"
    with pytest.raises(ValueError) as err:
        save_weights_subset(src, tmp_path / "none.pth", "backbone.")
    tops = ", ".join(f"m{i:02d}." for i in range(10))  # the first ten
    assert str(err.value) == (
        f"prefix 'backbone.' names no weight in {str(src)!r}; its names start with: {tops}"
    )
    atomic_save({"model": [1, 2]}, src.with_name("list.pth"))
    with pytest.raises(ValueError) as err:
        save_weights_subset(src.with_name("list.pth"), tmp_path / "none.pth", "m")
    assert str(err.value) == (
        f"checkpoint {str(src.with_name('list.pth'))!r} holds no weights (a dict of tensors)"
    )
    assert not (tmp_path / "none.pth").exists()


@pytest.mark.unit
def test_remove_stale_temporaries_removes_only_the_files_atomic_write_leaves(tmp_path) -> None:
    from budgeted.safety import remove_stale_temporaries

    stale = [".model_0000009.pth.tmp-0123abcd", ".last_checkpoint.tmp-ffffffff"]
    kept = ["model_0000004.pth", "model.pth.tmp-0123abcd", ".model.pth.tmp-0123ABCD",
            ".model.pth.tmp-0123abc", ".x.tmp-0123abcd.pth"]  # fmt: skip
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / ".folder.tmp-0123abcd").mkdir()  # a folder: left alone
    (tmp_path / ".link.tmp-0123abcd").symlink_to(tmp_path / "model_0000004.pth")  # not followed
    assert remove_stale_temporaries(tmp_path) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*kept, ".folder.tmp-0123abcd", ".link.tmp-0123abcd"]
    )
    assert remove_stale_temporaries(tmp_path / "missing") == []


@pytest.mark.unit
def test_a_symbolic_link_loop_is_neither_offered_nor_in_the_way(tmp_path):
    """A loop among the files (or named as the damaged one to exclude) raised RuntimeError from
    Path.resolve; the intact checkpoint beside it is still offered."""
    atomic_save({"iteration": 3}, tmp_path / "model_0000003.pth")
    loop = tmp_path / "model_0000009.pth"
    loop.symlink_to(loop)
    assert newest_intact_checkpoint(tmp_path, exclude=[loop]) == tmp_path / "model_0000003.pth"

"""Constants and helpers shared by the Detectron2 tests (imported by name, unlike conftest)."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import pickle
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOY_CONFIG = "configs/detectron2/toy/mask_rcnn_toy_budget10.yaml"
# 64 px images (for a trainer of one's own: SOLVER.BUDGET.WRITER_PERIOD is BudgetTrainer's key)
TINY_OWN = [
    "INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "64",
    "INPUT.MIN_SIZE_TEST", "64", "INPUT.MAX_SIZE_TEST", "64",
    "MODEL.ROI_HEADS.SCORE_THRESH_TEST", "0.0",
]  # fmt: skip
# 64 px images, metrics written every iteration
TINY = [*TINY_OWN, "SOLVER.BUDGET.WRITER_PERIOD", "1"]
# 8 iterations (0.02 x 400), warmup 3, a checkpoint every 4
EIGHT = ["SOLVER.BUDGET.FRACTION", "0.02", "SOLVER.CHECKPOINT_PERIOD", "4"]
REPO = Path(__file__).resolve().parents[2]


def read_metrics(output_dir: Path) -> list[dict]:
    """The rows of Detectron2's metrics.json."""
    return [json.loads(line) for line in (output_dir / "metrics.json").read_text().splitlines()]


def logged_lrs(output_dir: Path) -> dict[int, float]:
    """iteration -> the ``lr`` Detectron2's LRScheduler hook logged for it."""
    return {r["iteration"]: r["lr"] for r in read_metrics(output_dir) if "lr" in r}


# --- real files, real processes, real signals -------------------------------------------------


class Payload:
    """Unpickling this runs ``touch marker``: what a malicious weights file does (a pickle calls
    whatever callable it names). Pickling it runs nothing."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def write_payload(path: Path, marker: Path) -> Path:
    """A weights file carrying :class:`Payload`: a model-zoo style ``.pkl`` (numpy arrays under
    "model", "__author__") or a ``torch.save`` checkpoint (``.pth``), by the suffix."""
    import numpy as np
    import torch

    if path.suffix == ".pkl":
        data = {"model": {"w": np.ones(3, np.float32)}, "__author__": "Detectron2 Model Zoo",
                "matching_heuristics": True, "x": Payload(marker)}  # fmt: skip
        path.write_bytes(pickle.dumps(data))
    else:
        torch.save({"model": {"w": torch.ones(3)}, "x": Payload(marker)}, path)
    return path


def refusal(argv: list[str]) -> str:
    """The one line ``tools/train_net.py argv`` (in this process) exits with."""
    import pytest

    from budgeted.detectron2.cli import run

    with pytest.raises(SystemExit) as err:
        run(argv)
    message = str(err.value.code)
    assert "\n" not in message and message.startswith("train_net: "), message
    return message


def folder_hashes(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under ``folder`` (hidden ones too)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def copy_run(src: Path, dst: Path, checkpoints: tuple[str, ...] = ("model_0000003.pth",)) -> Path:
    """A run folder like ``src`` (config.yaml, metrics.json, the given checkpoints hard-linked,
    last_checkpoint naming the last of them)."""
    dst.mkdir(parents=True)
    for name in ("config.yaml", "metrics.json"):
        shutil.copy2(src / name, dst / name)
    for name in checkpoints:
        try:
            os.link(src / name, dst / name)  # read only here; refusals must not write anyway
        except OSError:
            shutil.copy2(src / name, dst / name)
    (dst / "last_checkpoint").write_text(checkpoints[-1])
    return dst


def truncate(path: Path, keep: float = 0.5) -> Path:
    """Replace ``path`` by its first ``keep`` fraction (a new file: a hard link stays intact)."""
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def metrics_rows(output_dir: Path) -> list[dict]:
    """The complete rows of metrics.json so far (a line being written is skipped)."""
    try:
        text = (output_dir / "metrics.json").read_text()
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def start_tool(argv: list[str], *, env: dict | None = None, tool: str = "train_net.py"):
    """``tools/<tool> argv`` as a real subprocess, in its own session, with the default
    dispositions of SIGINT, SIGTERM and SIGUSR1 whatever this process inherited (a test run in
    the background of a non-interactive shell has SIGINT ignored). Its output goes to files
    (a pipe nobody reads would block it); :func:`finish` returns it."""
    return start([sys.executable, str(REPO / "tools" / tool), *argv], env=env)


def _child_setup() -> None:
    """In the child before exec: default signal dispositions, and SIGTERM when the test process
    dies (the tool then stops as if preempted rather than training on, orphaned)."""
    from budgeted.safety.preemption import restore_default_signals

    restore_default_signals()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)


def start(cmd: list[str], *, env: dict | None = None) -> subprocess.Popen:
    """:func:`start_tool` for any command."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=out, stderr=err, text=True,
        preexec_fn=_child_setup, start_new_session=True,
    )  # fmt: skip
    proc.logs = (out, err)  # type: ignore[attr-defined]
    return proc


def _output(proc: subprocess.Popen) -> tuple[str, str]:
    texts = []
    for f in proc.logs:  # type: ignore[attr-defined]
        f.seek(0)
        texts.append(f.read())
    return texts[0], texts[1]


def wait_until(predicate, proc: subprocess.Popen | None = None, timeout: float = 600.0) -> None:
    """Poll ``predicate`` until true; fail if ``proc`` ends first or after ``timeout`` seconds
    (generous: the machine may be busy)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            err = _output(proc)[1]
            raise AssertionError(f"the process ended first (rc {proc.returncode}):\n{err[-3000:]}")
        if time.monotonic() > deadline:
            if proc is not None:
                stop_session(proc)
            raise AssertionError(f"timed out after {timeout:.0f} s")
        time.sleep(0.05)


def finish(proc: subprocess.Popen, timeout: float = 900.0) -> tuple[int, str, str]:
    """Wait for ``proc`` (its whole session is killed if it outlives ``timeout``); its return
    code, stdout and stderr."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_session(proc)
        proc.wait()
        err = _output(proc)[1][-3000:]
        raise AssertionError(f"still running after {timeout:.0f} s:\n{err}") from None
    out, err = _output(proc)
    return proc.returncode, out, err


def stop_session(proc: subprocess.Popen) -> None:
    """Kill what :func:`start` started (its session: the tool and its workers)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# --- real file systems: full, read-only ---------------------------------------------------------


@contextlib.contextmanager
def small_file_system(path: Path, size: str, *, read_only: bool = False):
    """A real tmpfs of ``size`` (``"150m"``) mounted at ``path`` (read-only once mounted, with
    ``read_only``): a disk that fills up, or one nothing can be written to. Needs root (``mount``);
    the test is skipped, with the reason, where it cannot be made."""
    import pytest

    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a real small or read-only file system needs root to mount a tmpfs")
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]
    done = subprocess.run(mount, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only_folder(path: Path):
    """A folder this process cannot write to: a read-only tmpfs as root (root writes through
    permission bits), else a folder with mode 0o555."""
    if os.geteuid() == 0:
        with small_file_system(path, "1m", read_only=True):
            yield path
        return
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


def edited_checkpoint(src: Path, dst: Path, *, last_epoch: int | None = None,
                      iteration: int | None = None) -> Path:  # fmt: skip
    """A copy of checkpoint ``src`` at ``dst`` (a new file: ``src`` may be a hard link) with its
    LR scheduler's ``last_epoch`` or its iteration (top level and trainer) edited."""
    import torch

    from budgeted.safety import load_checkpoint

    checkpoint = load_checkpoint(src)
    if last_epoch is not None:
        checkpoint["trainer"]["hooks"]["LRScheduler"]["last_epoch"] = last_epoch
    if iteration is not None:
        checkpoint["iteration"] = checkpoint["trainer"]["iteration"] = iteration
    torch.save(checkpoint, dst)
    return dst


def detectron2_tool(name: str) -> Path:
    """Detectron2's own ``tools/<name>``, unchanged, as the installed Detectron2 ships it (its
    distribution's ``tools`` package: the lite build's and a full build's); the test is skipped,
    with the reason, where the installed Detectron2 has none."""
    from importlib.metadata import PackageNotFoundError, distribution

    import pytest

    try:
        dist = distribution("detectron2")
    except PackageNotFoundError:
        pytest.skip("Detectron2 is not installed as a distribution")
    for file in dist.files or []:
        if file.as_posix() == f"tools/{name}":
            return Path(str(dist.locate_file(file)))
    pytest.skip(f"the installed Detectron2 ships no tools/{name}")

"""budgeted.safety.preemption with real signals against real child processes. Every signal is sent
after the child says it is ready (a line on its stdout), every wait has a deadline of minutes; the
tests pass whether this process has SIGINT ignored (the background of a non-interactive shell) or
not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from budgeted.safety.preemption import (
    PREEMPTED_EXIT_CODE,
    PREEMPTION_SIGNALS,
    Preempted,
    PreemptionGuard,
    PreemptionPolicy,
    active_guard,
    restore_default_signals,
)

DEADLINE_S = 300


def child(code: str, *, preexec=restore_default_signals) -> subprocess.Popen:
    """A Python child running ``code`` (default signal dispositions unless ``preexec`` says
    otherwise), its stdout a pipe read line by line."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=preexec,
    )  # fmt: skip


def read_until(proc: subprocess.Popen, word: str) -> str:
    """Read the child's stdout until a line holds ``word`` (an observable event)."""
    deadline = time.monotonic() + DEADLINE_S
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if word in line:
            return line
        assert line or proc.poll() is None, f"ended (rc {proc.poll()}): {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"no {word!r} within {DEADLINE_S} s"


def end(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=DEADLINE_S)
    return proc.returncode, out, err


GUARDED = """
import signal, sys, time
from budgeted.safety.preemption import PreemptionGuard
before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
with PreemptionGuard() as guard:
    print("ready", flush=True)
    deadline = time.monotonic() + 300
    while not guard.requested and time.monotonic() < deadline:
        time.sleep(0.01)
    print("flag", guard.signal_name, flush=True)
after = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
print("restored", after == before, flush=True)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("sig", PREEMPTION_SIGNALS, ids=lambda s: s.name)
def test_a_signal_only_sets_the_flag_and_the_old_handlers_come_back(sig) -> None:
    proc = child(GUARDED)
    read_until(proc, "ready")
    os.kill(proc.pid, sig)
    rc, out, err = end(proc)
    assert rc == 0, err
    assert f"flag {sig.name}" in out and "restored True" in out


@pytest.mark.e2e
def test_without_the_guard_the_same_signal_ends_the_process() -> None:
    """The control: the signals the tests send really do end an unguarded process."""
    proc = child("import time\nprint('ready', flush=True)\ntime.sleep(300)\n")
    read_until(proc, "ready")
    os.kill(proc.pid, signal.SIGTERM)
    assert end(proc)[0] == -signal.SIGTERM


STORM = """
import sys
from pathlib import Path
from budgeted.safety.writing import atomic_write
from budgeted.safety.preemption import PreemptionGuard
folder = Path(sys.argv[1])
with PreemptionGuard() as guard:
    for i in range(40):
        with atomic_write(folder / f"model_{i:07d}.pth") as f:
            for chunk in range(64):
                f.write(bytes([i]) * 65536)  # 4 MiB in 64 writes
                if chunk == 0:
                    print("writing", i, flush=True)
    print("signals", guard.count, guard.signal_name, flush=True)
    sys.stdin.read()  # until the test stops signalling (closes stdin): still guarded
"""


@pytest.mark.e2e
def test_signals_during_a_write_never_tear_it(tmp_path) -> None:
    """A storm of SIGTERM and SIGUSR1 while a guarded process writes checkpoints: every write
    completes whole (the handler only sets a flag; a write interrupted by a signal resumes)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STORM, str(tmp_path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=restore_default_signals,
    )  # fmt: skip
    read_until(proc, "writing")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    sent, deadline = 0, time.monotonic() + DEADLINE_S
    while not any(line.startswith("signals") for line in lines):  # all 40 written
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        os.kill(proc.pid, (signal.SIGTERM, signal.SIGUSR1)[sent % 2])
        sent += 1
        time.sleep(0.002)
    proc.stdin.close()
    assert proc.wait(timeout=DEADLINE_S) == 0, proc.stderr.read()
    reader.join(timeout=DEADLINE_S)
    count = int(next(line for line in lines if line.startswith("signals")).split()[1])
    assert count >= 2  # signals landed during the writes
    files = sorted(tmp_path.glob("model_*.pth"))
    assert len(files) == 40 and not list(tmp_path.glob(".*tmp*"))
    for i, path in enumerate(files):
        data = path.read_bytes()
        assert len(data) == 64 * 65536 and set(data) == {i}


@pytest.mark.e2e
def test_preempted_exits_75_silently_and_passes_except_exception() -> None:
    proc = child(
        "from budgeted.safety.preemption import Preempted\n"
        "try:\n"
        "    raise Preempted('train_net: preempted by SIGTERM at iteration 3/8')\n"
        "except Exception:\n"
        "    raise SystemExit('caught by except Exception: wrong')\n"
    )
    rc, out, err = end(proc)
    assert (rc, out, err) == (PREEMPTED_EXIT_CODE, "", "")
    assert PREEMPTED_EXIT_CODE == 75  # EX_TEMPFAIL, documented in docs/reliability.md
    err_obj = Preempted("x", signal.SIGUSR1)
    assert isinstance(err_obj, SystemExit) and not isinstance(err_obj, Exception)
    assert (err_obj.code, err_obj.signum, str(err_obj)) == (75, signal.SIGUSR1, "x")


@pytest.mark.unit
def test_the_guard_is_found_by_code_that_runs_under_it() -> None:
    assert active_guard() is None
    with PreemptionGuard() as outer:
        assert active_guard() is outer
        with PreemptionGuard() as inner:
            assert active_guard() is inner
            inner.request(signal.SIGUSR1)
            assert inner.requested and inner.signal_name == "SIGUSR1"
            assert not outer.requested
        assert active_guard() is outer
    assert active_guard() is None


IGNORING_PARENT = """
import signal, subprocess, sys
from budgeted.safety.preemption import restore_default_signals
# as in the background of a non-interactive shell: SIGINT ignored here, and inherited
assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
preexec = restore_default_signals if sys.argv[1] == "restore" else None
code = "import sys; print('ready', flush=True); sys.stdin.readline(); print('alive', flush=True)"
sleeper = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, preexec_fn=preexec)
sleeper.stdout.readline()
sleeper.send_signal(signal.SIGINT)  # Ctrl-C
try:
    sleeper.stdin.write("ping\\n")  # answered only by a child the SIGINT did not end
    sleeper.stdin.flush()
except BrokenPipeError:
    pass
answer = sleeper.stdout.readline().strip()
print("child", sleeper.wait(timeout=300), answer or "-", flush=True)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("preexec", ["restore", "inherit"])
def test_children_get_default_signals_even_where_sigint_is_ignored(preexec) -> None:
    """A parent started with SIGINT ignored: its child ignores Ctrl-C too, unless started with
    ``preexec_fn=restore_default_signals``."""

    def ignore_sigint() -> None:
        restore_default_signals()
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [sys.executable, "-c", IGNORING_PARENT, preexec], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=ignore_sigint,
    )  # fmt: skip
    rc, out, err = end(proc)
    assert rc == 0, err
    assert out.strip() == ("child -2 -" if preexec == "restore" else "child 0 alive")


@pytest.mark.unit
def test_restore_default_signals_in_this_process_gives_keyboard_interrupt() -> None:
    old = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        restore_default_signals([signal.SIGINT], python=True)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler runs at once; never reached
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.unit
def test_a_guard_entered_off_the_main_thread_installs_nothing(tmp_path: Path) -> None:
    seen = {}

    def run() -> None:
        with PreemptionGuard() as guard:
            seen["installed"] = guard.installed
            seen["handler"] = signal.getsignal(signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == {"installed": False, "handler": before}


# --- the stop policy both frameworks' hooks call -----------------------------------------------


@pytest.mark.unit
def test_the_policy_uses_the_tools_guard_and_stops_after_the_signal() -> None:
    with PreemptionGuard() as tool_guard:
        policy = PreemptionPolicy()
        assert policy.begin() == 0 and policy.guard is tool_guard  # the tool's, not a new one
        assert policy.stop_after(trained=1, total=5) == 0
        os.kill(os.getpid(), signal.SIGUSR1)
        assert policy.stop_after(trained=2, total=5) == signal.SIGUSR1
        assert policy.stop_after(trained=5, total=5) == 0  # the last one: the run ends anyway
        assert policy.end() is None  # one process: no all-reduce
        assert active_guard() is tool_guard  # a guard it did not install stays


@pytest.mark.unit
def test_a_signal_before_the_first_iteration_is_seen_by_begin() -> None:
    with PreemptionGuard() as guard:
        guard.request(signal.SIGTERM)  # arrived while the model was being built
        assert PreemptionPolicy().begin() == signal.SIGTERM


@pytest.mark.unit
def test_the_policy_installs_its_own_guard_and_releases_it() -> None:
    policy = PreemptionPolicy()
    policy.begin()
    assert active_guard() is policy.guard
    policy.end()
    assert active_guard() is None
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.unit
def test_with_several_ranks_the_flag_is_agreed_only_every_interval() -> None:
    policy = PreemptionPolicy(interval=4, world_size=lambda: 1)
    policy.begin()
    policy.guard.request(signal.SIGTERM)
    policy.world_size = lambda: 2  # several ranks: iterations between agreements go on
    agreed = []
    policy.agreed = lambda: agreed.append(1) or signal.SIGTERM  # the all-reduce's answer
    assert [policy.stop_after(t, 100) for t in (1, 2, 3, 4)] == [0, 0, 0, signal.SIGTERM]
    assert len(agreed) == 1
    policy.end()

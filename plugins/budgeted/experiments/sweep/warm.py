"""Warm cells (``budgeted-sweep --preload MODULE ...``): the local executor imports the modules
once, in the sweep's own process, and *forks* each cell's training process from it instead of
starting a fresh interpreter, so no cell pays for importing them again.

Why: a cell of a small model is mostly start-up. A 1 % cell of the digits (17 iterations) takes
about 4 CPU-seconds, of which 0.1 s is training; importing torch (1.2 s, ``torch._dynamo`` 1.1 s of
it, which torch's optimizers import at their first step) and scikit-learn is the rest. Forked from
a sweep that has imported them, the cell starts with them in memory (copy-on-write).

Each cell is still its own process, as without ``--preload``: its own process group, signals and
``PR_SET_PDEATHSIG`` as :func:`.execute.start_child` sets them, its output in its ``sweep.log``,
its environment, its exit status; nothing it changes (seeds, threads, modules' state) reaches the
sweep or the next cell. What differs is that its Python state starts as the sweep's after the
imports. A cell's command must run this interpreter on a script, a module or code
(``python SCRIPT ...``, ``python -m MODULE ...``, ``python -c CODE ...``): every command the sweep
plans for a local run does. The thread counts (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``) are read
when torch is imported, so the preload imports with the cells' values.

    >>> python_target(["/usr/bin/python3", "train.py", "--lr", "0.1"], python="/usr/bin/python3")
    ('path', 'train.py', ['train.py', '--lr', '0.1'])
    >>> python_target(["/usr/bin/python3", "-m", "pkg.tool", "-x"], python="/usr/bin/python3")
    ('module', 'pkg.tool', ['-m', '-x'])
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from ...errors import SweepError

__all__ = ["ForkedProcess", "check_preload", "fork_cell", "preload", "python_target"]


def python_target(command: Sequence[str], python: str = sys.executable) -> tuple[str, str, list]:
    """``(kind, target, argv)`` of a command that runs ``python``: kind ``path`` (a script),
    ``module`` (``-m``) or ``code`` (``-c``), and ``sys.argv`` as that interpreter would set it.

    Raises:
        SweepError: another program, or other interpreter options (one line).
    """
    command = list(command)
    if len(command) >= 2 and command[0] == python:
        first, rest = command[1], command[2:]
        if first in ("-m", "-c") and rest:
            kind = "module" if first == "-m" else "code"
            return kind, rest[0], [first, *rest[1:]]
        if not first.startswith("-"):
            return "path", first, [first, *rest]
    raise SweepError(
        f"--preload cannot fork the cell command {' '.join(command[:3])} ...; allowed: cells "
        f"that run {python} on a script, -m MODULE or -c CODE (leave out --preload otherwise)"
    )


def check_preload(modules: Sequence[str], commands: Sequence[Sequence[str]]) -> None:
    """Refuse (:class:`SweepError`, one line, before anything is written) a module that cannot be
    found, or a cell command :func:`fork_cell` cannot run (:func:`python_target`)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module)  # imports the parents of a.b.c, not a.b.c
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise SweepError(
                f"--preload {module} is not a module this interpreter finds; allowed: importable "
                "module names, e.g. torch torch._dynamo (nothing was run)"
            )
    for command in commands:
        python_target(command)


def preload(modules: Sequence[str], env: Mapping[str, str], variables: Sequence[str]) -> float:
    """Import ``modules`` in this process, with ``variables`` (thread counts) set from ``env``
    first; the seconds it took.

    Raises:
        SweepError: a module that cannot be imported, or exits (``sys.exit()``) as it is (one
            line naming it and why).
    """
    for name in variables:
        if name in env:
            os.environ[name] = env[name]
    start = time.perf_counter()
    for module in modules:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as err:  # ImportError, the module's own error or exit
            raise SweepError(
                f"--preload {module} cannot be imported ({type(err).__name__}: {err}); allowed: "
                "modules this interpreter imports (nothing was run or written)"
            ) from None
    return time.perf_counter() - start


class ForkedProcess:
    """The part of :class:`subprocess.Popen` the executor uses, for a forked child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reaped(self, flags: int) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, flags)
            if pid != 0:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        """Its exit status once it has ended (``-N``: killed by signal ``N``), else None."""
        return self._reaped(os.WNOHANG)

    def wait(self) -> int:
        """Wait for it to end; its exit status."""
        code = self._reaped(0)
        assert code is not None  # waitpid without WNOHANG returns once the child has ended
        return code


def _exit_code(err: SystemExit) -> int:
    """What ``sys.exit(value)`` makes the interpreter exit with (a text: printed, then 1)."""
    if err.code is None or isinstance(err.code, int):
        return err.code or 0
    print(err.code, file=sys.stderr)
    return 1


def _run(kind: str, target: str, argv: list[str]) -> int:
    """Run the cell's script, module or code as ``__main__`` with ``sys.argv`` and ``sys.path[0]``
    as the interpreter would set them; its exit status."""
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(target)) if kind == "path" else ""
    try:
        if kind == "path":
            runpy.run_path(target, run_name="__main__")
        elif kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as err:
        return _exit_code(err)
    return 0


def fork_cell(
    command: Sequence[str], log: IO[str], env: Mapping[str, str], setup: Callable[[], None]
) -> ForkedProcess:
    """Fork a child of this process that runs ``command`` (:func:`python_target`) with ``env``,
    stdin from ``/dev/null`` and its output into ``log``, after ``setup()`` (the executor's
    :func:`.execute.start_child`); the child never returns here."""
    kind, target, argv = python_target(command)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return ForkedProcess(pid)
    code = 1
    try:
        setup()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        os.environ.clear()
        os.environ.update(env)
        code = _run(kind, target, argv)
    except BaseException:  # the cell's own error: its traceback in its log, as a fresh process
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: nothing more to write
                stream.flush()
        os._exit(code)

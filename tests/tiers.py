"""The test tiers, checked while the tests run (loaded by tests/conftest.py).

Every test carries exactly one tier marker:

- ``unit``: in-process, no subprocess, no framework trainer (``make test-fast``);
- ``integration``: a real trainer (Detectron2, MMEngine, Lightning, the HF Trainer), in-process,
  no subprocess;
- ``e2e``: subprocesses, launchers, signals to trainers, packaging, the README's snippets.

A test whose marker is wrong fails: a ``unit`` test that starts one of our processes or builds a
framework trainer, an ``integration`` test that starts one of our processes. Process starts are
counted where both ``subprocess`` and ``multiprocessing`` (spawn, forkserver) start a program,
``_posixsubprocess.fork_exec`` (and ``subprocess``'s own binding of it), and at
``os.posix_spawn`` and ``os.fork``; a program counts when it is ours (:data:`OURS`: a Python
interpreter, a shell script, Slurm, pip), not a probe a framework runs for its log (``gcc
--version``). Trainers are counted where Detectron2's ``TrainerBase`` and MMEngine's ``Runner``
are constructed (wrapped when those modules are first imported). The count starts with the
test's setup: a module fixture that trains counts for the test that builds it, so a test that
needs a trained fixture carries the fixture's tier.
"""

from __future__ import annotations

import _posixsubprocess
import importlib.abc
import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

TIERS = ("unit", "integration", "e2e")
STARTED: Counter[str] = Counter()
"""What the running test started: ``process`` and ``trainer`` counts."""

_TRAINERS = {
    "detectron2.engine.train_loop": "TrainerBase",
    "mmengine.runner.runner": "Runner",
    "lightning.pytorch.trainer.trainer": "Trainer",
    "transformers.trainer": "Trainer",
}


def _counted(function: Any, key: str) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        STARTED[key] += 1
        return function(*args, **kwargs)

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    return wrapper


OURS = re.compile(r"python|torchrun|\.sh\b|\b(sbatch|srun|scancel|scontrol|pip|buildah)\b")
"""A started program that makes a test end-to-end: an interpreter (a tool, a launcher's
worker), a shell script, Slurm, pip, an image build. Probes a framework runs for its own log
(MMEngine's ``gcc --version``, ``git rev-parse``; Detectron2's ``collect_env``) do not count."""


def _command(argv: Any) -> str:
    items = argv if isinstance(argv, (list, tuple)) else [argv]
    return " ".join(a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in items)


def _counted_start(function: Any, argv_at: int) -> Any:
    """``function`` (``fork_exec``: argv first; ``posix_spawn``: argv second), counting the
    starts of :data:`OURS`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > argv_at and OURS.search(_command(args[argv_at])):
            STARTED["process"] += 1
        return function(*args, **kwargs)

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    return wrapper


def _count_trainers(module: Any) -> None:
    cls = getattr(module, _TRAINERS[module.__name__])
    cls.__init__ = _counted(cls.__init__, "trainer")


class _TrainerImports(importlib.abc.MetaPathFinder):
    """Wraps a framework trainer's ``__init__`` as its module is first imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _TRAINERS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_count(module: Any) -> None:
            exec_module(module)
            _count_trainers(module)

        spec.loader.exec_module = exec_and_count  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Count process starts and trainer constructions from now on (once per process)."""
    if getattr(_posixsubprocess.fork_exec, "__wrapped__", None) is not None:
        return
    _posixsubprocess.fork_exec = _counted_start(_posixsubprocess.fork_exec, 0)
    subprocess._fork_exec = _posixsubprocess.fork_exec  # type: ignore[attr-defined]
    os.posix_spawn = _counted_start(os.posix_spawn, 1)
    os.fork = _counted(os.fork, "process")  # a forked copy of the test process
    for name in _TRAINERS:
        if name in sys.modules:
            _count_trainers(sys.modules[name])
    sys.meta_path.insert(0, _TrainerImports())


def tier_of(item: pytest.Item) -> str:
    """The one tier marker of ``item``; a collection error naming the test otherwise."""
    found = [name for name in TIERS if item.get_closest_marker(name)]
    if len(found) != 1:
        raise pytest.UsageError(
            f"{item.nodeid}: tier markers {found or 'none'}; allowed: exactly one of "
            f"{', '.join(TIERS)} (tests/tiers.py)"
        )
    return found[0]


def problem(tier: str) -> str | None:
    """What the test that just ran did that its ``tier`` rules out (None: nothing)."""
    if tier != "e2e" and STARTED["process"]:
        return f"a {tier} test started {STARTED['process']} process(es): mark it e2e"
    if tier == "unit" and STARTED["trainer"]:
        return "a unit test built a framework trainer: mark it integration"
    return None

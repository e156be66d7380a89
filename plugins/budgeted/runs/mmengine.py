"""What a work dir of an MMEngine / MMSegmentation run holds: started, finished, its metrics.

What marks a work dir as holding a run (:func:`run_files`), its lock and the words of the lines
about it (:mod:`budgeted.control.folder`), and the final validation metrics of a finished run
(:func:`final_metrics`) for sweeps and reports.
MMEngine writes, in a work dir: checkpoints (``iter_<N>.pth``, ``epoch_<N>.pth``) and
``last_checkpoint``, the config it ran (``<config name>.py``) and, per launch,
``<timestamp>/vis_data/scalars.json`` (one JSON record a line: training iterations and
validations).

A work dir is untrusted (it may come from anyone): everything here reads it as data. The JSON
logs are parsed as JSON, and the config dump is parsed as Python without being run
(:func:`dumped_max_iters`); nothing imports MMEngine or executes a file of the folder.
"""

from __future__ import annotations

import ast
import os
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..safety.loading import load_checkpoint as safe_load
from ..safety.locks import FolderBusyError, FolderLock
from . import SavedLRs, check_new_run
from .records import RecordError, curve, number, read_json_lines

__all__ = [
    "CURVE_NAMES", "EXTRA_GLOBALS", "LOCK_NAME", "WORDS", "WorkDirBusyError", "WorkDirLock",
    "check_new_run_folder", "dumped_max_iters", "dumped_train_cfg", "evaluations", "extra_globals",
    "final_metrics", "history_buffer_getattr", "holds_run", "load_checkpoint", "resume_checkpoint",
    "run_files", "saved_base_lrs", "saved_schedulers", "scheduler_key", "scheduler_place",
    "state_place", "train_curve"
]  # fmt: skip

LOCK_NAME = ".train_seg.lock"
"""The lock file ``tools/train_seg.py`` holds (``flock``) in its work dir while it trains."""

WORDS = {
    "folder": "work dir",
    "writable": "a --work-dir where this user can create files",
    "in_use": "work dir {folder} is in use: {holder} is training there (it holds {lock}); wait "
    "for it to end, stop it, or choose another --work-dir (nothing was written)",
    "in_use_agreed": "work dir {folder} is in use (rank 0 found it locked)",
    "holds_run": "work dir {folder} already holds a run ({shown}); pass --resume to continue it, "
    "or choose another --work-dir (nothing is overwritten)",
    "removed": "removed {count} temporary file(s) that a killed checkpoint write left in "
    "{folder}: {names}",
}
"""``tools/train_seg.py``'s lines about its work dir (:mod:`budgeted.control.folder`); they name
its one option, ``--work-dir``."""

WorkDirBusyError = FolderBusyError
"""Another process trains in the work dir (one line naming it)."""


class WorkDirLock(FolderLock):
    """An exclusive ``flock`` on ``<folder>/.train_seg.lock`` while a run trains there: the lock
    of the work dir's :class:`~budgeted.control.folder.OutputFolder`.

    Example:
        >>> import tempfile
        >>> lock = WorkDirLock(tempfile.mkdtemp())
        >>> lock.check(); lock.acquire(); lock.release()
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        super().__init__(folder, LOCK_NAME, WORDS["in_use"])


def scheduler_key(group: Any, index: int) -> str:
    """Where a scheduler state is in a checkpoint: ``param_schedulers[0]``, or
    ``param_schedulers.<optimizer>[<i>]`` where each optimizer has its list."""
    return f"param_schedulers{'' if group is None else f'.{group}'}[{index}]"


def scheduler_place(key: str) -> tuple[str | None, int]:
    """``(optimizer name or None, position)`` of a :func:`scheduler_key`.

    Example:
        >>> scheduler_place("param_schedulers.backbone[1]"), scheduler_place("param_schedulers[0]")
        (('backbone', 1), (None, 0))
    """
    head, _, index = key[: -len("]")].rpartition("[")
    group = head[len("param_schedulers.") :] if head != "param_schedulers" else None
    return group, int(index)


def saved_schedulers(checkpoint: Any) -> dict[str, dict[str, Any]]:
    """The LR scheduler states a loaded (untrusted) checkpoint holds, by :func:`scheduler_key`
    (``{}`` where none): ``param_schedulers`` is a list, or a dict of lists (one per optimizer),
    paired with the config's schedulers by position as MMEngine's ``Runner.resume`` does (a
    ``zip``); an entry that is not a state is left out.

    Example:
        >>> saved_schedulers({"param_schedulers": [{"last_step": 3}, "junk"]})
        {'param_schedulers[0]': {'last_step': 3}}
        >>> saved_schedulers({"param_schedulers": {"head": [{"begin": 0}]}, "meta": None})
        {'param_schedulers.head[0]': {'begin': 0}}
    """
    saved = checkpoint.get("param_schedulers") if isinstance(checkpoint, Mapping) else None
    groups = saved.items() if isinstance(saved, Mapping) else [(None, saved)]
    return {
        scheduler_key(group, index): dict(state)
        for group, states in groups
        for index, state in enumerate(states if isinstance(states, list) else [])
        if isinstance(state, Mapping)
    }


def state_place(group: str | None, index: int) -> str:
    """Where a saved scheduler state is in ``param_schedulers``: ``[0]``, ``['backbone'][1]``."""
    return f"[{group!r}][{index}]" if group is not None else f"[{index}]"


def saved_base_lrs(checkpoint: Any) -> list[SavedLRs]:
    """Every record of the base LRs in a loaded (untrusted) checkpoint, by optimizer name (None:
    the only one): each LR scheduler's ``base_values`` (``param_name`` "lr"), then each optimizer
    state's ``initial_lr`` per param group (``lr`` where no scheduler moved it).

    Example:
        >>> saved_base_lrs({"optimizer": {"param_groups": [{"lr": 0.1}]}})[0].owner
        'optimizer'
    """
    found = []
    for key, state in saved_schedulers(checkpoint).items():
        if state.get("param_name", "lr") == "lr" and "base_values" in state:
            group, index = scheduler_place(key)
            owner = f"param_scheduler{state_place(group, index)}"
            found.append(SavedLRs(group, "base_values", state["base_values"], owner))
    saved = checkpoint.get("optimizer") if isinstance(checkpoint, Mapping) else None
    states = {None: saved} if isinstance(saved, Mapping) and "param_groups" in saved else saved
    for name, state in states.items() if isinstance(states, Mapping) else ():
        groups = state.get("param_groups") if isinstance(state, Mapping) else None
        if not isinstance(groups, list) or not all(isinstance(g, Mapping) for g in groups):
            continue
        key = "initial_lr" if all("initial_lr" in g for g in groups) else "lr"
        if key == "lr" and checkpoint.get("param_schedulers"):
            continue  # a scheduler moved the LR: its base_values are the base
        name = None if name is None else str(name)
        label = "optimizer" if name is None else f"optimizer[{name!r}]"
        found.append(SavedLRs(name, f"param groups' {key}", [g[key] for g in groups], label))
    return found


EXTRA_GLOBALS = ("mmengine.logging.history_buffer.HistoryBuffer", "builtins.getattr")
"""What MMEngine's checkpoints pickle beyond the shared loader's own set (tensors, builtin
containers, numpy arrays and scalars), by name: the message hub's ``HistoryBuffer`` and
``getattr`` of its statistics methods (:func:`history_buffer_getattr`), resolved only when a file
is loaded."""

_STATISTICS = ("min", "max", "current", "mean")


def history_buffer_getattr(owner: Any, name: str) -> Any:
    """What ``builtins.getattr`` resolves to in a checkpoint: HistoryBuffer's statistics only
    (anything else: ``pickle.UnpicklingError``)."""
    from mmengine.logging.history_buffer import HistoryBuffer

    if owner is HistoryBuffer and name in _STATISTICS:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f"refused getattr({owner!r}, {name!r}): checkpoints may only name HistoryBuffer's "
        f"statistics methods ({', '.join(_STATISTICS)})"
    )


def extra_globals() -> dict[str, Any]:
    """:data:`EXTRA_GLOBALS` resolved (``"module.name" -> object``; imports MMEngine)."""
    from mmengine.logging.history_buffer import HistoryBuffer

    return {EXTRA_GLOBALS[0]: HistoryBuffer, EXTRA_GLOBALS[1]: history_buffer_getattr}


def load_checkpoint(path: str | os.PathLike[str], map_location: Any = "cpu") -> Any:
    """A work dir's checkpoint (or a ``load_from`` file), loaded as untrusted data:
    :func:`budgeted.safety.load_checkpoint` with :data:`EXTRA_GLOBALS` (imports MMEngine and
    torch).

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line naming the file; nothing ran.
    """
    return safe_load(path, map_location=map_location, extra_globals=extra_globals())


_REMOTE = re.compile(r"^[\w.+-]*:(//)?")
"""``s3://...``, ``open-mmlab://...``: MMEngine's own loaders, not files."""


def resume_checkpoint(folder: str | os.PathLike[str]) -> str | None:
    """The checkpoint file ``--resume`` would load from work dir ``folder``: the one its
    ``last_checkpoint`` names (read as ``mmengine.runner.find_latest_checkpoint`` reads it; maybe
    a missing file), or the folder's own file of that name where the folder was moved or copied
    since; None without a ``last_checkpoint`` naming one file.

    Example:
        >>> resume_checkpoint("/nonexistent/folder") is None
        True
    """
    try:
        named = Path(folder, "last_checkpoint").read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None
    if not named or "\n" in named:
        return None
    if _REMOTE.match(named) and not os.path.exists(named):
        return named
    here = Path(folder, Path(named).name)
    if here.is_file() and Path(os.path.realpath(named)).parent != Path(os.path.realpath(folder)):
        return str(here)
    return named


_NOT_METRICS = frozenset({"step", "iter", "epoch", "time", "data_time"})
"""Keys of a validation record in ``scalars.json`` that are bookkeeping, not metrics."""


def run_files(folder: str | os.PathLike[str]) -> list[str]:
    """The files in ``folder`` that show a run was started there, sorted (relative names).

    Args:
        folder (str or PathLike): an MMEngine work dir.

    Returns:
        list[str]: checkpoints, ``last_checkpoint`` and training logs (``*/vis_data/scalars.json``).

    Example:
        >>> import tempfile
        >>> run_files(tempfile.mkdtemp())
        []
    """
    root = Path(folder)
    if not root.is_dir():
        return []
    found = [p for p in root.glob("*.pth") if p.is_file()]
    found += [root / "last_checkpoint"] if (root / "last_checkpoint").exists() else []
    found += list(root.glob("*/vis_data/scalars.json"))
    return sorted(p.relative_to(root).as_posix() for p in found)


def holds_run(folder: str | os.PathLike[str]) -> bool:
    """Whether an MMEngine run was started in ``folder`` (checkpoints or training logs).

    Args:
        folder (str or PathLike): an MMEngine work dir (need not exist).

    Example:
        >>> import tempfile
        >>> holds_run(tempfile.mkdtemp())
        False
    """
    return bool(run_files(folder))


def check_new_run_folder(
    folder: str | os.PathLike[str], resume: bool, *, key: str = "--work-dir"
) -> None:
    """Refuse (one ``ValueError`` line naming ``folder``, what it holds and the two ways on) a
    new run in a work dir that already holds one; a resumed run (``resume``) may go on there.
    ``key`` names the option (``--work-dir``, the only one).

    Example:
        >>> import tempfile
        >>> check_new_run_folder(tempfile.mkdtemp(), resume=False)  # empty: a new run may start
    """
    check_new_run(folder, resume, run_files, WORDS["holds_run"], key)


def _config_dump(folder: Path) -> Path | None:
    """The config of the last launch in ``folder`` that logged training: the one that launch
    saved (``<timestamp>/vis_data/config.py``), else the one MMEngine last dumped into
    ``folder``. A later launch that logged nothing (a resume refused before training, which
    MMEngine lets rewrite the dump first) does not change a run's length."""
    logged = sorted(p.parent for p in folder.glob("*/vis_data/scalars.json"))
    saved = logged[-1] / "config.py" if logged else None
    if saved is not None and saved.is_file():
        return saved
    dumps = sorted(folder.glob("*.py"), key=lambda p: p.stat().st_mtime)
    return dumps[-1] if dumps else None


_DUMP_ALLOWED = (
    "allowed: the config MMEngine dumped (plain assignments such as train_cfg = "
    "dict(max_iters=3200, ...)); a run folder's files are read as data, never run"
)


def _top_level_value(tree: ast.Module, name: str) -> ast.expr | None:
    """The expression last assigned to ``name`` at the top level of ``tree`` (None: never)."""
    value = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
    return value


def _dict_fields(node: ast.expr) -> dict[str, ast.expr] | None:
    """The named fields of ``dict(key=...)`` or ``{"key": ...}`` (unevaluated); None for any
    other expression."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.Dict):
        return {
            k.value: v
            for k, v in zip(node.keys, node.values)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    return None


def dumped_train_cfg(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The literal fields of ``train_cfg`` in a config MMEngine dumped, read without running the
    file (:func:`dumped_max_iters`): ``{"type": "IterBasedTrainLoop", "max_iters": 32, ...}``;
    ``{}`` without a ``train_cfg``. A field that is not a literal is left out, but for
    ``max_iters``, which must be one (else :class:`RecordError`).
    """
    path = Path(path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as err:
        raise RecordError(
            f"config dump {path} is not Python ({err.msg}, line {err.lineno}); {_DUMP_ALLOWED}"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as err:
        raise RecordError(
            f"config dump {path} cannot be read ({type(err).__name__}: {err}); {_DUMP_ALLOWED}"
        ) from None
    train_cfg = _top_level_value(tree, "train_cfg")
    if train_cfg is None or (isinstance(train_cfg, ast.Constant) and train_cfg.value is None):
        return {}
    fields = _dict_fields(train_cfg)
    if fields is None:
        raise RecordError(
            f"config dump {path}: train_cfg is an expression, not dict(...) "
            f"(line {train_cfg.lineno}); {_DUMP_ALLOWED}"
        )
    found = {}
    for key, node in fields.items():
        try:
            found[key] = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            if key == "max_iters":
                raise RecordError(
                    f"config dump {path}: train_cfg.max_iters is an expression, not a number "
                    f"(line {node.lineno}); {_DUMP_ALLOWED}"
                ) from None
    return found


def dumped_max_iters(path: str | os.PathLike[str]) -> int | None:
    """``train_cfg.max_iters`` of a config MMEngine dumped, read without running the file.

    The file is parsed (``ast``), never executed nor imported, and only a literal is read: a
    run folder may come from anyone, and ``Config.fromfile`` would run whatever code it holds.
    MMEngine dumps the merged config as plain assignments (``train_cfg = dict(max_iters=32,
    ...)``), which is all this reads; anything else in the file is ignored.

    Args:
        path (str or PathLike): ``<work_dir>/<config>.py`` or ``<timestamp>/vis_data/config.py``.

    Returns:
        int or None: the iterations; None where the file sets no ``train_cfg.max_iters`` or a
        value that is not an integer (an epoch-based loop).

    Raises:
        RecordError: one line, where the file is not Python, or ``train_cfg`` or its
            ``max_iters`` is an expression rather than a literal.

    Example:
        >>> import tempfile
        >>> dump = Path(tempfile.mkdtemp()) / "cfg.py"
        >>> text = "train_cfg = dict(max_iters=32)\\n_x = __import__('os').getpid()\\n"
        >>> _ = dump.write_text(text)
        >>> dumped_max_iters(dump)
        32
    """
    max_iters = dumped_train_cfg(path).get("max_iters")
    return max_iters if isinstance(max_iters, int) and not isinstance(max_iters, bool) else None


def final_metrics(folder: str | os.PathLike[str]) -> dict[str, float] | None:
    """The validation metrics at the end of a finished run, or None if it did not get there.

    The end is ``train_cfg.max_iters`` of the last launch that logged training (its saved
    config; else the config MMEngine dumped into the work dir; parsed, never run); for a
    ``TimeBudgetTrainLoop`` (a time budget, ``max_iters`` a cap) the iteration of its last
    validation, where its last checkpoint was saved and nothing was trained after it. The
    metrics are those of the last validation logged at that iteration in
    ``<folder>/<timestamp>/vis_data/scalars.json`` (for MMSegmentation's ``IoUMetric``:
    ``aAcc``, ``mIoU``, ``mAcc``, in percent).

    Args:
        folder (str or PathLike): an MMEngine work dir.

    Returns:
        dict[str, float] or None: metric name -> value; ``{}`` for a run whose final validation
        logged no metric (MMDetection's ``CocoMetric`` when the model predicted nothing); None
        for a run that is missing, still running, stopped early or epoch-based.

    Raises:
        RecordError: the config dump cannot be read as data (:func:`dumped_max_iters`).

    Example:
        >>> import tempfile
        >>> final_metrics(tempfile.mkdtemp()) is None
        True
    """
    root = Path(folder)
    dump = _config_dump(root) if root.is_dir() else None
    train_cfg = dumped_train_cfg(dump) if dump is not None else {}
    end = train_cfg.get("max_iters")
    if not isinstance(end, int) or isinstance(end, bool):
        return None
    records = _scalars(root)
    if train_cfg.get("type") == "TimeBudgetTrainLoop":
        end = _time_budget_end(root, records, end)
    finals = [r for r in records if r.get("step") == end and "lr" not in r and "loss" not in r]
    return _metrics(finals[-1]) if finals else None


def _time_budget_end(root: Path, records: list[dict], max_iters: int) -> int | None:
    """Where a ``TimeBudgetTrainLoop`` run ended (its ``max_iters`` only caps it): the step of
    its last validation, if that is also its last checkpoint (the loop saves, then validates,
    when the deadline comes) and nothing was trained after it; else None (still running,
    stopped early)."""
    validated = [r["step"] for r in records if _validation_step(r) is not None]
    trained = [r["step"] for r in records if "lr" in r and isinstance(r.get("step"), int)]
    if not validated or validated[-1] > max_iters or max(trained, default=0) > validated[-1]:
        return None
    return validated[-1] if (root / f"iter_{validated[-1]}.pth").is_file() else None


def _validation_step(record: dict) -> int | None:
    """The step of a validation record of ``scalars.json`` (None: a training record)."""
    if "lr" in record or "loss" in record:
        return None
    step = record.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _metrics(record: dict) -> dict[str, float]:
    """The metrics of a validation record of ``scalars.json``: its numbers, bookkeeping left
    out."""
    found = {k: number(v) for k, v in record.items() if k not in _NOT_METRICS}
    return {k: v for k, v in found.items() if v is not None}


CURVE_NAMES = {"lr": "lr", "loss": "loss", "grad_norm": "full_grad_norm"}
""":data:`budgeted.runs.records.CURVE_KEYS` -> the key in ``scalars.json``."""


def _scalars(folder: str | os.PathLike[str]) -> list[dict]:
    """The records of every launch's ``scalars.json`` in ``folder``, oldest launch first."""
    return [
        record
        for path in sorted(Path(folder).glob("*/vis_data/scalars.json"))
        for record in read_json_lines(path)
    ]


def train_curve(folder: str | os.PathLike[str]) -> list[dict[str, float]]:
    """The LR, training loss and full-gradient norm (where logged) per logged iteration, from
    every launch's ``scalars.json`` (MMEngine logs every ``LoggerHook`` interval); ``[]``
    without one.

    Example:
        >>> import tempfile
        >>> train_curve(tempfile.mkdtemp())
        []
    """
    return curve(_scalars(folder), "step", CURVE_NAMES)


def evaluations(folder: str | os.PathLike[str]) -> list[tuple[int, dict[str, float]]]:
    """Every validation logged in the work dir: (iteration, its metrics), in order; ``[]``
    without one. With ``train_cfg.val_interval`` below ``max_iters`` there is one per interval.

    Example:
        >>> import tempfile
        >>> evaluations(tempfile.mkdtemp())
        []
    """
    found = []
    for record in _scalars(folder):
        if "lr" in record or "loss" in record or not isinstance(record.get("step"), int):
            continue
        metrics = _metrics(record)
        if metrics:
            found.append((record["step"], metrics))
    return found

"""A finished run's final metric, as a sweep reports it (:func:`read_final`): each framework's
metrics and their range (:data:`METRICS`), the user's ``--metric`` (:func:`metrics_of`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import RecordError, ReportError
from ...runs import reader
from ...runs.records import read_json_lines, shown
from ..families import ConfigFamily

__all__ = [
    "LOGGED_AS_FRACTION", "METRICS", "NAN_LOGGED", "NOTHING_PREDICTED", "Final", "metrics_of",
    "read_final",
]  # fmt: skip

METRICS: dict[str, tuple[tuple[str, str], ...]] = {
    "detectron2": (("box AP", "bbox/AP"), ("mask AP", "segm/AP")),
    "mmseg": (("mIoU", "mIoU"),),
    "mmdet": (("box AP", "coco/bbox_mAP"), ("mask AP", "coco/segm_mAP")),
    "mmpretrain": (("top-1", "accuracy/top1"),),
    "mmaction": (("top-1", "acc/top1"),),
    "pytorch": (("top-1", "val_accuracy"),),
}
"""framework -> (name shown, key in the training tool's log) of each reported metric."""
LOGGED_AS_FRACTION = frozenset({"mmdet", "mmaction", "pytorch"})
"""Frameworks whose metrics are logged as fractions (0.375): the report shows them in percent."""
NOTHING_PREDICTED = {"detectron2": "logged as NaN", "mmdet": "not logged"}
"""framework -> how its COCO evaluation logs a metric when the model predicted nothing (counted
as 0, the COCO AP of no detections, the run named)."""
NAN_LOGGED = frozenset({"detectron2"})
"""Frameworks that log NaN for a model that predicted nothing; any other NaN is not a result."""
_FINAL_LOGS = {"detectron2": "metrics.json", "pytorch": "metrics.jsonl"}
"""framework -> its final evaluation's log (else MMEngine's: ``*/vis_data/scalars.json``)."""


def metrics_of(fam: ConfigFamily) -> tuple[tuple[str, str], ...]:
    """(name shown, key logged) of each metric a sweep of ``fam`` reports: its ``--metric``
    (shown as logged), else the framework's :data:`METRICS`.

    >>> from budgeted.experiments.families import PSPNET_TOY
    >>> metrics_of(PSPNET_TOY)
    (('mIoU', 'mIoU'),)
    """
    return ((fam.metric, fam.metric),) if fam.metric else METRICS.get(fam.framework, ())


@dataclass
class Final:
    """A finished run: its length in iterations and its final metrics (shown names);
    ``no_predictions``: the metrics its evaluation could not compute because the model predicted
    nothing (:data:`NOTHING_PREDICTED`), counted as 0 and named in the report."""

    iters: int
    metrics: dict[str, float]
    no_predictions: tuple[str, ...] = ()


def read_final(fam: ConfigFamily, budget: float, run_dir: Path) -> Final | None:
    """The final metrics of a finished run of ``fam`` at ``budget`` in ``run_dir`` (through its
    framework's run-folder reader), else None.

    Raises:
        ReportError: a finished run whose final evaluation has no result the report reads: a
            metric logged as no number (a string, an integer past a float's range), out of its
            range or not finite, or none of the metrics logged (one line naming the value and
            what is allowed).
    """
    if not run_dir.is_dir():
        return None
    try:
        found = reader(fam.framework).final_metrics(run_dir)
    except RecordError as err:
        raise ReportError(str(err)) from None
    if found is None or (not found and fam.framework not in NOTHING_PREDICTED):
        return None
    _check_final(fam, run_dir, found)
    if fam.metric:
        return Final(fam.iters(budget), {fam.metric: found[fam.metric]})
    if not found:  # validated, but no metric logged: the model predicted nothing
        found = {key: math.nan for _, key in METRICS[fam.framework]}
    scale = 100.0 if fam.framework in LOGGED_AS_FRACTION else 1.0
    metrics = {
        name: scale * float(found[key]) for name, key in METRICS[fam.framework] if key in found
    }
    if not any(math.isnan(v) for v in metrics.values()):
        return Final(fam.iters(budget), metrics)
    empty = tuple(n for n, _ in METRICS[fam.framework] if math.isnan(metrics.get(n, math.nan)))
    return Final(fam.iters(budget), {**metrics, **dict.fromkeys(empty, 0.0)}, empty)


_AGAIN = "move the cell's folder away to train it again"


def _allowed(fam: ConfigFamily, key: str) -> str:
    """What a final ``key`` of ``fam`` may be, as a refusal names it: any finite number for
    ``--metric``; else a number in [0, 1] where :data:`LOGGED_AS_FRACTION`, [0, 100] otherwise,
    NaN too where :data:`NAN_LOGGED`."""
    if fam.metric:
        return f"a finite number ({_AGAIN})"
    framework = fam.framework
    high, nan = 1.0 if framework in LOGGED_AS_FRACTION else 100.0, framework in NAN_LOGGED
    unit = "as a fraction" if high == 1.0 else "in percent"
    return (
        f"a number in [0, {high:g}]{' or NaN' if nan else ''} ({framework} logs {key} {unit}"
        f"{', NaN where the model predicted nothing' if nan else ''}; {_AGAIN})"
    )


def _in_range(fam: ConfigFamily, value: float) -> bool:
    """Whether a final metric of ``fam`` is one :func:`_allowed` takes."""
    if fam.metric:
        return math.isfinite(value)
    if math.isnan(value):
        return fam.framework in NAN_LOGGED
    return 0.0 <= value <= (1.0 if fam.framework in LOGGED_AS_FRACTION else 100.0)


def _check_final(fam: ConfigFamily, run_dir: Path, found: dict[str, float]) -> None:
    """Refuse (:class:`ReportError`, one line naming the value and what is allowed) a final
    evaluation without the result the report reads: a reported metric out of its range
    (:func:`_allowed`), one logged as no number (a string, an integer past a float's range: the
    reader leaves those out; found again in the log), or none of them logged (a model that
    predicted nothing logs none where :data:`NOTHING_PREDICTED`: counted as 0)."""
    keys = [fam.metric] if fam.metric else [key for _, key in METRICS[fam.framework]]
    where = run_dir if fam.metric else _final_log(fam, run_dir)
    for key in keys:
        if key in found and not _in_range(fam, found[key]):
            raise ReportError(f"{where}: its final {key} {found[key]!r} is not a result; "
                              f"allowed: {_allowed(fam, key)}")  # fmt: skip
    missing = [key for key in keys if key not in found]
    logged = _final_record(fam, run_dir, found) if found and missing else {}
    for key in missing:
        if key in logged:  # a value the reader does not take as a number
            raise ReportError(f"{where}: its final {key} {shown(logged[key])} is not a result; "
                              f"allowed: {_allowed(fam, key)}")  # fmt: skip
    if len(missing) < len(keys) or not (found or fam.metric):
        return
    names = ", ".join(sorted(found)) or "none"
    if fam.metric:
        raise ReportError(f"--metric {fam.metric!r} is not logged by the run in {run_dir}; "
                          f"allowed: a key its final evaluation logged ({names})")  # fmt: skip
    raise ReportError(
        f"{where}: its final evaluation logged no {' or '.join(keys)} (it logged {names}); "
        f"allowed: {keys[0]} as {_allowed(fam, keys[0])}, or --metric KEY to report another key"
    )


def _final_log(fam: ConfigFamily, run_dir: Path) -> Path:
    """The log of the run's final evaluation (the newest, of an MMEngine run launched again)."""
    return ([run_dir, *_logs(fam, run_dir)])[-1]


def _logs(fam: ConfigFamily, run_dir: Path) -> list[Path]:
    """The logs a finished run's final evaluation is in, oldest first."""
    return sorted(run_dir.glob(_FINAL_LOGS.get(fam.framework, "*/vis_data/scalars.json")))


def _final_record(fam: ConfigFamily, run_dir: Path, found: dict[str, float]) -> dict[str, Any]:
    """The final evaluation's record as logged, its values unread: the last record of the run's
    logs that holds every metric the reader ``found`` in it; {} without one."""
    records = [r for log in _logs(fam, run_dir) for r in read_json_lines(log)]
    return next((r for r in reversed(records) if found.keys() <= r.keys()), {})

"""A finished run's final metric, as a sweep reports it (:func:`read_final`): each framework's
metrics and their range (:data:`METRICS`), the user's ``--metric`` (:func:`metrics_of`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ...errors import RecordError, ReportError
from ...runs import reader
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
    framework's run-folder reader), else None."""
    if not run_dir.is_dir():
        return None
    try:
        found = reader(fam.framework).final_metrics(run_dir)
    except RecordError as err:
        raise ReportError(str(err)) from None
    if found is None or (not found and fam.framework not in NOTHING_PREDICTED):
        return None
    if fam.metric:
        return Final(fam.iters(budget), {fam.metric: _own_metric(fam, run_dir, found)})
    _check_final(fam.framework, run_dir, found)
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


def _own_metric(fam: ConfigFamily, run_dir: Path, found: dict[str, float]) -> float:
    """The ``--metric`` of a finished run, as logged: one line where the run did not log it
    (naming the keys it did) or logged a number that is not finite."""
    value = found.get(fam.metric)
    if value is None:
        logged = ", ".join(sorted(found)) or "none"
        raise ReportError(f"--metric {fam.metric!r} is not logged by the run in {run_dir}; "
                          f"allowed: a key its final evaluation logged ({logged})")  # fmt: skip
    if not math.isfinite(value):
        raise ReportError(f"{run_dir}: its final {fam.metric} {value!r} is not a result; "
                          "allowed: a finite number (move the cell's folder away to train it "
                          "again)")  # fmt: skip
    return float(value)


def _check_final(framework: str, run_dir: Path, found: dict[str, float]) -> None:
    """Refuse (one line) a final metric outside its tool's range: [0, 1] where
    :data:`LOGGED_AS_FRACTION`, else [0, 100]; NaN only where :data:`NAN_LOGGED`."""
    low, high = 0.0, 1.0 if framework in LOGGED_AS_FRACTION else 100.0
    nan = framework in NAN_LOGGED
    for _, key in METRICS[framework]:
        value = found.get(key)
        if value is None or low <= value <= high or (nan and math.isnan(value)):
            continue
        log = sorted(run_dir.glob(_FINAL_LOGS.get(framework, "*/vis_data/scalars.json")))[-1]
        unit = "as a fraction" if high == 1.0 else "in percent"
        raise ReportError(
            f"{log}: its final {key} {value!r} is not a result; allowed: a number in "
            f"[{low:g}, {high:g}]{' or NaN' if nan else ''} ({framework} logs {key} {unit}"
            f"{', NaN where the model predicted nothing' if nan else ''}; move the cell's "
            "folder away to train it again)"
        )

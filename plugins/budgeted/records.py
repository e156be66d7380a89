"""Reading the JSON-lines logs that run folders hold (framework-free).

>>> import tempfile, pathlib
>>> log = pathlib.Path(tempfile.mkdtemp()) / "metrics.json"
>>> _ = log.write_text('{"iteration": 0}\\n{"iteration": 1, "lr": 0.1}\\n{"iterat')
>>> read_json_lines(log)
[{'iteration': 0}, {'iteration': 1, 'lr': 0.1}]
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["CURVE_KEYS", "curve", "read_json_lines"]

CURVE_KEYS = ("lr", "loss", "grad_norm")
"""What a training curve holds per logged iteration (where the run logged it)."""


def read_json_lines(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines log, in order; a line cut short by a crash (or any
    line that is not a JSON object) is left out.

    Args:
        path: the log (Detectron2's ``metrics.json``, MMEngine's ``vis_data/scalars.json``).
    """
    records = []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def curve(
    records: list[dict[str, Any]], step: str, names: dict[str, str]
) -> list[dict[str, float]]:
    """The training curve in ``records``: one dict per logged iteration, ascending, with
    ``iteration`` and each of :data:`CURVE_KEYS` the records hold (under ``names[key]``).

    A record without any of them (an evaluation) is left out; an iteration logged twice (a run
    resumed from a checkpoint before it) keeps its last record.

    Args:
        records: the log's records, in order (:func:`read_json_lines`).
        step: the key of the iteration (``"iteration"``, ``"step"``).
        names: :data:`CURVE_KEYS` name -> key in the log (``{"loss": "total_loss"}``).

    Example:
        >>> rows = [{"step": 1, "lr": 0.1, "loss": 2.0}, {"step": 1, "mIoU": 40.0},
        ...         {"step": 1, "lr": 0.2, "loss": 1.5}]
        >>> curve(rows, "step", {"lr": "lr", "loss": "loss", "grad_norm": "grad_norm"})
        [{'iteration': 1.0, 'lr': 0.2, 'loss': 1.5}]
    """
    points: dict[float, dict[str, float]] = {}
    for record in records:
        point = {
            name: float(record[key])
            for name, key in names.items()
            if isinstance(record.get(key), (int, float)) and not isinstance(record[key], bool)
        }
        if point and isinstance(record.get(step), (int, float)):
            points[float(record[step])] = {"iteration": float(record[step]), **point}
    return [points[k] for k in sorted(points)]

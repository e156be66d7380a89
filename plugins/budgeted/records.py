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

__all__ = ["read_json_lines"]


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

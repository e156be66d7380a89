"""Constants and helpers shared by the Detectron2 tests (imported by name, unlike conftest)."""

from __future__ import annotations

import json
from pathlib import Path

TOY_CONFIG = "configs/detectron2/toy/mask_rcnn_toy_budget10.yaml"
# 64 px images, metrics written every iteration
TINY = [
    "INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "64",
    "INPUT.MIN_SIZE_TEST", "64", "INPUT.MAX_SIZE_TEST", "64",
    "SOLVER.BUDGET.WRITER_PERIOD", "1", "MODEL.ROI_HEADS.SCORE_THRESH_TEST", "0.0",
]  # fmt: skip
REPO = Path(__file__).resolve().parents[2]


def read_metrics(output_dir: Path) -> list[dict]:
    """The rows of Detectron2's metrics.json."""
    return [json.loads(line) for line in (output_dir / "metrics.json").read_text().splitlines()]


def logged_lrs(output_dir: Path) -> dict[int, float]:
    """iteration -> the ``lr`` Detectron2's LRScheduler hook logged for it."""
    return {r["iteration"]: r["lr"] for r in read_metrics(output_dir) if "lr" in r}

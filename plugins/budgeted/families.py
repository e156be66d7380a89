"""The shipped config families, described once: used by the config generators, the sweep and the
report (no framework imports).

A family is one model and dataset setting whose budgets are shipped as config files: its
framework, where its files live, the full schedule they are fractions of, the warmup, and which
schedules are shipped beside the budget-aware linear one. A budget's file name is
``<folder>/<prefix><tag><suffix><ext>``, with :func:`budget_tag` the one rule that turns a
fraction into the tag.

>>> budget_tag(0.1), budget_tag(0.005), budget_tag(1.0)
('10', '0p5', '100')
>>> MASK_RCNN.filename(0.1, "step")
'detectron2/mask_rcnn_budget10_step.yaml'
>>> PSPNET_TOY.filename(0.05, "linear")
'mmseg/toy/pspnet_r18-toy_cityscapes_budget5.py'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .budget import BUDGET_FRACTIONS, budget_iters

__all__ = [
    "FAMILIES",
    "MASK_RCNN",
    "MASK_RCNN_TOY",
    "PSPNET",
    "PSPNET_TOY",
    "ConfigFamily",
    "budget_tag",
    "family",
    "parse_budget_tag",
]


def budget_tag(fraction: float) -> str:
    """The file-name form of a budget fraction: its percentage, ``.`` written ``p``.

    ``0.1 -> "10"``, ``0.005 -> "0p5"``, ``1.0 -> "100"``, ``0.125 -> "12p5"``.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(f"budget fraction {fraction!r} is invalid; allowed: a number in (0, 1]")
    if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
        raise ValueError(f"budget fraction {fraction!r} is invalid; allowed: a number in (0, 1]")
    value = round(fraction * 100, 9)
    return str(int(value)) if float(value).is_integer() else f"{value:g}".replace(".", "p")


def parse_budget_tag(tag: str) -> float:
    """The fraction a :func:`budget_tag` stands for: ``"10" -> 0.1``, ``"0p5" -> 0.005``."""
    if not re.fullmatch(r"\d+(p\d+)?", tag):
        raise ValueError(f"budget tag {tag!r} is invalid; allowed: digits, e.g. 10 or 0p5")
    return round(float(tag.replace("p", ".")) / 100, 12)


@dataclass(frozen=True)
class ConfigFamily:
    """One model/dataset setting whose budget configs are shipped.

    Args:
        name: short name (``mask_rcnn``, ``pspnet_toy``, ...).
        framework: ``"detectron2"`` or ``"mmseg"``.
        folder: folder of the budget files, relative to the config root (``configs/``).
        prefix: file name before the budget tag.
        ext: ``".yaml"`` or ``".py"``.
        full_iters: the full schedule the budgets are fractions of.
        warmup: warmup iterations, the same for every budget.
        schedules: shipped schedule -> file-name suffix (``"linear": ""``, ``"step": "_step"``).
        step_milestones: where the step-BAC baseline drops, as fractions of the decay.
        title: what the family trains, for file headers and reports.
        paper: where the full schedule and baseline come from.
    """

    name: str
    framework: str
    folder: str
    prefix: str
    ext: str
    full_iters: int
    warmup: int
    schedules: dict[str, str]
    step_milestones: tuple[float, ...]
    title: str
    paper: str
    fractions: tuple[float, ...] = field(default=BUDGET_FRACTIONS)

    def filename(self, fraction: float, schedule: str = "linear") -> str:
        """The config of ``schedule`` at ``fraction``, relative to the config root."""
        if schedule not in self.schedules:
            raise ValueError(
                f"family {self.name!r} ships no {schedule!r} configs; "
                f"shipped schedules: {', '.join(self.schedules)}"
            )
        tag = budget_tag(fraction)
        return f"{self.folder}/{self.prefix}{tag}{self.schedules[schedule]}{self.ext}"

    def iters(self, fraction: float) -> int:
        """Training iterations at ``fraction``: ``round(fraction * full_iters)``."""
        return budget_iters(fraction=fraction, full_iters=self.full_iters)

    def parse(self, filename: str) -> tuple[float, str] | None:
        """``(fraction, schedule)`` of a file of this family, or None for another file."""
        base = filename.rsplit("/", 1)[-1]
        for schedule, suffix in sorted(self.schedules.items(), key=lambda kv: -len(kv[1])):
            pattern = re.escape(self.prefix) + r"(\d+(?:p\d+)?)" + re.escape(suffix + self.ext)
            match = re.fullmatch(pattern, base)
            if match:
                return parse_budget_tag(match.group(1)), schedule
        return None


MASK_RCNN = ConfigFamily(
    name="mask_rcnn",
    framework="detectron2",
    folder="detectron2",
    prefix="mask_rcnn_budget",
    ext=".yaml",
    full_iters=90000,
    warmup=500,
    schedules={"linear": "", "step": "_step"},
    step_milestones=(2 / 3, 8 / 9),
    title="Mask R-CNN R50-FPN, COCO (model zoo 1x)",
    paper="1x schedule, 90k iterations at batch 16; step x0.1 at 2/3 and 8/9 (paper, Sec. 4)",
)
MASK_RCNN_TOY = ConfigFamily(
    name="mask_rcnn_toy",
    framework="detectron2",
    folder="detectron2/toy",
    prefix="mask_rcnn_toy_budget",
    ext=".yaml",
    full_iters=400,
    warmup=max(3, math.ceil(500 * 400 / 90000)),  # 500/90000 of it, at least 3
    schedules={"linear": "", "step": "_step"},
    step_milestones=(2 / 3, 8 / 9),
    title="toy Mask R-CNN R18-BN, synthetic toy COCO, 128 px",
    paper="the Mask R-CNN family scaled to a 400-iteration full schedule",
)
PSPNET = ConfigFamily(
    name="pspnet",
    framework="mmseg",
    folder="mmseg",
    prefix="pspnet_r50-d8_cityscapes_budget",
    ext=".py",
    full_iters=80000,
    warmup=500,
    schedules={"linear": "", "poly": "_poly", "step": "_step"},
    step_milestones=(1 / 3, 2 / 3),
    title="PSPNet R50-D8, Cityscapes 512x1024",
    paper="MMSeg schedule_80k; step x0.1 at 1/3 and 2/3, as the paper's ImageNet setting",
)
PSPNET_TOY = ConfigFamily(
    name="pspnet_toy",
    framework="mmseg",
    folder="mmseg/toy",
    prefix="pspnet_r18-toy_cityscapes_budget",
    ext=".py",
    full_iters=3200,
    warmup=500 * 3200 // 80000,  # the same share of the full schedule: 20
    schedules={"linear": "", "poly": "_poly", "step": "_step"},
    step_milestones=(1 / 3, 2 / 3),
    title="toy PSPNet R18 (16 channels, BN), toy Cityscapes 128x128 crops",
    paper="the PSPNet family scaled to a 3200-iteration full schedule",
)

FAMILIES: dict[str, ConfigFamily] = {
    f.name: f for f in (MASK_RCNN, MASK_RCNN_TOY, PSPNET, PSPNET_TOY)
}
"""Every shipped family, by name."""


def family(framework: str, toy: bool = False) -> ConfigFamily:
    """The shipped family of ``framework`` (``detectron2`` or ``mmseg``), real or toy."""
    for fam in FAMILIES.values():
        if fam.framework == framework and fam.name.endswith("_toy") == toy:
            return fam
    frameworks = sorted({f.framework for f in FAMILIES.values()})
    raise ValueError(f"unknown framework {framework!r}; allowed: {', '.join(frameworks)}")

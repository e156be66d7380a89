"""The training tools' command lines of a sweep's cells: which tool runs a framework, which
overrides the sweep sets itself (refused after ``--``), and each cell's command (this
interpreter calling the console script's function: no ``bin/`` on ``PATH`` needed).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import SweepError
from ...schedules import schedule_info
from ..families import FRAMEWORKS
from .records import number_text

__all__ = [
    "LR_KEYS", "MMENGINE_FRAMEWORKS", "RESERVED", "SCHEDULER_KEYS", "SEED_KEYS", "TRAIN_TOOLS",
    "axis_overrides", "build_command", "check_extra", "schedule_overrides", "script_command",
    "short", "show", "split_mmseg_extra", "tool_command",
]  # fmt: skip

MMENGINE_FRAMEWORKS = tuple(f for f in FRAMEWORKS if f not in ("detectron2", "pytorch"))
"""The MMEngine codebases (mmseg, mmdet, mmpretrain, mmaction): one training tool, one set of
config keys."""


def _per_framework(detectron2: Any, mmengine: Any, lazy: Any = None) -> dict[str, Any]:
    """framework -> value; ``detectron2-lazy`` (a Detectron2 LazyConfig: its own tool) where
    ``lazy`` is given; every MMEngine codebase (and ``mmengine``, another one) alike."""
    lazy_tool = {} if lazy is None else {"detectron2-lazy": lazy}
    codebases = dict.fromkeys((*MMENGINE_FRAMEWORKS, "mmengine"), mmengine)
    return {"detectron2": detectron2, **lazy_tool, **codebases}


TRAIN_TOOLS = _per_framework(
    ("budgeted-train-net", "budgeted.detectron2.cli", "run"),
    ("budgeted-train-seg", "budgeted.mmengine.cli", "main"),
    ("budgeted-lazy-train-net", "budgeted.detectron2.lazy_cli", "run"),
)
"""tool (a framework, or ``detectron2-lazy``) -> (console script, module, function) of its
training tool."""
BUDGET_FLAGS = ("--budget", "--schedule", "--full-iters")
"""The flags of the cell contract: the budget, the schedule and the full schedule (plain-PyTorch
scripts, ``budgeted-train-seg`` and ``budgeted-lazy-train-net`` on the user's own config)."""
RESERVED = {
    **_per_framework(
        ("OUTPUT_DIR", "SOLVER.BUDGET.FRACTION", "SOLVER.BUDGET.FULL_ITERS", "SOLVER.MAX_ITER",
         "--config-file", "--config", "--resume", "--eval-only"),
        ("work_dir", "train_cfg.max_iters", "budget_fraction", "full_schedule_iters",
         "--work-dir", "--resume", *BUDGET_FLAGS),
        ("train.output_dir", "train.max_iter", "--config-file", "--config", "--resume",
         "--eval-only", *BUDGET_FLAGS),
    ),
    "pytorch": (*BUDGET_FLAGS, "--out"),
}  # fmt: skip
"""Overrides the sweep sets per cell (run folder, budget, resuming): refused after ``--``."""
LR_KEYS = {
    **_per_framework("SOLVER.BASE_LR", "optim_wrapper.optimizer.lr", "optimizer.lr"),
    "pytorch": "--lr",
}
"""tool -> the config key ``--lrs`` sets (the base LR the schedule multiplies)."""
SEED_KEYS = {**_per_framework("SEED", "randomness.seed", "train.seed"), "pytorch": "--seed"}
"""tool -> the config key ``--seeds`` sets."""

SCHEDULER_KEYS = _per_framework("SOLVER.LR_SCHEDULER_NAME", "param_scheduler.0.type")
"""framework -> the config key that names a config's LR scheduler: :func:`schedule_overrides`
sets it where a family ships no config of a cell's schedule."""


def schedule_overrides(framework: str, schedule: str) -> list[str]:
    """The overrides that turn a family's ``linear`` budget config into registered ``schedule``.

    >>> schedule_overrides("detectron2", "rex"), schedule_overrides("mmseg", "cosine")
    (['SOLVER.LR_SCHEDULER_NAME', 'BudgetRex'], ['param_scheduler.0.type=BudgetCosineLR'])
    """
    name = f"Budget{schedule_info(schedule).label}"
    if framework == "detectron2":
        return [SCHEDULER_KEYS[framework], name]
    return [f"{SCHEDULER_KEYS[framework]}={name}LR"]


def check_extra(
    framework: str, extra: Sequence[str], lrs: bool = False, seeds: bool = False,
    more: Sequence[str] = (),
) -> None:  # fmt: skip
    """Refuse overrides that would clash with what the sweep sets per cell (with ``--lrs`` /
    ``--seeds``, also the base LR / seed key; ``more``: the keys and flags of its arms and
    ``--validate-every``)."""
    reserved = [
        *RESERVED[framework],
        *([LR_KEYS[framework]] if lrs else []),
        *([SEED_KEYS[framework]] if seeds else []),
        *more,
    ]
    for token in extra:
        key = token.split("=", 1)[0] if framework != "detectron2" or "=" in token else token
        if key in reserved:
            raise SweepError(
                f"override {token!r} after -- is set by the sweep per cell; allowed: any "
                f"override but {', '.join(reserved)}"
            )


def axis_overrides(framework: str, lr: float | None, seed: int | None) -> list[str]:
    """The overrides that set a cell's base LR and seed, in the training tool's syntax.

    >>> axis_overrides("detectron2", 0.03, 1), axis_overrides("mmseg", None, 2)
    (['SOLVER.BASE_LR', '0.03', 'SEED', '1'], ['randomness.seed=2'])
    """
    pairs = [(LR_KEYS[framework], lr), (SEED_KEYS[framework], seed)]
    pairs = [(k, v) for k, v in pairs if v is not None]
    texts = [(k, number_text(v) if isinstance(v, float) else str(v)) for k, v in pairs]
    if framework in ("detectron2", "pytorch"):
        return [t for pair in texts for t in pair]
    # MMEngine's --cfg-options and LazyConfig's overrides: key=value
    return [f"{k}={v}" for k, v in texts]


def split_mmseg_extra(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """(flags, ``key=value`` config options) of MMSeg overrides, each in their order; a flag's
    value with ``:`` before its ``=`` (an arm: ``--schedule wsd:decay=sqrt``) stays a flag's.

    >>> split_mmseg_extra(["--schedule", "wsd:decay=sqrt", "randomness.seed=1"])
    (['--schedule', 'wsd:decay=sqrt'], ['randomness.seed=1'])
    """
    options = [t for t in extra if "=" in t.split(":")[0] and not t.startswith("-")]
    return [t for t in extra if t not in options], options


def tool_command(framework: str, args: Sequence[str], imports: Sequence[str] = ()) -> list[str]:
    """The command that runs ``framework``'s training tool with ``args``, after importing
    ``imports`` (``--import``).

    >>> tool_command("mmseg", ["a.py"], ["my_data"])[2]
    "import sys; import my_data; from budgeted.mmengine.cli import main as f; sys.argv[0] = 'budgeted-train-seg'; sys.exit(f())"
    """  # noqa: E501
    script, module, function = TRAIN_TOOLS[framework]
    first = "".join(f"import {name}; " for name in imports)
    boot = f"import sys; {first}from {module} import {function} as f; sys.argv[0] = {script!r}; " \
        "sys.exit(f())"  # fmt: skip
    return [sys.executable, "-c", boot, *args]


def build_command(
    framework: str, config: Path, run_dir: Path, data: Path | None, extra: Sequence[str],
    resume: bool, launcher: Sequence[str] = (), imports: Sequence[str] = (),
) -> list[str]:  # fmt: skip
    """The training tool's command line for one cell (``framework``: a framework or
    ``detectron2-lazy``; ``extra``: the user's overrides, then the cell's; ``launcher``: the
    launcher flags across a Slurm job's GPUs and nodes)."""
    again = ["--resume"] if resume else []
    if framework == "detectron2":
        args = [
            "--config-file", str(config), *again, *launcher, *extra, "OUTPUT_DIR", str(run_dir)
        ]  # fmt: skip
        return tool_command(framework, args, imports)
    flags, options = split_mmseg_extra(extra)
    if framework == "detectron2-lazy":  # flags first: the key=value overrides end the line
        args = [
            "--config-file", str(config), *again, *launcher, *flags, *options,
            f"train.output_dir={run_dir}",
        ]  # fmt: skip
        return tool_command(framework, args, imports)
    if data is not None:  # as the toy demo points the toy config at the toy set
        options = [
            *(f"{split}_dataloader.dataset.data_root={data}" for split in ("train", "val")),
            f"test_dataloader.dataset.data_root={data}",
            *options,
        ]
    args = [
        str(config), "--work-dir", str(run_dir), *again, *launcher, *flags,
        *(["--cfg-options", *options] if options else []),
    ]  # fmt: skip
    return tool_command(framework, args, imports)


def script_command(
    script: Path, schedule: str, budget: float, full_iters: int, run_dir: Path,
    extra: Sequence[str],
) -> list[str]:  # fmt: skip
    """A script family's cell: ``script`` with ``extra``, then the cell's own flags (last: they
    win).

    >>> show(script_command(Path("examples/digits_budget.py"), "rex", 0.01, 1720,
    ...                     Path("out/rex_budget1_lr0.1"), ["--lr", "0.1"]))
    'python examples/digits_budget.py --lr 0.1 --budget 0.01 --schedule rex --full-iters 1720 --out out/rex_budget1_lr0.1'
    """  # noqa: E501
    return [
        sys.executable, str(script), *extra, "--budget", number_text(budget), "--schedule",
        schedule, "--full-iters", str(full_iters), "--out", str(run_dir),
    ]  # fmt: skip


def short(path: str) -> str:
    """``path`` relative to the current folder when it lies under it, for printing."""
    return path.replace(f"{Path.cwd()}{os.sep}", "")


def show(command: Sequence[str]) -> str:
    """A tool command as printed: the console script's name and its arguments, paths shortened
    (``budgeted-train-seg configs/mmseg/toy/... --work-dir output/...``)."""
    if len(command) > 2 and command[1] == "-c":
        script = next(s for s, m, _ in TRAIN_TOOLS.values() if f" {m} import" in command[2])
        if not command[2].startswith("import sys; from "):  # --import: as it runs
            return shlex.join(["python", "-c", command[2], *(short(t) for t in command[3:])])
        return shlex.join([script, *(short(t) for t in command[3:])])
    return shlex.join(["python", *(short(t) for t in command[1:])])

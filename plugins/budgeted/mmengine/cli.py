"""``tools/train_seg.py``, ``budgeted-train-seg``: MMSegmentation's train.py, with budgets.

    python tools/train_seg.py pspnet_r50-d8_cityscapes_budget10            # a shipped config's name
    python tools/train_seg.py configs/mmseg/pspnet_r50-d8_cityscapes_budget100.py --budget 0.25
    bash tools/dist_train.sh CONFIG 2                                      # torchrun; gloo on CPUs

MMSegmentation's arguments plus ``--budget``, ``--budget-time``, ``--resume-from``,
``--schedule``, ``--full-iters`` and a sweep's arms (``--optimizer``, ``--schedule-free``,
``--subset``, ``--validate-every``: :mod:`budgeted.mmengine.arms`). Everything is checked
first, once, before anything is written (:func:`budgeted.mmengine.preflight.preflight`), each
refusal one line and exit status 2.
Exit statuses: 75 preempted (:class:`~budgeted.mmengine.hooks.PreemptionHook`), 3 diverged
(:class:`~budgeted.mmengine.hooks.DivergenceHook`), 4 a time budget that ended undecayed
(:class:`~budgeted.mmengine.time_budget.TimeBudgetEndHook`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import warnings
from collections.abc import Sequence
from typing import NoReturn

import torch.distributed as dist
from mmengine.config import Config, DictAction
from mmengine.runner import Runner

from ..control.tool import ToolRun, ToolWords
from ..safety.preemption import PREEMPTED_EXIT_CODE, Preempted, PreemptionGuard
from ..safety.ranks import agree_max
from ..schedules import BudgetMismatchError, schedule_names
from .arms import add_arm_options
from .checkpoint import allow_mmengine_checkpoints
from .compat import parse_option_value
from .config_edits import (  # the config edits, importable from here as before
    PROG,
    add_checkpoint_at,
    add_reliability_hooks,
    apply_budget_fraction,
    apply_time_budget,
    fill_budget_scheduler_defaults,
)
from .hooks import Diverged
from .input_checks import output_folder
from .launch import (
    LAUNCHERS,
    destroy_process_group,
    init_cpu_distributed,
    lost_a_rank,
    needs_cpu_distributed,
    say_lost_rank,
)
from .own_schedule import apply_own_schedule, full_schedule_iters, lr_warmup
from .preflight import (  # the pre-flight's checks, importable from here as before
    build_budget_schedulers,
    check_budget_hooks,
    check_budget_schedulers,
    check_data_roots,
    check_resume_budget,
    check_scheduler_types,
    load_config,
    preflight,
)
from .resume import NothingToResume
from .schedulers import BudgetConfigError
from .time_budget import Undecayed

__all__ = [
    "add_checkpoint_at", "add_reliability_hooks", "apply_budget_fraction", "apply_own_schedule",
    "apply_time_budget", "build_budget_schedulers", "check_budget_hooks",
    "check_budget_schedulers", "check_data_roots", "check_only", "check_resume_budget",
    "check_scheduler_types", "fill_budget_scheduler_defaults", "full_schedule_iters",
    "load_config", "lr_warmup", "main", "parse_args", "preflight"
]  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``train_seg: error: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _CfgOptions(DictAction):
    """MMEngine's ``DictAction``; an item without ``=`` is a one-line usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        for item in values:
            key, sep, _ = item.partition("=")
            if not sep or not key:
                parser.error(
                    f"--cfg-options item {item!r} is not KEY=VALUE; allowed: items like "
                    "train_cfg.max_iters=8000 or load_from=work_dirs/x/iter_8000.pth"
                )
            if not _parses(item.partition("=")[2]):
                parser.error(
                    f"--cfg-options item {item!r} cannot be parsed: a value is a number, a "
                    "string, True/False/None or a list or tuple of them, never dict(...); "
                    "allowed: a dict as one item per key (model.backbone.init_cfg.type="
                    "Pretrained model.backbone.init_cfg.checkpoint=...)"
                )
        super().__call__(parser, namespace, values, option_string)


def _parses(value: str) -> bool:
    """Whether MMEngine's ``DictAction`` reads ``value`` as meant: it takes ``dict(...)`` for a
    string (or, with a comma inside, recurses until Python's limit)."""
    if value.replace(" ", "").startswith("dict("):
        return False
    try:
        parse_option_value(value)
    except (RecursionError, ValueError, TypeError):
        return False
    return True


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number; allowed: a fraction in (0, 1]"
        ) from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(
            f"{text} is invalid; allowed: a fraction in (0, 1] of the full schedule (1 trains all "
            "of it)"
        )
    return value


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is invalid; allowed: a whole number >= 1 (the full schedule's iterations)"
        )
    return value


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    """The budget's options: ``--budget``, ``--schedule``, ``--full-iters``, ``--budget-time``
    (:mod:`budgeted.mmengine.own_schedule`, :mod:`budgeted.mmengine.config_edits`)."""
    parser.add_argument(
        "--budget",
        type=_fraction,
        metavar="FRACTION",
        help="train this fraction (0, 1] of the config's full schedule (full_schedule_iters, "
        "else train_cfg.max_iters); 1 trains the full schedule, more is refused",
    )
    parser.add_argument(
        "--schedule",
        metavar="NAME",
        help="train under this budget-aware LR schedule ("
        + ", ".join(schedule_names())
        + ", or one the config's custom_imports register): every LR entry of param_scheduler "
        "becomes one Budget<Name>LR with the schedule's default parameters and the config's "
        "warmup in iterations (a first LinearLR before the rest, or a Budget*LR's own); an "
        "epoch-based loop becomes IterBasedTrainLoop over the full schedule. Refused: a "
        "momentum or other non-LR scheduler entry, a custom train loop, a budget not longer "
        "than the warmup",
    )
    parser.add_argument(
        "--full-iters",
        type=_whole,
        metavar="N",
        help="the full schedule in iterations, which --budget takes a fraction of (sets "
        "full_schedule_iters); default: full_schedule_iters, else train_cfg.max_iters, else "
        "max_epochs x iterations per epoch (ceil(train set / batch_size), the set built)",
    )
    parser.add_argument(
        "--budget-time",
        metavar="DURATION",
        help="a wall-clock budget of training time: 6h, 90m, 2h30m, or seconds "
        "(TimeBudgetTrainLoop; the full schedule's max_iters then only caps the iterations)",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """MMSegmentation's ``tools/train.py`` arguments plus ``--budget``, ``--resume-from``,
    ``--schedule`` and ``--full-iters``.

    A usage error (an unknown option, ``--budget 1.5``, a ``--cfg-options`` item without ``=``)
    prints one line and exits with status 2.

    Example:
        >>> parse_args(["pspnet_r18-toy_cityscapes_budget10", "--budget", "0.05"]).budget
        0.05
    """
    parser = _Parser(prog=PROG, description="Train a segmentor (budget-aware)")
    parser.add_argument(
        "config",
        help="train config: a path, or a shipped config's name "
        "(pspnet_r50-d8_cityscapes_budget10, with or without .py)",
    )
    parser.add_argument("--work-dir", help="the dir to save logs and models")
    parser.add_argument(
        "--resume",
        action="store_true",
        default=False,
        help="resume from the latest checkpoint in the work_dir automatically (the file "
        "last_checkpoint names, even where load_from is set; with none, load_from); the "
        "checkpoint's budget must be the config's",
    )
    parser.add_argument(
        "--resume-from",
        metavar="PATH",
        help="resume from exactly this checkpoint (e.g. the intact one offered when the latest "
        "is damaged); the checkpoint's budget must be the config's",
    )
    parser.add_argument(
        "--amp",
        action="store_true",
        default=False,
        help="enable automatic-mixed-precision training",
    )
    add_budget_options(parser)
    add_arm_options(parser)
    parser.add_argument(
        "--cfg-options",
        nargs="+",
        action=_CfgOptions,
        help="override some settings in the used config, the key-value pair in xxx=yyy format "
        "will be merged into config file",
    )
    parser.add_argument("--launcher", choices=list(LAUNCHERS), default="none", help="job launcher")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0)
    args = parser.parse_args(argv)
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    return args


def _global_rank() -> int:
    for key in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


def _init_distributed(launcher: str, cfg: Config) -> None:
    """Start the process group now (MMEngine's runner would, after writing into the work dir)."""
    if launcher == "none":
        return
    if needs_cpu_distributed(launcher):
        init_cpu_distributed(launcher)
        return
    import torch.distributed as dist
    from mmengine.dist import init_dist

    if not dist.is_initialized():
        init_dist(launcher, **dict((cfg.get("env_cfg") or {}).get("dist_cfg") or {}))


def _claim_work_dir(cfg: Config, stack: contextlib.ExitStack) -> str | None:
    """The process group started; rank 0 locks the work dir (released by ``stack``) and removes
    what killed checkpoint writes left there (the line saying so, logged by the runner); every
    rank refuses together if it could not."""
    _init_distributed(cfg.launcher, cfg)
    work_dir = output_folder(cfg.work_dir)
    if not (dist.is_available() and dist.is_initialized()):
        removed = work_dir.claim()
    else:
        removed = work_dir.claim(here=dist.get_rank() == 0, agree=agree_max)
    stack.callback(work_dir.release)
    return work_dir.removed_line(removed)


WORDS = ToolWords(
    PROG,
    refusal_status=2,
    error_prefix="error: ",
    preempted_early="preempted by {signal} before training started: nothing written; exit status "
    f"{PREEMPTED_EXIT_CODE}, run the same command again",
    stops_said=True,
)
"""How ``train_seg`` says what ended its run (:class:`~budgeted.control.tool.ToolRun`)."""


def _tool_run(guard: PreemptionGuard | None = None) -> ToolRun:
    def lost(err: RuntimeError) -> int | None:
        if not lost_a_rank(err):
            return None
        say_lost_rank(PROG, _global_rank(), err)
        return 1

    return ToolRun(WORDS, guard, claim_first=False, refused=(ValueError, FileNotFoundError),
                   finished=(NothingToResume,), failed=(BudgetMismatchError, BudgetConfigError),
                   stops=(Preempted, Diverged, Undecayed), lost=lost)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Check everything, then train with MMEngine's runner; the exit status.

    0: trained (or nothing left to resume); 2: bad input, refused before anything was written;
    3 diverged; 4 a time budget ended undecayed; 75 preempted (continue with ``--resume``); 1:
    another rank is gone.

    Example:
        ``main(["pspnet_r18-toy_cityscapes_budget10", "--work-dir", "work_dirs/toy10"])``
    """
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else 2
    allow_mmengine_checkpoints()
    removed: list[str | None] = []  # the claim's line, logged by the runner
    with PreemptionGuard() as guard:
        try:
            return _tool_run(guard).run(
                lambda: _checked(args, guard),
                lambda cfg, stack: removed.append(_claim_work_dir(cfg, stack)),
                lambda cfg: _train(cfg, removed[0]),
                stop_early=lambda cfg: _has_preemption_hook(cfg) and args.launcher == "none",
            )
        finally:
            destroy_process_group()


def _has_preemption_hook(cfg: Config) -> bool:
    hooks = cfg.get("custom_hooks") or []
    return any(isinstance(h, dict) and h.get("type") == "PreemptionHook" for h in hooks)


def _checked(args: argparse.Namespace, guard: PreemptionGuard) -> Config:
    """:func:`preflight`; without a :class:`PreemptionHook` nothing would act on a signal's
    flag: signals as before (one that came meanwhile acts now)."""
    cfg = preflight(args)
    if not _has_preemption_hook(cfg):
        guard.__exit__(None, None, None)
        if guard.requested:
            os.kill(os.getpid(), guard.signum)
    return cfg


def check_only(argv: Sequence[str]) -> int | None:
    """Every check :func:`main` makes before training, in this process, training nothing: the
    exit status of a refusal (its one line printed), None when the run may start.

    :mod:`budgeted.mmengine.dist_run` runs it once before it starts the ranks.

    Example:
        ``check_only(["pspnet_r18-toy_cityscapes_budget10", "--launcher", "pytorch"])``
    """
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else 2
    allow_mmengine_checkpoints()
    return _tool_run().checked(lambda: preflight(args))[1]


def _train(cfg: Config, removed: str | None) -> int:
    runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else _build_custom(cfg)
    if removed is not None:
        runner.logger.warning(removed)
    runner.train()
    return 0


def _build_custom(cfg: Config) -> Runner:
    """A ``runner_type`` runner, from the config's default scope's registry."""
    scope = cfg.get("default_scope") or "mmengine"
    return importlib.import_module(f"{scope}.registry").RUNNERS.build(cfg)

"""``tools/train_seg.py``, ``budgeted-train-seg``: MMSegmentation's train.py, with budgets.

    python tools/train_seg.py pspnet_r50-d8_cityscapes_budget10            # a shipped config's name
    python tools/train_seg.py configs/mmseg/pspnet_r50-d8_cityscapes_budget100.py --budget 0.25
    bash tools/dist_train.sh CONFIG 2                                      # torchrun; gloo on CPUs

The same arguments as MMSegmentation's tool (``config``, ``--work-dir``, ``--resume``, ``--amp``,
``--cfg-options KEY=VALUE ...``, ``--launcher``) plus ``--budget FRACTION`` and ``--resume-from
PATH``. Everything that can be wrong is checked first (:func:`preflight`), before anything is
written, each as one line and exit status 2: bad arguments, a config that cannot be read, an
unknown scheduler type, bad budget scheduler arguments, a scheduler ``end`` other than the budget,
missing data, a work dir that already holds a run or that another process trains in, a file to
load that carries foreign globals or is damaged (the newest intact checkpoint is offered), a
resume with another budget. Budget schedulers without ``by_epoch`` follow the train loop;
``--launcher`` on a machine without GPUs runs gloo with BN for SyncBN.

Training is preemption-safe: checkpoints and ``last_checkpoint`` are written atomically
(:class:`~budgeted.mmengine.hooks.AtomicCheckpointHook`), and SIGTERM / SIGUSR1 stop the run after
the current iteration with a checkpoint, one line and exit status 75
(:class:`~budgeted.mmengine.hooks.PreemptionHook`,
:data:`budgeted.safety.preemption.PREEMPTED_EXIT_CODE`); ``--resume`` continues it exactly. A
non-finite loss ends the run at once with one line and exit status 3
(:class:`~budgeted.mmengine.hooks.DivergenceHook`); a time budget that ended before its schedule
decayed exits 4 after its checkpoint and validation
(:class:`~budgeted.mmengine.time_budget.TimeBudgetEndHook`).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import math
import os
import os.path as osp
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import NoReturn

import torch
from mmengine.config import Config, DictAction
from mmengine.logging import print_log
from mmengine.registry import PARAM_SCHEDULERS, Registry
from mmengine.runner import Runner

from ..config_files import find_config
from ..runs.mmengine import WorkDirBusyError, WorkDirLock, check_new_run_folder
from ..safety.checkpoints import checkpoint_iterations, remove_stale_temporaries
from ..safety.preemption import PREEMPTED_EXIT_CODE, Preempted, PreemptionGuard
from ..schedules.clock import parse_duration
from ..schedules.core import BudgetMismatchError, check_on_resume
from ..schedules.units import budget_iters
from .checkpoint import allow_mmengine_checkpoints
from .grad_norm import FullGradNormHook
from .hooks import (  # also registers AtomicCheckpointHook
    CheckpointAtHook,
    Diverged,
    DivergenceHook,
    PreemptionHook,
)
from .launch import (
    LAUNCHERS,
    destroy_process_group,
    init_cpu_distributed,
    lost_a_rank,
    needs_cpu_distributed,
    prepare_cpu_distributed,
    say_lost_rank,
)
from .preflight import (  # check_data_roots: also this module's, as before
    check_base_chain,
    check_data_roots,
    check_init_checkpoints,
    check_time_budget_pair,
    check_weights_fit_model,
    check_writable,
)
from .resume import NothingToResume, check_time_budget_resume, plan_load
from .schedulers import (
    BudgetConfigError,
    BudgetParamScheduler,
    check_loop_end,
    resume_step,
    scheduler_types,
)
from .time_budget import TimeBudgetTrainLoop, Undecayed

__all__ = [
    "add_checkpoint_at",
    "add_reliability_hooks",
    "apply_budget_fraction",
    "apply_time_budget",
    "build_budget_schedulers",
    "check_budget_hooks",
    "check_budget_schedulers",
    "check_data_roots",
    "check_only",
    "check_resume_budget",
    "check_scheduler_types",
    "fill_budget_scheduler_defaults",
    "load_config",
    "main",
    "parse_args",
    "preflight",
]

PROG = "train_seg"
RENAMED = {"BudgetLR": "BudgetScheduleLR"}
"""Former scheduler type names -> today's."""


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
        DictAction._parse_iterable(value)
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


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """MMSegmentation's ``tools/train.py`` arguments plus ``--budget`` and ``--resume-from``.

    A usage error (an unknown option, ``--budget 1.5``, a ``--cfg-options`` item without ``=``)
    prints one line and exits with status 2.

    Args:
        argv (list[str], optional): the arguments; default ``sys.argv[1:]``.

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
    parser.add_argument(
        "--budget",
        type=_fraction,
        metavar="FRACTION",
        help="train this fraction (0, 1] of the config's full schedule (full_schedule_iters, "
        "else train_cfg.max_iters); 1 trains the full schedule, more is refused",
    )
    parser.add_argument(
        "--budget-time",
        metavar="DURATION",
        help="a wall-clock budget of training time: 6h, 90m, 2h30m, or seconds "
        "(TimeBudgetTrainLoop; the full schedule's max_iters then only caps the iterations)",
    )
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


def _scheduler_groups(cfg: Config) -> list[tuple[str | None, list[dict]]]:
    """``param_scheduler`` as (optimizer name or None, its entries), as the runner builds it."""
    entries = cfg.get("param_scheduler") or []
    if isinstance(entries, dict):
        if "type" in entries:
            return [(None, [entries])]
        return [
            (name, list(group) if isinstance(group, list) else [group])
            for name, group in entries.items()
        ]
    return [(None, list(entries))]


def _scheduler_entries(cfg: Config) -> list[dict]:
    return [entry for _, group in _scheduler_groups(cfg) for entry in group]


def _is_budget_entry(entry: dict) -> bool:
    return str(entry.get("type", "")) in scheduler_types()


def _scope_registry(cfg: Config, name: str = "PARAM_SCHEDULERS") -> Registry:
    """Registry ``name`` of the config's default scope (``mmseg.registry``'s for MMSeg)."""
    scope = cfg.get("default_scope") or "mmengine"
    try:
        module = importlib.import_module(f"{scope}.registry")
        return getattr(module, name)
    except (ImportError, AttributeError):
        return getattr(importlib.import_module("mmengine.registry"), name)


def _stand_in_optimizer(cfg: Config, group: str | None) -> torch.optim.Optimizer | None:
    """The config's optimizer (of the optimizer wrapper ``group``, None: the only one) over one
    stand-in parameter, so that a scheduler's ``param_name`` is checked against its real
    param-group keys; None where it cannot be built without the model (the runner checks it)."""
    wrapper = cfg.get("optim_wrapper") or {}
    if group is not None:
        wrapper = wrapper.get(group) or {}
    spec = wrapper.get("optimizer") if isinstance(wrapper, Mapping) else None
    if not isinstance(spec, Mapping) or "type" not in spec:
        return None
    parameter = torch.nn.Parameter(torch.zeros(1))
    try:
        return _scope_registry(cfg, "OPTIMIZERS").build(dict(spec, params=[parameter]))
    except Exception:  # the runner builds it again and reports its own error
        return None


def check_scheduler_types(cfg: Config) -> None:
    """Every ``param_scheduler`` type must be registered; name ours and the closest match if not.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the unknown type, the closest registered one and ours.

    Example:
        >>> check_scheduler_types(Config(dict(param_scheduler=[dict(type="BudgetLinearLR")])))
    """
    registry = _scope_registry(cfg)
    for entry in _scheduler_entries(cfg):
        kind = entry.get("type")
        if not isinstance(kind, str) or registry.get(kind) is not None:
            continue
        known = set(registry.module_dict) | set(PARAM_SCHEDULERS.module_dict)
        close = difflib.get_close_matches(kind, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        if kind in RENAMED:
            hint = f"did you mean {RENAMED[kind]!r} (its new name)? "
        raise ValueError(
            f"unknown param_scheduler type {kind!r}; {hint}budget-aware types: "
            f"{', '.join(scheduler_types())} (with custom_imports=dict(imports="
            "['budgeted.mmengine'])); MMEngine's own: LinearLR, PolyLR, ..."
        )


def build_budget_schedulers(
    cfg: Config,
) -> list[tuple[str | None, int, BudgetParamScheduler]]:
    """Build each iteration-based budget entry on the config's optimizer over a stand-in
    parameter: bad arguments fail now, before anything is written.

    ``end`` defaults to ``train_cfg.max_iters`` as in the runner, and an ``end`` that differs
    from it is refused (:func:`~budgeted.mmengine.schedulers.check_loop_end`). Epoch-based entries
    are checked by the scheduler when the runner builds it (their length needs the dataloader).

    Args:
        cfg (Config): the training config.

    Returns:
        list: ``(optimizer name or None, position in its list, scheduler)`` per built entry.

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.
    """
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    policy = cfg.get("budget_on_resume")
    if policy is not None:
        check_on_resume(policy, "budget_on_resume")
    registry = _scope_registry(cfg)
    built = []
    for group, entries in _scheduler_groups(cfg):
        for index, entry in enumerate(entries):
            by_epoch = entry.get("by_epoch", True)
            if not _is_budget_entry(entry) or (by_epoch and entry.get("convert_to_iter_based")):
                continue  # an epoch-based entry: its length needs the dataloader
            args = dict(entry)
            if max_iters is not None and not by_epoch:
                args.setdefault("end", max_iters)
            if policy is not None:  # what the runner's build reads from the config
                args.setdefault("on_resume", policy)
            optimizer = _stand_in_optimizer(cfg, group)
            if optimizer is None:  # the config's optimizer needs the model: lr is checked here
                if args.get("param_name", "lr") != "lr":
                    continue
                optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
            scheduler = registry.build(args, default_args=dict(optimizer=optimizer))
            if isinstance(args.get("end"), int):
                check_loop_end(str(entry["type"]), args["end"], max_iters)
            built.append((group, index, scheduler))
    return built


def check_budget_schedulers(cfg: Config) -> None:
    """:func:`build_budget_schedulers`, for its checks only.

    Args:
        cfg (Config): the training config.

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.

    Example:
        >>> check_budget_schedulers(Config(dict(
        ...     train_cfg=dict(max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR", warmup_iters=5, by_epoch=False)],
        ... )))
    """
    build_budget_schedulers(cfg)


def check_resume_budget(cfg: Config, checkpoint: Mapping, path: str) -> None:
    """Refuse to resume ``checkpoint`` when its budget is not the config's (before the runner).

    Each iteration-based budget scheduler of the config is built (:func:`build_budget_schedulers`)
    and compares the ``budget`` saved in the checkpoint's state at its position
    (:meth:`~budgeted.mmengine.schedulers.BudgetParamScheduler.check_resume`): the same one-line
    :class:`~budgeted.schedules.core.BudgetMismatchError` the runner would raise, but before
    anything is written. A budget scheduler in the checkpoint where the config has a stock one is
    refused too.

    Args:
        cfg (Config): the training config.
        checkpoint (Mapping): the checkpoint, loaded safely.
        path (str): its file, for messages.

    Raises:
        BudgetMismatchError: one line saying what differs and what to do.
    """
    saved_all = checkpoint.get("param_schedulers")
    built = {(group, index): sched for group, index, sched in build_budget_schedulers(cfg)}
    for group, entries in _scheduler_groups(cfg):
        if group is None:
            saved_group = saved_all
        else:
            saved_group = saved_all.get(group) if isinstance(saved_all, Mapping) else None
        if not isinstance(saved_group, list):
            saved_group = []
        for index, entry in enumerate(entries):
            saved = saved_group[index] if index < len(saved_group) else None
            saved = saved if isinstance(saved, Mapping) else None
            scheduler = built.get((group, index))
            if scheduler is not None:
                scheduler.check_resume(
                    saved.get("budget") if saved is not None else None,
                    at=resume_step(saved) if saved is not None else None,
                )
                check_time_budget_resume(cfg, scheduler, saved, path)
            elif saved is not None and "budget" in saved and not _is_budget_entry(entry):
                where = f"param_scheduler[{group!r}][{index}]" if group else f"[{index}]"
                raise BudgetMismatchError(
                    f"cannot resume from {path}: its scheduler {where} is budget-aware, the "
                    f"config's is {entry.get('type')}; to resume, keep the checkpoint's "
                    "schedulers; to train another schedule, start a new run from its weights with "
                    f"load_from={path} and resume=False"
                )


def fill_budget_scheduler_defaults(cfg: Config) -> None:
    """Complete budget entries that leave ``by_epoch`` unset, from the train loop.

    Iteration-based loop: ``by_epoch=False``; epoch-based: ``by_epoch=True`` and
    ``convert_to_iter_based=True``. (A bare MMEngine runner reads a missing ``by_epoch`` as True.)

    Args:
        cfg (Config): the training config (changed in place).

    Example:
        >>> cfg = Config(dict(
        ...     train_cfg=dict(type="IterBasedTrainLoop", max_iters=100),
        ...     param_scheduler=[dict(type="BudgetLinearLR")],
        ... ))
        >>> fill_budget_scheduler_defaults(cfg)
        >>> cfg.param_scheduler[0].by_epoch
        False
    """
    loop = (cfg.get("train_cfg") or {}).get("type", "")
    by_epoch = "max_epochs" in (cfg.get("train_cfg") or {}) or loop == "EpochBasedTrainLoop"
    for entry in _scheduler_entries(cfg):
        if _is_budget_entry(entry) and "by_epoch" not in entry:
            entry["by_epoch"] = by_epoch
            if by_epoch:
                entry.setdefault("convert_to_iter_based", True)


def apply_time_budget(cfg: Config, duration: str | float) -> float:
    """Train for ``duration`` of training time (:class:`~budgeted.mmengine.TimeBudgetTrainLoop`);
    return the seconds.

    The iterations are capped at the full schedule (``cfg.full_schedule_iters``, else
    ``train_cfg.max_iters``).

    Raises:
        ValueError: one line for a bad duration, a loop that is not iteration-based, or a
            fraction config (:func:`~budgeted.mmengine.preflight.check_time_budget_pair`).

    Example:
        >>> cfg = Config(dict(full_schedule_iters=800, train_cfg=dict(max_iters=80)))
        >>> apply_time_budget(cfg, "90m"), cfg.train_cfg.type, cfg.train_cfg.max_iters
        (5400.0, 'TimeBudgetTrainLoop', 800)
    """
    seconds = parse_duration(duration)
    check_time_budget_pair(cfg, duration)
    loop = cfg.get("train_cfg") or {}
    if loop.get("type", "IterBasedTrainLoop") not in ("IterBasedTrainLoop", "TimeBudgetTrainLoop"):
        raise ValueError(
            f"--budget-time needs an iteration-based train loop; train_cfg.type is "
            f"{loop.get('type')!r}"
        )
    apply_budget_fraction(cfg, 1.0)
    cfg.train_cfg.type = "TimeBudgetTrainLoop"
    cfg.train_cfg.seconds = seconds
    return seconds


def apply_budget_fraction(cfg: Config, fraction: float) -> int:
    """Train ``fraction`` of the full schedule; return the iterations.

    The full schedule is ``cfg.full_schedule_iters`` (our configs) or ``train_cfg.max_iters``.
    ``max_iters`` and ``val_interval`` become the budget; schedulers without ``end`` follow it.

    Args:
        cfg (Config): the training config (changed in place).
        fraction (float): the budget, in (0, 1].

    Raises:
        ValueError: one line for a fraction outside (0, 1], an epoch-based config, or a
            scheduler whose fixed ``end`` would not follow the budget.

    Example:
        >>> cfg = Config(dict(full_schedule_iters=80000, train_cfg=dict(max_iters=80000)))
        >>> apply_budget_fraction(cfg, 0.1), cfg.train_cfg.val_interval
        (8000, 8000)
    """
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    if not (ok and math.isfinite(fraction) and 0 < fraction <= 1):
        raise ValueError(
            f"budget fraction={fraction!r} is invalid; allowed: a number in (0, 1], the share of "
            "the full schedule to train (1 trains all of it)"
        )
    train_cfg = cfg.get("train_cfg") or {}
    full = cfg.get("full_schedule_iters", train_cfg.get("max_iters"))
    if full is None:
        raise ValueError("--budget needs train_cfg.max_iters (an iteration-based config)")
    iters = budget_iters(fraction=fraction, full_iters=full)
    cfg.train_cfg.max_iters = iters
    cfg.train_cfg.val_interval = iters
    cfg.budget_fraction = fraction
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if checkpoint and checkpoint.get("interval", 0) > iters:
        checkpoint["interval"] = iters
    for entry in _scheduler_entries(cfg):
        end = entry.get("end")
        if end is not None and (_is_budget_entry(entry) or end > iters):
            raise ValueError(
                f"--budget {fraction}: the {entry.get('type')} scheduler sets end={end} but the "
                f"budget is {iters} iterations; remove its end so that it follows "
                "train_cfg.max_iters"
            )
    return iters


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def load_config(path: str | os.PathLike[str], options: dict | None = None) -> Config:
    """``Config.fromfile`` and the ``--cfg-options`` merge, with any failure as one line.

    A config is code: a syntax error, a failing ``custom_imports`` or ``_base_`` that cannot be
    found end in a ``ValueError`` naming the file and the error; an override that does not fit
    the config (``param_scheduler.3.type=...`` on one scheduler) names the override.

    Args:
        path (str or PathLike): the config file.
        options (dict, optional): ``--cfg-options``.

    Raises:
        ValueError: one line.
    """
    check_base_chain(path)  # before Config.fromfile would recurse into a cycle
    try:
        cfg = Config.fromfile(str(path))
    except Exception as err:  # the user's config is code: any error in it is theirs
        raise ValueError(f"config {path} cannot be loaded: {_one_line(err)}") from None
    if options:
        try:
            cfg.merge_from_dict(options)
        except Exception as err:
            shown = " ".join(f"{k}={v}" for k, v in options.items())
            raise ValueError(
                f"--cfg-options {shown} do not fit config {path}: {_one_line(err)}"
            ) from None
    return cfg


def _iteration_based(cfg: Config) -> bool:
    train_cfg = cfg.get("train_cfg") or {}
    kind = train_cfg.get("type")
    iteration_loops = (
        "IterBasedTrainLoop",
        "TimeBudgetTrainLoop",
    )  # a time budget counts iterations too
    return kind in iteration_loops or (kind is None and train_cfg.get("by_epoch") is False)


def add_checkpoint_at(cfg: Config) -> None:
    """The top-level ``checkpoint_at=[N, ...]`` as a :class:`~budgeted.mmengine.hooks.
    CheckpointAtHook`: extra checkpoints after those iteration counts (``budgeted-branch``).

    Raises:
        ValueError: one line for anything but a list of positive iteration counts.

    Example:
        >>> cfg = Config(dict(checkpoint_at=[152, 304]))
        >>> add_checkpoint_at(cfg)
        >>> cfg.custom_hooks
        [{'type': 'CheckpointAtHook', 'iterations': [152, 304]}]
    """
    at = cfg.get("checkpoint_at")
    if at is None:
        return
    values = checkpoint_iterations(
        "checkpoint_at", at if isinstance(at, (list, tuple)) else [at], allow_empty=False
    )
    hooks = list(cfg.get("custom_hooks") or [])
    hooks.append(dict(type="CheckpointAtHook", iterations=values))
    cfg.custom_hooks = hooks


def add_reliability_hooks(cfg: Config, prog: str = PROG) -> None:
    """Atomic checkpoints, preemption-safe training and a stop at a non-finite loss, in the config
    the runner builds.

    MMEngine's ``CheckpointHook`` becomes :class:`~budgeted.mmengine.hooks.AtomicCheckpointHook`
    (same arguments and file names); the run gets a :class:`~budgeted.mmengine.hooks.
    DivergenceHook` and, when iteration-based, a :class:`~budgeted.mmengine.hooks.PreemptionHook`
    unless the config has them; a ``TimeBudgetTrainLoop`` gets ``prog`` for its line; and
    ``custom_imports`` gets ``budgeted.mmengine`` so that the dumped config builds with
    MMSegmentation's own tools too.

    Args:
        cfg (Config): the training config (changed in place).
        prog (str): the name the preemption line starts with.

    Example:
        >>> cfg = Config(dict(train_cfg=dict(type="IterBasedTrainLoop", max_iters=8),
        ...                   default_hooks=dict(checkpoint=dict(type="CheckpointHook"))))
        >>> add_reliability_hooks(cfg)
        >>> cfg.default_hooks.checkpoint.type, [h.type for h in cfg.custom_hooks]
        ('AtomicCheckpointHook', ['DivergenceHook', 'PreemptionHook'])
    """
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("type") in (
        "CheckpointHook",
        "mmengine.CheckpointHook",
    ):
        checkpoint["type"] = "AtomicCheckpointHook"
    custom = list(cfg.get("custom_hooks") or [])
    have = {h.get("type") for h in custom if isinstance(h, dict)}
    if "DivergenceHook" not in have:
        custom.append(dict(type="DivergenceHook", prog=prog))
    if _iteration_based(cfg) and "PreemptionHook" not in have:
        custom.append(dict(type="PreemptionHook", prog=prog))
    cfg.custom_hooks = custom
    loop = cfg.get("train_cfg") or {}
    if loop.get("type") == "TimeBudgetTrainLoop":
        loop.setdefault("prog", prog)
    imports = dict(cfg.get("custom_imports") or {})
    names = list(imports.get("imports") or [])
    if isinstance(names, str):
        names = [names]
    if "budgeted.mmengine" not in names:
        imports["imports"] = [*names, "budgeted.mmengine"]
        imports.setdefault("allow_failed_imports", False)
        cfg.custom_imports = imports


def _global_rank() -> int:
    for key in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(key, "").isdigit():
            return int(os.environ[key])
    return 0


def check_budget_hooks(cfg: Config) -> None:
    """Build each of this package's hooks in ``custom_hooks`` (their arguments are checked when
    built, with no runner) and check a ``TimeBudgetTrainLoop``'s own arguments: a bad value is
    one line now, not after the runner has written into the work dir.

    Args:
        cfg (Config): the training config.

    Raises:
        ValueError: one line naming the hook or loop, the value and what is allowed.

    Example:
        >>> check_budget_hooks(Config(dict(custom_hooks=[dict(type="CheckpointAtHook",
        ...                                                  iterations=[40, 80])])))
    """
    ours = {
        cls.__name__: cls
        for cls in (FullGradNormHook, CheckpointAtHook, PreemptionHook, DivergenceHook)
    }
    for entry in cfg.get("custom_hooks") or []:
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if isinstance(kind, str) and kind in ours:
            ours[kind](**{k: v for k, v in entry.items() if k not in ("type", "priority")})
    loop = cfg.get("train_cfg") or {}
    if loop.get("type") in ("TimeBudgetTrainLoop", TimeBudgetTrainLoop):
        TimeBudgetTrainLoop.check_arguments(loop.get("seconds"), loop.get("clock_sync_period", 1))


def preflight(args: argparse.Namespace) -> Config:
    """The config as MMSegmentation's ``train.py`` builds it, after every check (one-line errors).

    Nothing is written: the checks read the config, the data folders, the work dir and the file
    to load (:func:`~budgeted.mmengine.resume.plan_load`: loaded safely, resumable, the same
    budget, not finished), which the returned config then names as ``load_from``.

    Args:
        args (argparse.Namespace): from :func:`parse_args`.

    Returns:
        Config: ready for ``Runner.from_cfg``.

    Raises:
        ValueError, FileNotFoundError: one line saying what is wrong and what is allowed.
        NothingToResume: ``--resume`` of a run that trained its whole budget.

    Example:
        ``cfg = preflight(parse_args(["pspnet_r18-toy_cityscapes_budget10"]))``
    """
    path = find_config(args.config, "mmengine")
    cfg = load_config(path, args.cfg_options)
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir", None) is None:
        cfg.work_dir = osp.join("./work_dirs", path.stem)
    if args.amp:
        _apply_amp(cfg)
    cfg.resume = bool(args.resume or args.resume_from)
    _apply_budgets(cfg, args.budget, getattr(args, "budget_time", None))
    fill_budget_scheduler_defaults(cfg)
    check_scheduler_types(cfg)
    check_budget_schedulers(cfg)
    check_budget_hooks(cfg)
    check_data_roots(cfg)
    check_writable(cfg.work_dir)
    if args.launcher == "none":  # several ranks agree on the lock once their group is up
        WorkDirLock(cfg.work_dir).check()
    check_new_run_folder(cfg.work_dir, cfg.resume)
    check_init_checkpoints(cfg)
    plan = plan_load(
        cfg,
        args.resume_from,
        check_budget=check_resume_budget,
        check_weights=check_weights_fit_model,
    )
    if plan.note is not None:
        print(f"{PROG}: {plan.note}", file=sys.stderr)
    add_reliability_hooks(cfg)
    add_checkpoint_at(cfg)
    if needs_cpu_distributed(args.launcher):
        replaced = prepare_cpu_distributed(cfg)
        print_log(
            f"no GPU: --launcher {args.launcher} runs gloo on CPUs, DDP with device_ids=None"
            + (f", {replaced} SyncBN norm configs replaced by BN" if replaced else ""),
            "current",
            logging.WARNING,
        )
    return cfg


def _apply_amp(cfg: Config) -> None:
    """``--amp``: MMEngine's ``AmpOptimWrapper`` with a dynamic loss scale."""
    optim_wrapper = cfg.optim_wrapper.type
    if optim_wrapper == "AmpOptimWrapper":
        print_log("AMP training is already enabled in your config.", "current", logging.WARNING)
    elif optim_wrapper != "OptimWrapper":
        raise ValueError(f"--amp needs optim_wrapper.type OptimWrapper, got {optim_wrapper!r}")
    else:
        cfg.optim_wrapper.type = "AmpOptimWrapper"
        cfg.optim_wrapper.loss_scale = "dynamic"


def _apply_budgets(cfg: Config, fraction: float | None, duration: str | None) -> None:
    """``--budget`` or ``--budget-time`` (one of them; a time budget on the full schedule)."""
    if fraction is not None and duration is not None:
        raise ValueError(
            f"--budget {fraction} and --budget-time {duration} are two budgets; "
            "allowed: one of them"
        )
    if fraction is not None:
        apply_budget_fraction(cfg, fraction)
    if duration is not None:
        apply_time_budget(cfg, duration)


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


def _lock_work_dir(cfg: Config) -> WorkDirLock | None:
    """Rank 0 locks the work dir; every rank refuses together if it could not."""
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0
    lock = WorkDirLock(cfg.work_dir) if rank == 0 else None
    error: WorkDirBusyError | None = None
    if lock is not None:
        try:
            lock.acquire()
        except WorkDirBusyError as err:
            error, lock = err, None
    if distributed:
        from ..safety.ranks import agree_max

        if agree_max(error is not None) and error is None:
            if lock is not None:
                lock.release()
            error = WorkDirBusyError(f"work dir {cfg.work_dir} is in use (rank 0 found it locked)")
    if error is not None:
        raise error
    return lock


def main(argv: Sequence[str] | None = None) -> int:
    """Check everything, then train with MMEngine's runner; the exit status.

    0: trained (or nothing left to resume); 2: bad input, refused before anything was written
    (one line ``train_seg: error: ...``), or a budget refused while the runner starts;
    3 (:data:`budgeted.safety.preemption.DIVERGED_EXIT_CODE`): the loss became NaN or infinite, the
    run stopped there (not a result); 4 (:data:`budgeted.safety.preemption.UNDECAYED_EXIT_CODE`): a
    time budget ended before its schedule decayed (saved and validated); 75
    (:data:`budgeted.safety.preemption.PREEMPTED_EXIT_CODE`): stopped by SIGTERM / SIGUSR1 after
    writing a checkpoint, continue with ``--resume``; 1: another rank is gone. SIGTERM and
    SIGUSR1 only set a flag from the start (:class:`budgeted.safety.preemption.PreemptionGuard`), so
    one that arrives while the runner is built is not lost.

    Args:
        argv (list[str], optional): the arguments; default ``sys.argv[1:]``.

    Example:
        ``main(["pspnet_r18-toy_cityscapes_budget10", "--work-dir", "work_dirs/toy10"])``
    """
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else 2
    allow_mmengine_checkpoints()
    with PreemptionGuard() as guard:
        return _train(args, guard)


def _has_preemption_hook(cfg: Config) -> bool:
    hooks = cfg.get("custom_hooks") or []
    return any(isinstance(h, dict) and h.get("type") == "PreemptionHook" for h in hooks)


def _checked(args: argparse.Namespace) -> Config | int:
    """:func:`preflight`, with a refusal printed in one line: the config, or the exit status."""
    try:
        return preflight(args)
    except NothingToResume as done:
        print(f"{PROG}: {done}", file=sys.stderr)
        return 0
    except (ValueError, FileNotFoundError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2


def check_only(argv: Sequence[str]) -> int | None:
    """Every check :func:`main` makes before training, in this process, training nothing: the
    exit status of a refusal (its one line printed), None when the run may start.

    ``tools/dist_train.sh``'s launcher (:mod:`budgeted.mmengine.dist_run`) runs it once before
    it starts the ranks, so that bad input (missing data, say) is one line and exit status 2,
    not one line per rank and torchrun's report of their failure.

    Example:
        ``check_only(["pspnet_r18-toy_cityscapes_budget10", "--launcher", "pytorch"])``
    """
    try:
        args = parse_args(argv)
    except SystemExit as stop:  # --help, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else 2
    allow_mmengine_checkpoints()
    checked = _checked(args)
    return checked if isinstance(checked, int) else None


def _signalled_early(cfg: Config, guard: PreemptionGuard, launcher: str) -> int | None:
    """A preemption signal that came during the checks: the exit status (nothing written)."""
    if not _has_preemption_hook(cfg):  # nothing would act on the flag: signals as before
        guard.__exit__(None, None, None)
        if guard.requested:
            os.kill(os.getpid(), guard.signum)
    elif guard.requested and launcher == "none":  # several ranks: the hook agrees
        print(
            f"{PROG}: preempted by {guard.signal_name} before training started: nothing "
            f"written; exit status {PREEMPTED_EXIT_CODE}, run the same command again",
            file=sys.stderr,
        )
        return PREEMPTED_EXIT_CODE
    return None


def _removed_temporaries(work_dir: str) -> str | None:
    """Remove what a killed checkpoint write left (holding the work dir's lock); the line."""
    removed = remove_stale_temporaries(work_dir)
    if not removed:
        return None
    return (
        f"removed {len(removed)} temporary file(s) that a killed checkpoint write left in "
        f"{work_dir}: {', '.join(removed)}"
    )


def _train(args: argparse.Namespace, guard: PreemptionGuard) -> int:
    lock = None
    try:
        cfg = _checked(args)
        if isinstance(cfg, int):
            return cfg
        early = _signalled_early(cfg, guard, args.launcher)
        if early is not None:
            return early
        try:
            _init_distributed(args.launcher, cfg)
            lock = _lock_work_dir(cfg)
        except ValueError as err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return 2
        cleaned = _removed_temporaries(cfg.work_dir) if lock is not None else None
        runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else _build_custom(cfg)
        if cleaned is not None:
            runner.logger.warning(cleaned)
        runner.train()
    except (Preempted, Diverged, Undecayed) as stop:  # the hook printed its one line
        return int(stop.code)
    except (BudgetMismatchError, BudgetConfigError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        if not lost_a_rank(err):
            raise
        say_lost_rank(PROG, _global_rank(), err)
        return 1
    finally:
        if lock is not None:
            lock.release()
        destroy_process_group()
    return 0


def _build_custom(cfg: Config) -> Runner:
    """A ``runner_type`` runner, from the config's default scope's registry."""
    scope = cfg.get("default_scope") or "mmengine"
    return importlib.import_module(f"{scope}.registry").RUNNERS.build(cfg)

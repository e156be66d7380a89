"""The one pre-flight of ``tools/train_seg.py``: every check, before anything is written.

:func:`preflight` runs before MMEngine's runner exists (the runner writes into the work dir as
soon as it is built): the config with the command line's edits, its budget schedulers and hooks
built with their arguments, the data, the work dir and the model's files, then the file to load
or resume (:func:`budgeted.mmengine.resume.plan_load`). Each refusal is one line (a
``ValueError``, ``FileNotFoundError`` or :class:`~budgeted.mmengine.resume.NothingToResume`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import os.path as osp
import sys
import warnings
from collections.abc import Iterator, Mapping

import torch
from mmengine.config import Config
from mmengine.logging import print_log

from ..config_files import find_config
from ..control.folder import OutputFolder
from ..control.preflight import Tool
from ..control.preflight import preflight as run_checks
from ..runs.mmengine import saved_schedulers, scheduler_key
from ..schedules import BudgetMismatchError, check_on_resume
from .annotation_checks import check_annotation_files
from .arms import apply_optimizer, apply_schedule_free, apply_subset, apply_validate_every
from .config_edits import (
    PROG,
    RENAMED,
    add_checkpoint_at,
    add_reliability_hooks,
    apply_amp,
    apply_budgets,
    check_scheduler_types,
    fill_budget_scheduler_defaults,
    is_budget_entry,
    scheduler_groups,
    scope_registry,
)
from .grad_norm import FullGradNormHook
from .hooks import CheckpointAtHook, DivergenceHook, PreemptionHook
from .input_checks import (
    DATA_HINTS,
    check_base_chain,
    check_data_roots,
    check_init_checkpoints,
    check_time_budget_pair,
    check_weights_fit_model,
    check_writable,
    output_folder,
)
from .launch import needs_cpu_distributed, prepare_cpu_distributed
from .own_schedule import apply_own_schedule, check_budget_after_warmup
from .resume import check_resume_base_lrs, check_time_budget_resume, plan_load, state_place
from .schedule_free import ScheduleFreeHook, check_schedulefree_installed
from .schedulers import BudgetParamScheduler, check_loop_end
from .time_budget import TimeBudgetTrainLoop

__all__ = [
    "DATA_HINTS",
    "IMPORT_WARNINGS",
    "RENAMED",
    "build_budget_schedulers",
    "check_base_chain",
    "check_budget_hooks",
    "check_budget_schedulers",
    "check_data_roots",
    "check_init_checkpoints",
    "check_resume_budget",
    "check_scheduler_types",
    "check_time_budget_pair",
    "check_weights_fit_model",
    "check_writable",
    "load_config",
    "preflight",
    "scope_registry",
]


IMPORT_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"`torch\.jit\.script` is deprecated\. Please switch to"),
)
"""``(category, message regex)`` of the warnings that importing a codebase prints while the
checks look its classes up, which say nothing about the run: fvcore (imported by MMPretrain's and
MMDetection's models through Detectron2) calls ``torch.jit.script`` at import, which torch now
says is deprecated."""


@contextlib.contextmanager
def quiet_import_warnings() -> Iterator[None]:
    """Ignore exactly :data:`IMPORT_WARNINGS` inside (other warnings are shown as before), so
    that a refusal is the only line on stderr."""
    with warnings.catch_warnings():
        for category, message in IMPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def load_config(path: str | os.PathLike[str], options: dict | None = None) -> Config:
    """``Config.fromfile`` and the ``--cfg-options`` merge, with any failure as one line.

    A config is code: a syntax error, a failing ``custom_imports`` or ``_base_`` that cannot be
    found end in a ``ValueError`` naming the file and the error; an override that does not fit
    the config (``param_scheduler.3.type=...`` on one scheduler) names the override.

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


def preflight(args: argparse.Namespace) -> Config:
    """The config as MMSegmentation's ``train.py`` builds it, after every check (one-line errors).

    Nothing is written: the checks read the config, the data folders, the work dir and the file
    to load (:func:`~budgeted.mmengine.resume.plan_load`: loaded safely, resumable, the same
    budget, not finished), which the returned config then names as ``load_from``.

    Raises:
        ValueError, FileNotFoundError: one line saying what is wrong and what is allowed.
        NothingToResume: ``--resume`` of a run that trained its whole budget.

    Example:
        ``cfg = preflight(parse_args(["pspnet_r18-toy_cityscapes_budget10"]))``
    """
    with quiet_import_warnings():  # the checks import the codebase's modules first
        return _checked_config(args)


class TrainSeg(Tool):
    """``tools/train_seg.py`` to the one pre-flight (:func:`budgeted.control.preflight.preflight`):
    the config with the command line's edits; the budget schedulers, hooks, data and annotations;
    the work dir writable, not in use (one process: several ranks agree on the lock once their
    group is up), no other run there; the model's files; the file to load."""

    ORDER = ("inputs", "writable", "in_use", "new_run", "model_files", "file")

    def load(self, args: argparse.Namespace) -> Config:
        return _edited_config(args)

    def folder(self, cfg: Config) -> OutputFolder:
        return output_folder(cfg.work_dir)

    def inputs(self, cfg: Config, args: argparse.Namespace) -> None:
        for check in (check_scheduler_types, check_budget_schedulers, check_budget_hooks):
            check(cfg)
        for check in (check_schedulefree_installed, check_data_roots, check_annotation_files):
            check(cfg)

    def in_use(self, cfg: Config, args: argparse.Namespace) -> None:
        if args.launcher == "none":
            super().in_use(cfg, args)

    def model_files(self, cfg: Config, args: argparse.Namespace) -> None:
        check_init_checkpoints(cfg)

    def file(self, cfg: Config, args: argparse.Namespace) -> None:
        plan = plan_load(cfg, args.resume_from, check_budget=check_resume_budget,
                         check_weights=check_weights_fit_model)  # fmt: skip
        if plan.note is not None:
            print(f"{PROG}: {plan.note}", file=sys.stderr)


def _checked_config(args: argparse.Namespace) -> Config:
    """:func:`preflight`'s checks (:class:`TrainSeg`), then the edits that follow them."""
    cfg = run_checks(TrainSeg(), args)
    add_reliability_hooks(cfg)
    add_checkpoint_at(cfg)
    apply_subset(cfg, getattr(args, "subset", None))  # after the data checks, which it wraps
    if needs_cpu_distributed(args.launcher):
        replaced = prepare_cpu_distributed(cfg)
        print_log(
            f"no GPU: --launcher {args.launcher} runs gloo on CPUs, DDP with device_ids=None"
            + (f", {replaced} SyncBN norm configs replaced by BN" if replaced else ""),
            "current",
            logging.WARNING,
        )
    return cfg


def _edited_config(args: argparse.Namespace) -> Config:
    """The config file with the command line's edits: ``--cfg-options``, the launcher, the work
    dir, ``--amp``, the resume flag, ``--schedule`` or ``--schedule-free`` / ``--full-iters``,
    the budget, budget schedulers' ``by_epoch``, ``--optimizer``, ``--validate-every``
    (:mod:`budgeted.mmengine.arms`; ``--subset`` follows the data checks)."""
    path = find_config(args.config, "mmengine")
    cfg = load_config(path, args.cfg_options)
    cfg.launcher = args.launcher
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir", None) is None:
        cfg.work_dir = osp.join("./work_dirs", path.stem)
    if args.amp:
        apply_amp(cfg)
    cfg.resume = bool(args.resume or args.resume_from)
    schedule, free = getattr(args, "schedule", None), getattr(args, "schedule_free", False)
    if schedule is not None and free:
        raise ValueError(
            f"--schedule {schedule} and --schedule-free are two LR schedules; allowed: one of them"
        )
    warmup = apply_own_schedule(cfg, schedule, getattr(args, "full_iters", None), free)
    if free:  # the optimizer is the schedule
        warmup = apply_schedule_free(cfg, getattr(args, "optimizer", None))
    if schedule is not None and args.cfg_options:  # param_scheduler.0.cooldown=0.1, say:
        scheduler_options = {  # the budget scheduler's parameters, set on the one it made
            k: v for k, v in dict(args.cfg_options).items() if k.startswith("param_scheduler.")
        }
        cfg.merge_from_dict(scheduler_options)
    apply_budgets(cfg, args.budget, getattr(args, "budget_time", None))
    if schedule is not None or free:
        check_budget_after_warmup(cfg, warmup)
    fill_budget_scheduler_defaults(cfg)
    if not free:
        apply_optimizer(cfg, getattr(args, "optimizer", None))
    apply_validate_every(cfg, getattr(args, "validate_every", None))
    return cfg


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
        return scope_registry(cfg, "OPTIMIZERS").build(dict(spec, params=[parameter]))
    except Exception:  # the runner builds it again and reports its own error
        return None


def build_budget_schedulers(
    cfg: Config,
) -> list[tuple[str | None, int, BudgetParamScheduler]]:
    """Build each iteration-based budget entry on the config's optimizer over a stand-in
    parameter: bad arguments fail now, before anything is written.

    ``end`` defaults to ``train_cfg.max_iters`` as in the runner, and an ``end`` that differs
    from it is refused (:func:`~budgeted.mmengine.schedulers.check_loop_end`). Epoch-based entries
    are checked by the scheduler when the runner builds it (their length needs the dataloader).

    Raises:
        BudgetConfigError: one line naming the scheduler, the value and what is allowed.
    """
    max_iters = (cfg.get("train_cfg") or {}).get("max_iters")
    policy = cfg.get("budget_on_resume")
    if policy is not None:
        check_on_resume(policy, "budget_on_resume")
    registry = scope_registry(cfg)
    built = []
    for group, entries in scheduler_groups(cfg):
        for index, entry in enumerate(entries):
            by_epoch = entry.get("by_epoch", True)
            if not is_budget_entry(entry) or (by_epoch and entry.get("convert_to_iter_based")):
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
    and takes the one resume route with the state it is paired with
    (:func:`budgeted.runs.mmengine.saved_schedulers`, MMEngine's pairing by position;
    :func:`~budgeted.mmengine.resume.check_time_budget_resume`): the one-line refusal the runner
    would raise, before anything is written. A budget scheduler in the checkpoint where the
    config has a stock one is refused too.

    Raises:
        BudgetMismatchError: one line saying what differs and what to do; also for a checkpoint
            whose base LRs are not the ones the config gives each param group
            (:func:`~budgeted.mmengine.resume.check_resume_base_lrs`).
    """
    states = saved_schedulers(checkpoint)
    built = {(group, index): sched for group, index, sched in build_budget_schedulers(cfg)}
    for group, entries in scheduler_groups(cfg):
        for index, entry in enumerate(entries):
            saved = states.get(scheduler_key(group, index))
            scheduler = built.get((group, index))
            if scheduler is not None:
                check_time_budget_resume(cfg, scheduler, saved, path)
            elif saved is not None and "budget" in saved and not is_budget_entry(entry):
                where = f"param_scheduler{state_place(group, index)}" if group else f"[{index}]"
                raise BudgetMismatchError(
                    f"cannot resume from {path}: its scheduler {where} is budget-aware, the "
                    f"config's is {entry.get('type')}; to resume, keep the checkpoint's "
                    "schedulers; to train another schedule, start a new run from its weights with "
                    f"load_from={path} and resume=False"
                )
    check_resume_base_lrs(cfg, checkpoint, path)


def check_budget_hooks(cfg: Config) -> None:
    """Build each of this package's hooks in ``custom_hooks`` (their arguments are checked when
    built, with no runner) and check a ``TimeBudgetTrainLoop``'s own arguments: a bad value is
    one line now, not after the runner has written into the work dir.

    Raises:
        ValueError: one line naming the hook or loop, the value and what is allowed.

    Example:
        >>> check_budget_hooks(Config(dict(custom_hooks=[dict(type="CheckpointAtHook",
        ...                                                  iterations=[40, 80])])))
    """
    ours = {
        cls.__name__: cls
        for cls in (
            FullGradNormHook,
            CheckpointAtHook,
            PreemptionHook,
            DivergenceHook,
            ScheduleFreeHook,
        )
    }
    for entry in cfg.get("custom_hooks") or []:
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        if isinstance(kind, str) and kind in ours:
            ours[kind](**{k: v for k, v in entry.items() if k not in ("type", "priority")})
    loop = cfg.get("train_cfg") or {}
    if loop.get("type") in ("TimeBudgetTrainLoop", TimeBudgetTrainLoop):
        TimeBudgetTrainLoop.check_arguments(loop.get("seconds"), loop.get("clock_sync_period", 1))

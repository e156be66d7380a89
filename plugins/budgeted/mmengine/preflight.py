"""The one pre-flight of ``tools/train_seg.py``: every check, before anything is written.

:func:`preflight` runs once, before MMEngine's runner exists (the runner creates the work dir, a
timestamped log folder and the config dump as soon as it is built, so a problem it would find
later has already changed the folder). In order:

1. the config: read (:func:`load_config`, a ``_base_`` cycle found first), with the command
   line's edits (:mod:`budgeted.mmengine.own_schedule`: ``--schedule``, ``--full-iters``;
   :mod:`budgeted.mmengine.config_edits`: ``--budget``, ``--budget-time``, ``--amp``,
   ``by_epoch`` from the loop);
2. its budget schedulers and this package's hooks, built with their arguments
   (:mod:`budgeted.mmengine.config_checks`; a scheduler on the config's optimizer over a
   stand-in parameter);
3. the data folders, the annotation files of MMPretrain ``CustomDataset`` sets
   (:mod:`budgeted.mmengine.annotation_checks`), the work dir (writable, not locked, not another
   run's) and the files the model loads (:mod:`budgeted.mmengine.input_checks`);
4. the file to load or resume (:func:`budgeted.mmengine.resume.plan_load`: loaded safely,
   resumable, the same budget, not finished), which the returned config then names;
5. the reliability hooks and the CPU launcher's settings, added to the config.

Each refusal is one line (a ``ValueError``, ``FileNotFoundError`` or
:class:`~budgeted.mmengine.resume.NothingToResume`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import os.path as osp
import sys
import warnings
from collections.abc import Iterator

from mmengine.config import Config
from mmengine.logging import print_log

from ..config_files import find_config
from ..runs.mmengine import WorkDirLock, check_new_run_folder
from .annotation_checks import check_annotation_files
from .config_checks import (
    check_budget_hooks,
    check_budget_schedulers,
    check_resume_budget,
    check_scheduler_types,
)
from .config_edits import (
    PROG,
    add_checkpoint_at,
    add_reliability_hooks,
    apply_amp,
    apply_budgets,
    fill_budget_scheduler_defaults,
)
from .input_checks import (
    DATA_HINTS,
    check_base_chain,
    check_data_roots,
    check_init_checkpoints,
    check_time_budget_pair,
    check_weights_fit_model,
    check_writable,
)
from .launch import needs_cpu_distributed, prepare_cpu_distributed
from .own_schedule import apply_own_schedule, check_budget_after_warmup
from .resume import plan_load

__all__ = [
    "DATA_HINTS",
    "IMPORT_WARNINGS",
    "check_base_chain",
    "check_data_roots",
    "check_init_checkpoints",
    "check_time_budget_pair",
    "check_weights_fit_model",
    "check_writable",
    "load_config",
    "preflight",
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
    with quiet_import_warnings():  # the checks import the codebase's modules first
        return _checked_config(args)


def _checked_config(args: argparse.Namespace) -> Config:
    """:func:`preflight`'s checks and edits, in order."""
    cfg = _edited_config(args)
    check_scheduler_types(cfg)
    check_budget_schedulers(cfg)
    check_budget_hooks(cfg)
    check_data_roots(cfg)
    check_annotation_files(cfg)
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


def _edited_config(args: argparse.Namespace) -> Config:
    """The config file with the command line's edits: ``--cfg-options``, the launcher, the work
    dir, ``--amp``, the resume flag, ``--schedule`` / ``--full-iters``, the budget, budget
    schedulers' ``by_epoch``."""
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
    schedule = getattr(args, "schedule", None)
    warmup = apply_own_schedule(cfg, schedule, getattr(args, "full_iters", None))
    if schedule is not None and args.cfg_options:  # param_scheduler.0.cooldown=0.1, say:
        scheduler_options = {  # the budget scheduler's parameters, set on the one it made
            k: v for k, v in dict(args.cfg_options).items() if k.startswith("param_scheduler.")
        }
        cfg.merge_from_dict(scheduler_options)
    apply_budgets(cfg, args.budget, getattr(args, "budget_time", None))
    if schedule is not None:
        check_budget_after_warmup(cfg, warmup)
    fill_budget_scheduler_defaults(cfg)
    return cfg

"""Checks of a config, its data, its work dir and the files it names, before anything is written
(each reads only and refuses in one line, a ``ValueError``): :func:`check_base_chain`,
:func:`check_data_roots`, :func:`check_writable`, :func:`check_time_budget_pair`,
:func:`check_init_checkpoints`, :func:`check_weights_fit_model`.
"""

from __future__ import annotations

import ast
import copy
import importlib
import os
import os.path as osp
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from mmengine.config import Config

from ..control.folder import OutputFolder
from ..control.plan import check_one_budget
from ..runs import mmengine as accessor
from .checkpoint import load_mmengine_checkpoint

__all__ = [
    "DATA_HINTS", "check_base_chain", "check_data_roots", "check_init_checkpoints",
    "check_time_budget_pair", "check_weights_fit_model", "check_writable", "output_folder"
]  # fmt: skip

DATA_HINTS = {
    "mmseg": "tools/make_toy_cityscapes.py for the toy set, tools/prepare_cityscapes.py for "
    "Cityscapes",
    "mmdet": "tools/make_toy_coco.py for the toy set; COCO 2017 as docs/mmdet.md lays it out",
    "mmpretrain": "tools/make_toy_cifar10.py or tools/make_toy_imagenet.py for the toy sets; "
    "docs/mmpretrain.md for CIFAR-10 and ImageNet",
    "mmaction": "tools/make_toy_kinetics.py for the toy set; docs/mmaction.md for Kinetics-400 "
    "raw frames",
}
"""default_scope -> how to make or get the data a config names, for the missing-folder error."""

_REMOTE = re.compile(r"^[\w.+-]*:(//)?")
"""``open-mmlab://...``, ``torchvision://...``, ``https://...``: MMEngine's own loaders."""


# --- _base_ ---------------------------------------------------------------------------------


def _base_files(path: str) -> list[str]:
    """The local files ``path``'s top-level ``_base_`` names, read without running the file
    (package configs ``mmseg::...`` and ``{{ }}`` templates are MMEngine's to resolve)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []  # Config.fromfile reports it in one line
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_base_" for t in node.targets
        ):
            values = (
                node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            )
            names = [v.value for v in values if isinstance(v, ast.Constant)]
    local = [n for n in names if isinstance(n, str) and "::" not in n and "{{" not in n]
    return [osp.realpath(osp.join(osp.dirname(path), n)) for n in local]


def check_base_chain(path: str | os.PathLike[str]) -> None:
    """Refuse a config whose ``_base_`` chain comes back to a file already in it.

    ``Config.fromfile`` would recurse until Python's limit (a ``RecursionError`` after seconds).
    Python configs are parsed (``ast``), never run, to follow their ``_base_``.

    Raises:
        ValueError: one line naming the files of the cycle.

    Example:
        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.py").write_text('_base_ = "./b.py"')
        >>> _ = (folder / "b.py").write_text('_base_ = ["./a.py"]')
        >>> check_base_chain(folder / "a.py")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: config .../a.py inherits from itself through _base_: a.py -> b.py -> a.py (...
    """
    start = osp.realpath(path)
    done: set[str] = set()

    def visit(file: str, chain: list[str]) -> None:
        if file in chain:
            cycle = [*chain[chain.index(file) :], file]
            raise ValueError(
                f"config {path} inherits from itself through _base_: "
                f"{' -> '.join(osp.basename(f) for f in cycle)} ({' -> '.join(cycle)}); "
                "allowed: a _base_ chain that never comes back to a file in it"
            )
        if file in done or not file.endswith(".py"):
            return
        for base in _base_files(file):
            visit(base, [*chain, file])
        done.add(file)

    visit(start, [])


# --- data -----------------------------------------------------------------------------------


def _prefix_folders(dataset: Mapping) -> list[str]:
    root = dataset.get("data_root")
    prefix = dataset.get("data_prefix") or {}
    if isinstance(prefix, str):
        prefix = {"img": prefix}
    parts = (
        [p for p in prefix.values() if isinstance(p, str) and p]
        if isinstance(prefix, Mapping)
        else []
    )
    return [osp.join(root, p) for p in parts]


def _holds_a_file(folder: str) -> bool:
    """Whether ``folder`` or a folder below it holds a file (stops at the first one)."""
    return any(files for _, _, files in os.walk(folder, followlinks=True))


def check_data_roots(cfg: Config) -> None:
    """Each train/val/test dataset's root and prefix folders must exist, and the train and val
    prefix folders (images, labels) must hold files.

    Raises:
        ValueError: one line naming the missing or empty folder and how to make or point to it.

    Example:
        >>> check_data_roots(Config(dict(train_dataloader=dict(dataset=dict()))))
    """
    hint = DATA_HINTS.get(cfg.get("default_scope"), "see the codebase's docs")
    for loader in ("train_dataloader", "val_dataloader", "test_dataloader"):
        dataset = (cfg.get(loader) or {}).get("dataset") or {}
        root = dataset.get("data_root")
        if root is None:
            continue
        prefixes = _prefix_folders(dataset)
        for folder in [root, *prefixes]:
            if not osp.isdir(folder):
                raise ValueError(
                    f"{loader}: {folder} does not exist; set {loader}.dataset.data_root "
                    f"(--cfg-options) or create the data ({hint})"
                )
        if loader == "test_dataloader":
            continue
        for folder in prefixes:
            if not _holds_a_file(folder):
                split = "training" if loader == "train_dataloader" else "validation"
                raise ValueError(
                    f"{loader}: {folder} holds no files: the {split} split is empty; put the "
                    f"data there, or set {loader}.dataset.data_root (--cfg-options) ({hint})"
                )


# --- the work dir, the budget -------------------------------------------------------------------


def output_folder(work_dir: str | os.PathLike[str]) -> OutputFolder:
    """The work dir as the output folder of ``tools/train_seg.py`` (named by ``--work-dir``)."""
    return OutputFolder(work_dir, accessor, "--work-dir")


def check_writable(work_dir: str | os.PathLike[str]) -> None:
    """The work dir (where it does not exist yet: the folder it will be made in) can be written.

    Raises:
        ValueError: one line naming the folder and why (``Read-only file system``).

    Example:
        >>> import tempfile
        >>> check_writable(tempfile.mkdtemp() + "/run")
    """
    output_folder(work_dir).check_writable()


def check_time_budget_pair(cfg: Config, duration: str) -> None:
    """Refuse ``--budget-time`` with a fraction config (``budget_fraction`` < 1, e.g. the
    ``_budget10`` configs): a time budget and a fraction of the schedule are two budgets
    (Detectron2 refuses ``SOLVER.BUDGET.FRACTION`` != 1 with ``SECONDS`` the same way).

    Raises:
        ValueError: one line naming both and what is allowed.

    Example:
        >>> check_time_budget_pair(Config(dict(budget_fraction=1.0)), "6h")
    """
    fraction, full = cfg.get("budget_fraction"), cfg.get("full_schedule_iters")
    of = f" of full_schedule_iters={full}" if full is not None else ""
    head = f"--budget-time {duration} with a fraction config (budget_fraction={fraction}{of})"
    check_one_budget(fraction, head, "--budget-time with the full-schedule config, e.g. a "
                     "_budget100 one, whose max_iters then only caps the iterations; or this "
                     "config without --budget-time")  # fmt: skip


# --- files the model loads -----------------------------------------------------------------------


def _init_checkpoints(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """``(config key, file)`` of every ``Pretrained`` init checkpoint and ``pretrained=`` path
    under ``node``."""
    if isinstance(node, Mapping):
        init = node.get("init_cfg")
        entries = init if isinstance(init, (list, tuple)) else [init]
        listed = isinstance(init, (list, tuple))
        for i, entry in enumerate(entries):
            pretrained = isinstance(entry, Mapping) and entry.get("type") == "Pretrained"
            if pretrained and isinstance(entry.get("checkpoint"), str):
                at = f"{where}.init_cfg" + (f"[{i}]" if listed else "")
                yield f"{at}.checkpoint", entry["checkpoint"]
        if isinstance(node.get("pretrained"), str):
            yield f"{where}.pretrained", node["pretrained"]
        for key, value in node.items():
            if key != "init_cfg":
                yield from _init_checkpoints(value, f"{where}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _init_checkpoints(value, f"{where}[{i}]")


def check_init_checkpoints(cfg: Config) -> None:
    """Load every local file the model's ``init_cfg`` (``type="Pretrained"``) or ``pretrained``
    names as untrusted input (:func:`~budgeted.mmengine.checkpoint.load_mmengine_checkpoint`):
    a foreign global or a damaged file is one line now, not a torch traceback when the runner
    initialises the weights. Remote names (``open-mmlab://``, ``https://``) are MMEngine's.

    Raises:
        UnsafeCheckpointError, DamagedCheckpointError: one line, prefixed with the config key.

    Example:
        >>> check_init_checkpoints(Config(dict(model=dict(pretrained="open-mmlab://resnet50"))))
    """
    for where, path in _init_checkpoints(cfg.get("model") or {}, "model"):
        if _REMOTE.match(path) and not osp.exists(path):
            continue
        try:
            load_mmengine_checkpoint(path)
        except ValueError as err:
            raise type(err)(f"{where}: {err}") from None


def _model_keys(cfg: Config) -> set[str] | None:
    """The state-dict keys of the config's model, built without weights (on the ``meta``
    device, else on the CPU); None where it cannot be built here (the runner reports that)."""
    scope = cfg.get("default_scope") or "mmengine"
    try:
        registry = importlib.import_module(f"{scope}.registry").MODELS
    except (ImportError, AttributeError):
        from mmengine.registry import MODELS as registry
    from mmengine.registry import DefaultScope

    for device in ("meta", "cpu"):
        try:
            with (
                DefaultScope.overwrite_default_scope(scope),
                torch.device(device),
                warnings.catch_warnings(),  # the runner's build says them again
            ):
                warnings.simplefilter("ignore")
                model = registry.build(copy.deepcopy(cfg.model))
            return set(model.state_dict())
        except Exception:  # any failure: leave the check to the runner
            continue
    return None


def check_weights_fit_model(cfg: Config, checkpoint: Any, path: str) -> None:
    """Refuse weights to start from (``load_from``, not resumed) that share no key with the
    model: MMEngine would load nothing and only warn deep in the log.

    The keys are read as MMEngine's ``load_checkpoint`` reads them: the ``state_dict`` entry if
    there is one, else the whole mapping, without a ``module.`` prefix. Any overlap passes (a
    backbone's weights in a whole segmentor, say).

    Raises:
        ValueError: one line naming some keys of each and what is allowed.
    """
    if not isinstance(checkpoint, Mapping) or cfg.get("model") is None:
        return
    state = checkpoint.get("state_dict", checkpoint)
    if not isinstance(state, Mapping):
        return
    keys = sorted(re.sub(r"^module\.", "", k) for k in state if isinstance(k, str))
    model = _model_keys(cfg)
    if not keys or model is None or set(keys) & model:
        return
    foreign = ""
    if "model" in keys:
        foreign = " (a Detectron2 checkpoint keeps its weights under 'model', named its own way)"
    raise ValueError(
        f"load_from={path}: none of its {len(keys)} keys ({', '.join(keys[:3])}) is a key of "
        f"the model ({', '.join(sorted(model)[:3])}, ...): it would load nothing{foreign}; "
        "allowed: weights of this model (an iter_<N>.pth of MMEngine's runner, or its "
        "state_dict), or weights converted to its names"
    )

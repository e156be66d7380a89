"""The annotation files of MMPretrain's ``CustomDataset``, checked line by line before anything is
written.

:func:`check_annotation_files` builds each train and val dataset of the config (through dataset
wrappers) without loading it (``lazy_init=True``) and reads its annotation file as
``CustomDataset.load_data_list`` does: a line without an integer label, a label outside the
classes, a missing image or a path that leaves ``data_prefix`` is one line. Other dataset types,
remote files and datasets that cannot be built here are left to the runner.
"""

from __future__ import annotations

import copy
import os
import os.path as osp
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from mmengine.config import Config
from mmengine.fileio import list_from_file
from mmengine.registry import DefaultScope

from .config_edits import scope_registry
from .input_checks import _REMOTE, DATA_HINTS

__all__ = ["check_annotation_files"]

_LOADERS = {"train_dataloader": "training", "val_dataloader": "validation"}
"""The dataloaders a training run reads, and the name of their split."""


def _dataset_configs(node: Any) -> Iterator[Mapping]:
    """Every dataset config under ``node``, through wrappers (``dataset=``, ``datasets=[...]``)."""
    if not isinstance(node, Mapping):
        return
    inner, several = node.get("dataset"), node.get("datasets")
    if isinstance(inner, Mapping):
        yield from _dataset_configs(inner)
    elif isinstance(several, (list, tuple)):
        for item in several:
            yield from _dataset_configs(item)
    else:
        yield node


def _lazy_custom_dataset(cfg: Config, dataset: Mapping) -> Any:
    """The dataset ``dataset`` configures, built without reading its annotation file, where it is
    a ``CustomDataset`` that reads that file the ``CustomDataset`` way; else None."""
    registry = scope_registry(cfg, "DATASETS")
    kind = dataset.get("type")
    try:
        cls = kind if isinstance(kind, type) else registry.get(kind)
    except Exception:  # not ours to report: the runner's build says what is wrong
        return None
    # imported by the lookup where the class is MMPretrain's or a subclass of it
    base = getattr(sys.modules.get("mmpretrain.datasets.custom"), "CustomDataset", None)
    if base is None or not isinstance(cls, type) or not issubclass(cls, base):
        return None
    if cls.load_data_list is not base.load_data_list:  # a format of its own
        return None
    try:
        with DefaultScope.overwrite_default_scope(cfg.get("default_scope") or "mmengine"):
            return registry.build({**copy.deepcopy(dict(dataset)), "lazy_init": True})
    except Exception:  # the runner builds it again and reports its own error
        return None


def _num_classes(cfg: Config, dataset: Any) -> tuple[int, str] | None:
    """The fewest classes the dataset's metainfo or the model's ``num_classes`` allow, and where
    that number is set; None where neither says."""
    found: list[tuple[int, str]] = []
    classes = getattr(dataset, "CLASSES", None)
    if classes:
        found.append((len(classes), f"the {len(classes)} classes of its metainfo"))
    model = cfg.get("model") or {}
    preprocessor = model.get("data_preprocessor") or cfg.get("data_preprocessor") or {}
    for key, node in (
        ("model.head", model.get("head")),
        ("model.backbone", model.get("backbone")),
        ("data_preprocessor", preprocessor),
    ):
        count = node.get("num_classes") if isinstance(node, Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            found.append((count, f"{key}.num_classes={count}"))
    return min(found, key=lambda item: item[0]) if found else None


def _label_range(classes: tuple[int, str] | None) -> str:
    """``0..9 (where 10 is set)``, or any label >= 0 where no number of classes is known."""
    if classes is None:
        return "0, 1, 2, ... (an integer >= 0)"
    count, source = classes
    return f"0..{count - 1} ({source})"


def _files_in(folder: str, seen: dict[str, frozenset[str]]) -> frozenset[str]:
    """The names of the files in ``folder`` (links followed), listed once."""
    if folder not in seen:
        try:
            with os.scandir(folder) as entries:
                seen[folder] = frozenset(e.name for e in entries if e.is_file())
        except OSError:
            seen[folder] = frozenset()
    return seen[folder]


def _check_lines(
    loader: str, dataset: Any, lines: list[str], classes: tuple[int, str] | None
) -> None:
    """Each of ``lines`` (``dataset``'s annotation file) as ``CustomDataset.load_data_list``
    reads it: ``<image> <label>`` split at the last space (``<image>`` without labels)."""
    ann, prefix = dataset.ann_file, dataset.img_prefix
    shown = prefix or osp.abspath(prefix)
    labels = _label_range(classes)
    inside = "allowed: a path relative to data_prefix that exists inside it"
    every = (
        f"'<image> <label>' lines, the image a path relative to data_prefix {shown} that exists "
        f"inside it, the label in {labels}"
        if dataset.with_label
        else f"'<image>' lines, a path relative to data_prefix {shown} that exists inside it"
    )
    root = osp.abspath(prefix)
    inner = root.rstrip(os.sep) + os.sep  # a path inside the prefix starts so
    seen: dict[str, frozenset[str]] = {}
    for number, line in enumerate(lines, 1):
        at = f"{loader}: {ann} line {number}"
        if not line.strip():
            raise ValueError(f"{at} is empty; allowed: {every}")
        name = line
        if dataset.with_label:
            parts = line.strip().rsplit(" ", 1)
            if len(parts) != 2:
                raise ValueError(
                    f"{at}: {line!r} has no label (a cut or damaged line); allowed: {every}"
                )
            name, label = parts
            try:
                value = int(label)
            except ValueError:
                raise ValueError(
                    f"{at}: label {label!r} is not an integer; allowed: a label in {labels}"
                ) from None
            if value < 0 or (classes is not None and value >= classes[0]):
                raise ValueError(
                    f"{at}: label {value} is out of range; allowed: a label in {labels}"
                )
        path = osp.normpath(osp.join(root, name))  # lexical: a linked image may live elsewhere
        if not path.startswith(inner):
            raise ValueError(f"{at}: image {name!r} is outside data_prefix {shown}; {inside}")
        folder, _, file = path.rpartition(os.sep)
        if file not in _files_in(folder, seen):
            raise ValueError(
                f"{at}: image {name!r} does not exist in data_prefix {shown}; {inside}"
            )


def check_annotation_files(cfg: Config) -> None:
    """Each annotation file of the train and val ``CustomDataset`` datasets must exist, read as
    UTF-8, and hold a line per image: a path inside ``data_prefix`` that exists and (``with_label``)
    an integer label below the number of classes.

    Raises:
        ValueError: one line naming the dataloader, the file, the line number, the bad value and
            what is allowed.

    Example:
        >>> check_annotation_files(Config(dict(train_dataloader=dict(dataset=dict()))))
    """
    hint = DATA_HINTS.get(cfg.get("default_scope"), "see the codebase's docs")
    for loader, split in _LOADERS.items():
        top = cfg.get(loader)
        for config in _dataset_configs(top.get("dataset") if isinstance(top, Mapping) else None):
            dataset = _lazy_custom_dataset(cfg, config)
            ann = getattr(dataset, "ann_file", "")
            if not ann or any(_REMOTE.match(p) for p in (ann, dataset.img_prefix)):
                continue  # a folder of class folders, or remote storage
            form = "'<image> <label>'" if dataset.with_label else "'<image>'"
            if not osp.isfile(ann):
                raise ValueError(
                    f"{loader}: annotation file {ann} does not exist; set {loader}.dataset."
                    f"ann_file (relative to data_root) or create the data ({hint})"
                )
            try:
                lines = list_from_file(ann)
            except (OSError, UnicodeDecodeError) as err:
                why = " ".join(f"{type(err).__name__}: {err}".split())
                raise ValueError(
                    f"{loader}: annotation file {ann} cannot be read ({why}); allowed: a UTF-8 "
                    f"text file, one {form} line per image"
                ) from None
            if not lines:
                raise ValueError(
                    f"{loader}: annotation file {ann} holds no lines: the {split} split is "
                    f"empty; allowed: one {form} line per image"
                )
            _check_lines(loader, dataset, lines, _num_classes(cfg, dataset))

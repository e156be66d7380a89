"""Datasets: the synthetic toy COCO set, and a check that every configured dataset's files exist.

Datasets are found the Detectron2 way: under ``$DETECTRON2_DATASETS`` (default ``./datasets``),
where Detectron2 registers ``coco_2017_train`` etc. as ``coco/...`` and we register
``toy_coco_train`` / ``toy_coco_val`` as ``toy_coco/...`` (written by ``tools/make_toy_coco.py``).
Importing this module registers nothing: call :func:`register_toy_coco` (our tools do, in every
worker). The toy set itself (its categories, layout and writer) is the framework-free
:mod:`budgeted.toys.coco`; its names are re-exported here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from detectron2.config import CfgNode
from detectron2.data import DatasetCatalog, MetadataCatalog
from detectron2.data.datasets import register_coco_instances

from ..toys.coco import TOY_CATEGORIES, TOY_DATASETS, datasets_root

__all__ = [
    "TOY_CATEGORIES", "TOY_DATASETS", "check_config_train_set", "check_datasets",
    "check_not_empty", "datasets_root", "detection_train_set", "register_toy_coco"
]  # fmt: skip


def register_toy_coco(root: str | None = None, *, replace: bool = False) -> None:
    """Register ``toy_coco_train`` and ``toy_coco_val`` (COCO instances, 3 categories) in
    Detectron2's ``DatasetCatalog``, from ``toy_coco/`` under ``root``.

    Example:
        >>> from detectron2.data import DatasetCatalog
        >>> register_toy_coco()
        >>> "toy_coco_train" in DatasetCatalog.list()
        True
    """
    root = datasets_root() if root is None else root
    for name, (images, ann) in TOY_DATASETS.items():
        if name in DatasetCatalog.list():
            if not replace:
                continue
            DatasetCatalog.remove(name)
            MetadataCatalog.remove(name)
        register_coco_instances(name, {}, os.path.join(root, ann), os.path.join(root, images))
        MetadataCatalog.get(name).set(thing_classes=list(TOY_CATEGORIES))


def check_datasets(names: Iterable[str]) -> None:
    """Raise a one-line ``ValueError`` for a dataset that is not registered or lacks its files.

    Example:
        >>> check_datasets([])  # nothing to check
    """
    registered = set(DatasetCatalog.list())
    for name in names:
        if name not in registered:
            coco = sorted(n for n in registered if n.startswith(("coco_2017", "toy_coco")))
            raise ValueError(
                f"unknown dataset {name!r}; register it with detectron2.data.DatasetCatalog "
                f"(registered COCO-style names include: {', '.join(coco)})"
            )
        meta = MetadataCatalog.get(name)
        for key in ("json_file", "image_root"):
            path = meta.get(key, None)
            if path and not os.path.exists(path):
                hint = (
                    "run tools/make_toy_coco.py"
                    if name in TOY_DATASETS
                    else "download the dataset there"
                )
                raise ValueError(
                    f"dataset {name!r}: {key} {path!r} does not exist; set DETECTRON2_DATASETS "
                    f"to the folder that holds it (now {datasets_root()!r}) or {hint}"
                )


def check_not_empty(names: Iterable[str], load: Callable[[], Any]) -> None:
    """Raise a one-line ``ValueError`` when training set ``names`` is empty: ``load()`` (what
    the trainer will call, e.g. Detectron2's ``get_detection_dataset_dicts``) fails Detectron2's
    "is empty" / "No valid data found" assertion. Run in the launching process, before anything
    is written (it reads the set's annotations once more: seconds for COCO train2017).

    Example:
        >>> check_not_empty(["toy"], lambda: [{"file_name": "a.png"}])  # not empty: fine
    """
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the trainer logs the loading, in its own log.txt
    try:
        load()
    except AssertionError as err:
        raise ValueError(
            f"training set {', '.join(names)} has nothing to train on ({err}); allowed: a "
            "dataset with at least one image with annotations (check its annotation file and "
            f"DETECTRON2_DATASETS, now {datasets_root()!r}); nothing was written"
        ) from None
    finally:
        logging.disable(previous)


def check_config_train_set(cfg: CfgNode) -> None:
    """:func:`check_not_empty` for ``DATASETS.TRAIN`` (:func:`detection_train_set`)."""
    check_not_empty(cfg.DATASETS.TRAIN, lambda: detection_train_set(cfg))


def detection_train_set(cfg: CfgNode) -> list[dict[str, Any]]:
    """``DATASETS.TRAIN``'s dicts, loaded as ``build_detection_train_loader`` loads them (the
    same empty-annotation and keypoint filters)."""
    from detectron2.data.build import get_detection_dataset_dicts

    keypoints = cfg.MODEL.ROI_KEYPOINT_HEAD.MIN_KEYPOINTS_PER_IMAGE if cfg.MODEL.KEYPOINT_ON else 0
    return get_detection_dataset_dicts(
        list(cfg.DATASETS.TRAIN),
        filter_empty=cfg.DATALOADER.FILTER_EMPTY_ANNOTATIONS,
        min_keypoints=keypoints,
    )

"""``RandomSubsetDataset`` (registered in MMEngine's ``DATASETS``): a seeded random subset of a
dataset, the data-subsampling baseline of a budget (``budgeted-train-seg --subset FRACTION``):
the full schedule's epochs on ``FRACTION x N`` images.

A wrapper like MMEngine's own ``ClassBalancedDataset``: the inner dataset is any registered one
(MMSeg, MMPretrain, MMDet ...), built with ``DATASETS.build`` in the config's scope::

    train_dataloader = dict(dataset=dict(type="RandomSubsetDataset", fraction=0.1, seed=0,
                                         dataset=dict(type="CustomDataset", ...)))
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from mmengine.registry import DATASETS

__all__ = ["RandomSubsetDataset", "subset_indices"]


def subset_indices(size: int, fraction: float, seed: int) -> list[int]:
    """``max(1, round(fraction x size))`` distinct indices of ``range(size)``, drawn by a
    ``torch.Generator`` seeded with ``seed``, sorted.

    Raises:
        ValueError: one line for a fraction outside (0, 1] or an empty dataset.

    Example:
        >>> len(subset_indices(1400, 0.05, seed=0)), subset_indices(10, 0.01, seed=0)
        (70, [4])
    """
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    if not (ok and math.isfinite(fraction) and 0 < fraction <= 1):
        raise ValueError(
            f"RandomSubsetDataset: fraction={fraction!r} is invalid; allowed: a number in (0, 1], "
            "the share of the training set to keep"
        )
    if size < 1:
        raise ValueError("RandomSubsetDataset: the dataset is empty; allowed: one of >= 1 sample")
    count = max(1, round(fraction * size))
    generator = torch.Generator().manual_seed(int(seed))
    return sorted(torch.randperm(size, generator=generator)[:count].tolist())


@DATASETS.register_module()
class RandomSubsetDataset:
    """The samples :func:`subset_indices` picks of ``dataset`` (a config or a dataset); the
    inner dataset's ``metainfo`` passed through.

    Args:
        dataset: the dataset, or its config (built with ``DATASETS.build``).
        fraction: the share in (0, 1] to keep: ``max(1, round(fraction x len(dataset)))``.
        seed: the seed of the draw (the run's ``randomness.seed``).
        lazy_init: build the index list at :meth:`full_init` (on first use), as MMEngine's
            wrappers do.
    """

    def __init__(self, dataset: Any, fraction: float, seed: int = 0, lazy_init: bool = False):
        self.dataset = DATASETS.build(dataset) if isinstance(dataset, dict) else dataset
        self.fraction, self.seed = fraction, seed
        self._metainfo = getattr(self.dataset, "metainfo", {})
        self.indices: list[int] = []
        self._fully_initialized = False
        if not lazy_init:
            self.full_init()

    @property
    def metainfo(self) -> dict:
        """The inner dataset's ``metainfo`` (a copy)."""
        return copy.deepcopy(self._metainfo)

    def full_init(self) -> None:
        """Load the inner dataset and draw the indices (once)."""
        if self._fully_initialized:
            return
        if hasattr(self.dataset, "full_init"):
            self.dataset.full_init()
        self.indices = subset_indices(len(self.dataset), self.fraction, self.seed)
        self._fully_initialized = True

    def get_data_info(self, idx: int) -> dict:
        """The inner dataset's annotation of the subset's sample ``idx``."""
        self.full_init()
        return self.dataset.get_data_info(self.indices[idx])

    def __getitem__(self, idx: int) -> Any:
        self.full_init()
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        self.full_init()
        return len(self.indices)

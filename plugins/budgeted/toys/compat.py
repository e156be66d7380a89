"""MMPretrain's ``CIFAR10`` reading a toy set: the one class of the toys that overrides private
methods of a framework class (MMPretrain has no public route to skip the real archive's md5
checks).

Written for MMPretrain 1.2.0: ``CIFAR10.__init__`` -> ``BaseDataset.full_init`` ->
``load_data_list``, which calls ``self._check_integrity()`` (the md5 of each file of the real
archive) and ``self._load_meta()`` (the class names, into ``self._metainfo``).
tests/toys/test_toys_compat.py fails when MMPretrain changes either.
"""

from __future__ import annotations

import pickle

from mmengine.fileio import exists, get, join_path
from mmpretrain.datasets import CIFAR10
from mmpretrain.registry import DATASETS

from .cifar10 import TOY_MARKER

__all__ = ["ToyCIFAR10"]


@DATASETS.register_module(force=True)
class ToyCIFAR10(CIFAR10):
    """MMPretrain's ``CIFAR10``, reading a toy set without the real archive's checksums.

    A folder whose ``cifar-10-batches-py/`` holds :data:`budgeted.toys.cifar10.TOY_MARKER` is read
    with the stock reading code and no md5 checks; any other folder goes through the stock class
    unchanged (checksums and all). ``download`` defaults to False: a toy config never downloads
    the real archive.

    Example:
        >>> import tempfile
        >>> from budgeted.toys.mmpretrain import write_cifar10
        >>> root = write_cifar10(tempfile.mkdtemp(), num_train=10, num_test=10)
        >>> len(ToyCIFAR10(data_root=str(root), split="test"))
        10
    """

    def __init__(self, data_root: str = "", split: str = "train", download: bool = False,
                 **kwargs) -> None:  # fmt: skip
        super().__init__(data_root=data_root, split=split, download=download, **kwargs)

    def _folder_path(self, name: str) -> str:
        return join_path(self.data_prefix["root"], self.base_folder, name)

    def is_toy(self) -> bool:
        """Whether the folder carries the toy marker (and is read without checksums)."""
        return exists(self._folder_path(TOY_MARKER))

    def load_data_list(self) -> list[dict]:
        """The stock reading; a marked toy folder that lacks files is refused in one line."""
        if self.is_toy():
            names = [n for n, _ in self.train_list + self.test_list] + [self.meta["filename"]]
            missing = [n for n in names if not exists(self._folder_path(n))]
            if missing:
                folder = self._folder_path("").rstrip("/")
                raise FileNotFoundError(
                    f"toy CIFAR-10 {folder} lacks {', '.join(missing)}; remove {folder} and "
                    "write it again (tools/make_toy_cifar10.py --root DATA_ROOT)"
                )
        return super().load_data_list()

    def _check_integrity(self) -> bool:
        if self.is_toy():  # files checked in load_data_list; no checksums of the real archive
            return True
        return super()._check_integrity()

    def _load_meta(self) -> None:
        if not self.is_toy():
            super()._load_meta()
            return
        data = pickle.loads(get(self._folder_path(self.meta["filename"])), encoding="latin1")
        self._metainfo.setdefault("classes", data[self.meta["key"]])

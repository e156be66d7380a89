"""budgeted.toys.compat: ToyCIFAR10 overrides two private methods of MMPretrain 1.2.0's CIFAR10;
these tests fail when MMPretrain stops calling them where the toy relies on it."""

from __future__ import annotations

import inspect

import pytest

pytestmark = pytest.mark.unit


def test_mmpretrain_cifar10_still_checks_and_loads_meta_through_the_overridden_methods() -> None:
    cifar = pytest.importorskip("mmpretrain.datasets.cifar")
    source = inspect.getsource(cifar.CIFAR10.load_data_list)
    assert "self._check_integrity()" in source
    assert "self._load_meta()" in source
    assert "_metainfo" in inspect.getsource(cifar.CIFAR10._load_meta)


def test_a_toy_folder_is_read_without_checksums(tmp_path) -> None:
    pytest.importorskip("mmpretrain")
    from budgeted.toys.compat import ToyCIFAR10
    from budgeted.toys.mmpretrain import write_cifar10

    root = write_cifar10(tmp_path, num_train=10, num_test=10)
    dataset = ToyCIFAR10(data_root=str(root), split="test")
    assert len(dataset) == 10 and len(dataset.metainfo["classes"]) == 10

"""budgeted.toys.cifar10 (tools/make_toy_cifar10.py): a synthetic CIFAR-10 in the real archive's
format, read by torchvision's CIFAR10 reader."""

from __future__ import annotations

import importlib.util
import pickle
import pickletools
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from torchvision.datasets import CIFAR10

from budgeted.toys.cifar10 import BASE_FOLDER, LABEL_NAMES, TOY_MARKER, make_toy_cifar10

ROOT = Path(__file__).resolve().parents[2]
BATCHES = [f"data_batch_{k}" for k in range(1, 6)]


def unpickle(path: Path, encoding: str = "bytes") -> dict:
    return pickle.loads(path.read_bytes(), encoding=encoding)


class Unchecked(CIFAR10):
    """The stock class with one change: no md5 of the real archive's files to match."""

    train_list: ClassVar[list] = [[name, None] for name, _ in CIFAR10.train_list]
    test_list: ClassVar[list] = [[name, None] for name, _ in CIFAR10.test_list]
    meta: ClassVar[dict] = {**CIFAR10.meta, "md5": None}


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    """The root of a 53 / 17-image toy set (``root/cifar-10-batches-py``)."""
    root = tmp_path_factory.mktemp("toy")
    assert make_toy_cifar10(root, num_train=53, num_test=17, seed=3) == root / BASE_FOLDER
    return root


@pytest.mark.unit
def test_the_files_are_python2_pickles_like_the_real_archive(toy):
    folder = toy / BASE_FOLDER
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted([*BATCHES, "test_batch", "batches.meta", TOY_MARKER])
    sizes = []
    for name in [*BATCHES, "test_batch"]:
        raw = (folder / name).read_bytes()
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(raw)]
        names = {op for op, _ in ops}
        assert raw[:2] == b"\x80\x02"  # protocol 2, as Python 2's cPickle wrote it
        assert {"SHORT_BINSTRING", "BINSTRING"} <= names  # Python 2 strings ...
        assert not {"BINUNICODE", "SHORT_BINBYTES", "BINBYTES"} & names  # ... only
        # numpy 1's names, which numpy 2 still loads: the array loads under either
        assert {arg for op, arg in ops if op == "GLOBAL"} == {
            "numpy.core.multiarray _reconstruct",
            "numpy ndarray",
            "numpy dtype",
        }
        batch = unpickle(folder / name)  # the archive's own recipe: encoding="bytes"
        assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
        data, labels, files = batch[b"data"], batch[b"labels"], batch[b"filenames"]
        assert data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3 * 32 * 32
        assert len(labels) == len(files) == len(data)
        assert all(type(label) is int and 0 <= label <= 9 for label in labels)
        assert all(isinstance(f, bytes) and f.endswith(b".png") for f in files)
        sizes.append(len(data))
    assert sizes == [11, 11, 11, 10, 10, 17]
    assert unpickle(folder / "data_batch_2")[b"batch_label"] == b"training batch 2 of 5"
    assert unpickle(folder / "test_batch")[b"batch_label"] == b"testing batch 1 of 1"
    assert unpickle(folder / "batches.meta") == {
        b"num_cases_per_batch": 11,
        b"label_names": [name.encode() for name in LABEL_NAMES],
        b"num_vis": 3072,
    }
    latin = unpickle(folder / "data_batch_1", "latin1")  # torchvision's encoding: str keys
    assert set(latin) == {"batch_label", "labels", "data", "filenames"}
    assert latin["batch_label"] == "training batch 1 of 5" and latin["data"].shape == (11, 3072)


@pytest.mark.unit
def test_the_stock_class_refuses_by_checksum_and_its_reader_loads_the_files(toy):
    with pytest.raises(RuntimeError, match="Dataset not found or corrupted"):
        CIFAR10(toy, train=True, download=False)  # torchvision 0.29 checks the real md5s
    train, test = Unchecked(toy, train=True), Unchecked(toy, train=False)
    assert train.data.shape == (53, 32, 32, 3) and train.data.dtype == np.uint8
    assert test.data.shape == (17, 32, 32, 3) and len(test.targets) == 17
    assert train.classes == list(LABEL_NAMES)
    batches = [unpickle(toy / BASE_FOLDER / name) for name in BATCHES]
    assert train.targets == [label for b in batches for label in b[b"labels"]]
    assert np.bincount(train.targets).tolist() == [6, 6, 6, 5, 5, 5, 5, 5, 5, 5]  # balanced
    row = batches[0][b"data"][0]  # R, G, B planes of 32x32, row-major
    assert np.array_equal(train.data[0], row.reshape(3, 32, 32).transpose(1, 2, 0))
    image, label = train[0]
    assert image.size == (32, 32) and image.mode == "RGB" and label == train.targets[0]


@pytest.mark.unit
def test_the_same_seed_writes_the_same_bytes(tmp_path):
    runs = (("a", 5), ("b", 5), ("c", 6))
    folders = [make_toy_cifar10(tmp_path / n, num_train=20, num_test=10, seed=s) for n, s in runs]
    for name in [*BATCHES, "test_batch", "batches.meta"]:
        a, b, c = ((f / name).read_bytes() for f in folders)
        assert a == b
        assert name == "batches.meta" or a != c


@pytest.mark.unit
def test_the_classes_are_learnable(tmp_path):
    """A nearest-class-mean classifier on raw pixels beats chance (10 %) by far."""
    make_toy_cifar10(tmp_path, num_train=300, num_test=100)
    train, test = Unchecked(tmp_path, train=True), Unchecked(tmp_path, train=False)
    x = train.data.reshape(len(train.data), -1).astype(np.float64)
    y = np.array(train.targets)
    means = np.stack([x[y == c].mean(0) for c in range(10)])
    xt = test.data.reshape(len(test.data), -1).astype(np.float64)
    predicted = ((xt[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (predicted == np.array(test.targets)).mean() > 0.3


@pytest.mark.unit
def test_an_existing_set_is_not_overwritten(tmp_path):
    make_toy_cifar10(tmp_path, num_train=10, num_test=10)
    before = (tmp_path / BASE_FOLDER / "data_batch_1").read_bytes()
    with pytest.raises(FileExistsError, match="already exists; remove it") as err:
        make_toy_cifar10(tmp_path, num_train=10, num_test=10, seed=1)
    assert "\n" not in str(err.value)
    assert (tmp_path / BASE_FOLDER / "data_batch_1").read_bytes() == before


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_train": 9}, "num_train=9 is invalid; allowed: a whole number in [10, 50000]"),
        ({"num_train": 50001}, "num_train=50001 is invalid"),
        ({"num_train": True}, "num_train=True is invalid"),
        ({"num_train": 100.0}, "num_train=100.0 is invalid"),
        ({"num_test": 10001}, "num_test=10001 is invalid; allowed: a whole number in [10, 10000]"),
        ({"seed": -1}, "seed=-1 is invalid; allowed: a whole number >= 0"),
    ],
)
def test_bad_sizes_are_one_line(tmp_path, kwargs, message):
    with pytest.raises(ValueError) as err:
        make_toy_cifar10(tmp_path, **kwargs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert not (tmp_path / BASE_FOLDER).exists()


@pytest.mark.unit
def test_the_tool_writes_the_set_and_refuses_to_overwrite(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "make_toy_cifar10", ROOT / "tools/make_toy_cifar10.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    args = ["--root", str(tmp_path), "--num-train", "20", "--num-test", "10", "--seed", "2"]
    assert tool.main(args) == 0
    assert capsys.readouterr().out.strip() == f"toy CIFAR-10: {tmp_path / BASE_FOLDER}"
    assert len(Unchecked(tmp_path, train=True)) == 20
    with pytest.raises(SystemExit) as exit_:
        tool.main(args)
    assert str(exit_.value.code).startswith("make_toy_cifar10: ") and "\n" not in exit_.value.code


@pytest.mark.e2e
def test_the_tools_default_root_is_what_the_toy_configs_read(tmp_path, monkeypatch):
    """Defect 7 of the reliability issue: the default used to be ``./datasets``, which no config
    reads. With no arguments the set lands where the MMPretrain toy configs' ``data_root`` and the
    sweep's toy-data check look, and where the missing-data advice sends the user."""
    from budgeted.experiments.families import family

    monkeypatch.chdir(tmp_path)
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools/make_toy_cifar10.py"), "--num-train", "10",
         "--num-test", "10"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    toy = family("mmpretrain", toy=True, task="cifar10").toy_data
    assert (tmp_path / toy.root / toy.marker).is_file(), result.stdout
    config = (ROOT / "configs/mmpretrain/toy/resnet18-toy_cifar10_base.py").read_text()
    data_roots = set(re.findall(r'^data_root = "([^"]+)"$', config, re.MULTILINE))
    assert data_roots == {toy.root}
    assert Unchecked(tmp_path / toy.root, train=True).data.shape == (10, 32, 32, 3)

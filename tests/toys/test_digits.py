"""budgeted.toys.digits and tools/make_digits.py: the UCI digits split once, upscaled, written as
the files MMPretrain's CustomDataset reads; the same bytes every time; never overwritten."""

from __future__ import annotations

import doctest
import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from budgeted._require import MissingFrameworkError
from budgeted.toys import digits, image_sets
from budgeted.toys.digits import (
    MARKER,
    MEAN,
    STD,
    TRAIN_SIZE,
    VAL_SIZE,
    digits_split,
    load_digits_arrays,
    stratified_split,
    upscale,
    write_digits,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MISSING = (
    "budgeted.toys.digits needs 'sklearn', which is not installed; install it with "
    'pip install "budgeted-training[digits]"'
)


def load_tool():
    spec = importlib.util.spec_from_file_location("make_digits", REPO / "tools/make_digits.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def sha256s(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def split() -> digits.DigitsSplit:
    return digits_split()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_digits(tmp_path_factory.mktemp("digits") / "digits")


def test_the_module_doctests_pass() -> None:
    result = doctest.testmod(digits)
    assert result.failed == 0 and result.attempted >= 6


def test_the_split_is_disjoint_complete_stratified_and_fixed(split) -> None:
    images, labels = load_digits_arrays()
    assert images.shape == (1797, 8, 8) and images.max() == 16 and len(labels) == 1797
    train, val = split.train_indices, split.val_indices
    assert (len(train), len(val)) == (TRAIN_SIZE, VAL_SIZE) == (1400, 397)
    assert not set(train) & set(val) and sorted([*train, *val]) == list(range(1797))
    assert list(train) == sorted(train) and list(val) == sorted(val)
    counts, held = np.bincount(labels), np.bincount(labels[val])
    assert np.all(np.abs(held - VAL_SIZE * counts / 1797) < 1)  # each class its share, rounded
    assert held.tolist() == [39, 40, 39, 40, 40, 40, 40, 40, 39, 40]
    assert np.array_equal(split.val_labels, labels[val])
    again_train, again_val = stratified_split(labels, VAL_SIZE)
    assert np.array_equal(again_train, train) and np.array_equal(again_val, val)
    assert not np.array_equal(stratified_split(labels, VAL_SIZE, seed=1)[1], val)
    assert val[:5].tolist() == [1, 5, 9, 12, 14]  # the committed split: a change shows here


def test_the_pixels_repeat_each_count_over_its_block(split) -> None:
    images, _ = load_digits_arrays()
    pixels = upscale(images)
    assert pixels.shape == (1797, 32, 32) and pixels.dtype == np.uint8
    expected = np.rint(images.astype(np.float64) * 255 / 16).astype(np.uint8)
    for dy in range(4):
        for dx in range(4):
            assert np.array_equal(pixels[:, dy::4, dx::4], expected)
    assert np.array_equal(split.train_images, pixels[split.train_indices])
    train = split.train_images.astype(np.float64)
    assert train.mean() == pytest.approx(MEAN, abs=0.005)
    assert train.std() == pytest.approx(STD, abs=0.005)


@pytest.mark.parametrize("val_size", [0, 1797, 3.5])
def test_a_bad_split_size_is_one_line(val_size) -> None:
    with pytest.raises(ValueError, match=r"^val_size=.* is invalid; allowed: 0 < val_size < 1797$"):
        stratified_split(np.arange(1797) % 10, val_size=val_size)


def test_the_files_hold_the_split_pixel_for_pixel(written, split) -> None:
    assert (written / MARKER).is_file() and "CC BY 4.0" in (written / "README.txt").read_text()
    for name, images, labels, indices in (
        ("train", split.train_images, split.train_labels, split.train_indices),
        ("val", split.val_images, split.val_labels, split.val_indices),
    ):
        lines = (written / "meta" / f"{name}.txt").read_text().splitlines()
        assert lines == [f"{i:05d}.png {y}" for i, y in zip(indices, labels)]
        assert sorted(p.name for p in (written / name).iterdir()) == [
            line.split()[0] for line in lines
        ]
        for k in (0, len(lines) // 2, len(lines) - 1):
            with Image.open(written / name / lines[k].split()[0]) as png:
                assert png.mode == "L" and png.size == (32, 32)
                assert np.array_equal(np.asarray(png), images[k])
    assert [p.name for p in written.parent.iterdir()] == [written.name]  # no staging left


def test_the_same_call_writes_the_same_bytes(written, tmp_path) -> None:
    assert sha256s(write_digits(tmp_path / "again")) == sha256s(written)


def test_an_existing_set_is_refused_in_one_line_and_left_as_it_was(written, tmp_path) -> None:
    before = sha256s(written)
    with pytest.raises(FileExistsError) as err:
        write_digits(written)
    assert str(err.value) == f"{written} already exists; remove it to write the digits again"
    assert sha256s(written) == before
    a_file = tmp_path / "digits"
    a_file.write_text("mine\n")
    with pytest.raises(FileExistsError, match="already exists"):
        write_digits(a_file)
    assert a_file.read_text() == "mine\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert sha256s(write_digits(empty)) == before  # an empty folder is filled


def test_a_failed_write_leaves_neither_the_set_nor_a_staging_folder(tmp_path, monkeypatch):
    calls = []

    def fail_on_val(folder, name, *args):
        calls.append(name)
        if name == "val":
            raise OSError("disk full")
        return ""

    monkeypatch.setattr(image_sets, "_write_split", fail_on_val)
    with pytest.raises(OSError, match="disk full"):
        write_digits(tmp_path / "digits")
    assert calls == ["train", "val"] and list(tmp_path.iterdir()) == []


def test_a_missing_scikit_learn_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # importlib.util.find_spec -> None
    with pytest.raises(MissingFrameworkError) as err:
        write_digits(tmp_path / "digits")
    assert str(err.value) == MISSING
    with pytest.raises(SystemExit) as exit_:
        load_tool().main(["--root", str(tmp_path / "digits")])
    assert exit_.value.code == f"make_digits: {MISSING}"
    assert list(tmp_path.iterdir()) == []


def test_the_tool_writes_the_set_and_refuses_to_overwrite_it(tmp_path, capsys) -> None:
    tool = load_tool()
    root = tmp_path / "digits"
    assert tool.main(["--root", str(root)]) == 0
    assert capsys.readouterr().out == (
        f"digits: {root} (1400 train/, 397 val/ held out, meta/*.txt)\n"
    )
    before = sha256s(root)
    with pytest.raises(SystemExit) as exit_:
        tool.main(["--root", str(root)])
    assert exit_.value.code == (
        f"make_digits: {root} already exists; remove it to write the digits again"
    )
    assert sha256s(root) == before

"""Finding shipped configs by path or bare name (budgeted.config_files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from budgeted.config_files import SEARCH_FOLDERS, config_root, find_config
from budgeted.experiments.families import FAMILIES

pytestmark = pytest.mark.unit


def test_every_family_file_is_found_by_its_bare_name():
    for fam in FAMILIES.values():
        for fraction in fam.fractions:
            for schedule in fam.schedules:
                rel = fam.filename(fraction, schedule)
                bare = Path(rel).name
                assert find_config(bare, fam.framework) == config_root() / rel


def test_a_name_without_extension_finds_the_one_file_of_that_stem():
    assert find_config("mask_rcnn_budget10", "detectron2") == (
        config_root() / "detectron2/mask_rcnn_budget10.yaml"
    )
    # the toy yaml and the toy LazyConfig share a stem: that is ambiguous, not a guess
    with pytest.raises(FileNotFoundError, match=r"ambiguous; candidates: .*\.yaml, .*\.py"):
        find_config("mask_rcnn_toy_budget10", "detectron2")


def test_a_tool_finds_its_own_kind_of_config_first():
    """Detectron2's yaml tool and its LazyConfig tool take the toy stem both files share."""
    toy = "mask_rcnn_toy_budget10"
    assert find_config(toy, "detectron2", kinds=(".py",)) == (
        config_root() / f"detectron2/lazy/{toy}.py"
    )
    assert find_config(toy, "detectron2", kinds=(".yaml",)) == (
        config_root() / f"detectron2/toy/{toy}.yaml"
    )
    # no file of the tool's kind: the other kind's (the tool names the kind it takes)
    assert find_config("mask_rcnn_budget10", "detectron2", kinds=(".py",)) == (
        config_root() / "detectron2/mask_rcnn_budget10.yaml"
    )
    # a name with its extension is that file, whatever the tool's kind
    assert find_config(f"{toy}.yaml", "detectron2", kinds=(".py",)).suffix == ".yaml"


def test_an_existing_path_is_taken_as_it_is(tmp_path):
    mine = tmp_path / "mask_rcnn_budget10.yaml"
    mine.write_text("SOLVER:\n  MAX_ITER: 3\n")
    assert find_config(mine, "detectron2") == mine


def test_a_missing_path_is_never_replaced_by_a_shipped_file_of_the_same_name():
    with pytest.raises(FileNotFoundError, match=r"'my/dir/mask_rcnn_budget10.yaml' does not exist"):
        find_config("my/dir/mask_rcnn_budget10.yaml", "detectron2")


def test_an_unknown_name_lists_close_candidates_in_one_line():
    with pytest.raises(FileNotFoundError) as err:
        find_config("mask_rcnn_budget11.yaml", "detectron2")
    assert "\n" not in str(err.value)
    assert "candidates: " in str(err.value) and "mask_rcnn_budget1.yaml" in str(err.value)


def test_an_ambiguous_name_lists_every_match(tmp_path, monkeypatch):
    for folder in ("detectron2", "detectron2/toy"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "same.yaml").write_text("VERSION: 2\n")
    monkeypatch.setenv("BUDGETED_CONFIGS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"ambiguous; candidates: detectron2/same.yaml, "):
        find_config("same", "detectron2")


def test_an_unknown_framework_is_named():
    allowed = "detectron2, mmseg, mmdet, mmpretrain, mmaction, mmengine"
    with pytest.raises(ValueError, match=rf"unknown framework 'caffe'; allowed: {allowed}$"):
        find_config("x", "caffe")


def test_every_real_image_set_has_its_config_folder_searched():
    from budgeted.toys.image_sets import REAL_SET_NAMES

    for name in REAL_SET_NAMES:
        assert f"mmpretrain/{name}" in SEARCH_FOLDERS["mmpretrain"]
        assert f"mmpretrain/{name}" in SEARCH_FOLDERS["mmengine"]
        assert (config_root() / "mmpretrain" / name).is_dir()

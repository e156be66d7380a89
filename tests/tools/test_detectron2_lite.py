"""The lite Detectron2 build: the real v0.6 Python package with a stand-in for its compiled ops."""

from __future__ import annotations

import pytest
import torch

detectron2_C = pytest.importorskip("detectron2._C")
lite = getattr(detectron2_C, "__budgeted_lite__", False)
pytestmark = pytest.mark.skipif(not lite, reason="a full Detectron2 with compiled ops is installed")


def test_collect_env_works():
    from detectron2.utils.collect_env import collect_env_info

    assert "lite build without compiled ops" in collect_env_info()


def test_a_compiled_op_fails_with_a_clear_error_naming_it():
    from detectron2.layers.rotated_boxes import pairwise_iou_rotated

    boxes = torch.tensor([[5.0, 5.0, 4.0, 4.0, 0.0]])
    with pytest.raises(AttributeError, match=r"_C\.box_iou_rotated is a compiled op.*lite build"):
        pairwise_iou_rotated(boxes, boxes)


def test_feature_probes_see_no_op():
    assert not hasattr(detectron2_C, "deform_conv_forward")
    with pytest.raises(AttributeError):
        detectron2_C.__wrapped__  # noqa: B018  dunder look-ups stay plain AttributeErrors


def test_model_zoo_configs_are_packaged():
    from detectron2 import model_zoo

    path = model_zoo.get_config_file("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml")
    assert path.endswith("mask_rcnn_R_50_FPN_1x.yaml")

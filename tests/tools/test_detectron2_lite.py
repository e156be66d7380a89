"""The lite Detectron2 build: the real v0.6 Python package with a stand-in for its compiled ops;
Detectron2's own tools/train_net.py trains and evaluates on it (issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

detectron2_C = pytest.importorskip("detectron2._C")
lite = getattr(detectron2_C, "__budgeted_lite__", False)
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not lite, reason="a full Detectron2 with compiled ops is installed")


@pytest.mark.unit
def test_collect_env_works():
    from detectron2.utils.collect_env import collect_env_info

    assert "lite build without compiled ops" in collect_env_info()


@pytest.mark.unit
def test_a_compiled_op_fails_with_a_clear_error_naming_it():
    from detectron2.layers.rotated_boxes import pairwise_iou_rotated

    boxes = torch.tensor([[5.0, 5.0, 4.0, 4.0, 0.0]])
    with pytest.raises(AttributeError, match=r"_C\.box_iou_rotated is a compiled op.*lite build"):
        pairwise_iou_rotated(boxes, boxes)


@pytest.mark.unit
def test_feature_probes_see_no_op():
    assert not hasattr(detectron2_C, "deform_conv_forward")
    with pytest.raises(AttributeError):
        detectron2_C.__wrapped__  # noqa: B018  dunder look-ups stay plain AttributeErrors


@pytest.mark.unit
def test_model_zoo_configs_are_packaged():
    from detectron2 import model_zoo

    path = model_zoo.get_config_file("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml")
    assert path.endswith("mask_rcnn_R_50_FPN_1x.yaml")


STOCK_TRAIN_NET = '''
"""Detectron2 v0.6's tools/train_net.py, shortened, with the one-line adoption of
docs/detectron2.md (build_lr_scheduler) and the budget keys."""
import os

from detectron2.config import get_cfg
from detectron2.data import MetadataCatalog
from detectron2.engine import DefaultTrainer, default_argument_parser, default_setup, launch
from detectron2.evaluation import COCOEvaluator, DatasetEvaluators

import budgeted.detectron2 as bd2


class Trainer(DefaultTrainer):
    build_lr_scheduler = classmethod(lambda cls, cfg, opt: bd2.build_lr_scheduler(cfg, opt))

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_folder=None):
        if output_folder is None:
            output_folder = os.path.join(cfg.OUTPUT_DIR, "inference")
        evaluator_list = []
        if MetadataCatalog.get(dataset_name).evaluator_type in ["coco", "coco_panoptic_seg"]:
            evaluator_list.append(COCOEvaluator(dataset_name, output_dir=output_folder))
        return DatasetEvaluators(evaluator_list)


def setup(args):
    cfg = get_cfg()
    bd2.add_budget_config(cfg)
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    default_setup(cfg, args)
    return cfg


def main(args):
    bd2.register_toy_coco()
    cfg = setup(args)
    trainer = Trainer(cfg)
    trainer.resume_or_load(resume=args.resume)
    return trainer.train()


if __name__ == "__main__":
    args = default_argument_parser().parse_args()
    launch(main, args.num_gpus, num_machines=args.num_machines, machine_rank=args.machine_rank,
           dist_url=args.dist_url, args=(args,))
'''


@pytest.mark.e2e
def test_detectron2s_own_train_net_adopted_as_documented_trains_and_evaluates(tmp_path):
    """The stock COCOEvaluator (use_fast_impl=True) evaluates with pycocotools in the lite build
    instead of failing with MissingCompiledOp in its final evaluation."""
    from budgeted.detectron2.toy import make_toy_coco

    make_toy_coco(str(tmp_path / "datasets"), num_train=4, num_val=2, size=64, seed=0)
    script = tmp_path / "train_net.py"
    script.write_text(STOCK_TRAIN_NET)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(script), "--config-file",
         str(REPO / "configs/detectron2/toy/mask_rcnn_toy_budget1.yaml"),
         "INPUT.MIN_SIZE_TRAIN", "(64,)", "INPUT.MAX_SIZE_TRAIN", "64", "INPUT.MIN_SIZE_TEST",
         "64", "INPUT.MAX_SIZE_TEST", "64", "MODEL.ROI_HEADS.SCORE_THRESH_TEST", "0.0",
         "MODEL.DEVICE", "cpu", "OUTPUT_DIR", str(out)],
        cwd=tmp_path, env={**os.environ, "DETECTRON2_DATASETS": str(tmp_path / "datasets")},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MissingCompiledOp" not in done.stderr
    rows = [json.loads(line) for line in (out / "metrics.json").read_text().splitlines()]
    assert any("bbox/AP" in row for row in rows)  # the final evaluation ran, and was logged
    assert "COCO evaluation with pycocotools' COCOeval" in (out / "log.txt").read_text()


@pytest.mark.e2e
def test_detect_reports_an_older_lite_build_as_stale(tmp_path):
    """tools/setup_env.sh rebuilds a lite build older than tools/detectron2_lite makes."""
    lite_dir = REPO / "tools" / "detectron2_lite"
    stand_in = (lite_dir / "_C.py").read_text()
    sys.path.insert(0, str(lite_dir))
    try:
        import detect
    finally:
        sys.path.remove(str(lite_dir))
    assert f"__budgeted_lite__ = {detect.LITE_VERSION}\n" in stand_in  # the two agree
    for version, expected in ((True, "stale-lite"), (detect.LITE_VERSION, "lite")):
        root = tmp_path / str(version)
        (root / "detectron2").mkdir(parents=True)
        (root / "detectron2" / "__init__.py").write_text("")
        (root / "detectron2" / "_C.py").write_text(f"__budgeted_lite__ = {version}\n")
        found = subprocess.run(
            [sys.executable, str(lite_dir / "detect.py")], capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(root)}, check=True,
        ).stdout.strip()  # fmt: skip
        assert found == expected

"""Users' own MMEngine configs, written by the tests (none of configs/): an MMSeg FCN on the toy
Cityscapes set and an epoch-based MMPretrain LeNet-5 on the digits (what ``budgeted-train-seg
--schedule`` and ``budgeted-sweep --config`` are tested on)."""

from __future__ import annotations

import itertools
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_names = itertools.count()

STOCK_SCHEDULE = """[
    dict(type="LinearLR", start_factor=0.01, by_epoch=False, begin=0, end=4),
    dict(type="PolyLR", eta_min=1e-4, power=0.9, begin=0, end=40, by_epoch=False),
]"""

FCN_CONFIG = """
default_scope = "mmseg"
norm_cfg = dict(type="BN", requires_grad=True)
crop_size = (64, 64)
data_preprocessor = dict(
    type="SegDataPreProcessor", mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True, pad_val=0, seg_pad_val=255, size=crop_size,
)
model = dict(
    type="EncoderDecoder",
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        type="ResNetV1c", depth=18, stem_channels=16, base_channels=16, num_stages=4,
        out_indices=(0, 1, 2, 3), dilations=(1, 1, 2, 4), strides=(1, 2, 1, 1),
        norm_cfg=norm_cfg, norm_eval=False, style="pytorch", contract_dilation=True,
    ),
    decode_head=dict(
        type="FCNHead", in_channels=128, in_index=3, channels=32, num_convs=1,
        concat_input=False, dropout_ratio=0.1, num_classes=19, norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
    train_cfg=dict(),
    test_cfg=dict(mode="whole"),
)
data_root = "{root}"
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(
        type="CityscapesDataset", data_root=data_root,
        data_prefix=dict(img_path="leftImg8bit/train", seg_map_path="gtFine/train"),
        pipeline=[
            dict(type="LoadImageFromFile"),
            dict(type="LoadAnnotations"),
            dict(type="RandomCrop", crop_size=crop_size, cat_max_ratio=0.75),
            dict(type="RandomFlip", prob=0.5),
            dict(type="PackSegInputs"),
        ],
    ),
)
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(
        type="CityscapesDataset", data_root=data_root,
        data_prefix=dict(img_path="leftImg8bit/val", seg_map_path="gtFine/val"),
        pipeline=[
            dict(type="LoadImageFromFile"),
            dict(type="Resize", scale=(128, 64), keep_ratio=True),
            dict(type="LoadAnnotations"),
            dict(type="PackSegInputs"),
        ],
    ),
)
test_dataloader = val_dataloader
val_evaluator = dict(type="IoUMetric", iou_metrics=["mIoU"])
test_evaluator = val_evaluator
optim_wrapper = dict(
    type="OptimWrapper",
    optimizer=dict(type="SGD", lr=0.01, momentum=0.9, weight_decay=0.0005),
    clip_grad=None,
)
param_scheduler = {schedule}
train_cfg = dict(type="IterBasedTrainLoop", max_iters=40, val_interval=40)
val_cfg = dict(type="ValLoop")
test_cfg = dict(type="TestLoop")
default_hooks = dict(
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=1, log_metric_by_epoch=False),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=40),
    sampler_seed=dict(type="DistSamplerSeedHook"),
)
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo"))
vis_backends = [dict(type="LocalVisBackend")]
visualizer = dict(type="SegLocalVisualizer", vis_backends=vis_backends, name="{name}")
log_processor = dict(by_epoch=False)
log_level = "INFO"
experiment_name = "{name}"
randomness = dict(seed=0)
"""

DIGITS_CONFIG = """
_base_ = "mmpretrain::lenet/lenet5_mnist.py"
data_preprocessor = dict(mean=[77.97], std=[95.89], num_classes=10)
data_root = "{root}"
pipeline = [dict(type="LoadImageFromFile", color_type="grayscale"), dict(type="PackInputs")]
metainfo = dict(classes=("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"))
train_dataloader = dict(
    batch_size=32, num_workers=0, persistent_workers=False,
    sampler=dict(type="DefaultSampler", shuffle=True),
    dataset=dict(
        _delete_=True, type="CustomDataset", data_root=data_root, data_prefix="train",
        ann_file="meta/train.txt", metainfo=metainfo, pipeline=pipeline,
    ),
)
val_dataloader = dict(
    batch_size=100, num_workers=0, persistent_workers=False,
    dataset=dict(
        _delete_=True, type="CustomDataset", data_root=data_root, data_prefix="val",
        ann_file="meta/val.txt", metainfo=metainfo, pipeline=pipeline,
    ),
)
test_dataloader = val_dataloader
optim_wrapper = dict(optimizer=dict(lr=0.1, momentum=0.9, weight_decay=1e-4))
param_scheduler = {schedule}
train_cfg = dict(_delete_=True, by_epoch=True, max_epochs=2, val_interval=1)
default_hooks = dict(logger=dict(type="LoggerHook", interval=1))
env_cfg = dict(dist_cfg=dict(backend="gloo"))
visualizer = dict(
    type="UniversalVisualizer", vis_backends=[dict(type="LocalVisBackend")], name="{name}"
)
experiment_name = "{name}"
randomness = dict(seed=0)
"""

MULTISTEP = 'dict(type="MultiStepLR", by_epoch=True, milestones=[1], gamma=0.1)'


def fcn_config(tmp_path: Path, toy_root: Path, schedule: str = STOCK_SCHEDULE) -> Path:
    """A user's own MMSeg config: an FCN head on a tiny ResNetV1c-18, the toy Cityscapes set."""
    path = tmp_path / f"fcn_{next(_names)}.py"
    name = f"own{next(_names)}"
    path.write_text(FCN_CONFIG.format(root=toy_root, schedule=schedule, name=name))
    return path


def digits_config(tmp_path: Path, root: Path, schedule: str = MULTISTEP) -> Path:
    """An epoch-based MMPretrain config (LeNet-5 on the digits, 2 epochs, DefaultSampler)."""
    path = tmp_path / f"digits_{next(_names)}.py"
    path.write_text(DIGITS_CONFIG.format(root=root, schedule=schedule, name=f"dig{next(_names)}"))
    return path


TOY_LAZY = REPO / "configs/detectron2/lazy/mask_rcnn_toy_budget10.py"
LAZY_CONFIG = f"""\
# a user's own LazyConfig: the toy model and data, their optimizer, Detectron2's stock schedule
from detectron2.config import LazyCall as L
from detectron2.config import LazyConfig
from detectron2.solver import WarmupParamScheduler
from fvcore.common.param_scheduler import MultiStepParamScheduler

_toy = LazyConfig.load({str(TOY_LAZY)!r})
model = _toy.model
dataloader = _toy.dataloader
{{evaluator}}
optimizer = _toy.optimizer
optimizer.lr = 0.02
optimizer.momentum = 0.8
optimizer.weight_decay = 5e-4
train = _toy.train
train.max_iter = 40
lr_multiplier = L(WarmupParamScheduler)(
    scheduler=L(MultiStepParamScheduler)(values=[1.0, 0.1], milestones=[30]),
    warmup_length=4 / 40,
    warmup_factor=0.01,
)
"""


def lazy_config(tmp_path: Path, evaluate: bool = True) -> Path:
    """A user's own Detectron2 LazyConfig (the toy Mask R-CNN's parts, 40 iterations, the stock
    ``WarmupParamScheduler`` with a 4-iteration warmup at factor 0.01); ``evaluate``: keep the
    toy's COCO evaluator."""
    path = tmp_path / f"my_lazy_{next(_names)}.py"
    no_evaluator = "del dataloader.evaluator  # no evaluation: only the LRs are looked at"
    path.write_text(LAZY_CONFIG.replace("{evaluator}", "" if evaluate else no_evaluator))
    return path


D2_DATA_MODULE = '''"""A user's datasets: my_shapes_train / _val (COCO json) under $SHAPES."""
import os

from detectron2.data.datasets import register_coco_instances

root = os.environ["SHAPES"]
for split in ("train", "val"):
    register_coco_instances(f"my_shapes_{split}", {}, f"{root}/toy_coco/annotations/"
                            f"instances_{split}.json", f"{root}/toy_coco/{split}")
'''
D2_YAML = """\
# a user's own Mask R-CNN yaml: the model zoo's 1x made small, their datasets, stock schedule
_BASE_: "model-zoo://COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"
MODEL:
  WEIGHTS: ""
  DEVICE: "cpu"
  BACKBONE: {FREEZE_AT: 0}
  RESNETS: {DEPTH: 18, RES2_OUT_CHANNELS: 64, NORM: "BN"}
  FPN: {OUT_CHANNELS: 64}
  ANCHOR_GENERATOR: {SIZES: [[16], [32], [64], [128], [256]]}
  RPN: {PRE_NMS_TOPK_TRAIN: 400, POST_NMS_TOPK_TRAIN: 200, PRE_NMS_TOPK_TEST: 200,
        POST_NMS_TOPK_TEST: 100}
  ROI_HEADS: {NUM_CLASSES: 3, BATCH_SIZE_PER_IMAGE: 64, SCORE_THRESH_TEST: 0.001}
  ROI_BOX_HEAD: {FC_DIM: 256}
  ROI_MASK_HEAD: {CONV_DIM: 64}
INPUT:
  MIN_SIZE_TRAIN: (64,)
  MAX_SIZE_TRAIN: 64
  MIN_SIZE_TEST: 64
  MAX_SIZE_TEST: 64
DATASETS:
  TRAIN: ("my_shapes_train",)
  TEST: ("my_shapes_val",)
DATALOADER: {NUM_WORKERS: 0}
SOLVER:
  IMS_PER_BATCH: 2
  BASE_LR: 0.01
  MOMENTUM: 0.8
  CLIP_GRADIENTS: {ENABLED: True, CLIP_TYPE: "norm", CLIP_VALUE: 1.0}
  MAX_ITER: 20
  STEPS: (14, 18)
  WARMUP_ITERS: 2
  WARMUP_FACTOR: 0.01
  CHECKPOINT_PERIOD: 100000
SEED: 0
"""


def d2_yaml(tmp_path: Path) -> Path:
    """A user's own Detectron2 yaml (20 iterations, WarmupMultiStepLR at 14 and 18, warmup 2 at
    factor 0.01) on datasets that ``my_data.py`` beside it registers (``--import my_data``)."""
    (tmp_path / "my_data.py").write_text(D2_DATA_MODULE)
    path = tmp_path / "my_mask_rcnn.yaml"
    path.write_text(D2_YAML)
    return path

"""Toy PSPNet for CPU runs: the model and data of every configs/mmseg/toy/ config.

MMSegmentation's PSPNet R50-D8 Cityscapes recipe with a ResNetV1c-18 backbone at 16 base channels,
BN instead of SyncBN, no pretrained weights, 128x128 crops of the 256x128 toy Cityscapes set
(tools/make_toy_cityscapes.py). Trained as it is, it runs the full toy schedule, 3200 iterations
(budgeted.experiments.families.PSPNET_TOY.full_iters), with the stock PolyLR; the budget configs
beside it replace the schedule (tools/gen_mmseg_configs.py writes them, not this file).
"""

_base_ = "mmseg::pspnet/pspnet_r50-d8_4xb2-80k_cityscapes-512x1024.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

norm_cfg = dict(type="BN", requires_grad=True)
crop_size = (128, 128)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(depth=18, stem_channels=16, base_channels=16, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=128, channels=32, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=64, channels=16, norm_cfg=norm_cfg),
)

data_root = "datasets/toy_cityscapes/"
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations"),
    dict(type="RandomResize", scale=(256, 128), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type="RandomCrop", crop_size=crop_size, cat_max_ratio=0.75),
    dict(type="RandomFlip", prob=0.5),
    dict(type="PhotoMetricDistortion"),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=(256, 128), keep_ratio=True),
    dict(type="LoadAnnotations"),
    dict(type="PackSegInputs"),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=test_pipeline),
)
test_dataloader = val_dataloader
test_evaluator = [
    dict(type="IoUMetric", iou_metrics=["mIoU"]),
    dict(type="CityscapesMetric", output_dir="work_dirs/toy_cityscapes_metric"),
]

full_schedule_iters = 3200
param_scheduler = [
    dict(
        type="PolyLR",
        eta_min=1e-4,
        power=0.9,
        begin=0,
        end=full_schedule_iters,
        by_epoch=False,
    ),
]
train_cfg = dict(
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=10, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo"))
randomness = dict(seed=0)

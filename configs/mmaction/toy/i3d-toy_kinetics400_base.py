"""Toy I3D for CPU runs: the model and data of every configs/mmaction/toy/ config.

MMAction2's I3D Kinetics-400 recipe (the real family's base, ../i3d_r50_kinetics400_base.py) scaled
down: a ResNet3d-18 at 8 base channels, inflated like I3D's ResNet-50 (3x1x1 kernels in alternate
blocks, a 5x7x7 stem), no pretrained weights, 8x2x1 clips at 32 px instead of 32x2x1 at 224 px, 4
classes, batch 8, on the toy raw-frame set (tools/make_toy_kinetics.py writes it to
datasets/toy_kinetics400). At 8 frames of 32 px, I3D's strides (temporal 2 in the stem's conv and
pool, spatial 2 in the last stage) would leave 1x1x1 maps with BN over a few values, and the toy
would not learn in its schedule; the toy drops those three strides. Kept from the real setting: the
raw-frame format and dataset class, the clip sampling scheme, the augmentation (multi-scale crop,
resize, flip), the SGD optimizer with gradient clipping, AccMetric, and the iteration-based loop;
the full schedule is the toy family's 400 iterations
(budgeted.experiments.families.I3D_TOY.full_iters). The budget configs beside it set the schedule
and the budget (tools/gen_mmengine_configs.py writes them, not this file).
"""

_base_ = "mmaction::recognition/i3d/i3d_imagenet-pretrained-r50_8xb8-32x2x1-100e_kinetics400-rgb.py"
custom_imports = dict(
    imports=[
        "budgeted.mmengine",
        "budgeted.mmengine.safe_checkpoints",
        "budgeted.mmengine.mmaction_compat",
    ],
    allow_failed_imports=False,
)

model = dict(
    backbone=dict(
        pretrained=None,
        pretrained2d=False,
        depth=18,
        base_channels=8,
        inflate=((1, 1), (1, 0), (1, 0), (0, 1)),
        conv1_stride_t=1,
        pool1_stride_t=1,
        spatial_strides=(1, 2, 2, 1),
    ),
    cls_head=dict(num_classes=4, in_channels=64),
)

dataset_type = "RawframeDataset"
data_root = "datasets/toy_kinetics400"
train_pipeline = [
    dict(type="SampleFrames", clip_len=8, frame_interval=2, num_clips=1),
    dict(type="RawFrameDecode"),
    dict(type="Resize", scale=(-1, 36)),
    dict(
        type="MultiScaleCrop",
        input_size=32,
        scales=(1, 0.8),
        random_crop=False,
        max_wh_scale_gap=0,
    ),
    dict(type="Resize", scale=(32, 32), keep_ratio=False),
    dict(type="Flip", flip_ratio=0.5),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
val_pipeline = [
    dict(type="SampleFrames", clip_len=8, frame_interval=2, num_clips=1, test_mode=True),
    dict(type="RawFrameDecode"),
    dict(type="Resize", scale=(-1, 36)),
    dict(type="CenterCrop", crop_size=32),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
test_pipeline = [
    dict(type="SampleFrames", clip_len=8, frame_interval=2, num_clips=2, test_mode=True),
    dict(type="RawFrameDecode"),
    dict(type="Resize", scale=(-1, 36)),
    dict(type="ThreeCrop", crop_size=36),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(_delete_=True, type="InfiniteSampler", shuffle=True),
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file="kinetics400_train_list_rawframes.txt",
        data_prefix=dict(img="rawframes_train"),
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file="kinetics400_val_list_rawframes.txt",
        data_prefix=dict(img="rawframes_val"),
        pipeline=val_pipeline,
        test_mode=True,
    ),
)
test_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file="kinetics400_val_list_rawframes.txt",
        data_prefix=dict(img="rawframes_val"),
        pipeline=test_pipeline,
        test_mode=True,
    ),
)
val_evaluator = dict(type="AccMetric")
test_evaluator = val_evaluator

full_schedule_iters = 400
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it
optim_wrapper = dict(optimizer=dict(lr=0.01))
auto_scale_lr = dict(enable=False, base_batch_size=8)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=10, log_metric_by_epoch=False),
    checkpoint=dict(
        type="CheckpointHook", by_epoch=False, interval=full_schedule_iters, max_keep_ckpts=5
    ),
)
log_processor = dict(by_epoch=False)
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method="fork", opencv_num_threads=0),
    dist_cfg=dict(backend="gloo"),
)
randomness = dict(seed=0)

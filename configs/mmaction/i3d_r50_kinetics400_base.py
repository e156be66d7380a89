"""I3D ResNet-50, Kinetics-400 raw frames: the model and data of every configs/mmaction/ config.

MMAction2's own I3D recipe (ImageNet-pretrained ResNet-50 inflated 3x1x1, 32x2x1 clips, SGD 0.9
momentum, weight decay 1e-4, gradient clipping at 40) made iteration-based over the paper's full
schedule, 300k iterations on 4 GPUs (budgeted.experiments.families.I3D), and read from raw frames:
``RawframeDataset`` with ``RawFrameDecode`` instead of videos with decord, laid out as MMAction2's
Kinetics-400 tools write them under ``data/kinetics400``::

    kinetics400_train_list_rawframes.txt    "abseiling/0wR5jVB-WPk_000417_000427 300 0" per line
    kinetics400_val_list_rawframes.txt
    rawframes_train/<class>/<video>/img_00001.jpg ...
    rawframes_val/<class>/<video>/img_00001.jpg ...

Batch: 8 clips per GPU, the stock's per-GPU batch (what an I3D R50 at 32x224x224 is set up for
on one GPU; the stock trains 8 GPUs x 8 = 64), on the paper's 4 GPUs: 32 clips per iteration.
The LR follows MMAction2's linear scaling rule (``auto_scale_lr``: 0.01 at 64) to 0.005 at 32.
Clip sampling and augmentation are the stock's. The budget configs beside it set the schedule
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

# dataset settings: raw frames (the stock's pipelines with RawFrameDecode for decord)
dataset_type = "RawframeDataset"
data_root = "data/kinetics400"
ann_file_train = "kinetics400_train_list_rawframes.txt"
ann_file_val = "kinetics400_val_list_rawframes.txt"
ann_file_test = "kinetics400_val_list_rawframes.txt"
file_client_args = dict(io_backend="disk")
train_pipeline = [
    dict(type="SampleFrames", clip_len=32, frame_interval=2, num_clips=1),
    dict(type="RawFrameDecode", **file_client_args),
    dict(type="Resize", scale=(-1, 256)),
    dict(
        type="MultiScaleCrop",
        input_size=224,
        scales=(1, 0.8),
        random_crop=False,
        max_wh_scale_gap=0,
    ),
    dict(type="Resize", scale=(224, 224), keep_ratio=False),
    dict(type="Flip", flip_ratio=0.5),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
val_pipeline = [
    dict(type="SampleFrames", clip_len=32, frame_interval=2, num_clips=1, test_mode=True),
    dict(type="RawFrameDecode", **file_client_args),
    dict(type="Resize", scale=(-1, 256)),
    dict(type="CenterCrop", crop_size=224),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
test_pipeline = [
    dict(type="SampleFrames", clip_len=32, frame_interval=2, num_clips=10, test_mode=True),
    dict(type="RawFrameDecode", **file_client_args),
    dict(type="Resize", scale=(-1, 256)),
    dict(type="ThreeCrop", crop_size=256),
    dict(type="FormatShape", input_format="NCTHW"),
    dict(type="PackActionInputs"),
]
train_dataloader = dict(
    batch_size=8,
    sampler=dict(_delete_=True, type="InfiniteSampler", shuffle=True),
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file=ann_file_train,
        data_prefix=dict(img="rawframes_train"),
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file=ann_file_val,
        data_prefix=dict(img="rawframes_val"),
        pipeline=val_pipeline,
        test_mode=True,
    ),
)
test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root=data_root,
        ann_file=ann_file_test,
        data_prefix=dict(img="rawframes_val"),
        pipeline=test_pipeline,
        test_mode=True,
    ),
)

# iteration-based: the paper's full schedule; the budget configs set max_iters
full_schedule_iters = 300000
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it
optim_wrapper = dict(optimizer=dict(lr=0.005))  # 0.01 x 32 / 64 (4 GPUs x 8 clips)
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=20, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=8000, max_keep_ckpts=5),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

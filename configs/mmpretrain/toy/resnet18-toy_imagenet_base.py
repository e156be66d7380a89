"""Toy ResNet-18 on the toy ImageNet, for CPU runs: the model and data of every
configs/mmpretrain/toy/resnet18-toy_imagenet config.

MMPretrain's ``resnet/resnet18_8xb32_in1k.py`` recipe
(configs/mmpretrain/resnet18_imagenet_base.py) scaled down: the same ResNet-18 (7x7 stride-2 stem
and max-pool, four stages of two basic blocks) at a quarter width (16 base channels, head on 128
features, 10 classes), no pretrained weights; the same pipelines at 64 px instead of 224 (random
resized crops and flips; the short edge to 73 px, 64/224 of the stock 256, then a 64 px centre
crop), SGD lr 0.1, momentum 0.9, weight decay 1e-4 as the stock, ``Accuracy`` top-1 and top-5,
iteration-based with an ``InfiniteSampler``; on the toy ImageNet (``tools/make_toy_imagenet.py``,
``budgeted.toys.mmpretrain.write_imagenet``: ImageNet's first 10 classes, 20 train / 5 val images
each, 80x80 px JPEGs in MMPretrain's ImageNet layout) read by the stock ``ImageNet`` dataset, batch
32, no dataloader workers. Trained as it is, it runs the full toy schedule, 400 iterations
(budgeted.experiments.families.RESNET18_IMAGENET_TOY.full_iters), at a constant LR; the budget
configs beside it set the schedule and the budget (tools/gen_mmengine_configs.py writes them, not
this file).
"""

_base_ = "mmpretrain::resnet/resnet18_8xb32_in1k.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

num_classes = 10  # budgeted.toys.mmpretrain.IMAGENET_WNIDS, labels 0-9 as in ImageNet
data_preprocessor = dict(num_classes=num_classes)
model = dict(
    backbone=dict(stem_channels=16, base_channels=16),
    head=dict(num_classes=num_classes, in_channels=128),
)

data_root = "datasets/toy_imagenet"
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="RandomResizedCrop", scale=64),
    dict(type="RandomFlip", prob=0.5, direction="horizontal"),
    dict(type="PackInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="ResizeEdge", scale=73, edge="short"),
    dict(type="CenterCrop", crop_size=64),
    dict(type="PackInputs"),
]
train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(data_root=data_root, split="train", pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=25,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, split="val", pipeline=test_pipeline),
)
test_dataloader = val_dataloader

full_schedule_iters = 400
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it
optim_wrapper = dict(optimizer=dict(lr=0.1))
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=10, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
log_processor = dict(by_epoch=False)
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo"))
randomness = dict(seed=0)

"""Toy ResNet-18 on the toy CIFAR-10, for CPU runs: the model and data of every
configs/mmpretrain/toy/resnet18-toy_cifar10 config.

MMPretrain's ``resnet/resnet18_8xb16_cifar10.py`` recipe as the real family sets it
(configs/mmpretrain/resnet18_cifar10_base.py): the same ``ResNet_CIFAR``-18 (CIFAR stem, four
stages of two basic blocks) at a quarter width (16 base channels, head on 128 features), the same
augmentation and normalisation, SGD lr 0.1, momentum 0.9 and the paper's weight decay 5e-4,
``Accuracy`` top-1, iteration-based with an ``InfiniteSampler``; on the toy CIFAR-10
(``budgeted.toys.mmpretrain.write_cifar10`` = ``tools/make_toy_cifar10.py --root
datasets/toy_cifar10``: 1,000 train / 200 test 32x32 images in the real pickle format), batch 32,
no dataloader workers. Read with ``ToyCIFAR10`` (budgeted.toys.mmpretrain, imported by the configs'
``custom_imports``): the stock reader without the real archive's checksums, for folders marked as
toy sets. Validation is on the toy ``test_batch``, not on held-out training images as the real
family: the holdout is a count of images (``indices``), which would overlap the training images of
a smaller toy set the configs are pointed at (``--cfg-options
*_dataloader.dataset.data_root=DIR``). Trained as it is, it runs the full toy schedule, 400
iterations (budgeted.experiments.families.RESNET18_CIFAR10_TOY.full_iters), at a constant LR; the
budget configs beside it set the schedule and the budget (tools/gen_mmengine_configs.py writes
them, not this file).
"""

_base_ = "mmpretrain::resnet/resnet18_8xb16_cifar10.py"
custom_imports = dict(
    imports=[
        "budgeted.mmengine",
        "budgeted.mmengine.safe_checkpoints",
        "budgeted.toys.mmpretrain",
    ],
    allow_failed_imports=False,
)

model = dict(
    backbone=dict(stem_channels=16, base_channels=16),
    head=dict(in_channels=128),
)

data_root = "datasets/toy_cifar10"
train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(type="ToyCIFAR10", data_root=data_root, split="train"),
)
val_dataloader = dict(
    batch_size=50,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type="ToyCIFAR10", data_root=data_root, split="test"),
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
optim_wrapper = dict(optimizer=dict(lr=0.1, momentum=0.9, weight_decay=5e-4))
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=10, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
log_processor = dict(by_epoch=False)
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo"))
randomness = dict(seed=0)

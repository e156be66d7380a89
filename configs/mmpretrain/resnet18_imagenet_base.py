"""ResNet-18, ImageNet-1k: the model and data of every configs/mmpretrain/resnet18_imagenet config.

MMPretrain's own ``resnet/resnet18_8xb32_in1k.py`` (ResNet-18 from random init; random resized 224
px crops and horizontal flips, 256 px short edge and a 224 px centre crop for validation; SGD lr
0.1, momentum 0.9, weight decay 1e-4; ``Accuracy`` top-1 and top-5 on the 50,000 validation images)
unchanged, made iteration-based: batch 256 (32 images per GPU x 8 GPUs, the stock's and the batch
its lr 0.1 is for; ``auto_scale_lr.base_batch_size`` 256), the full schedule 100 epochs x
ceil(1,281,167 / 256) = 5005 iterations = 500,500 iterations
(budgeted.experiments.families.RESNET18_IMAGENET.full_iters), with an ``InfiniteSampler`` and one
validation at the end of the budget. Data in MMPretrain's layout under ``data/imagenet/``
(``train/<wnid>/``, ``val/``, ``meta/{train,val}.txt``). The budget configs beside it set the
schedule and the budget (tools/gen_mmengine_configs.py writes them, not this file); trained as it
is, it runs the full 500,500 iterations at the stock LR with no scheduler.
"""

_base_ = "mmpretrain::resnet/resnet18_8xb32_in1k.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

train_dataloader = dict(sampler=dict(type="InfiniteSampler", shuffle=True))

# iteration-based: the paper's full schedule; the budget configs set max_iters
full_schedule_iters = 500500
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it (the stock: x0.1 at 30, 60, 90)
optim_wrapper = dict(optimizer=dict(lr=0.1))  # the stock's, for batch 256
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=100, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=8000),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

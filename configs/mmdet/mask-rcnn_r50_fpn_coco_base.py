"""Mask R-CNN R50-FPN, COCO 2017: the model and data of every configs/mmdet/ config.

MMDetection's own ``mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py`` (ImageNet-pretrained ResNet-50 from
torchvision, FPN, 1333x800 images with flips, SGD lr 0.02, momentum 0.9, weight decay 1e-4,
CocoMetric bbox + segm on val2017) unchanged, made iteration-based: the 1x schedule as
Detectron2's model zoo and the paper state it, 90k iterations at batch 16 (2 images per GPU x 8
GPUs, the stock's batch and the batch its lr 0.02 is for; the stock's 12 epochs are about 88k
iterations), with the train sampler an ``InfiniteSampler`` (as MMDetection's own 90k configs,
``common/ms-90k_coco.py``) and one validation at the end of the budget. Data in MMDetection's
layout under ``data/coco/`` (``annotations/instances_{train,val}2017.json``,
``{train,val}2017/``). The budget configs beside it set the schedule and the budget
(tools/gen_mmengine_configs.py writes them, not this file); trained as it is, it runs the full
90k iterations at the stock LR with no scheduler.
"""

_base_ = "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

train_dataloader = dict(sampler=dict(type="InfiniteSampler", shuffle=True))

# iteration-based: the paper's full schedule; the budget configs set max_iters
full_schedule_iters = 90000
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it (the stock: 500 warmup, x0.1 steps)
optim_wrapper = dict(optimizer=dict(lr=0.02))  # the stock's, for batch 16
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=8000),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

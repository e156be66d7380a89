"""Toy Mask R-CNN for CPU runs: the model and data of every configs/mmdet/toy/ config.

MMDetection's Mask R-CNN R50-FPN 1x COCO recipe (the same model type, heads, losses, assigners,
samplers, SGD with momentum 0.9 and weight decay 1e-4, CocoMetric bbox + segm with pycocotools)
scaled down for CPUs, as the Detectron2 toy (configs/detectron2/toy/Base-Toy-Mask-RCNN.yaml) is: a
ResNet-18 at half width (32 base channels) with trainable BN and no pretrained weights (none can be
downloaded here; nothing frozen), FPN and heads at 64 channels, anchors 16-256 px, few proposals
(RPN 400/200 in training, 200/100 in testing) and 64 sampled RoIs an image, on the synthetic toy
COCO set (tools/make_toy_coco.py, budgeted.toys.mmdet.write: 64 train / 16 val images of 128x128
px, 3 shape classes, the set the Detectron2 toy reads) at 128 px, batch 2, lr 0.01 with gradient
clipping at norm 1 (from random init, unclipped gradients diverge), no dataloader workers. The
validation metric reads the ground truth from the dataset itself (``CocoMetric(ann_file=None)``,
the raw ``instances`` packed with each image), so pointing the dataloaders at another toy set
(``--cfg-options *_dataloader.dataset.data_root=DIR``) evaluates against that set. Trained as it
is, it runs the full toy schedule, 400 iterations
(budgeted.experiments.families.MMDET_MASK_RCNN_TOY.full_iters), at a constant LR; the budget
configs beside it set the schedule and the budget (tools/gen_mmengine_configs.py writes them, not
this file).
"""

_base_ = "mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

norm_cfg = dict(type="BN", requires_grad=True)
channels = 64
model = dict(
    backbone=dict(
        depth=18,
        stem_channels=32,
        base_channels=32,
        frozen_stages=-1,
        norm_cfg=norm_cfg,
        norm_eval=False,
        init_cfg=None,
    ),
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=channels),
    rpn_head=dict(
        in_channels=channels,
        feat_channels=channels,
        anchor_generator=dict(scales=[4]),  # 16-256 px over strides 4-64
    ),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=channels),
        bbox_head=dict(in_channels=channels, fc_out_channels=256, num_classes=3),
        mask_roi_extractor=dict(out_channels=channels),
        mask_head=dict(in_channels=channels, conv_out_channels=channels, num_classes=3),
    ),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=400, max_per_img=200),
        rcnn=dict(sampler=dict(num=64)),
    ),
    test_cfg=dict(
        rpn=dict(nms_pre=200, max_per_img=100),
        rcnn=dict(score_thr=0.001),  # an undertrained model scores low: keep its detections
    ),
)

data_root = "datasets/toy_coco/"
metainfo = dict(classes=("square", "circle", "triangle"))  # budgeted.toys.coco.TOY_CATEGORIES
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(type="Resize", scale=(128, 128), keep_ratio=True),
    dict(type="RandomFlip", prob=0.5),
    dict(type="PackDetInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=(128, 128), keep_ratio=True),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(
        type="PackDetInputs",
        meta_keys=("img_id", "img_path", "ori_shape", "img_shape", "scale_factor", "instances"),
    ),
]
train_dataloader = dict(
    batch_size=2,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file="annotations/instances_train.json",
        data_prefix=dict(img="train/"),
        pipeline=train_pipeline,
    ),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file="annotations/instances_val.json",
        data_prefix=dict(img="val/"),
        pipeline=test_pipeline,
    ),
)
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=None)  # the ground truth of the dataset the dataloader reads
test_evaluator = val_evaluator

full_schedule_iters = 400
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it
optim_wrapper = dict(optimizer=dict(lr=0.01), clip_grad=dict(max_norm=1.0, norm_type=2))
auto_scale_lr = dict(enable=False, base_batch_size=2)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=10, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
log_processor = dict(by_epoch=False)
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo"))
randomness = dict(seed=0)

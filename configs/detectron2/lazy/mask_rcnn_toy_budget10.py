"""The toy Mask R-CNN (R18-BN, 128 px, toy_coco) as a LazyConfig, at 10 % of its 400 iterations.

It registers the toy sets it names (``toy_coco_train`` / ``toy_coco_val``, from
``$DETECTRON2_DATASETS``; ``python tools/make_toy_coco.py`` writes them) when it is loaded, in
every process that loads it, so Detectron2's own ``tools/lazyconfig_train_net.py`` trains it as
it is::

    python <detectron2>/tools/lazyconfig_train_net.py \
        --config-file configs/detectron2/lazy/mask_rcnn_toy_budget10.py
"""

import detectron2.data.transforms as T
from detectron2.config import LazyCall as L
from detectron2.layers import ShapeSpec

from budgeted.detectron2 import register_toy_coco
from budgeted.schedules.units import budget_iters

from .mask_rcnn_R_50_FPN_budget10 import dataloader, lr_multiplier, model, optimizer, train

bottom_up = model.backbone.bottom_up
bottom_up.freeze_at = 0
bottom_up.stem.norm = "BN"
bottom_up.stages.depth = 18
bottom_up.stages.norm = "BN"
del bottom_up.stages.stride_in_1x1  # not an argument of R18's BasicBlock
model.backbone.out_channels = 64
model.proposal_generator.head.in_channels = 64
model.proposal_generator.anchor_generator.sizes = [[16], [32], [64], [128], [256]]
model.proposal_generator.pre_nms_topk = (400, 200)
model.proposal_generator.post_nms_topk = (200, 100)
model.roi_heads.num_classes = 3
model.roi_heads.batch_size_per_image = 64
model.roi_heads.box_head.input_shape = ShapeSpec(channels=64, height=7, width=7)
model.roi_heads.box_predictor.test_score_thresh = 0.001
model.roi_heads.mask_head.input_shape = ShapeSpec(channels=64, height=14, width=14)
model.roi_heads.mask_head.conv_dims = [64, 64, 64, 64, 64]

register_toy_coco()  # the names below, in Detectron2's DatasetCatalog (kept if registered)
dataloader.train.dataset.names = "toy_coco_train"
dataloader.train.mapper.augmentations = [
    L(T.ResizeShortestEdge)(short_edge_length=(128,), max_size=128, sample_style="choice"),
    L(T.RandomFlip)(horizontal=True),
]
dataloader.train.total_batch_size = 2
dataloader.train.num_workers = 0
dataloader.test.dataset.names = "toy_coco_val"
dataloader.test.mapper.augmentations = [
    L(T.ResizeShortestEdge)(short_edge_length=128, max_size=128)
]
dataloader.test.num_workers = 0

optimizer.lr = 0.01
train.max_iter = budget_iters(fraction=0.1, full_iters=400)  # 40
train.init_checkpoint = ""
train.device = "cpu"
train.seed = 0
train.checkpointer.period = 100000
train.output_dir = "./output/lazy/mask_rcnn_toy_budget10"
lr_multiplier.warmup_iters = 3

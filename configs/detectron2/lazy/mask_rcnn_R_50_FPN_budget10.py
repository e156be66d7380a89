"""Mask R-CNN R50-FPN, the model zoo's LazyConfig 1x recipe, at 10 % of the 1x budget.

    python tools/lazyconfig_train_net.py --num-gpus 8 \
        --config-file configs/detectron2/lazy/mask_rcnn_R_50_FPN_budget10.py

Another budget or schedule: ``train.max_iter=22500`` (the scheduler follows ``train.max_iter``),
``lr_multiplier.schedule=cosine``.
"""

from detectron2.config import LazyCall as L
from detectron2.model_zoo import get_config

from budgeted.detectron2.lazy import BudgetLRMultiplier
from budgeted.detectron2.trainer import has_compiled_ops
from budgeted.schedules.units import budget_iters

_zoo = get_config("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.py")
model, dataloader, optimizer, train = _zoo.model, _zoo.dataloader, _zoo.optimizer, _zoo.train

train.max_iter = budget_iters(fraction=0.1, full_iters=90000)  # 9000
train.eval_period = 0  # evaluate once, at the end of the budget
train.output_dir = "./output/lazy/mask_rcnn_R_50_FPN_budget10"
dataloader.evaluator.use_fast_impl = has_compiled_ops()

lr_multiplier = L(BudgetLRMultiplier)(
    schedule="linear",
    total_iters="${train.max_iter}",
    warmup_iters=500,
    warmup_factor=0.001,
)

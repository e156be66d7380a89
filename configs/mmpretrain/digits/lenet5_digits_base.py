"""LeNet-5 on the UCI handwritten digits: the model and data of every configs/mmpretrain/digits
config (docs/digits.md).

MMPretrain's own ``lenet/lenet5_mnist.py`` (the stock ``LeNet5`` backbone with its classifier,
1 x 32 x 32 grey input, ``ClsHead`` with cross-entropy, SGD momentum 0.9 and weight decay 1e-4,
the ``Accuracy`` top-1 evaluator), on real images that need no download and made
iteration-based:

* data: scikit-learn's copy of the UCI digits written by ``tools/make_digits.py`` (=
  ``budgeted.toys.digits.write_digits``) into ``datasets/digits``: 32x32 grey PNGs (each 8x8
  count repeated over its 4x4 block, the scan's own resolution and LeNet-5's input) read by the
  stock ``CustomDataset`` from its annotation files; 1,400 train, 397 held out and never trained
  on (a stratified split drawn with seed 0, the one ``examples/digits_budget.py`` trains on), no
  augmentation (as the stock);
* normalisation: the training pixels' mean and deviation (``budgeted.toys.digits.MEAN, STD``),
  not MNIST's;
* batch 32, base LR 0.1 (the middle of the digits grid; the stock has batch 128, LR 0.01);
* the full schedule is 40 epochs x floor(1,400 / 32) = 43 iterations = 1,720 iterations
  (budgeted.experiments.families' digits family ``full_iters``), with an ``InfiniteSampler`` and one
  validation, on the held-out images, at the end of the budget; the validation batch is 100
  (397 images: never a last batch of one, which the stock ``LeNet5.forward``'s ``squeeze()``
  would break).

The budget configs beside it set the schedule and the budget (tools/gen_mmengine_configs.py
writes them, not this file); trained as it is, it runs the full 1,720 iterations at the base LR
with no scheduler.
"""

_base_ = "mmpretrain::lenet/lenet5_mnist.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

data_preprocessor = dict(mean=[77.97], std=[95.89], num_classes=10)  # the training pixels
data_root = "datasets/digits"
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
val_dataloader = dict(  # the 397 held-out images
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
full_schedule_iters = 1720
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
    logger=dict(type="LoggerHook", interval=43, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=full_schedule_iters),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

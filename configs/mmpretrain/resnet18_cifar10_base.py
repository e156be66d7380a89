"""ResNet-18 (CIFAR stem), CIFAR-10: the model and data of every configs/mmpretrain/resnet18_cifar10
config.

MMPretrain's own ``resnet/resnet18_8xb16_cifar10.py`` (``ResNet_CIFAR``-18: a 3x3 stride-1 stem,
no max-pool; random crop with padding 4 and horizontal flips; SGD lr 0.1, momentum 0.9; the
``Accuracy`` top-1 evaluator), set to the paper's CIFAR-10 setting (Sec. 3) and made
iteration-based:

* batch 128 in all: the stock 16 images per GPU x 8 GPUs (the file's ``8xb16``; its
  ``auto_scale_lr.base_batch_size`` is 128), kept as shipped; on one GPU set
  ``train_dataloader.batch_size=128`` for the same batch;
* weight decay 5e-4 (the paper's; the stock has 1e-4), lr 0.1 and momentum 0.9 as the stock;
* 5,000 training images held out for validation, as the paper: the first 45,000 images of the
  training batches train (``indices=45000``), the LAST 5,000 validate (``indices=-5000``, split
  ``train``, no augmentation), the same split as ``examples/cifar10_budget.py``; the 10,000
  test images are the test set (``test_dataloader``, MMPretrain's ``tools/test.py``);
* the full schedule is 200 epochs x ceil(45,000 / 128) = 352 iterations = 70,400 iterations
  (budgeted.experiments.families.RESNET18_CIFAR10.full_iters), with an ``InfiniteSampler`` and one
  validation at the end of the budget.

Data: the real archive extracted in ``data/cifar10/cifar-10-batches-py/`` (the stock place), read
by the stock ``CIFAR10`` dataset, which checks every file's md5 (and downloads the archive where
it is missing, as the stock config does). The budget configs beside it set the schedule and the
budget (tools/gen_mmengine_configs.py writes them, not this file); trained as it is, it runs the
full 70,400 iterations at the stock LR with no scheduler.
"""

_base_ = "mmpretrain::resnet/resnet18_8xb16_cifar10.py"
custom_imports = dict(
    imports=["budgeted.mmengine", "budgeted.mmengine.safe_checkpoints"],
    allow_failed_imports=False,
)

data_root = "data/cifar10"
train_dataloader = dict(
    batch_size=16,  # x 8 GPUs = 128, the paper's batch (one GPU: batch_size=128)
    sampler=dict(type="InfiniteSampler", shuffle=True),
    dataset=dict(data_root=data_root, split="train", indices=45000),  # the first 45,000
)
val_dataloader = dict(  # the last 5,000 training images, held out (test pipeline: no aug)
    dataset=dict(data_root=data_root, split="train", indices=-5000),
)
test_dataloader = dict(dataset=dict(data_root=data_root, split="test"))  # the 10,000 test images

# iteration-based: the paper's full schedule; the budget configs set max_iters
full_schedule_iters = 70400
train_cfg = dict(
    _delete_=True,
    type="IterBasedTrainLoop",
    max_iters=full_schedule_iters,
    val_interval=full_schedule_iters,
)
param_scheduler = []  # the schedule bases in _base_/ set it (the stock: x0.1 at epochs 100, 150)
optim_wrapper = dict(optimizer=dict(lr=0.1, momentum=0.9, weight_decay=5e-4))  # the paper's
default_hooks = dict(
    logger=dict(type="LoggerHook", interval=100, log_metric_by_epoch=False),
    checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=8000),
)
log_processor = dict(by_epoch=False)
randomness = dict(seed=0)

"""MMEngine hooks: atomic checkpoints and preemption-safe training (registered in ``HOOKS``).

- :class:`AtomicCheckpointHook`: MMEngine's ``CheckpointHook`` writing each checkpoint and
  ``last_checkpoint`` to a temporary file, fsynced and renamed into place;
- :class:`PreemptionHook`: SIGTERM / SIGUSR1 stop the run after the current iteration (agreed by
  every rank) with a checkpoint, one line and exit status 75;
- :class:`DivergenceHook`: a non-finite loss ends the run at that iteration, exit status 3.

In a config (``tools/train_seg.py`` adds them itself)::

    custom_imports = dict(imports=["budgeted.mmengine"], allow_failed_imports=False)
    default_hooks = dict(
        checkpoint=dict(type="AtomicCheckpointHook", by_epoch=False, interval=8000)
    )
    custom_hooks = [dict(type="PreemptionHook"), dict(type="DivergenceHook")]
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import os.path as osp
import sys
from collections.abc import Mapping
from typing import Any

from mmengine.dist import barrier, get_world_size, is_main_process
from mmengine.fileio import LocalBackend
from mmengine.hooks import CheckpointHook, Hook
from mmengine.registry import HOOKS
from mmengine.runner.loops import IterBasedTrainLoop

from ..control.stops import NON_FINITE, base_lr_of, diverged, loss_code, preempted_after
from ..errors import Diverged
from ..safety import checkpoint_iterations
from ..safety.preemption import (
    DIVERGED_EXIT_CODE,
    PREEMPTED_EXIT_CODE,
    Preempted,
    PreemptionPolicy,
    signal_name,
)
from ..safety.ranks import agree_max
from ..safety.writing import save_and_point
from .compat import CheckpointSaveHook, built_train_loop, stock_save

__all__ = [
    "AtomicCheckpointHook", "CheckpointAtHook", "Diverged", "DivergenceHook", "PreemptionHook",
    "agree_max", "save_checkpoint_atomically", "save_checkpoint_now"
]  # fmt: skip

_NO_VALIDATION = sys.maxsize
"""``val_begin`` of a loop stopped by a preemption: a validation due now is not started."""


def _say(prog: str, runner: Any, text: str) -> None:
    """Rank 0: ``text`` in the run's log and ``<prog>: text`` on stderr."""
    if is_main_process():
        runner.logger.info(text)
        print(f"{prog}: {text}", file=sys.stderr, flush=True)


def save_checkpoint_atomically(
    hook: CheckpointHook,
    runner: Any,
    step: int,
    meta: dict,
    *,
    filename_tmpl: str | None = None,
    by_epoch: bool | None = None,
) -> str:
    """What MMEngine's ``CheckpointHook`` does for each save (:func:`~budgeted.mmengine.compat.
    stock_save`), with atomic writes; the path.

    The runner's ``save_checkpoint`` writes under a temporary name; rank 0 fsyncs and renames
    it, writes ``last_checkpoint`` atomically, then removes what ``max_keep_ckpts`` retires.
    """
    tmpl = filename_tmpl or hook.filename_tmpl
    by_epoch = hook.by_epoch if by_epoch is None else by_epoch
    if not isinstance(hook.file_backend, LocalBackend):
        stock_save(hook, runner, step, meta)
        return str(hook.last_ckpt)
    retired = None
    if hook.max_keep_ckpts > 0 and not (hook.keep_ckpt_ids and hook.keep_ckpt_ids[-1] == step):
        if len(hook.keep_ckpt_ids) == hook.max_keep_ckpts:
            retired = hook.keep_ckpt_ids.popleft()
        hook.keep_ckpt_ids.append(step)
        runner.message_hub.update_info("keep_ckpt_ids", list(hook.keep_ckpt_ids))
    filename = tmpl.format(step)
    hook.last_ckpt = hook.file_backend.join_path(hook.out_dir, filename)
    runner.message_hub.update_info("last_ckpt", hook.last_ckpt)

    def write(tmp: str) -> None:
        runner.save_checkpoint(  # @master_only: writes on rank 0 only
            hook.out_dir,
            osp.basename(tmp),
            hook.file_client_args,
            save_optimizer=hook.save_optimizer,
            save_param_scheduler=hook.save_param_scheduler,
            meta=meta,
            by_epoch=by_epoch,
            backend_args=hook.backend_args,
            **hook.args,
        )

    pointer = osp.join(runner.work_dir, "last_checkpoint")
    save_and_point(write, hook.last_ckpt, pointer, hook.last_ckpt, main=is_main_process())
    if is_main_process() and retired is not None and retired != step:
        old = hook.file_backend.join_path(hook.out_dir, tmpl.format(retired))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(old)
    return str(hook.last_ckpt)


def save_checkpoint_now(runner: Any, step: int, who: str) -> str:
    """Write ``iter_<step>.pth`` now, as the runner's checkpoint hook would (atomically; a
    file that hook wrote at this iteration a moment ago is kept); its path."""
    hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)), None)
    if hook is None:  # no periodic checkpoints configured: still write this one
        hook = CheckpointHook(by_epoch=False)
        hook.before_train(runner)
    tmpl = "iter_{}.pth" if hook.by_epoch else hook.filename_tmpl
    name = tmpl.format(step)
    last = runner.message_hub.get_info("last_ckpt")
    if last and osp.basename(str(last)) == name and osp.isfile(str(last)):
        return str(last)  # the checkpoint hook wrote this iteration a moment ago
    meta = dict(epoch=runner.epoch, iter=step)
    runner.logger.log(logging.INFO, f"{who}: saving checkpoint at {step} iterations")
    return save_checkpoint_atomically(hook, runner, step, meta, filename_tmpl=tmpl, by_epoch=False)


@HOOKS.register_module()
class CheckpointAtHook(Hook):
    """Save ``iter_<N>.pth`` once ``N`` iterations are trained, for each ``N`` of ``iterations``:
    the points a run is branched from (the cooldowns of ``tools/branch.py``), beside the
    periodic checkpoints. In a config: ``custom_hooks=[dict(type="CheckpointAtHook",
    iterations=[3040, 6080])]``.
    """

    priority = "VERY_LOW"  # after the scheduler step and the periodic checkpoint

    def __init__(self, iterations: Any) -> None:
        self.iterations = checkpoint_iterations("CheckpointAtHook: iterations", iterations)

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        if runner.iter + 1 in self.iterations:
            save_checkpoint_now(runner, runner.iter + 1, "CheckpointAtHook")


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointSaveHook):
    """MMEngine's ``CheckpointHook`` with atomic writes (:func:`save_checkpoint_atomically`).

    The same arguments and file names as ``CheckpointHook``; in a config::

        default_hooks = dict(checkpoint=dict(type="AtomicCheckpointHook", by_epoch=False,
                                             interval=8000))

    (Best-metric checkpoints, ``save_best``, are written by MMEngine as before.)
    """

    def save_with_step(self, runner: Any, step: int, meta: dict) -> None:
        """Write the checkpoint named after ``step`` atomically."""
        save_checkpoint_atomically(self, runner, step, meta)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Stop after the current iteration on SIGTERM / SIGUSR1, with a checkpoint; exit 75.

    The signals only set a flag (:class:`~budgeted.safety.preemption.PreemptionGuard`); after each
    training iteration the flag is all-reduced over the ranks (every ``interval`` iterations), and
    once set rank 0 writes ``iter_<N>.pth`` and ``last_checkpoint`` atomically, prints one line,
    and :class:`~budgeted.safety.preemption.Preempted` ends the run. Iteration-based loops only.

    In a config: ``custom_hooks = [dict(type="PreemptionHook")]``.
    """

    priority = "VERY_LOW"

    def __init__(self, prog: str = "PreemptionHook", interval: int = 1) -> None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            raise ValueError(
                f"PreemptionHook: interval={interval!r} is invalid; allowed: an int >= 1"
            )
        self.prog = prog
        self.interval = interval
        self._policy: PreemptionPolicy | None = None
        self._stop: tuple[int, int, str | None] | None = None

    def _say(self, runner: Any, text: str) -> None:
        _say(self.prog, runner, text)

    def _release(self) -> str | None:
        cost = self._policy.end() if self._policy is not None else None
        self._policy = None
        return cost

    # --- hook points (the policy: budgeted.safety.preemption.PreemptionPolicy) -------------

    def before_run(self, runner: Any) -> None:
        self._stop = None
        if built_train_loop(runner) is None:
            return  # runner.val() / runner.test(): SIGTERM keeps its usual meaning
        self._policy = PreemptionPolicy(interval=self.interval)  # from here on, loading the
        self._policy.take_guard()  # checkpoint too, a signal is a flag

    def before_train(self, runner: Any) -> None:
        loop = runner.train_loop
        if not isinstance(loop, IterBasedTrainLoop):
            self._release()
            raise ValueError(
                f"PreemptionHook needs an IterBasedTrainLoop, got {type(loop).__name__}: a run "
                "stopped inside an epoch would restart that epoch on resume; remove the hook or "
                "train by iterations (train_cfg=dict(type='IterBasedTrainLoop', max_iters=...))"
            )
        if self._policy is None:
            self._policy = PreemptionPolicy(interval=self.interval)
        signum = self._policy.begin()
        if signum:  # preempted while the runner was being built or the checkpoint loaded
            self._say(
                runner,
                f"preempted by {signal_name(signum)} before iteration {runner.iter + 1} of "
                f"{loop.max_iters}: nothing new to save; exit status {PREEMPTED_EXIT_CODE}, "
                "continue with --resume",
            )
            self._release()
            raise Preempted(f"preempted by {signal_name(signum)}", signum)

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        if self._stop is not None or self._policy is None:
            return
        loop = runner.train_loop
        done = runner.iter + 1  # iterations trained (runner.iter counts up after the hooks)
        save = functools.partial(self._save, runner)
        stop = preempted_after(self._policy, done, loop.max_iters, save, barrier)
        if stop is None:
            return
        signum, path = stop
        self._stop = (signum, done, path)
        loop.stop_training = True
        loop.val_begin = _NO_VALIDATION
        self._say(
            runner,
            f"preempted by {signal_name(signum)} at iteration {done} of {loop.max_iters}: "
            f"saved {path}; exit status {PREEMPTED_EXIT_CODE}, continue with --resume",
        )

    def after_train(self, runner: Any) -> None:
        policy = self._policy
        if policy is not None and policy.syncs:
            runner.logger.info(
                f"PreemptionHook: {policy.syncs} all-reduced preemption checks over "
                f"{get_world_size()} ranks, {1e3 * policy.sync_seconds / policy.syncs:.3f} ms "
                "each on average"
            )

    def after_run(self, runner: Any) -> None:
        self._release()
        if self._stop is not None:
            signum, done, _ = self._stop
            raise Preempted(f"preempted by {signal_name(signum)} at iteration {done}", signum)

    # --- the checkpoint ---------------------------------------------------------------------

    def _save(self, runner: Any, step: int) -> str:
        return save_checkpoint_now(runner, step, "PreemptionHook")


def _base_lr(runner: Any) -> float | None:
    """The base LR in use: the runner's LR schedulers' ``base_values`` (what they multiply: a
    resumed checkpoint's, not the config's), else the param groups' ``initial_lr`` (``lr``
    without a scheduler); the largest, or the first that is not finite
    (:func:`~budgeted.schedules.base_lrs.base_lr_in_use`); the first optimizer's with several
    (``OptimWrapperDict``)."""
    schedulers = getattr(runner, "param_schedulers", None)
    if isinstance(schedulers, Mapping):
        schedulers = next(iter(schedulers.values()), None)
    values = [
        value
        for scheduler in (schedulers if isinstance(schedulers, list) else [])
        if getattr(scheduler, "param_name", None) == "lr"
        for value in getattr(scheduler, "base_values", [])
    ]
    wrapper = runner.optim_wrapper
    first = next(iter((getattr(wrapper, "optim_wrappers", None) or {"": wrapper}).values()))
    return base_lr_of(
        values, getattr(getattr(first, "optimizer", None), "param_groups", None) or []
    )


@HOOKS.register_module()
class DivergenceHook(Hook):
    """End the run at the first iteration whose training loss is NaN or infinite; exit 3.

    After each training iteration the ranks agree on the worst loss (:func:`agree_max`), so all
    stop after the same iteration; rank 0 prints one line naming the iteration and the base LR,
    and every rank raises :class:`Diverged`: no checkpoint of that iteration, no validation.

    In a config: ``custom_hooks = [dict(type="DivergenceHook")]``.
    """

    priority = "LOW"

    def __init__(self, prog: str = "DivergenceHook") -> None:
        self.prog = prog

    def after_train_iter(
        self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None
    ) -> None:
        what = NON_FINITE.get(agree_max(loss_code(outputs)))
        if what is None:
            return
        stop = diverged(
            what,
            runner.iter + 1,
            _base_lr(runner),
            "lower the base LR (optim_wrapper.optimizer.lr) or clip the gradients (optim_wrapper."
            "clip_grad=dict(max_norm=...)); stopped before any checkpoint or validation of it, the "
            f"run is not a result (exit status {DIVERGED_EXIT_CODE})",
        )
        _say(self.prog, runner, stop.message)
        raise stop

"""The framework-free core of the budgeted-convergence diagnostics (budgeted.control.grad_norm):
the norm is the one computed by hand, and nothing the training depends on changes."""

from __future__ import annotations

import doctest
import importlib
import math
import random

import numpy as np
import pytest
import torch
from torch import nn

import budgeted.control.grad_norm as gn
from budgeted.control.grad_norm import (
    GradNormProbe,
    check_count,
    first_batches,
    full_gradient_norm,
    model_devices,
    preserved_rng,
    unwrap_model,
)
from budgeted.errors import BudgetConfigError


def mse(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return (model(x) - y).pow(2).mean()


def make_net(dropout: float = 0.5) -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 1)
    )


def make_batches(n: int = 3, size: int = 4, seed: int = 2) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(size, 3, generator=g), torch.randn(size, 1, generator=g)) for _ in range(n)
    ]


@pytest.mark.unit
def test_linear_regression_by_hand():
    """L_b = mean((X_b w - y_b)^2): grad_b = (2 / n) X_b^T (X_b w - y_b); the norm of their mean."""
    net = nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[0.5, -1.0, 2.0]]))
    batches = make_batches(n=3, size=5)
    w = net.weight.detach().double().reshape(3, 1)
    grads = []
    for x, y in batches:
        x, y = x.double(), y.double()
        grads.append(2.0 / len(x) * x.T @ (x @ w - y))
    expected = math.sqrt(float(sum(grads).div(len(grads)).pow(2).sum()))
    assert full_gradient_norm(net, batches, mse) == pytest.approx(expected, rel=1e-6)


@pytest.mark.unit
def test_equals_backward_of_the_mean_loss_in_training_mode():
    """With BatchNorm and dropout: the norm of the .grad that backward() of the mean loss over
    the batches leaves, the model in training mode and the generators seeded with the seed."""
    batches = make_batches()
    net = make_net()
    reference = make_net()
    reference.train()
    torch.manual_seed(0)
    loss = sum(mse(reference, b) for b in batches) / len(batches)
    loss.backward()
    expected = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in reference.parameters()))
    assert full_gradient_norm(net, batches, mse, seed=0) == pytest.approx(expected, rel=1e-6)


def snapshot(net: nn.Module) -> dict[str, object]:
    return {
        "params": [p.detach().clone() for p in net.parameters()],
        "grads": [p.grad for p in net.parameters()],
        "grad_values": [None if p.grad is None else p.grad.clone() for p in net.parameters()],
        "buffers": {k: v.clone() for k, v in net.named_buffers()},
        "buffer_ids": {k: id(v) for k, v in net.named_buffers()},
        "training": net.training,
    }


def assert_untouched(net: nn.Module, before: dict[str, object]) -> None:
    after = snapshot(net)
    assert all(torch.equal(a, b) for a, b in zip(before["params"], after["params"]))
    assert all(a is b for a, b in zip(before["grads"], after["grads"]))  # the same objects
    for a, b in zip(before["grad_values"], after["grad_values"]):
        assert (a is None and b is None) or torch.equal(a, b)
    assert before["buffers"].keys() == after["buffers"].keys()
    assert {"1.running_mean", "1.running_var", "1.num_batches_tracked"} <= set(after["buffers"])
    for key, value in before["buffers"].items():
        assert torch.equal(value, after["buffers"][key]), key  # bitwise
    assert before["buffer_ids"] == after["buffer_ids"]  # restored in place
    assert before["training"] == after["training"]


def rng_states() -> tuple:
    """python's, numpy's and torch's CPU generator states, comparable with ==."""
    return random.getstate(), str(np.random.get_state()), torch.get_rng_state().tolist()


@pytest.mark.unit
@pytest.mark.parametrize("training", [True, False])
def test_weights_grads_optimizer_buffers_rng_and_mode_are_untouched(training: bool):
    net = make_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    batches = make_batches()
    mse(net, batches[0]).backward()  # a training step: grads, momentum, BN statistics
    opt.step()
    mse(net, batches[1]).backward()  # grads of the next step, not applied yet
    net.train(training)
    before = snapshot(net)
    opt_state = {k: {n: t.clone() for n, t in v.items()} for k, v in opt.state.items()}
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    rng = rng_states()

    value = full_gradient_norm(net, batches, mse)

    assert math.isfinite(value) and value > 0
    assert rng_states() == rng
    assert_untouched(net, before)
    assert opt.state.keys() == opt_state.keys()
    for k, v in opt.state.items():
        assert all(torch.equal(t, opt_state[k][n]) for n, t in v.items())
    # the next draws are those the training would have made without the call
    draws = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    assert draws == (random.random(), float(np.random.rand()), float(torch.rand(1)))


@pytest.mark.unit
def test_training_after_an_evaluation_is_bitwise_the_same():
    """Two copies trained 3 SGD steps with dropout and BatchNorm; one evaluates the norm after
    every step: the weights and buffers stay bitwise equal."""
    batches = make_batches(n=3)
    nets = [make_net(), make_net()]
    torch.manual_seed(7)
    states = [torch.get_rng_state()] * 2
    for i, net in enumerate(nets):
        torch.set_rng_state(states[i])
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for batch in batches:
            opt.zero_grad()
            mse(net, batch).backward()
            opt.step()
            if i == 1:
                full_gradient_norm(net, batches[:2], mse)
    for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.unit
def test_same_weights_same_norm_and_the_seed_fixes_dropout():
    net, batches = make_net(), make_batches()
    first = full_gradient_norm(net, batches, mse, seed=3)
    assert full_gradient_norm(net, batches, mse, seed=3) == first
    assert full_gradient_norm(net, batches, mse, seed=4) != first  # other dropout masks
    no_dropout = make_net(dropout=0.0)
    torch.manual_seed(9)
    a = full_gradient_norm(no_dropout, batches, mse, seed=None)
    assert full_gradient_norm(no_dropout, batches, mse, seed=None) == a


@pytest.mark.unit
def test_a_loss_that_changes_its_batch_in_place_sees_the_same_batch_each_time():
    net = nn.Linear(3, 1)
    batches = make_batches(n=2)

    def pads_in_place(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        x.mul_(2.0)  # as MMSegmentation's preprocessor pads the data samples in place
        return mse(model, (x, y))

    originals = [tuple(t.clone() for t in b) for b in batches]
    first = full_gradient_norm(net, batches, pads_in_place)
    assert full_gradient_norm(net, batches, pads_in_place) == first
    assert all(torch.equal(a, b) for o, n in zip(originals, batches) for a, b in zip(o, n))


@pytest.mark.unit
def test_an_error_in_the_loss_restores_everything():
    net = make_net()
    net.eval()
    mse(net.train(), make_batches()[0]).backward()
    net.eval()
    before = snapshot(net)
    rng = rng_states()
    calls = []

    def fails_second(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        calls.append(model.training)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return mse(model, batch)

    with pytest.raises(RuntimeError, match="boom"):
        full_gradient_norm(net, make_batches(), fails_second)
    assert calls == [True, True]  # evaluated in training mode
    assert rng_states() == rng
    assert_untouched(net, before)


@pytest.mark.unit
def test_unused_parameters_count_as_zero_and_frozen_ones_are_left_out():
    net = nn.ModuleDict({"used": nn.Linear(3, 1), "unused": nn.Linear(3, 1)})
    frozen = nn.Linear(3, 1)
    frozen.requires_grad_(False)
    net["frozen"] = frozen
    batches = make_batches(n=2)

    def loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return (model["used"](x) + model["frozen"](x) - y).pow(2).mean()

    only_used = nn.ModuleDict({"used": net["used"], "frozen": frozen})
    assert full_gradient_norm(net, batches, loss) == full_gradient_norm(only_used, batches, loss)


@pytest.mark.unit
def test_bad_input_is_one_line():
    net = nn.Linear(3, 1)
    with pytest.raises(ValueError, match="at least one batch"):
        full_gradient_norm(net, [], mse)
    with pytest.raises(ValueError, match="no parameter with requires_grad"):
        full_gradient_norm(nn.Linear(3, 1).requires_grad_(False), make_batches(), mse)
    with pytest.raises(
        ValueError, match=r"scalar tensor with a gradient; got Tensor of shape \(4, 1\)"
    ):
        full_gradient_norm(net, make_batches(), lambda m, b: m(b[0]))
    with pytest.raises(ValueError, match="got float"):
        full_gradient_norm(net, make_batches(), lambda m, b: 1.0)
    with pytest.raises(ValueError, match=r"num_batches=0 is invalid; allowed: an int >= 1"):
        first_batches(lambda: [1, 2], 0)
    with pytest.raises(ValueError, match="gave 2 batches, fewer than num_batches=3"):
        first_batches(lambda: [1, 2], 3)


@pytest.mark.unit
def test_first_batches_reads_a_loader_of_its_own_without_touching_the_generators():
    dataset = torch.utils.data.TensorDataset(torch.arange(20.0))
    made = []

    def make_loader() -> torch.utils.data.DataLoader:
        made.append(np.random.randint(1000))  # a sampler drawing its seed from numpy
        return torch.utils.data.DataLoader(dataset, batch_size=2, shuffle=True)

    rng = rng_states()
    first = first_batches(make_loader, 3, seed=0)
    assert rng_states() == rng
    again = first_batches(make_loader, 3, seed=0)
    assert len(first) == 3 and made[0] == made[1]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again))  # the same subset


@pytest.mark.unit
def test_preserved_rng_restores_after_an_error_and_helpers():
    rng = rng_states()
    with pytest.raises(KeyError), preserved_rng(seed=1):
        torch.rand(3)
        raise KeyError
    assert rng_states() == rng
    net = nn.Linear(2, 1)
    assert unwrap_model(nn.DataParallel(nn.DataParallel(net))) is net
    assert model_devices(net) == []


# --- the probe every framework's FullGradNormHook is -----------------------------------------


def train_with(probe: GradNormProbe | None, iters: int = 7) -> tuple[nn.Module, dict[int, float]]:
    """A plain training loop (dropout, BatchNorm, momentum, batches drawn from the global
    generators); the probe, if any, measured after each iteration it is due."""
    net = make_net()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(3)
    if probe is not None:
        probe.draw(lambda: make_batches(n=4, seed=9), nn.DataParallel(net))
    values = {}
    for done in range(1, iters + 1):
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        opt.zero_grad()
        mse(net, (x, y)).backward()
        opt.step()
        if probe is not None and probe.due(done, iters):
            values[done] = probe.measure(nn.DataParallel(net), mse)[0]
    return net, values


@pytest.mark.unit
def test_a_probe_measures_on_its_period_and_after_the_last_leaving_training_as_it_was():
    probe = GradNormProbe(period=3, num_batches=2, seed=0)
    plain, _ = train_with(None)
    net, values = train_with(probe)
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(),
                                                 net.state_dict().values()))  # fmt: skip
    assert sorted(values) == [3, 6, 7]
    assert probe.evaluations == 3 and probe.seconds > 0
    # the subset was drawn once: the value is the norm over the loader's first two batches
    assert values[7] == full_gradient_norm(net, make_batches(n=4, seed=9)[:2], mse, seed=0)
    assert probe.line(values[7], 0.125, 7) == (
        f"GradNormProbe: full_grad_norm={values[7]:.6g} after iteration 7 (2 batches, 0.12 s)"
    )
    assert probe.finish() == (
        f"GradNormProbe: 3 evaluations of 2 batches, {probe.seconds / 3:.2f} s each on average"
    )
    assert probe.batches is None
    assert GradNormProbe(period=1).finish() is None  # nothing measured: no summary


@pytest.mark.unit
def test_a_probe_refuses_in_its_owners_words():
    for kwargs, line in (
        (dict(period=0), "GradNormProbe: period=0 is invalid; allowed: an int >= 1"),
        (dict(period=True, owner="FullGradNormHook", period_key="interval"),
         "FullGradNormHook: interval=True is invalid; allowed: an int >= 1"),
        (dict(period=2, num_batches=1.5, owner="FullGradNormHook"),
         "FullGradNormHook: num_batches=1.5 is invalid; allowed: an int >= 1"),
    ):  # fmt: skip
        with pytest.raises(BudgetConfigError) as err:
            GradNormProbe(**kwargs)
        assert str(err.value) == line
    with pytest.raises(BudgetConfigError, match=r"^X: seed=-1 is invalid; allowed: an int >= 0$"):
        check_count("X", "seed", -1, 0)
    probe = GradNormProbe(period=2, owner="FullGradNormHook")
    with pytest.raises(RuntimeError, match=r"^FullGradNormHook: before_train has not drawn"):
        probe.measure(nn.Linear(3, 1), mse)
    with pytest.raises(ValueError, match="gave 1 batches, fewer than num_batches=2"):
        probe.draw(lambda: make_batches(n=1), nn.Linear(3, 1))
    assert probe.batches is None and probe.evaluations == 0


@pytest.mark.unit
def test_a_framework_words_its_own_measured_line():
    class Quiet(GradNormProbe):
        MEASURED = "{name}: {value:.6g} after iteration {done} ({batches} batches, {seconds:.2f} s)"

    probe = Quiet(period=1, num_batches=1, name="gn")
    probe.draw(lambda: make_batches(n=1), nn.Linear(3, 1))
    assert probe.line(1.5, 2.0, 4) == "gn: 1.5 after iteration 4 (1 batches, 2.00 s)"


@pytest.mark.unit
def test_docstring_examples_run():
    result = doctest.testmod(gn, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.unit
@pytest.mark.parametrize("old", ["budgeted.experiments.grad_norm", "budgeted.grad_norm"])
def test_an_old_path_is_this_module(old):
    assert importlib.import_module(old) is gn


# --- several processes: the gradients are averaged over the ranks ---------------------------


def _rank_norm(rank: int, init: str, out: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        net = make_net(dropout=0.0)
        batches = make_batches(n=4)[2 * rank : 2 * rank + 2]  # each rank its own two batches
        value = full_gradient_norm(net, batches, mse)
        local = full_gradient_norm(net, batches, mse, all_reduce=False)
        torch.save({"value": value, "local": local}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


@pytest.mark.e2e
def test_two_ranks_give_the_norm_over_all_their_batches(tmp_path):
    import torch.multiprocessing as mp

    out = str(tmp_path / "norm")
    mp.spawn(_rank_norm, args=(f"file://{tmp_path}/init", out), nprocs=2, join=True)
    results = [torch.load(f"{out}.{rank}") for rank in range(2)]
    net = make_net(dropout=0.0)
    batches = make_batches(n=4)
    expected = full_gradient_norm(net, batches, mse)
    assert results[0]["value"] == results[1]["value"]  # the same on every rank
    assert results[0]["value"] == pytest.approx(expected, rel=1e-6)
    assert results[0]["local"] == pytest.approx(full_gradient_norm(net, batches[:2], mse))
    assert results[1]["local"] == pytest.approx(full_gradient_norm(net, batches[2:], mse))

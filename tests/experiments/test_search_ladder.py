"""The budget ladder's arithmetic (budgeted.experiments.search.ladder, .space): the rungs a search
budget buys, the best LR of a rung, its trend across budgets, the cells of each step as a pure
function of the trials so far, the widening at an edge; the search budget and LR range read."""

from __future__ import annotations

import math

import pytest

from budgeted.errors import SweepError
from budgeted.experiments.search.ladder import PRIOR_ALPHA, Ladder, Trial, best_lr, trend
from budgeted.experiments.search.space import (
    SearchBudget,
    lattice_index,
    lr_grid,
    parse_lr_range,
    snap,
)

pytestmark = pytest.mark.unit


def ladder(schedules=("linear",), runs=4.0, target=0.1, full=1720, warmup=0, low=0.01, high=1.0):
    return Ladder(target, full, warmup, tuple(schedules), low, high, runs)


def run(cells, value):
    """Trials of ``cells``, each with ``value(cell)`` (None: it diverged)."""
    return [Trial(c.schedule, c.budget, c.lr, c.seed, value(c), round(c.budget * 1720))
            for c in cells]  # fmt: skip


def peaked(best_at_target: float, alpha: float = 0.5):
    """A smooth response: the best LR falls as budget**-alpha from ``best_at_target`` at 0.1;
    the value falls with the squared log distance from it."""

    def value(cell):
        best = best_at_target * (cell.budget / 0.1) ** -alpha
        return 100 - 20 * math.log10(cell.lr / best) ** 2

    return value


def test_the_lattice_holds_the_usual_half_decades_and_snaps_to_its_points():
    assert lr_grid(0.01, 1.0) == [0.01, 0.03, 0.1, 0.3, 1.0]
    assert lr_grid(0.0001, 0.01, per_decade=1) == [0.0001, 0.001, 0.01]
    assert snap(0.29) == 0.3 and snap(0.11) == 0.1 and snap(7e-4) == 7.5e-4
    assert [lattice_index(x) for x in (1.0, 3.0, 0.1)] == [0, 4, -8]


def test_the_richest_ladder_the_budget_buys_is_planned_and_costs_at_most_the_budget():
    one = ladder(runs=4.0)
    assert [(r.budget, r.iters, r.schedules, r.lrs) for r in one.rungs] == [
        (0.00625, 11, 1, 5), (0.025, 43, 1, 3), (0.1, 172, 1, 2)
    ]  # fmt: skip
    five = ladder(("linear", "step", "cosine", "wsd", "schedulefree"), runs=4.0)
    assert five.cost <= 4.0 and [r.schedules for r in five.rungs] == [5, 2, 1]
    for runs in (1.5, 2.0, 3.0, 8.0):
        assert ladder(runs=runs).cost <= runs
    assert not ladder(runs=1.0).fits and ladder(runs=1.0).smallest_runs() > 1.0
    # no rung below the target decays over fewer than 8 iterations after the warmup: with a
    # long warmup, the ladder is the target rung alone (a grid of its LRs)
    short = ladder(target=0.05, warmup=80)
    assert [(r.budget, r.lrs) for r in short.rungs] == [(0.05, 3)], short.rungs
    assert [r.iters for r in ladder(target=0.25, warmup=80).rungs] == [108, 430]


def test_best_lr_is_the_vertex_near_the_best_tried_and_the_edge_at_an_edge():
    assert best_lr([(0.1, 90.0), (0.3, 94.0), (1.0, 90.0)])[0] == pytest.approx(10**-0.5)
    assert 0.1 < best_lr([(0.1, 93.0), (0.3, 94.0), (1.0, 90.0)])[0] < 0.3
    assert best_lr([(0.1, 95.0), (0.3, 94.0), (1.0, 90.0)]) == (0.1, 95.0)  # an edge
    assert best_lr([(0.1, None), (0.3, 50.0), (1.0, None)]) == (0.3, 50.0)  # diverged around


def test_the_trend_is_the_prior_with_one_rung_and_the_data_with_many():
    assert trend([(0.1, 0.3)]) == PRIOR_ALPHA
    far = [(10.0**-k, 10.0 ** (-1 + k)) for k in range(6)]  # alpha 1 over five decades
    assert trend(far) == pytest.approx(1.0, abs=0.01)
    two = trend([(0.025, 0.4), (0.1, 0.1)])  # alpha 1 measured over one ladder step
    assert PRIOR_ALPHA < two < 1.0


@pytest.mark.parametrize("truth", [0.03, 0.1, 0.3])
def test_on_a_smooth_response_the_ladder_lands_near_the_best_lr_and_spends_its_plan(truth):
    lad, trials = ladder(runs=4.0), []
    while cells := lad.next_cells(trials):
        trials += run(cells, peaked(truth))
    schedule, lr, _ = lad.choice(trials)
    assert schedule == "linear" and abs(math.log10(lr / truth)) <= 0.25, (truth, lr)
    spent = sum(t.iterations for t in trials) / 172
    assert spent <= 4.0 + 1e-9, spent
    assert lad.next_cells(trials) == []  # done: the same trials plan nothing more


def test_a_best_at_the_grids_edge_widens_it_by_a_step_while_the_budget_lasts():
    lad, trials = ladder(runs=4.0, low=0.01, high=0.1), []
    first = lad.next_cells(trials)
    assert [c.lr for c in first] == [0.01, 0.03, 0.1]
    trials += run(first, peaked(0.3))  # the best is above the range
    widened = lad.next_cells(trials)
    assert [(c.budget, c.lr) for c in widened] == [(0.00625, 0.3)]


def test_the_next_cells_are_a_function_of_the_trials_alone():
    lad, trials = ladder(("linear", "cosine"), runs=4.0), []
    plans = []
    while cells := lad.next_cells(trials):
        plans.append(cells)
        assert lad.next_cells(trials) == cells  # asked again: the same (a resumed search)
        trials += run(cells, peaked(0.1))
    assert {c.schedule for c in plans[0]} == {"linear", "cosine"}
    assert len({c.schedule for c in plans[-1]}) == 1  # one schedule reaches the target


def test_a_search_budget_is_runs_iterations_or_time_and_never_below_one_run():
    assert SearchBudget.parse("3x", 172).iters == 516
    assert SearchBudget.parse("400", 172).runs == pytest.approx(400 / 172)
    assert (
        SearchBudget.parse("2h", 172).seconds == 7200
        and SearchBudget.parse("2h", 172).iters is None
    )
    for text in ("0.5x", "100", "0x"):
        with pytest.raises(SweepError, match="smaller than one target run"):
            SearchBudget.parse(text, 172)
    for text in ("x", "nanx", "-1", "fast"):
        with pytest.raises(SweepError, match=r"--search-budget .* is invalid"):
            SearchBudget.parse(text, 172)


@pytest.mark.parametrize(
    ("texts", "says"),
    [(["0.1", "0.01"], "is inverted"), (["0", "1"], "is not a positive number"),
     (["nan", "1"], "is not a positive number"), (["a", "1"], "is not a positive number")],
)  # fmt: skip
def test_an_empty_or_inverted_lr_range_is_one_line(texts, says):
    with pytest.raises(SweepError, match=says):
        parse_lr_range(texts)


def test_an_lr_run_twice_at_a_budget_counts_once_with_its_mean():
    """A random search may draw one LR twice: the vertex is still defined (no division by 0)."""
    lr, value = best_lr([(0.0877, 96.0), (0.0877, 97.0), (0.3, 90.0), (0.01, 80.0)])
    assert value == 96.5 and 0.01 < lr < 0.3

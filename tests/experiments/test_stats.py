"""budgeted.experiments.stats: mean ± std, paired t-intervals, verdicts and the best LR, by hand."""

from __future__ import annotations

import math

import pytest

from budgeted.experiments.stats import (
    Interval,
    best_lr,
    decimals,
    paired_difference,
    summarize,
    t_quantile_975,
    verdict,
)

pytestmark = pytest.mark.unit


def test_summarize_is_the_sample_mean_and_std():
    values = [40.0, 43.0, 46.0]
    s = summarize(values)
    assert (s.mean, s.n) == (43.0, 3)
    assert s.std == pytest.approx(math.sqrt(((3**2) * 2) / 2))  # sum of squares / (n - 1)
    assert s.text() == "43.00 ± 3.00 (3)"
    assert summarize([41.5]).std is None and summarize([41.5]).text() == "41.50"
    with pytest.raises(ValueError, match="no values to summarize"):
        summarize([])


def test_t_quantiles_match_the_tables():
    assert [t_quantile_975(df) for df in (1, 2, 4, 10, 30)] == [12.706, 4.303, 2.776, 2.228, 2.042]
    # beyond the table: Student's t, not the normal 1.96 (scipy.stats.t.ppf(0.975, df))
    assert [t_quantile_975(df) for df in (31, 40, 60, 120, 10**6)] == [
        2.040,
        2.021,
        2.000,
        1.980,
        1.960,
    ]
    with pytest.raises(ValueError, match="degrees of freedom 0 is invalid"):
        t_quantile_975(0)
    with pytest.raises(ValueError, match=r"degrees of freedom 2\.5 is invalid"):
        t_quantile_975(2.5)


def test_interval_over_many_seeds_uses_students_t():
    """40 pairs: the half-width is t(0.975, 39) = 2.023 standard errors, not 1.96."""
    diffs = [1.0 + (-1) ** k * (k % 7) / 3 for k in range(40)]
    interval = paired_difference(dict(enumerate(diffs)), dict.fromkeys(range(40), 0.0))
    sd = math.sqrt(sum((d - interval.mean) ** 2 for d in diffs) / 39)
    assert interval.high - interval.mean == pytest.approx(2.023 * sd / math.sqrt(40))


def test_paired_difference_uses_common_seeds_only():
    a = {0: 50.0, 1: 52.0, 2: 51.0, 3: 99.0}
    b = {0: 48.0, 1: 49.0, 2: 50.0}  # seed 3 ran only for a: not a pair
    interval = paired_difference(a, b)
    diffs = [2.0, 3.0, 1.0]
    half = 4.303 * 1.0 / math.sqrt(3)
    assert interval == Interval(2.0, pytest.approx(2.0 - half), pytest.approx(2.0 + half), 3)
    assert verdict(interval, "linear", "step") == "within noise"
    assert sum(diffs) / 3 == interval.mean
    assert paired_difference({0: 1.0}, {1: 1.0}) is None
    one = paired_difference({0: 3.0}, {0: 1.0})
    assert one.text() == "+2.00 (1)" and verdict(one, "a", "b") == "one seed: no interval"


def test_verdicts_follow_the_sign_of_the_interval():
    clear = paired_difference({0: 50.0, 1: 51.0, 2: 52.0}, {0: 45.0, 1: 45.5, 2: 46.0})
    assert clear.low > 0 and verdict(clear, "linear", "step") == "linear ahead"
    behind = paired_difference({0: 45.0, 1: 45.5, 2: 46.0}, {0: 50.0, 1: 51.0, 2: 52.0})
    assert verdict(behind, "linear", "step") == "step ahead"
    assert verdict(None, "linear", "step") == "no common seed"


def test_best_lr_is_the_best_mean_and_flags_the_edges():
    assert best_lr({0.03: [30.0, 40.0], 0.1: [36.0, 36.0], 0.3: [20.0]}) == (0.1, False)
    assert best_lr({0.03: [30.0], 0.1: [20.0], 0.3: [10.0]}) == (0.03, True)
    assert best_lr({0.03: [30.0], 0.1: [], 0.3: [31.0]}) == (0.3, True)  # no finished run at 0.1
    assert best_lr({None: [30.0]}) == (None, False)  # the config's own LR: no grid, no edge
    with pytest.raises(ValueError, match="no finished runs"):
        best_lr({0.1: []})


def test_no_verdict_from_two_pairs_or_equal_differences():
    """Issue 52/8: two pairs (one degree of freedom) and differences all equal (a zero-width
    interval, equal but for float rounding too) are not resolved, whatever their sign."""
    two = paired_difference({0: 91.0, 1: 92.0}, {0: 90.0, 1: 91.0})
    assert (two.low, two.high, two.resolved) == (1.0, 1.0, False)
    assert verdict(two, "linear", "step") == "not resolved: 2 seeds (3 needed)"
    wide = paired_difference({0: 95.0, 1: 99.0}, {0: 90.0, 1: 91.0})
    assert verdict(wide, "linear", "step") == "not resolved: 2 seeds (3 needed)"
    same = paired_difference({0: 97.23, 1: 96.89, 2: 97.57}, {0: 96.89, 1: 96.55, 2: 97.23})
    assert same.low == same.high == same.mean and not same.resolved
    assert verdict(same, "linear", "step") == "not resolved: every difference equal"
    three = paired_difference({0: 50.0, 1: 51.0, 2: 52.0}, {0: 45.0, 1: 45.5, 2: 46.0})
    assert three.resolved and verdict(three, "linear", "step") == "linear ahead"


def test_decimals_follow_the_metrics_scale():
    """Four significant digits of the largest value, at least two decimals."""
    assert [decimals(v) for v in ([97.12], [100.0], [0.9712], [0.05, 0.01], [1234.5], [])] == [
        2, 2, 4, 5, 2, 2
    ]  # fmt: skip
    assert summarize([0.9712, 0.9743]).text(decimals([0.9743])) == "0.9728 ± 0.0022 (2)"

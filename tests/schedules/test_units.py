"""Budgets stated as fractions, iterations, epochs or images, in iterations."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from budgeted import BUDGET_FRACTIONS, budget_iters

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [(0.01, 900), (0.05, 4500), (0.1, 9000), (0.25, 22500), (0.5, 45000), (1.0, 90000)],
)
def test_fractions_of_the_1x_schedule(fraction, expected):
    assert budget_iters(fraction=fraction, full_iters=90000) == expected


def test_paper_fractions():
    assert BUDGET_FRACTIONS == (0.01, 0.05, 0.1, 0.25, 0.5, 1.0)


def test_iters_epochs_and_images():
    assert budget_iters(iters=1234) == 1234
    # 12 epochs of COCO train2017 (117266 images) at 16 images per iteration.
    assert budget_iters(epochs=12, dataset_size=117266, batch_size=16) == 87950
    assert budget_iters(epochs=0.5, dataset_size=10, batch_size=4) == 2  # ceil(5 / 4)
    assert budget_iters(images=1_440_000, batch_size=16) == 90000
    assert budget_iters(images=17, batch_size=16) == 2
    # floating-point noise does not add an iteration: 1.1 * 50000 = 55000.000000000007
    assert budget_iters(epochs=1.1, dataset_size=50000, batch_size=1) == 55000
    assert budget_iters(epochs=0.55, dataset_size=100, batch_size=1) == 55


def test_numpy_numbers_are_accepted_and_give_a_plain_int():
    np = pytest.importorskip("numpy")
    total = budget_iters(fraction=np.float64(0.1), full_iters=np.int64(90000))
    assert total == 9000 and type(total) is int
    assert budget_iters(epochs=np.float32(2), dataset_size=np.int64(1000), batch_size=16) == 125


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"exactly one of iters, fraction, epochs, images; got none"),
        ({"iters": 5, "fraction": 0.1}, r"got \['iters', 'fraction'\]"),
        (
            {"fraction": 0, "full_iters": 90000},
            r"budget fraction=0 is invalid; allowed: a number > 0",
        ),
        ({"fraction": -0.1, "full_iters": 90000}, r"fraction=-0.1 is invalid"),
        ({"fraction": 0.1}, r"full_iters=None is invalid; allowed: a whole number > 0"),
        ({"fraction": 1e-6, "full_iters": 1000}, r"fraction=1e-06 is less than one iteration"),
        ({"iters": 2.5}, r"iters=2.5 is invalid; allowed: a whole number > 0"),
        ({"epochs": 1, "dataset_size": 100}, r"batch_size=None is invalid"),
        ({"images": 0, "batch_size": 2}, r"images=0 is invalid"),
        ({"iters": True}, r"iters=True is invalid"),
        (
            {"iters": 100, "batch_size": 16},
            r"^a budget of iters does not use batch_size; allowed with it: nothing else$",
        ),
        (
            {"images": 100, "batch_size": 16, "dataset_size": 3},
            r"^a budget of images does not use dataset_size; allowed with it: batch_size$",
        ),
        ({"fraction": 0.1, "full_iters": 900, "batch_size": 2}, r"fraction does not use"),
    ],
)
def test_bad_budgets(kwargs, message):
    with pytest.raises(ValueError, match=message):
        budget_iters(**kwargs)


INEXACT = [(0.29, 100), (0.57, 100), (0.07, 300), (0.035, 200), (0.009, 90000), (0.043, 80000)]
"""Fractions x full schedules whose product floating point does not give exactly: 0.29 * 100
is 28.999999999999996, 0.07 * 300 is 21.000000000000004, ..."""


def exact(fraction: float) -> Fraction:
    return Fraction(repr(fraction))  # the decimal the user wrote, not its binary approximation


def test_the_inexact_cases_are_inexact():
    """Guard: each case really is off an integer in floating point, so the tests below would
    catch a truncation (``int``) or a ceiling in place of rounding."""
    for fraction, full in INEXACT:
        product = fraction * full
        assert product != round(product) and exact(fraction) * full == round(product)
    assert any(int(f * n) != round(f * n) for f, n in INEXACT)
    assert any(math.ceil(f * n) != round(f * n) for f, n in INEXACT)


@pytest.mark.parametrize(("fraction", "full"), INEXACT)
def test_a_fraction_is_rounded_to_the_nearest_iteration_not_truncated(fraction, full):
    assert budget_iters(fraction=fraction, full_iters=full) == exact(fraction) * full


@pytest.mark.parametrize(("epochs", "dataset_size"), INEXACT)
def test_epochs_whose_images_are_inexact_give_the_exact_ceiling(epochs, dataset_size):
    for batch in (1, 2, 7):
        expected = math.ceil(exact(epochs) * dataset_size / batch)
        assert budget_iters(epochs=epochs, dataset_size=dataset_size, batch_size=batch) == expected


def test_images_are_exact_integers():
    for images, batch in [(2900, 100), (2901, 100), (29, 1), (7, 3)]:
        assert budget_iters(images=images, batch_size=batch) == -(-images // batch)


@pytest.mark.parametrize(("fraction", "full"), INEXACT)
def test_a_family_budget_is_rounded_too(fraction, full):
    from dataclasses import replace

    from budgeted.experiments.families import family

    fam = replace(family("mmseg"), full_iters=full)
    assert fam.iters(fraction) == exact(fraction) * full


WHOLE = "allowed: a whole number > 0"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epochs": 0, "dataset_size": 10, "batch_size": 2}, "budget epochs=0 is invalid; "
         "allowed: a number > 0"),
        ({"epochs": 1, "dataset_size": 10.5, "batch_size": 2}, f"budget dataset_size=10.5 is "
         f"invalid; {WHOLE}"),
        ({"epochs": 1, "dataset_size": 10, "batch_size": 2.5}, f"budget batch_size=2.5 is "
         f"invalid; {WHOLE}"),
        ({"images": 2.5, "batch_size": 2}, f"budget images=2.5 is invalid; {WHOLE}"),
        ({"images": 10, "batch_size": 0.5}, f"budget batch_size=0.5 is invalid; {WHOLE}"),
        ({"images": 10, "batch_size": 2, "full_iters": 9, "dataset_size": 3}, "a budget of "
         "images does not use full_iters, dataset_size; allowed with it: batch_size"),
        ({"epochs": 1, "dataset_size": 10, "batch_size": 2, "full_iters": 9}, "a budget of "
         "epochs does not use full_iters; allowed with it: dataset_size, batch_size"),
        ({"epochs": 1e-12, "dataset_size": 10, "batch_size": 2}, "the budget epochs=1e-12 is "
         "less than one iteration; allowed: a budget of at least one iteration"),
    ],
)  # fmt: skip
def test_each_bad_argument_is_named_with_what_is_allowed(kwargs, message):
    """The whole line: which argument, its value, what is allowed (mutation check survivors)."""
    with pytest.raises(ValueError) as err:
        budget_iters(**kwargs)
    assert str(err.value) == message

"""The budget advisor (``budgeted-report --predict``): what a larger budget would buy, from the
budgets a sweep has run.

For each schedule, at its best base LR per budget (the report's table), the final metric of every
seed is fitted against the budget ``B`` (a fraction of the full schedule) with one of
:data:`CURVES`, least squares over the runs (``scipy.optimize.curve_fit``, bounded):

- ``power`` (the default), a saturating power law: ``m(B) = a - b * B**(-c)`` with ``b, c > 0``:
  the metric rises towards ``a`` and each doubling of the budget gains less than the one before;
- ``log``, log-linear: ``m(B) = a + b * ln(B)``: every doubling gains the same ``b ln 2`` (it does
  not saturate: the optimistic one at large budgets).

The interval is a bootstrap over seeds: at each budget the seeds' values are drawn with
replacement, the curve is fitted again (:data:`BOOTSTRAP` times, a fixed generator), and the 2.5
and 97.5 percentiles of the refits' predictions bound it. It says how much the prediction moves
with the seeds the sweep happened to draw; it does not cover the error of the curve family
itself, which ``--holdout`` measures (the largest budget left out, predicted, compared).

    >>> import numpy as np
    >>> xs = np.array([0.01, 0.02, 0.05, 0.1, 0.25])
    >>> fit = fit_curve("power", xs, CURVES["power"].f(xs, 97.0, 0.9, 0.6))
    >>> [round(float(v), 3) for v in fit]
    [97.0, 0.9, 0.6]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ReportError
from .model import Group

__all__ = [
    "BOOTSTRAP", "CURVES", "Curve", "Prediction", "advice", "fit_curve", "holdout", "plot_advice",
    "predict", "target_budget",
]  # fmt: skip

BOOTSTRAP = 400
"""Refits of the bootstrap over seeds."""


@dataclass(frozen=True)
class Curve:
    """A curve family: ``f(B, *params)``, its formula, a first guess from the points, bounds, and
    the budget at which it reaches a value (None where it never does)."""

    formula: str
    f: Callable[..., np.ndarray]
    guess: Callable[[np.ndarray, np.ndarray], list[float]]
    bounds: tuple[list[float], list[float]]
    reaches: Callable[[float, Sequence[float]], float | None]


def _power_reaches(value: float, p: Sequence[float]) -> float | None:
    a, b, c = p
    return None if value >= a else (b / (a - value)) ** (1 / c)


CURVES: dict[str, Curve] = {
    "power": Curve(
        "m(B) = a − b·B^(−c)",
        lambda x, a, b, c: a - b * np.power(x, -c),
        lambda x, y: [
            float(y.max()) + 1e-3 * abs(float(y.max())) + 1e-6,
            max(float(np.ptp(y)) * float(x.min()) ** 0.5, 1e-6),
            0.5,
        ],
        ([-np.inf, 0.0, 1e-3], [np.inf, np.inf, 5.0]),
        _power_reaches,
    ),
    "log": Curve(
        "m(B) = a + b·ln(B)",
        lambda x, a, b: a + b * np.log(x),
        lambda x, y: [float(y.max()), 1.0],
        ([-np.inf, -np.inf], [np.inf, np.inf]),
        lambda value, p: math.exp((value - p[0]) / p[1]) if p[1] > 0 else None,
    ),
}
"""The curve families ``--curve`` picks from (docs/sweeps.md, "Predicting a larger budget")."""


def fit_curve(curve: str, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The least-squares parameters of ``CURVES[curve]`` through the points.

    Raises:
        RuntimeError: the fit did not converge.
    """
    from scipy.optimize import curve_fit

    family = CURVES[curve]
    lower, upper = (np.asarray(b, dtype=float) for b in family.bounds)
    guess = np.clip(family.guess(xs, ys), lower + 1e-9, upper - 1e-9)
    params, _ = curve_fit(family.f, xs, ys, p0=guess, bounds=family.bounds, maxfev=20000)
    return params


@dataclass
class Prediction:
    """A schedule's fit: the budgets it used, its parameters, and per asked budget the
    prediction and its bootstrap interval; ``refused``: why there is none (one line)."""

    schedule: str
    budgets: list[float]
    params: np.ndarray | None = None
    at: dict[float, tuple[float, float, float]] | None = None
    refused: str = ""


def best_points(group: Group, metric: str, schedule: str, budgets: Sequence[float]) -> dict:
    """budget -> {seed: metric} at the schedule's best LR; a budget without a finished run at
    any LR (diverged, or not run yet) is left out and named in :class:`ReportError`."""
    points = {}
    for budget in budgets:
        found = group.best(metric, schedule, budget)
        if found is None:
            diverged = any(group.with_status("diverged", schedule, budget, lr)
                           for lr in group.lrs_of(schedule))  # fmt: skip
            if diverged:
                raise ReportError(f"{schedule}: every run at budget {budget:g} diverged; the "
                                  "fit needs a finished run at each budget")  # fmt: skip
            continue
        points[budget] = group.values(metric, schedule, budget, found[0])
    return points


def predict(
    group: Group, metric: str, schedule: str, asked: Sequence[float], curve: str = "power",
    fit_budgets: Sequence[float] | None = None, seed: int = 0,
) -> Prediction:  # fmt: skip
    """Fit ``schedule``'s metric over ``fit_budgets`` (default: every budget run) and predict it
    at the ``asked`` budgets, with a bootstrap over seeds; refusals as one line in ``refused``."""
    budgets = sorted(fit_budgets if fit_budgets is not None else group.budgets)
    result = Prediction(schedule, budgets)
    try:
        points = best_points(group, metric, schedule, budgets)
    except ReportError as err:
        result.refused = str(err)
        return result
    result.budgets = sorted(points)
    least = len(CURVES[curve].bounds[0])
    if len(points) < 3 or len(points) < least:
        result.refused = (f"{schedule}: {len(points)} budget(s) with results; the {curve} fit "
                          f"needs at least {max(3, least)}")  # fmt: skip
        return result
    means = [float(np.mean(list(points[b].values()))) for b in result.budgets]
    if means[-1] <= means[0]:
        result.refused = (f"{schedule}: {metric} does not grow with the budget ({means[0]:.2f} at "
                          f"{result.budgets[0]:g}, {means[-1]:.2f} at {result.budgets[-1]:g}); "
                          "nothing to extrapolate")  # fmt: skip
        return result
    xs = np.array([b for b in result.budgets for _ in points[b]], dtype=float)
    ys = np.array([v for b in result.budgets for v in points[b].values()], dtype=float)
    try:
        result.params = fit_curve(curve, xs, ys)
    except (RuntimeError, ValueError) as err:
        result.refused = f"{schedule}: the {curve} fit did not converge ({err})"
        return result
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(BOOTSTRAP):
        ys_b = np.concatenate([rng.choice(list(points[b].values()), size=len(points[b]))
                               for b in result.budgets])  # fmt: skip
        try:
            params = fit_curve(curve, xs, ys_b)
        except (RuntimeError, ValueError):
            continue
        draws.append(CURVES[curve].f(np.asarray(asked, dtype=float), *params))
    f = CURVES[curve].f
    low, high = (np.percentile(draws, q, axis=0) if draws else [math.nan] * len(asked)
                 for q in (2.5, 97.5))  # fmt: skip
    result.at = {
        x: (float(f(np.array([x]), *result.params)[0]), float(lo), float(hi))
        for x, lo, hi in zip(asked, low, high)
    }
    return result


def target_budget(prediction: Prediction, curve: str, target: float) -> str:
    """The smallest budget predicted to reach ``target`` (<= 1: that share of the predicted
    full-schedule metric; > 1: the metric itself), as text."""
    params = prediction.params
    if params is None:
        return "-"
    full = float(CURVES[curve].f(np.array([1.0]), *params)[0])
    value = target * full if target <= 1 else target
    found = CURVES[curve].reaches(value, params)
    if found is None:
        return f"never ({value:.2f} is above the curve's limit)"
    beyond = " (beyond the full schedule)" if found > 1 else ""
    return f"{found:.3g} for {value:.2f}{beyond}"


def _head(metric: str, curve: str, what: str) -> list[str]:
    return [f"#### {metric}: {what} ({curve}: {CURVES[curve].formula}, fitted to every seed at "
            "each budget's best LR; 95 % interval: bootstrap over seeds)", ""]  # fmt: skip


def advice(
    group: Group, metric: str, asked: Sequence[float], curve: str, target: float | None
) -> str:
    """The predicted metric at each ``asked`` budget, the gain per doubling of the largest budget
    run, and the smallest budget reaching ``target``; a schedule that cannot be fitted is one
    line under the table."""
    doubled = max(group.budgets)
    lines = _head(
        metric, curve, f"predicted from budgets {', '.join(f'{b:g}' for b in group.budgets)}"
    )
    head = ["schedule", *(f"at {x:g}" for x in asked), f"gain per doubling at {doubled:g}"]
    head += (
        [f"budget for {target:g}" + (" of the full schedule's" if target <= 1 else "")]
        if target
        else []
    )
    lines += [f"| {' | '.join(head)} |", "| --- |" + " ---: |" * (len(head) - 1)]
    refused = []
    for schedule in group.schedules:
        found = predict(group, metric, schedule, [*asked, doubled, 2 * doubled], curve)
        if found.at is None:
            refused.append(f"- cannot predict {found.refused}")
            continue
        row = [f"`{schedule}`"] + [f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in
                                   (found.at[x] for x in asked)]  # fmt: skip
        row.append(f"{found.at[2 * doubled][0] - found.at[doubled][0]:+.2f}")
        row += [target_budget(found, curve, target)] if target else []
        lines.append(f"| {' | '.join(row)} |")
    return "\n".join(lines + (["", *refused] if refused else []))


def holdout(group: Group, metric: str, curve: str) -> str:
    """The largest budget run left out, predicted from the others, and compared: per schedule
    the prediction, its interval, the measured mean, the error and whether the interval covers
    it."""
    last = max(group.budgets)
    fit_on = [b for b in group.budgets if b != last]
    lines = _head(
        metric,
        curve,
        f"the largest budget, {last:g}, predicted from {', '.join(f'{b:g}' for b in fit_on)}",
    )
    lines += ["| schedule | predicted | 95 % interval | measured | error | covered |",
              "| --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    refused = []
    for schedule in group.schedules:
        found = predict(group, metric, schedule, [last], curve, fit_budgets=fit_on)
        best = group.best(metric, schedule, last)
        if found.at is None or best is None:
            refused.append(
                f"- cannot check {found.refused or f'{schedule}: no result at {last:g}'}"
            )
            continue
        measured = float(np.mean(list(group.values(metric, schedule, last, best[0]).values())))
        m, lo, hi = found.at[last]
        covered = "yes" if lo <= measured <= hi else "no"
        lines.append(f"| `{schedule}` | {m:.2f} | [{lo:.2f}, {hi:.2f}] | {measured:.2f} | "
                     f"{m - measured:+.2f} | {covered} |")  # fmt: skip
    return "\n".join(lines + (["", *refused] if refused else []))


def plot_advice(group: Group, metric: str, curve: str, path, fit_budgets=None) -> None:
    """Per schedule: the measured means ± std, the fitted curve and its bootstrap band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted(group.budgets)
    grid = list(np.geomspace(min(budgets), max(1.0, max(budgets)) * 2, 60))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for schedule in group.schedules:
        found = predict(group, metric, schedule, grid, curve, fit_budgets=fit_budgets)
        means = [(b, group.best(metric, schedule, b)) for b in budgets]
        xs = [b for b, best in means if best]
        values = [
            list(group.values(metric, schedule, b, best[0]).values()) for b, best in means if best
        ]
        stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values]
        line = ax.errorbar(xs, [np.mean(v) for v in values], yerr=stds, fmt="o", capsize=3,
                           label=schedule)  # fmt: skip
        if found.at is not None:
            color = line[0].get_color()
            ax.plot(grid, [found.at[x][0] for x in grid], color=color)
            ax.fill_between(grid, [found.at[x][1] for x in grid], [found.at[x][2] for x in grid],
                            color=color, alpha=0.15)  # fmt: skip
    ax.set(xscale="log", xlabel="budget (fraction of the full schedule)", ylabel=metric,
           title=f"{group.family}: {CURVES[curve].formula}")  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

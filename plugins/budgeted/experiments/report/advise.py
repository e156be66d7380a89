"""The budget advisor (``budgeted-report --predict``): what a larger budget would buy, from the
budgets a sweep has run.

For each schedule, at its best base LR per budget (the report's table), the final metric of every
seed is fitted against the budget ``B`` (a fraction of the full schedule) with one of
:data:`CURVES`, least squares over the runs (``scipy.optimize.curve_fit``, bounded). A metric
with a ceiling (:class:`Scale`: a framework's own metrics, in percent, or a key of the user's whose
every value lies in [0, 1]) is fitted on the log of its error, ``z = −ln(top − m)``, so that
every prediction and interval stays below the top (and, clipped, above the bottom): on the
paper grid's digits and MNIST-5k arms this held out better than the metric as is and than its
logit (docs/sweeps.md, "Predicting a larger budget"). A metric of unknown range is fitted as is.

- ``power`` (the default), saturating: ``z(B) = a − b·B^(−c)`` with ``b, c > 0``: the metric
  rises towards a limit and each doubling of the budget gains less than the one before;
- ``log``: ``z(B) = a + b·ln(B)``: on the error scale the error falls as a power of the budget
  towards 0 (as is: every doubling gains the same ``b ln 2``).

The interval is a bootstrap over seeds: at each budget the seeds' values are drawn with
replacement, the curve is fitted again (:data:`BOOTSTRAP` times, a fixed generator), and the 2.5
and 97.5 percentiles of the refits' predictions bound it. It says how much the prediction moves
with the seeds the sweep happened to draw (so it needs two seeds or more at every budget; with
one there is none); it does not cover the error of the curve family itself, which ``--holdout``
measures (the largest budget left out, predicted, compared). A budget more than
:data:`EXTRAPOLATION` times beyond those fitted is not predicted.

    >>> xs = np.array([0.01, 0.02, 0.05, 0.1, 0.25])
    >>> fit = fit_curve("power", xs, CURVES["power"].f(xs, 97.0, 0.9, 0.6))
    >>> [round(float(v), 3) for v in fit]
    [97.0, 0.9, 0.6]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ReportError
from .model import Group

__all__ = [
    "BOOTSTRAP", "CURVES", "EXTRAPOLATION", "Curve", "Prediction", "Scale", "advice",
    "advice_blocks", "check_budgets", "fit_curve", "fit_scale", "holdout", "plot_advice",
    "predict", "target_budget",
]  # fmt: skip

BOOTSTRAP = 400
"""Refits of the bootstrap over seeds."""

EXTRAPOLATION = 4.0
"""How far the advisor predicts beyond the budgets fitted: at most this factor (two doublings)
above the largest or below the smallest; further, it refuses."""

ERROR_FLOOR = 1e-3
"""The smallest error (a share of the metric's range) the error scale takes: a run at the top
(100 %) counts as 0.1 points below it (the log of 0 is not a number)."""


@dataclass(frozen=True)
class Curve:
    """A curve family on the fitted scale ``z``: ``f(B, *params)``, its formula, a first guess
    from the points, bounds, and the log of the budget at which it reaches a value (None where it
    never does)."""

    formula: str
    f: Callable[..., np.ndarray]
    guess: Callable[[np.ndarray, np.ndarray], list[float]]
    bounds: tuple[list[float], list[float]]
    reaches: Callable[[float, Sequence[float]], float | None]


def _power_reaches(value: float, p: Sequence[float]) -> float | None:
    a, b, c = p
    return None if value >= a or b <= 0 else math.log(b / (a - value)) / c


CURVES: dict[str, Curve] = {
    "power": Curve(
        "a − b·B^(−c)",
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
        "a + b·ln(B)",
        lambda x, a, b: a + b * np.log(x),
        lambda x, y: [float(y.max()), 1.0],
        ([-np.inf, -np.inf], [np.inf, np.inf]),
        lambda value, p: (value - p[0]) / p[1] if p[1] > 0 else None,
    ),
}
"""The curve families ``--curve`` picks from (docs/sweeps.md, "Predicting a larger budget")."""


@dataclass(frozen=True)
class Scale:
    """Where a metric is fitted: on the log of its error, ``z = −ln(high − m)``, where its range
    [``low``, ``high``] is known (every prediction below ``high``, clipped at ``low``), else as
    is (``high`` None). ``why``: how the range is known, for the output.

    >>> scale = Scale(0.0, 100.0)
    >>> round(float(scale.back(scale.to_fit(np.array([97.5]))[0])), 6)
    97.5
    >>> float(scale.back(np.array([-50.0]))[0]), Scale().back(np.array([161.0]))[0]
    (0.0, 161.0)
    """

    low: float = 0.0
    high: float | None = None
    why: str = ""

    def to_fit(self, m: np.ndarray) -> np.ndarray:
        """The fitted scale of metric values."""
        if self.high is None:
            return np.asarray(m, dtype=float)
        error = np.maximum(self.high - np.asarray(m, dtype=float),
                           ERROR_FLOOR * (self.high - self.low))  # fmt: skip
        return -np.log(error)

    def back(self, z: np.ndarray) -> np.ndarray:
        """Metric values of the fitted scale, in the range."""
        if self.high is None:
            return np.asarray(z, dtype=float)
        with np.errstate(over="ignore"):
            return np.clip(self.high - np.exp(-np.asarray(z, dtype=float)), self.low, self.high)

    def text(self) -> str:
        if self.high is None:
            return "fitted as is: its range is not known"
        top = f"{self.high:g}"
        return f"fitted to z = −ln({top} − m), below {top} ({self.why})"


def fit_scale(group: Group, metric: str) -> Scale:
    """How ``group``'s ``metric`` is fitted: on its error where its range is known
    (:meth:`~.model.Group.metric_range`) or where every value lies in [0, 1] (taken as a share:
    an accuracy or F1 as a fraction), else as is."""
    found = group.metric_range(metric)
    if found is not None:
        return Scale(found[0], found[1], f"{metric} lies in [{found[0]:g}, {found[1]:g}]")
    values = [c.final.metrics[metric] for c in group.cells.values()
              if c.final is not None and metric in c.final.metrics]  # fmt: skip
    if values and all(0 <= v <= 1 for v in values):
        return Scale(0.0, 1.0, f"every {metric} lies in [0, 1]: taken as a share")
    return Scale()


def fit_curve(
    curve: str, xs: np.ndarray, ys: np.ndarray, start: np.ndarray | None = None
) -> np.ndarray:
    """The least-squares parameters of ``CURVES[curve]`` through the points (on the fitted
    scale), from ``start`` (default: the curve's guess from the points).

    Raises:
        RuntimeError: the fit did not converge.
    """
    from scipy.optimize import curve_fit

    family = CURVES[curve]
    lower, upper = (np.asarray(b, dtype=float) for b in family.bounds)
    first = family.guess(xs, ys) if start is None else start
    guess = np.clip(first, lower + 1e-9, upper - 1e-9)
    params, _ = curve_fit(family.f, xs, ys, p0=guess, bounds=family.bounds, maxfev=20000)
    return params


@dataclass
class Prediction:
    """A schedule's fit: the budgets it used, its scale and parameters, and per asked budget the
    prediction and its bootstrap interval (None: one seed at some budget, ``lonely`` names
    them); ``refused``: why there is none (one line)."""

    schedule: str
    budgets: list[float]
    scale: Scale = Scale()
    params: np.ndarray | None = None
    at: dict[float, tuple[float, float | None, float | None]] | None = None
    lonely: tuple[float, ...] = ()
    refused: str = ""


def best_points(group: Group, metric: str, schedule: str, budgets: Sequence[float]) -> dict:
    """budget -> {seed: metric} at the schedule's best LR; a budget without a finished run at
    any LR (not run yet) is left out; one whose runs ended but no LR has every run finished
    (a run diverged or ended undecayed) is named in :class:`ReportError`."""
    points = {}
    for budget in budgets:
        found = group.best(metric, schedule, budget)
        if found is None:
            ended = {s: sum(group.with_status(s, schedule, budget, lr)
                            for lr in group.lrs_of(schedule))
                     for s in ("diverged", "undecayed", "finished")}  # fmt: skip
            if ended["diverged"] or ended["undecayed"]:
                runs, at = sum(ended.values()), f"budget {budget:g}"
                what = (f"every run at {at} diverged" if ended["diverged"] == runs else
                        f"no base LR at {at} has every run finished ({ended['diverged']} of "
                        f"{runs} runs diverged, {ended['undecayed']} ended undecayed)")  # fmt: skip
                raise ReportError(f"{schedule}: {what}; the fit needs a finished base LR at "
                                  "each budget")  # fmt: skip
            continue
        points[budget] = group.values(metric, schedule, budget, found[0])
    return points


def beyond(budget: float, fitted: Sequence[float]) -> str | None:
    """Why ``budget`` is too far from the ``fitted`` budgets to predict (more than
    :data:`EXTRAPOLATION` times beyond them), in words; None where it is not.

    >>> beyond(1.0, [0.01, 0.25]), beyond(1e-05, [0.01, 0.25])
    (None, 'more than 4× below the smallest budget fitted, 0.01')
    """
    if budget > EXTRAPOLATION * max(fitted):
        return f"more than {EXTRAPOLATION:g}× the largest budget fitted, {max(fitted):g}"
    if budget < min(fitted) / EXTRAPOLATION:
        return f"more than {EXTRAPOLATION:g}× below the smallest budget fitted, {min(fitted):g}"
    return None


def predict(
    group: Group, metric: str, schedule: str, asked: Sequence[float], curve: str = "power",
    fit_budgets: Sequence[float] | None = None, seed: int = 0,
) -> Prediction:  # fmt: skip
    """Fit ``schedule``'s metric over ``fit_budgets`` (default: every budget run) and predict it
    at the ``asked`` budgets, with a bootstrap over seeds; refusals as one line in ``refused``."""
    budgets = sorted(fit_budgets if fit_budgets is not None else group.budgets)
    result = Prediction(schedule, budgets, fit_scale(group, metric))
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
    far = next(((x, why) for x in asked if (why := beyond(x, result.budgets))), None)
    if far is not None:
        result.refused = f"{schedule}: budget {far[0]:g} is {far[1]}"
        return result
    means = [float(np.mean(list(points[b].values()))) for b in result.budgets]
    if means[-1] <= means[0]:
        first, last = (f"{m:.{group.digits(metric)}f}" for m in (means[0], means[-1]))
        result.refused = (f"{schedule}: {metric} does not grow with the budget ({first} at "
                          f"{result.budgets[0]:g}, {last} at {result.budgets[-1]:g}); nothing "
                          "to extrapolate")  # fmt: skip
        return result
    scale, f = result.scale, CURVES[curve].f
    xs = np.array([b for b in result.budgets for _ in points[b]], dtype=float)
    ys = scale.to_fit(np.array([v for b in result.budgets for v in points[b].values()]))
    try:
        result.params = fit_curve(curve, xs, ys)
    except (RuntimeError, ValueError) as err:
        result.refused = f"{schedule}: the {curve} fit did not converge ({err})"
        return result
    grid = np.asarray(asked, dtype=float)
    result.lonely = tuple(b for b in result.budgets if len(points[b]) < 2)
    low: list = [None] * len(asked)
    high: list = [None] * len(asked)
    if not result.lonely:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(BOOTSTRAP):
            ys_b = scale.to_fit(np.concatenate([
                rng.choice(list(points[b].values()), size=len(points[b]))
                for b in result.budgets
            ]))  # fmt: skip
            try:
                draws.append(scale.back(f(grid, *fit_curve(curve, xs, ys_b, result.params))))
            except (RuntimeError, ValueError):
                continue
        if draws:
            low, high = (list(np.percentile(draws, q, axis=0)) for q in (2.5, 97.5))
    predicted = scale.back(f(grid, *result.params))
    result.at = {
        x: (float(m), None if lo is None else float(lo), None if hi is None else float(hi))
        for x, m, lo, hi in zip(asked, predicted, low, high)
    }
    return result


def target_budget(prediction: Prediction, curve: str, target: float, digits: int = 2) -> str:
    """The smallest budget predicted to reach ``target`` (<= 1: that share of the predicted
    full-schedule metric; > 1: the metric itself), as text: "never" above the curve's limit (or
    the metric's top), "beyond" more than :data:`EXTRAPOLATION` times past the budgets fitted."""
    params, scale = prediction.params, prediction.scale
    if params is None:
        return "-"
    full = float(scale.back(CURVES[curve].f(np.array([1.0]), *params))[0])
    value = target * full if target <= 1 else target
    shown = f"{value:.{digits}f}"
    if scale.high is not None and value >= scale.high:
        return f"never ({shown} is the top of the metric's range, or above it)"
    found = CURVES[curve].reaches(float(scale.to_fit(np.array([value]))[0]), params)
    if found is None:
        return f"never ({shown} is above the curve's limit)"
    top = EXTRAPOLATION * max(prediction.budgets)
    if found > math.log(top):
        return f"beyond {top:g} for {shown} (more than {EXTRAPOLATION:g}× the budgets fitted)"
    budget = math.exp(found)
    return f"{budget:.3g} for {shown}" + (" (beyond the full schedule)" if budget > 1 else "")


def _head(group: Group, metric: str, curve: str, what: str) -> list[str]:
    return [f"#### {metric}: {what} ({curve}: z(B) = {CURVES[curve].formula}, "
            f"{fit_scale(group, metric).text()}; fitted to every seed at each budget's best LR; "
            "95 % interval: bootstrap over seeds)", ""]  # fmt: skip


def _interval(found: Prediction, x: float, digits: int) -> str:
    _, lo, hi = found.at[x]
    return "-" if lo is None or hi is None else f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def _lonely(found: Prediction) -> list[str]:
    """The note of a schedule fitted without an interval (one seed at some budget)."""
    if not found.lonely:
        return []
    return [f"- `{found.schedule}`: no interval: one seed at budget(s) "
            f"{', '.join(f'{b:g}' for b in found.lonely)} (the bootstrap over seeds needs two "
            "or more at each budget)"]  # fmt: skip


def advice(
    group: Group, metric: str, asked: Sequence[float], curve: str, target: float | None
) -> str:
    """The predicted metric at each ``asked`` budget, the gain per doubling of the largest budget
    run, and the smallest budget reaching ``target``; a schedule that cannot be fitted is one
    line under the table."""
    if not group.budgets:
        return f"#### {metric}: nothing to predict\n\n- cannot predict: the sweep has no cells"
    doubled, digits = max(group.budgets), group.digits(metric)
    lines = _head(
        group, metric, curve,
        f"predicted from budgets {', '.join(f'{b:g}' for b in group.budgets)}",
    )  # fmt: skip
    head = ["schedule", *(f"at {x:g}" for x in asked), f"gain per doubling at {doubled:g}"]
    head += (
        [f"budget for {target:g}" + (" of the full schedule's" if target <= 1 else "")]
        if target
        else []
    )
    lines += [f"| {' | '.join(head)} |", "| --- |" + " ---: |" * (len(head) - 1)]
    notes = []
    for schedule in group.schedules:
        found = predict(group, metric, schedule, [*asked, doubled, 2 * doubled], curve)
        if found.at is None:
            notes.append(f"- cannot predict {found.refused}")
            continue
        row = [f"`{schedule}`"] + [
            f"{found.at[x][0]:.{digits}f} {_interval(found, x, digits)}".removesuffix(" -")
            for x in asked
        ]
        row.append(f"{found.at[2 * doubled][0] - found.at[doubled][0]:+.{digits}f}")
        row += [target_budget(found, curve, target, digits)] if target else []
        lines.append(f"| {' | '.join(row)} |")
        notes += _lonely(found)
    return "\n".join(lines + (["", *notes] if notes else []))


def holdout(group: Group, metric: str, curve: str) -> str:
    """The largest budget run left out, predicted from the others, and compared: per schedule
    the prediction, its interval, the measured mean, the error and whether the interval covers
    it."""
    if not group.budgets:
        return f"#### {metric}: nothing to check\n\n- cannot check: the sweep has no cells"
    last, digits = max(group.budgets), group.digits(metric)
    fit_on = [b for b in group.budgets if b != last]
    lines = _head(
        group, metric, curve,
        f"the largest budget, {last:g}, predicted from {', '.join(f'{b:g}' for b in fit_on)}",
    )  # fmt: skip
    lines += ["| schedule | predicted | 95 % interval | measured | error | covered |",
              "| --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    notes = []
    for schedule in group.schedules:
        found = predict(group, metric, schedule, [last], curve, fit_budgets=fit_on)
        best = group.best(metric, schedule, last)
        if found.at is None or best is None:
            notes.append(f"- cannot check {found.refused or f'{schedule}: no result at {last:g}'}")
            continue
        measured = float(np.mean(list(group.values(metric, schedule, last, best[0]).values())))
        m, lo, hi = found.at[last]
        covered = "-" if lo is None or hi is None else "yes" if lo <= measured <= hi else "no"
        row = [f"`{schedule}`", f"{m:.{digits}f}", _interval(found, last, digits),
               f"{measured:.{digits}f}", f"{m - measured:+.{digits}f}", covered]  # fmt: skip
        lines.append(f"| {' | '.join(row)} |")
        notes += _lonely(found)
    return "\n".join(lines + (["", *notes] if notes else []))


def check_budgets(groups: Sequence[Group], asked: Sequence[float], target: float | None) -> None:
    """Refuse (:class:`ReportError`, one line) a ``--predict`` budget more than
    :data:`EXTRAPOLATION` times beyond the budgets a group has results at (and the full schedule,
    1, where ``--target`` is a share of its metric)."""
    for group in groups:
        run = sorted({k.budget for k, c in group.cells.items() if c.final is not None})
        if not run:
            continue  # the advice says so
        share = [1.0] if target is not None and target <= 1 else []
        for x in [*asked, *share]:
            why = beyond(x, run)
            if why is not None:
                flag = "--predict" if x in asked else f"--target {target:g} (a share of the " \
                    "full schedule's metric, predicted at 1)"  # fmt: skip
                low, high = min(run) / EXTRAPOLATION, EXTRAPOLATION * max(run)
                raise ReportError(
                    f"{flag} {x:g} is {why.replace('fitted', 'run')} ({group.family}); allowed: "
                    f"budgets from {low:g} to {high:g} (at most {EXTRAPOLATION:g}× beyond those "
                    "run: a curve says little further out)"
                )


def advice_blocks(
    groups: Sequence[Group], asked: Sequence[float] | None, holding_out: bool, curve: str,
    target: float | None,
) -> list[str]:  # fmt: skip
    """The advisor's text for ``budgeted-report``: per group and metric the predictions at
    ``asked`` (None: none) and the hold-out check; :class:`ReportError` (before any text) for a
    budget too far out (:func:`check_budgets`)."""
    if asked is not None:
        check_budgets(groups, asked, target)
    blocks = []
    for group in groups:
        for metric, _ in group.metrics:
            if asked is not None:
                blocks.append("\n" + advice(group, metric, asked, curve, target))
            if holding_out:
                blocks.append("\n" + holdout(group, metric, curve))
    return blocks


def plot_advice(group: Group, curve: str, path: Path, holding_out: bool = False) -> Path:
    """Per schedule of ``group``'s first metric: the measured means ± std, the fitted curve and
    its bootstrap band (fitted without the largest budget where ``holding_out``), written
    atomically and marked as the report's figures are (:func:`.plots.save_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import save_figure

    metric = group.metrics[0][0]
    budgets = sorted(group.budgets)
    fit_on = budgets[:-1] if holding_out else budgets
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for schedule in group.schedules:
        means = [(b, group.best(metric, schedule, b)) for b in budgets]
        xs = [b for b, best in means if best]
        values = [
            list(group.values(metric, schedule, b, best[0]).values()) for b, best in means if best
        ]
        stds = [np.std(v, ddof=1) if len(v) > 1 else 0.0 for v in values]
        line = ax.errorbar(xs, [np.mean(v) for v in values], yerr=stds, fmt="o", capsize=3,
                           label=schedule)  # fmt: skip
        fitted = [b for b in xs if b in fit_on]
        if len(fitted) < 3:
            continue
        top = min(max(1.0, max(budgets)) * 2, EXTRAPOLATION * max(fitted))
        grid = list(np.geomspace(min(fitted), top, 60))
        found = predict(group, metric, schedule, grid, curve, fit_budgets=fit_on)
        if found.at is not None:
            color = line[0].get_color()
            ax.plot(grid, [found.at[x][0] for x in grid], color=color)
            if not found.lonely:
                low, high = ([found.at[x][i] for x in grid] for i in (1, 2))
                ax.fill_between(grid, low, high, color=color, alpha=0.15)
    ax.set(xscale="log", xlabel="budget (fraction of the full schedule)", ylabel=metric,
           title=f"{group.family}: z(B) = {CURVES[curve].formula}; "
                 f"{fit_scale(group, metric).text()}")  # fmt: skip
    ax.title.set_fontsize(8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)

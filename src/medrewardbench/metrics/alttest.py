"""The alternative annotator test: can a judge stand in for one of the annotators?

Calderon, Reichart and Dror, "The Alternative Annotator Test for LLM-as-a-Judge" (ACL 2025,
arXiv 2501.10970). The human-ceiling row says how often a judge agrees with the annotators
compared with how often one of them does; this test turns that into a decision, per dimension
and pooled, with a stated margin and a multiple-testing correction.

Input: a **ratings** array, int ``(n_cases, n_annotators, n_dims)`` (1 or 2 = the better response
in source order, 0 = no label) and a judge's **verdicts** ``(n_cases, 2, n_dims)`` (-1 not run,
0 failed, 1 or 2).

For annotator j and a (case i, dimension d) that j labelled and at least one other annotator
labelled too (an *instance*):

* ``S_h`` = the share of the *other* annotators of (i, d) whose label equals j's;
* ``S_f`` = for each order the judge was run in, the share of the same others whose label equals
  its verdict (a failure matches nobody: 0), averaged over the orders run. Both orders count, as
  they do for every other number of a report; a judge never run on the case has no instance;
* ``W_f = 1[S_f >= S_h]`` and ``W_h = 1[S_h >= S_f]``: a tie is a win for both.

The comparisons are exact (integer arithmetic, no float ties). For one column (a dimension, or
the six pooled), annotator j's cases are those with an instance in the column; per case,
``d_i`` is the mean of ``W_f - W_h`` over the column's instances of the case (pooled: over its
dimensions, so the t-test's unit stays the case, whose dimensions are not independent).
``rho_f_j`` and ``rho_h_j`` are the means over cases of the per-case means of ``W_f`` and ``W_h``,
so ``mean(d) = rho_f_j - rho_h_j``.

The test of annotator j is the paper's: a one-sided one-sample t-test of
``H0: rho_f_j <= rho_h_j - epsilon`` on the ``d_i`` (``t = (mean(d) + epsilon) / (sd(d) / sqrt(n))``,
``n - 1`` degrees of freedom; with ``sd = 0``, p is 0 when ``mean(d) + epsilon > 0`` and 1
otherwise). Annotators with fewer than :data:`~medrewardbench.metrics.results.ALT_TEST_MIN_CASES`
cases are not tested (the paper's minimum for the t-test's normal approximation). The tested
annotators' p-values are corrected with Benjamini-Yekutieli at q; the winning rate ``omega`` is the
share of tested annotators whose H0 is rejected, the advantage probability ``rho`` the mean of
``rho_f_j`` over them.

Verdict (one of :data:`~medrewardbench.metrics.results.VERDICTS`):

* ``omega >= 0.5``: "can stand in for an annotator" (the paper's rule);
* fewer than :data:`~medrewardbench.metrics.results.ALT_TEST_MIN_ANNOTATORS` annotators with
  enough cases: "too few cases to tell" (the paper recommends three; with two there is no
  consensus to represent);
* "cannot" when the judge is shown to represent the others *worse* than the annotator by more
  than epsilon for at least half of the annotators (the mirror test, ``H0: rho_f_j >= rho_h_j -
  epsilon``, its p-value one minus the first, Benjamini-Yekutieli likewise), or when the cases
  would have let a judge exactly as good as the annotators pass: ``d`` of mean 0 and the observed
  spread, detected with 80 % power. That *detectable margin* is ``(z_{1-a_k} + z_0.8) sd_j /
  sqrt(n_j)``, where ``a_k`` is the BY level at which the k-th smallest p-value must fall for
  ``k = ceil(m / 2)`` rejections; the cases suffice when the k-th smallest margin is at most
  epsilon. (A judge 15 points below the annotators sits near ``mean(d) = -0.1``, so the mirror
  test alone would leave it undecided for ever; a clearly worse judge has a large spread, so the
  power rule alone would call it undecided on tens of cases.)
* otherwise "too few cases to tell": neither shown as good nor shown worse, and too few cases
  for an equally good judge to have passed.

Only numpy and the standard library are needed (the t distribution comes from the regularised
incomplete beta function).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.power import POWER
from medrewardbench.metrics.results import (
    ALT_TEST_MIN_ANNOTATORS,
    ALT_TEST_MIN_CASES,
    CAN_STAND_IN,
    CANNOT,
    DEFAULT_EPSILON,
    TOO_FEW,
)

__all__ = [
    "AltTestOutcome",
    "AnnotatorOutcome",
    "alt_test",
    "alt_test_columns",
    "benjamini_yekutieli",
    "case_differences",
    "regularized_incomplete_beta",
    "student_t_sf",
    "t_test_greater",
]

_NOT_RUN = -1
_MISSING = 0


# --------------------------------------------------------------------------------------------
# The t distribution and Benjamini-Yekutieli, without scipy
# --------------------------------------------------------------------------------------------


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz, Numerical Recipes 6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the regularised incomplete beta function.

    Args:
        a: first shape parameter (> 0).
        b: second shape parameter (> 0).
        x: in [0, 1].

    Returns:
        ``I_x(a, b)`` in [0, 1].

    Raises:
        ValueError: a parameter out of range.
    """
    if a <= 0 or b <= 0 or not 0.0 <= x <= 1.0:
        raise ValueError(f"need a > 0, b > 0 and 0 <= x <= 1, got a={a}, b={b}, x={x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom.

    Args:
        t: the statistic (may be infinite).
        df: degrees of freedom (> 0).

    Returns:
        The upper tail probability.
    """
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t > 0 else 1.0 - tail


def t_test_greater(values: npt.ArrayLike, null_mean: float) -> float:
    """One-sided one-sample t-test of ``H0: mean <= null_mean`` against ``mean > null_mean``.

    scipy's ``ttest_1samp(values, null_mean, alternative="greater").pvalue``, except for data
    without spread: p is 0 when their mean exceeds ``null_mean`` and 1 otherwise (scipy gives NaN
    or 0 there).

    Args:
        values: the sample (at least two values).
        null_mean: the mean under H0.

    Returns:
        The p-value; NaN for fewer than two values.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    n = x.size
    if n < 2:
        return math.nan
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return 0.0 if mean - null_mean > 1e-12 else 1.0
    return student_t_sf((mean - null_mean) / (sd / math.sqrt(n)), n - 1)


def benjamini_yekutieli(p_values: npt.ArrayLike, q: float = 0.05) -> npt.NDArray[np.bool_]:
    """Which hypotheses Benjamini-Yekutieli rejects at false discovery rate ``q``.

    Step-up: with the m p-values sorted, the largest k with ``p_(k) <= k q / (m H_m)``
    (``H_m = 1 + 1/2 + ... + 1/m``) rejects the k smallest. Valid under any dependence between the
    tests (the annotators' tests share the judge's verdicts and each other's labels). NaN entries
    are not tested and not counted in m.

    Args:
        p_values: any shape.
        q: the false discovery rate.

    Returns:
        Booleans of the same shape.
    """
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.reshape(-1)
    rejected = np.zeros(flat.shape, dtype=bool)
    present = np.flatnonzero(~np.isnan(flat))
    m = present.size
    if m:
        order = present[np.argsort(flat[present], kind="stable")]
        harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
        passing = np.flatnonzero(flat[order] <= np.arange(1, m + 1) * q / (m * harmonic))
        if passing.size:
            rejected[order[: passing[-1] + 1]] = True
    return rejected.reshape(p.shape)


def by_level(rank: int, m: int, q: float) -> float:
    """The Benjamini-Yekutieli threshold of the ``rank``-th smallest of ``m`` p-values at ``q``."""
    return rank * q / (m * float(np.sum(1.0 / np.arange(1, m + 1))))


# --------------------------------------------------------------------------------------------
# Wins per instance and per case
# --------------------------------------------------------------------------------------------


def _check(ratings: npt.ArrayLike, verdicts: npt.ArrayLike) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    values = np.asarray(ratings)
    picks = np.asarray(verdicts)
    if values.ndim != 3:
        raise ValueError(f"ratings must have shape (n_cases, n_annotators, n_dims), got {values.shape}")
    if picks.shape != (values.shape[0], 2, values.shape[2]):
        raise ValueError(f"verdicts must have shape ({values.shape[0]}, 2, {values.shape[2]}), got {picks.shape}")
    if values.size and not np.isin(values, (_MISSING, 1, 2)).all():
        raise ValueError("ratings must be 0 (none), 1 or 2")
    return values.astype(np.int8, copy=False), picks.astype(np.int8, copy=False)


def instance_wins(
    ratings: npt.ArrayLike, verdicts: npt.ArrayLike
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Who represents the other annotators better on every (case, annotator, dimension).

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no label.
        verdicts: ``(n_cases, 2, n_dims)`` in source order (-1 not run, 0 failed, 1 or 2).

    Returns:
        ``(instance, judge_wins, annotator_wins)``, each ``(n_cases, n_annotators, n_dims)``:
        whether (i, j, d) is an instance (j labelled it, another annotator did too, the judge ran
        on the case), ``W_f`` and ``W_h`` (False outside instances).
    """
    values, picks = _check(ratings, verdicts)
    given = values != _MISSING
    counts = {c: (values == c).sum(axis=1) for c in (1, 2)}  # (n, D) labels per category
    n_given = given.sum(axis=1)  # (n, D)
    others = n_given[:, None, :] - given  # (n, R, D) the others' labels
    own = np.where(values == 1, counts[1][:, None, :], counts[2][:, None, :])
    agree_h = np.where(given, own - 1, 0)  # others agreeing with j
    run = picks != _NOT_RUN  # (n, 2, D)
    n_run = run.sum(axis=1)  # (n, D)
    agree_f = np.zeros(values.shape, dtype=np.int64)
    for order in range(2):
        v = picks[:, order, :][:, None, :]  # (n, 1, D)
        matching = np.where(v == 1, counts[1][:, None, :], np.where(v == 2, counts[2][:, None, :], 0))
        # the others' labels equal to the verdict: j's own label is not among the others
        matching = matching - (given & (values == v))
        agree_f += np.where(run[:, order, :][:, None, :], matching, 0)
    instance = given & (others >= 1) & (n_run[:, None, :] >= 1)
    # S_f = agree_f / (n_run * others) and S_h = agree_h / others: compare without dividing
    lhs = agree_f
    rhs = agree_h * n_run[:, None, :]
    return instance, instance & (lhs >= rhs), instance & (rhs >= lhs)


def case_differences(
    ratings: npt.ArrayLike, verdicts: npt.ArrayLike, dimensions: Sequence[int] | None = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Per case and annotator, the mean ``W_f`` and ``W_h`` over the chosen dimensions' instances.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``.
        verdicts: ``(n_cases, 2, n_dims)``.
        dimensions: the dimension indices of the column (None: all of them, the pooled column).

    Returns:
        ``(judge, annotator, counted)``, each ``(n_cases, n_annotators)``: the per-case winning
        rates (0 where not counted) and whether the case has an instance for that annotator.
    """
    instance, wins_f, wins_h = instance_wins(ratings, verdicts)
    if dimensions is not None:
        index = list(dimensions)
        instance, wins_f, wins_h = instance[:, :, index], wins_f[:, :, index], wins_h[:, :, index]
    n = instance.sum(axis=2)
    counted = n > 0
    safe = np.maximum(n, 1)
    return wins_f.sum(axis=2) / safe, wins_h.sum(axis=2) / safe, counted


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatorOutcome:
    """The test against one left-out annotator on one column."""

    n_cases: int
    judge_wins: float
    annotator_wins: float
    p_value: float
    """NaN when the annotator has too few cases to be tested"""
    judge_beats: bool
    detectable_margin: float
    judge_worse: bool = False
    """the mirror test: the judge is shown to win less often than the annotator by more than epsilon"""


@dataclass(frozen=True)
class AltTestOutcome:
    """The alt-test of one judge on one column (see the module docstring)."""

    verdict: str
    reason: str
    winning_rate: float
    advantage: float
    n_annotators: int
    n_cases: int
    detectable_margin: float
    annotators: tuple[AnnotatorOutcome, ...]


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def alt_test(
    judge: npt.ArrayLike,
    annotator: npt.ArrayLike,
    counted: npt.ArrayLike,
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = 0.05,
    min_cases: int = ALT_TEST_MIN_CASES,
    min_annotators: int = ALT_TEST_MIN_ANNOTATORS,
    power: float = POWER,
) -> AltTestOutcome:
    """The alt-test from per-case winning rates (:func:`case_differences`).

    Args:
        judge: ``(n_cases, n_annotators)`` per-case mean ``W_f``.
        annotator: ``(n_cases, n_annotators)`` per-case mean ``W_h``.
        counted: ``(n_cases, n_annotators)`` whether the case counts for the annotator.
        epsilon: the cost-benefit margin, in winning probability.
        q: the false discovery rate of the Benjamini-Yekutieli correction.
        min_cases: cases an annotator needs to be tested.
        min_annotators: tested annotators the verdict needs.
        power: the power an equally good judge needs for a failure to read "cannot".

    Returns:
        The verdict with its numbers.

    Raises:
        ValueError: arrays of different shapes, or a negative epsilon.
    """
    wins_f = np.asarray(judge, dtype=np.float64)
    wins_h = np.asarray(annotator, dtype=np.float64)
    mask = np.asarray(counted, dtype=bool)
    if wins_f.shape != wins_h.shape or wins_f.shape != mask.shape or wins_f.ndim != 2:
        raise ValueError("judge, annotator and counted must share one (n_cases, n_annotators) shape")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    n_annotators = wins_f.shape[1]
    sizes = mask.sum(axis=0)
    tested = [j for j in range(n_annotators) if sizes[j] >= max(min_cases, 2)]
    m = len(tested)
    k = max(1, math.ceil(m / 2))
    z_power = NormalDist().inv_cdf(power)
    z_level = NormalDist().inv_cdf(1.0 - by_level(k, m, q)) if m else math.nan
    p_values = np.full(n_annotators, np.nan)
    margins = np.full(n_annotators, np.nan)
    rho_f = np.full(n_annotators, np.nan)
    rho_h = np.full(n_annotators, np.nan)
    for j in range(n_annotators):
        rows = mask[:, j]
        if not rows.any():
            continue
        rho_f[j] = float(wins_f[rows, j].mean())
        rho_h[j] = float(wins_h[rows, j].mean())
        if j in tested:
            d = wins_f[rows, j] - wins_h[rows, j]
            p_values[j] = t_test_greater(d, -epsilon)
            margins[j] = (z_level + z_power) * float(d.std(ddof=1)) / math.sqrt(d.size)
    rejected = benjamini_yekutieli(p_values, q)
    worse = benjamini_yekutieli(_mirror(p_values, wins_f, wins_h, mask, epsilon), q)
    outcomes = tuple(
        AnnotatorOutcome(
            int(sizes[j]),
            float(rho_f[j]),
            float(rho_h[j]),
            float(p_values[j]),
            bool(rejected[j]),
            float(margins[j]),
            bool(worse[j]),
        )
        for j in range(n_annotators)
    )
    n_cases = int(mask[:, tested].any(axis=1).sum()) if m else int(mask.any(axis=1).sum())
    most = int(sizes.max()) if n_annotators else 0
    if m < min_annotators:
        if n_annotators < min_annotators:
            reason = f"{_count(n_annotators, 'annotator')}; the test needs at least {min_annotators}"
        else:
            reason = (
                f"{_count(m, 'annotator')} with at least {min_cases} cases (at most {most} here); "
                f"the test needs {min_annotators}"
            )
        return AltTestOutcome(TOO_FEW, reason, math.nan, math.nan, m, n_cases, math.nan, outcomes)
    beaten = int(rejected.sum())
    omega = beaten / m
    rho = float(np.mean(rho_f[tested]))
    margin = float(np.sort(margins[tested])[k - 1])
    wins = f"wins against {beaten} of {m} annotators (ω = {omega:.2f}) within ε = {epsilon:.2f}"
    if omega >= 0.5:
        return AltTestOutcome(CAN_STAND_IN, wins, omega, rho, m, n_cases, margin, outcomes)
    shown_worse = int(worse.sum())
    if shown_worse / m >= 0.5:
        reason = f"{wins}; it is worse than {shown_worse} of {m} annotators by more than ε"
        return AltTestOutcome(CANNOT, reason, omega, rho, m, n_cases, margin, outcomes)
    if margin > epsilon:
        reason = (
            f"{wins}, but with {n_cases} cases a judge as good as an annotator would pass less than "
            f"{100 * power:.0f} % of the time (the test detects margins of {margin:.2f} and more)"
        )
        return AltTestOutcome(TOO_FEW, reason, omega, rho, m, n_cases, margin, outcomes)
    reason = f"{wins}; with these cases a judge as good as an annotator would have passed"
    return AltTestOutcome(CANNOT, reason, omega, rho, m, n_cases, margin, outcomes)


def _mirror(
    p_values: npt.NDArray[np.float64],
    wins_f: npt.NDArray[np.float64],
    wins_h: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_],
    epsilon: float,
) -> npt.NDArray[np.float64]:
    """p-values of the mirror test ``H0: mean(d) >= -epsilon`` (NaN where the annotator is not tested)."""
    out = np.full(p_values.shape, np.nan)
    for j in np.flatnonzero(~np.isnan(p_values)):
        rows = mask[:, j]
        out[j] = t_test_greater(wins_h[rows, j] - wins_f[rows, j], epsilon)
    return out


def alt_test_columns(
    ratings: npt.ArrayLike,
    verdicts: npt.ArrayLike,
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = 0.05,
    min_cases: int = ALT_TEST_MIN_CASES,
    min_annotators: int = ALT_TEST_MIN_ANNOTATORS,
) -> list[AltTestOutcome]:
    """The alt-test of one judge on every dimension, then on all of them pooled.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no label.
        verdicts: ``(n_cases, 2, n_dims)`` in source order.
        epsilon: the cost-benefit margin.
        q: the Benjamini-Yekutieli false discovery rate.
        min_cases: cases an annotator needs to be tested.
        min_annotators: tested annotators a verdict needs.

    Returns:
        ``n_dims + 1`` outcomes: each dimension, then the pooled column.
    """
    instance, wins_f, wins_h = instance_wins(ratings, verdicts)
    n_dims = instance.shape[2]
    out = []
    for index in [*([d] for d in range(n_dims)), list(range(n_dims))]:
        n = instance[:, :, index].sum(axis=2)
        safe = np.maximum(n, 1)
        out.append(
            alt_test(
                wins_f[:, :, index].sum(axis=2) / safe,
                wins_h[:, :, index].sum(axis=2) / safe,
                n > 0,
                epsilon=epsilon,
                q=q,
                min_cases=min_cases,
                min_annotators=min_annotators,
            )
        )
    return out

"""Selective judging with a guarantee: accept a judge's verdict only when it is confident enough.

A verdict is **accepted** when its confidence (:attr:`CaseVerdicts.confidence
<medrewardbench.metrics.confidence.CaseVerdicts.confidence>`) is at least a threshold ``t`` and it
names a response (a tie or a missing verdict is never accepted: it goes to a doctor). The
**selective risk** of ``t`` is the population error rate among accepted verdicts,
``R(t) = P(wrong | accepted at t)``; the **coverage** is the share of verdicts accepted.

**Method (Learn then Test with fixed-sequence testing; Angelopoulos, Bates, Candès, Jordan and Lei
2021, arXiv 2110.01052).** The cases are split at random into a calibration part and a held-out
part (``calibration_fraction``; the unit is the case, so a case's dimensions stay together). A
grid of thresholds ``t_1 > t_2 > ... > t_m`` is fixed without the calibration labels: the distinct
confidences of the held-out verdicts, or, when there are more than ``max_thresholds`` of them,
those at ``m`` evenly spaced held-out coverages up to 1; the first accepts a share of the verdicts
large enough to be shown safe at all (:func:`first_share`: about three times the
``log(delta) / log(1 - alpha)`` verdicts that a run without errors needs, from the number of
calibration verdicts, never from their labels). For each ``t_j`` the null hypothesis
``H_j: R(t_j) > alpha`` is tested on the calibration cases with a p-value that is valid under it:

* one dimension: conditionally on the number ``n_j`` of accepted calibration verdicts, the
  accepted cases are independent draws from the cases accepted at ``t_j``, so their errors
  ``k_j`` are Binomial(``n_j``, ``R(t_j)``); the exact p-value is ``P(Binomial(n_j, alpha) <= k_j)``
  (Clopper-Pearson's tail). No accepted verdict gives p = 1.
* the pooled column (every dimension's verdicts together): the verdicts of one case are not
  independent, so the test is on cases. ``R(t) <= alpha`` exactly when the case-level variable
  ``Z = errors - alpha * accepted`` (over the case's dimensions) has mean ``<= 0``; rescaled to
  [0, 1], ``(Z + alpha D) / D`` has mean ``<= alpha`` under the alternative, and a betting
  p-value (Waudby-Smith and Ramdas 2024, as in Bates et al.'s RCPS; :func:`betting_p_value`)
  tests its mean over the calibration cases: valid in finite samples, and adaptive to the small
  spread of these sums (Hoeffding-Bentkus, which bounds by the range, found nothing safe).

The hypotheses are tested in sequence from the most confident threshold downwards, each at level
``delta``, stopping at the first that is not rejected; the threshold chosen is the last one
rejected. Fixed-sequence testing controls the family-wise error rate at ``delta``, so

    **with probability at least 1 - delta over the calibration cases, R(t_chosen) <= alpha,**

for any judge, any distribution of cases, and finite samples, provided the calibration and future
cases are exchangeable (drawn from the same population) and the grid does not depend on the
calibration labels. When the most confident threshold is not rejected, no threshold qualifies and
nothing is accepted (coverage 0): the data do not show that any share of the verdicts is safe.
The guarantee is about the population risk; the held-out realised error estimates it (with a
Clopper-Pearson interval per dimension, a case-bootstrap interval for the pooled column, never
zero-width: :mod:`medrewardbench.metrics.stats.floor`) and
fluctuates around it (beyond :data:`~medrewardbench.metrics.calibration.BOOTSTRAP_LIMIT` held-out
cases the pooled interval is the normal one of the ratio's linearisation). Ties in confidence are
accepted or refused together (the threshold compares ``>=``), so coarse confidences (order
agreement gives 0.5 or 1) give a coarse grid, not a wrong one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.calibration import BOOTSTRAP_LIMIT
from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.settings import DEFAULT_DELTA, DEFAULT_RISK
from medrewardbench.metrics.stats import FloatArray
from medrewardbench.metrics.stats.bootstrap import ratio_ci
from medrewardbench.metrics.stats.distributions import _regularized_beta
from medrewardbench.metrics.stats.floor import floor_degenerate

__all__ = [
    "DEFAULT_DELTA",
    "DEFAULT_RISK",
    "ColumnSelection",
    "Threshold",
    "betting_p_value",
    "Selection",
    "binomial_cdf",
    "calibration_split",
    "clopper_pearson",
    "conformal_threshold",
    "first_share",
    "selective_judging",
    "threshold_grid",
]


# --------------------------------------------------------------------------------------------
# Exact tails (numpy and math only)
# --------------------------------------------------------------------------------------------


def binomial_cdf(k: float, n: int, p: float) -> float:
    """``P(Binomial(n, p) <= k)``.

    Args:
        k: the count (floored).
        n: trials.
        p: success probability in [0, 1].

    Returns:
        The probability.
    """
    k_int = math.floor(k)
    if k_int < 0:
        return 0.0
    if k_int >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    return _regularized_beta(n - k_int, k_int + 1, 1.0 - p)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion ``k / n``.

    Args:
        k: successes.
        n: trials.
        confidence: coverage.

    Returns:
        ``(low, high)``; NaN for ``n = 0``.
    """
    if n <= 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0

    def solve(target: float, count: int) -> float:
        """The p at which P(Bin(n, p) <= count) = target (decreasing in p): bisection."""
        low, high = 0.0, 1.0
        for _ in range(60):
            middle = (low + high) / 2.0
            if binomial_cdf(count, n, middle) > target:
                low = middle
            else:
                high = middle
        return (low + high) / 2.0

    lower = 0.0 if k <= 0 else solve(1.0 - tail, k - 1)
    upper = 1.0 if k >= n else solve(tail, k)
    return lower, upper


def betting_p_value(values: npt.ArrayLike, alpha: float, delta: float) -> float:
    """p-value of ``H0: E[X] > alpha`` from independent X in [0, 1] by betting (Waudby-Smith and Ramdas).

    The capital ``K_t = prod_{i <= t} (1 - nu_i (X_i - alpha))`` is a nonnegative supermartingale
    under H0 whatever the bets ``nu_i`` in [0, 1] chosen from the earlier observations (here the
    predictable plug-in ``min(1, sqrt(2 log(1/delta) / (n sigma_{i-1}^2)))``), so by Ville's
    inequality ``1 / max_t K_t`` is a valid p-value. It adapts to the variance, which matters when
    the range of X is much wider than its spread (the pooled column's case sums).

    Args:
        values: the observations, in an order that does not depend on them (case order).
        alpha: the level the mean is tested against.
        delta: the level of the test (it tunes the bets).

    Returns:
        The p-value, at most 1.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    n = x.size
    if n == 0:
        return 1.0
    t = np.arange(1, n + 1, dtype=np.float64)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    previous = np.concatenate([[0.25], sigma2[:-1]])
    nu = np.minimum(1.0, np.sqrt(2.0 * math.log(1.0 / delta) / (n * previous)))
    log_capital = np.cumsum(np.log1p(-nu * (x - alpha)))
    return float(min(1.0, math.exp(-max(0.0, float(log_capital.max())))))


# --------------------------------------------------------------------------------------------
# The threshold
# --------------------------------------------------------------------------------------------


def calibration_split(n_cases: int, fraction: float, seed: int) -> npt.NDArray[np.bool_]:
    """Which cases calibrate (True) and which are held out, at random (seeded).

    Args:
        n_cases: how many cases.
        fraction: share of cases to calibrate on, in (0, 1).
        seed: the seed.

    Returns:
        (n_cases,) boolean mask, ``round(fraction * n_cases)`` True.
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the calibration fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5E1,)))
    mask = np.zeros(n_cases, dtype=bool)
    mask[rng.permutation(n_cases)[: int(round(fraction * n_cases))]] = True
    return mask


def threshold_grid(confidence: npt.ArrayLike, max_thresholds: int = 20, first_share: float = 0.0) -> FloatArray:
    """Thresholds to test, most confident first, from confidences that do not calibrate.

    Args:
        confidence: the confidences of the verdicts that could be accepted (held-out cases).
        max_thresholds: the most thresholds.
        first_share: the smallest share of these verdicts the first threshold accepts (a
            threshold that accepts a handful cannot be shown safe, and the sequence would stop there).

    Returns:
        Decreasing thresholds: the distinct values that accept at least ``first_share``; when there
        are more than ``max_thresholds`` of them, those at which ``first_share`` to 1 of the
        verdicts would be accepted, in ``max_thresholds`` even steps.
    """
    c = np.sort(np.asarray(confidence, dtype=np.float64).reshape(-1))[::-1]
    if c.size == 0:
        return np.zeros(0)
    values = np.unique(c)[::-1]
    shares = np.searchsorted(-c, -values, side="right") / c.size
    kept = values[shares >= min(first_share, 1.0) - 1e-12]
    if kept.size <= max_thresholds:
        return kept
    start = max(first_share, 1.0 / max_thresholds)
    steps = np.linspace(start, 1.0, max_thresholds)
    positions = np.clip(np.ceil(steps * c.size).astype(np.int64) - 1, 0, c.size - 1)
    return np.unique(c[positions])[::-1]


def first_share(n_calibration: int, alpha: float, delta: float, margin: float = 3.0) -> float:
    """The share of verdicts the first threshold should accept: ``margin`` times the fewest that can pass.

    With ``n`` accepted and no error the binomial p-value is ``(1 - alpha)**n``, so fewer than
    ``log(delta) / log(1 - alpha)`` accepted verdicts (22 at 0.10 and 0.10) can never be shown
    safe; starting the sequence at about ``margin`` times that many leaves room for a few errors.

    Args:
        n_calibration: calibration cases (with a label in the column): the unit of the tests.
        alpha: the risk level.
        delta: the error probability.
        margin: the multiple.

    Returns:
        A share in [0, 1].
    """
    if n_calibration <= 0:
        return 1.0
    fewest = math.log(delta) / math.log(1.0 - alpha)
    return min(1.0, margin * fewest / n_calibration)


@dataclass(frozen=True)
class Threshold:
    """The outcome of the sequence of tests on the calibration cases.

    Attributes:
        threshold: the chosen threshold; NaN when none qualifies.
        tested: how many thresholds were tested (the last one was not rejected, unless all were).
        p_value: the p-value of the chosen threshold (NaN when none qualifies).
        accepted, errors: accepted verdicts and errors among them on the calibration cases at it.
    """

    threshold: float
    tested: int
    p_value: float
    accepted: int
    errors: int


def conformal_threshold(
    confidence: npt.ArrayLike,
    wrong: npt.ArrayLike,
    acceptable: npt.ArrayLike,
    grid: npt.ArrayLike,
    *,
    alpha: float = DEFAULT_RISK,
    delta: float = DEFAULT_DELTA,
) -> Threshold:
    """The lowest threshold of ``grid`` whose selective risk is shown <= alpha (fixed-sequence LTT).

    Rows are calibration cases, columns the dimensions pooled together. With one column the test
    is the exact binomial one; with several the case-level betting test (see the module
    docstring).

    Args:
        confidence: (n_cases, D) or (n_cases,) confidences.
        wrong: same shape, 1 where the verdict is wrong.
        acceptable: same shape, True where a verdict may be accepted (labelled, names a response).
        grid: thresholds, most confident first.
        alpha: the risk level.
        delta: the error probability of the guarantee.

    Returns:
        The :class:`Threshold`.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    if conf.ndim == 1:
        conf = conf[:, None]
    bad = np.asarray(wrong, dtype=np.float64).reshape(conf.shape)
    ok = np.asarray(acceptable, dtype=bool).reshape(conf.shape)
    n_dims = conf.shape[1]
    cases = ok.any(axis=1)
    chosen = Threshold(math.nan, 0, math.nan, 0, 0)
    for j, t in enumerate(np.asarray(grid, dtype=np.float64).tolist()):
        accepted = ok & (conf >= t)
        n_acc = int(accepted.sum())
        n_err = int(np.round((bad * accepted).sum()))
        if n_dims == 1:
            p = binomial_cdf(n_err, n_acc, alpha) if n_acc else 1.0
        else:
            z = (bad * accepted).sum(axis=1) - alpha * accepted.sum(axis=1)
            scaled = (z[cases] + alpha * n_dims) / n_dims
            p = betting_p_value(scaled, alpha, delta)
        if p > delta:
            return replace(chosen, tested=j + 1)
        chosen = Threshold(float(t), j + 1, p, n_acc, n_err)
    return chosen


# --------------------------------------------------------------------------------------------
# One judge
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnSelection:
    """Selective judging of one column (a dimension, or pooled), measured on the held-out cases.

    Attributes:
        threshold: from the calibration cases (:class:`Threshold`).
        n: held-out labelled verdicts (the coverage's denominator).
        accepted: held-out verdicts accepted.
        errors: wrong ones among them.
        coverage: ``accepted / n``.
        risk, risk_low, risk_high: the realised error among accepted, with its interval (NaN
            when nothing was accepted).
        curve_threshold, curve_coverage, curve_risk: the held-out risk-coverage curve, most
            confident first.
    """

    threshold: Threshold
    n: int
    accepted: int
    errors: int
    coverage: float
    risk: float
    risk_low: float
    risk_high: float
    curve_threshold: FloatArray
    curve_coverage: FloatArray
    curve_risk: FloatArray


@dataclass(frozen=True)
class Selection:
    """Selective judging of one judge: one :class:`ColumnSelection` per dimension, then pooled."""

    columns: tuple[ColumnSelection, ...]
    calibration_cases: int
    heldout_cases: int


def _curve(
    conf: FloatArray, bad: FloatArray, ok: npt.NDArray[np.bool_], n: int, max_points: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Held-out risk and coverage (of ``n`` verdicts) at each of at most ``max_points`` thresholds."""
    values = conf[ok]
    if values.size == 0 or n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    grid = threshold_grid(values, max_points)
    order = np.argsort(-values, kind="stable")
    sorted_conf = values[order]
    cum_err = np.concatenate([[0.0], np.cumsum(bad[ok][order])])
    counts = np.searchsorted(-sorted_conf, -grid, side="right")  # accepted at each threshold (>=)
    with np.errstate(invalid="ignore", divide="ignore"):
        risk = np.where(counts > 0, cum_err[counts] / np.maximum(counts, 1), np.nan)
    return grid, counts / n, risk


def _normal_ratio_interval(numerators: FloatArray, denominators: FloatArray, confidence: float) -> tuple[float, float]:
    """Normal interval of ``sum(num) / sum(den)`` over independent cases (its linearisation; large data).

    No error among the accepted verdicts (or no correct one) gives a spread of 0; that interval is
    widened to the exact bound on the cases accepted (:func:`~medrewardbench.metrics.stats.floor.floor_degenerate`).
    """
    total = float(denominators.sum())
    ratio = float(numerators.sum()) / total
    influence = (numerators - ratio * denominators) / total
    n = influence.size
    spread = math.sqrt(n / max(n - 1, 1) * float(((influence - influence.mean()) ** 2).sum()))
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    units = int((denominators > 0).sum())
    low, high = floor_degenerate(ratio, max(0.0, ratio - z * spread), min(1.0, ratio + z * spread), units, confidence)
    return float(low), float(high)


def selective_judging(
    verdicts: CaseVerdicts,
    *,
    alpha: float = DEFAULT_RISK,
    delta: float = DEFAULT_DELTA,
    calibration_fraction: float = 0.5,
    seed: int = 0,
    max_thresholds: int = 20,
    n_resamples: int = 2000,
    strata: npt.ArrayLike | None = None,
    confidence_level: float = 0.95,
    curve_points: int = 40,
) -> Selection:
    """Choose thresholds on a calibration split of cases and measure them on the rest.

    Args:
        verdicts: one judge's case-level preferences (its source must not be ``"none"``).
        alpha: the risk level.
        delta: the error probability of the guarantee.
        calibration_fraction: share of the cases to calibrate on.
        seed: the seed of the split (and of the pooled interval's resamples).
        max_thresholds: the most thresholds tested.
        n_resamples: resamples for the pooled column's interval (0: none).
        strata: (n_cases,) stratum per case for that bootstrap.
        confidence_level: coverage of the realised error's interval.
        curve_points: the most points of each risk-coverage curve.

    Returns:
        The :class:`Selection`.

    Raises:
        ValueError: a judge without confidences, or alpha/delta outside (0, 1).
    """
    if verdicts.source == "none":
        raise ValueError(f"{verdicts.judge_spec}: the judge has no confidence (one order, no probability)")
    if not (0.0 < alpha < 1.0 and 0.0 < delta < 1.0):
        raise ValueError(f"alpha and delta must be in (0, 1), got {alpha} and {delta}")
    n_cases, n_dims = verdicts.p_first.shape
    calibrate = calibration_split(n_cases, calibration_fraction, seed)
    held = ~calibrate
    conf = verdicts.confidence
    ok = (verdicts.labels > 0) & (verdicts.verdict != 0)
    labelled = verdicts.labels > 0
    bad = np.where(ok, 1.0 - np.nan_to_num(verdicts.correct), 0.0)
    columns: list[ColumnSelection] = []
    for column in range(n_dims + 1):
        dims = np.arange(n_dims) if column == n_dims else np.array([column], dtype=np.int64)
        c, b, o, lab = conf[:, dims], bad[:, dims], ok[:, dims], labelled[:, dims]
        start = first_share(int(lab[calibrate].any(axis=1).sum()), alpha, delta)  # cases: the unit of every test
        grid = threshold_grid(c[held][o[held]], max_thresholds, start)
        found = conformal_threshold(c[calibrate], b[calibrate], o[calibrate], grid, alpha=alpha, delta=delta)
        t = found.threshold
        accepted = o[held] & (c[held] >= t) if not math.isnan(t) else np.zeros_like(o[held])
        n = int(lab[held].sum())
        n_acc = int(accepted.sum())
        n_err = int(np.round((b[held] * accepted).sum()))
        risk = n_err / n_acc if n_acc else math.nan
        if not n_acc:
            low = high = math.nan
        elif column < n_dims:
            low, high = clopper_pearson(n_err, n_acc, confidence_level)
        elif n_resamples and int(held.sum()) > BOOTSTRAP_LIMIT:
            low, high = _normal_ratio_interval(
                (b[held] * accepted).sum(axis=1), accepted.sum(axis=1).astype(np.float64), confidence_level
            )
        elif n_resamples:
            est = ratio_ci(
                (b[held] * accepted).sum(axis=1),
                accepted.sum(axis=1).astype(np.float64),
                n_resamples=n_resamples,
                seed=seed,
                strata=None if strata is None else np.asarray(strata, dtype=object)[held],
                confidence=confidence_level,
                small_sample=True,  # few held cases without an error must not give [0, 0]
            )
            low, high = float(est.low), float(est.high)
        else:
            low = high = math.nan
        curve = _curve(c[held], b[held], o[held], n, curve_points)
        columns.append(
            ColumnSelection(
                threshold=found,
                n=n,
                accepted=n_acc,
                errors=n_err,
                coverage=n_acc / n if n else math.nan,
                risk=risk,
                risk_low=low,
                risk_high=high,
                curve_threshold=curve[0],
                curve_coverage=curve[1],
                curve_risk=curve[2],
            )
        )
    return Selection(tuple(columns), int(calibrate.sum()), int(held.sum()))

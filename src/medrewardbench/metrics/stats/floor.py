"""A floor under bootstrap intervals of a ratio over a few units: never narrower than the units can show.

A case bootstrap resamples units (cases, parent cases). Over a few units it fails in two ways:

* **Zero width.** When every unit agrees (a judge flips on 0 of 12 parents, or on all of them),
  every resample gives the same value and the percentile interval is ``[0, 0]``, as if the rate
  were known exactly. With 12 parents of 12 requests and a true rate of 1 %, all agree 24 % of
  the time (70 % when a parent's requests move together), and the 95 % interval covered 75 %
  (30 %) of the time.
* **Too narrow near the boundary.** With one or two units showing the event the resamples rarely
  lose them all, and the interval still under-covers (the percentile bootstrap of a mean over 5
  units covers about 85 % even at a rate of 0.2).

The floor (:func:`small_sample_floor`), for a ratio of sums ``sum y_i / sum m_i`` over units:

* a **zero-width** interval (all ``n`` units with a positive denominator gave the same value
  ``p``) becomes ``[p - u (p - lo), p + u (hi - p)]`` on the statistic's range ``[lo, hi]``,
  where ``u = 1 - (alpha / 2) ** (1 / n)`` is the exact (Clopper-Pearson) upper bound on the share
  of units that could differ when none of ``n`` did (:func:`exceptions_bound`; 12 units: 0.265),
  and such units move the ratio by at most ``u`` times the distance to the end of the range. At
  ``p = 0`` that is the Clopper-Pearson interval of 0 of ``n``, ``[0, u]``; at 1 its mirror; a
  paired difference that is 0 on every unit gets ``[-u, u]`` (a difference of two rates can move
  only on units where they differ, as in McNemar's test). The units are taken as the sample
  because a unit's requests may all move together;
* any other interval becomes the **hull** of itself and the Korn-Graubard interval (Korn and
  Graubard, *Survey Methodology* 1998): Wilson's interval at the effective sample size
  ``n_eff = p (1 - p) / v`` (``v`` the ratio's linearised variance over units, ``n / (n - 1)``
  times the sum of squared residuals ``(y_i - p m_i) / sum m``; for a rate of 0/1 requests
  ``n_eff`` is at most ``sum m``, as if the requests were independent; a difference of two rates,
  mostly 0 per request, is not capped),
  shrunk by ``(z / t_{n-1})^2`` because ``v`` comes from ``n`` units.

A statistic on another range (a difference of rates on ``[-1, 1]``) is rescaled to ``[0, 1]``
for the Korn-Graubard interval. The floor only widens: each end is the wider of the two. Over
hundreds of units the Korn-Graubard interval is the bootstrap's to within ``t_{n-1} / z`` (1.001
at 1,000 units), so large data sets see changes in the third or fourth decimal only.

Coverage of a nominal 95 % interval, 400 simulated data sets per cell, 12 requests per unit
(``benchmarks/bench_small_sample_floor.py`` prints the whole grid; ``tests/metrics/test_stats_floor.py``
checks it; ICC 0.5: a unit's rate drawn from a beta law)::

    units  rate  ICC   bootstrap  floored
      5    0.01  0     0.46       1.00
      5    0.20  0     0.84       0.99
     12    0.01  0.5   0.30       1.00
     12    0.05  0.5   0.70       0.90
     30    0.02  0.5   0.65       0.89
     30    0.50  0     0.92       0.965

Rare events concentrated in a few units (ICC 0.5, 1-3 units showing them) stay the hardest
cell (about 0.89-0.90): the variance there rests on the few units that show the event.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.stats.counts import FloatArray, _check_confidence
from medrewardbench.metrics.stats.distributions import t_over_z

__all__ = [
    "DEGENERATE_WIDTH",
    "exceptions_bound",
    "floor_degenerate",
    "small_sample_floor",
    "wilson_interval",
]

DEGENERATE_WIDTH = 1e-12
"""An interval narrower than this (on the statistic's scale) counts as zero-width."""


def exceptions_bound(n_units: npt.ArrayLike, confidence: float = 0.95) -> FloatArray:
    """``1 - (alpha / 2) ** (1 / n)``: the exact upper bound on a share that ``n`` units all missed.

    Args:
        n_units: the units (0 gives NaN).
        confidence: two-sided coverage (``alpha = 1 - confidence``).

    Returns:
        The Clopper-Pearson upper end for 0 events in ``n`` (12 units: 0.265).
    """
    _check_confidence(confidence)
    n = np.asarray(n_units, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, 1.0 - tail ** (1.0 / n), np.nan)


def wilson_interval(point: npt.ArrayLike, n: npt.ArrayLike, confidence: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Wilson's score interval of a proportion ``point`` on ``n`` trials (``n`` may be fractional).

    Args:
        point: proportions in [0, 1].
        n: trials, positive (NaN out where not).
        confidence: coverage.

    Returns:
        ``(low, high)``.
    """
    _check_confidence(confidence)
    p = np.asarray(point, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(m > 0, m, np.nan)
        centre = (p + z * z / (2 * m)) / (1 + z * z / m)
        half = z / (1 + z * z / m) * np.sqrt(np.maximum(p * (1 - p), 0.0) / m + z * z / (4 * m * m))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def floor_degenerate(
    point: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    n_units: npt.ArrayLike,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[FloatArray, FloatArray]:
    """Zero-width intervals widened to ``[p - u (p - lo), p + u (hi - p)]``; the others unchanged.

    ``u`` is :func:`exceptions_bound` of the units (the module docstring).

    Args:
        point: the point estimates.
        low: the bootstrap intervals' low ends.
        high: their high ends.
        n_units: the units behind each point (units with a positive denominator).
        confidence: coverage.
        bounds: the statistic's range (``(-1, 1)`` for a difference of two rates).

    Returns:
        ``(low, high)``, new arrays of the same shape.
    """
    lo, hi = _check_bounds(bounds)
    p = np.asarray(point, dtype=np.float64)
    out_low = np.array(low, dtype=np.float64, copy=True)
    out_high = np.array(high, dtype=np.float64, copy=True)
    n = np.broadcast_to(np.asarray(n_units, dtype=np.float64), p.shape)
    degenerate = np.isfinite(p) & (n > 0) & ~(out_high - out_low > DEGENERATE_WIDTH)
    if degenerate.any():
        centre = np.clip(p[degenerate], lo, hi)
        share = exceptions_bound(n[degenerate], confidence)
        out_low[degenerate] = centre - share * (centre - lo)
        out_high[degenerate] = centre + share * (hi - centre)
    return out_low, out_high


def small_sample_floor(
    numerators: npt.ArrayLike,
    denominators: npt.ArrayLike,
    low: npt.ArrayLike,
    high: npt.ArrayLike,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[FloatArray, FloatArray]:
    """A bootstrap interval of a ratio of sums over units, never narrower than its small-sample floor.

    Zero-width intervals are widened by :func:`floor_degenerate` on the units;
    the others become the hull of the bootstrap interval and the Korn-Graubard interval (the
    module docstring).

    Args:
        numerators: (n_units, ...) per-unit numerators.
        denominators: the same shape; units with a denominator of 0 do not count.
        low: (...) the bootstrap intervals' low ends.
        high: their high ends.
        confidence: coverage.
        bounds: the ratio's range.

    Returns:
        ``(low, high)``, new arrays.
    """
    lo, hi = _check_bounds(bounds)
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    used = den > 0
    n = used.sum(axis=0).astype(np.float64)
    total = den.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = num.sum(axis=0) / total
        residual = np.where(used, num - point * den, 0.0)
        variance = n / (n - 1) * (residual * residual).sum(axis=0) / (total * total)
    out_low, out_high = floor_degenerate(point, low, high, n, confidence, bounds)
    q = (point - lo) / (hi - lo)
    variance_q = variance / (hi - lo) ** 2
    informative = np.isfinite(q) & (n > 1) & (variance_q > 0) & (q > 0) & (q < 1) & (out_high - out_low > 0)
    if informative.any():
        effective = q[informative] * (1 - q[informative]) / variance_q[informative]
        if (lo, hi) == (0.0, 1.0):  # 0/1 requests: no more information than independent ones
            effective = np.minimum(total[informative], effective)
        # Korn and Graubard's degrees-of-freedom correction: the variance is estimated from n units
        effective = effective / t_over_z(n[informative] - 1, confidence) ** 2
        kg_low, kg_high = wilson_interval(q[informative], effective, confidence)
        out_low[informative] = np.minimum(out_low[informative], lo + (hi - lo) * kg_low)
        out_high[informative] = np.maximum(out_high[informative], lo + (hi - lo) * kg_high)
    return out_low, out_high


def _check_bounds(bounds: tuple[float, float]) -> tuple[float, float]:
    lo, hi = bounds
    if not hi > lo:
        raise ValueError(f"bounds must be increasing, got {bounds}")
    return lo, hi

"""Calibration of a judge's confidences: reliability bins, ECE, Brier score, cross-fitted recalibration.

Works on the case-level view of :mod:`medrewardbench.metrics.confidence` (one preference
``p_first`` per case and dimension). A cell counts when the case has an expert label on the
dimension and the judge gave a verdict in some order; a cell without a verdict has no confidence
to calibrate (selective judging abstains on it, :mod:`medrewardbench.metrics.selective`).

* **Brier score** (the proper score): the mean of ``(p_first - y)**2`` with ``y = 1`` when the
  experts prefer ``response_1``: 0 is perfect, 0.25 is a coin at 0.5.
* **Expected calibration error** on the verdict's confidence ``c = max(p, 1 - p)`` against its
  correctness (1, 0, or 0.5 for a tie): ``sum_b (n_b / n) |accuracy_b - confidence_b|`` over bins
  of confidence, **equal-width** (``n_bins`` bins on [0.5, 1]) or **equal-mass** (bins of about
  ``n / n_bins`` cells each). Equal-mass bins never split cells of equal confidence: a run whose
  confidences come from order agreement has only the values 0.5 and 1 and gets two bins, not ten.
* **Intervals**: case bootstrap (:mod:`medrewardbench.metrics.stats`: cases resampled within organ
  systems, the dimensions of a case together), each statistic recomputed in every resample from
  per-case sums over fixed bins; the pooled column pools every dimension's cells. Beyond
  :data:`BOOTSTRAP_LIMIT` cases, normal intervals from the statistics' linearisation in those
  sums (cases independent) replace the bootstrap, which would take minutes there.
* **Recalibration** (:func:`cross_fitted`): isotonic regression (pool-adjacent-violators, in
  numpy) or temperature scaling of ``logit(p_first)``, fitted on K-1 folds of cases and applied to
  the held-out fold, so every recalibrated preference comes from a map that never saw its case.
  Both maps are fitted on the data and its mirror ``(1 - p, 1 - y)``: the order of the two
  responses in the source carries no meaning, so the map is symmetric and keeps every verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.stats import CountArray, FloatArray
from medrewardbench.metrics.stats.bootstrap import iter_bootstrap_weights, percentile_interval

__all__ = [
    "RECALIBRATIONS",
    "BinLayout",
    "CalibrationFigures",
    "Recalibration",
    "calibration_figures",
    "calibration_figures_many",
    "case_folds",
    "cross_fitted",
    "equal_mass_bins",
    "equal_width_bins",
    "fit_isotonic",
    "fit_temperature",
    "isotonic_regression",
]

Recalibration = Literal["none", "isotonic", "temperature"]
RECALIBRATIONS: tuple[str, ...] = ("none", "isotonic", "temperature")
"""The recalibrations :func:`cross_fitted` knows."""

BOOTSTRAP_LIMIT = 20_000
"""Beyond this many cases, intervals come from a normal approximation (:func:`_normal_intervals`):
the bootstrap of 140 sums per judge would take minutes, and at this size the two agree."""
_CLIP = 1e-4
"""Preferences are clipped to [_CLIP, 1 - _CLIP] before a logit (order agreement gives 0 and 1)."""


# --------------------------------------------------------------------------------------------
# Bins
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BinLayout:
    """Which bin each cell falls in, and the edges of the bins.

    Attributes:
        index: bin of each cell (same shape as the confidences given).
        edges: (n_bins + 1,) lower edges then the upper edge of the last bin.
    """

    index: CountArray
    edges: FloatArray

    @property
    def n_bins(self) -> int:
        """How many bins."""
        return int(self.edges.size - 1)


def equal_width_bins(confidence: npt.ArrayLike, n_bins: int = 10) -> BinLayout:
    """``n_bins`` bins of equal width on [0.5, 1]; a confidence of 1 falls in the last bin.

    Args:
        confidence: confidences in [0.5, 1].
        n_bins: how many bins.

    Returns:
        The layout.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    c = np.asarray(confidence, dtype=np.float64)
    edges = np.linspace(0.5, 1.0, n_bins + 1)
    index = np.clip(np.floor((c - 0.5) / 0.5 * n_bins), 0, n_bins - 1).astype(np.int64)
    return BinLayout(index, edges)


def equal_mass_bins(confidence: npt.ArrayLike, n_bins: int = 10) -> BinLayout:
    """Bins of about ``len / n_bins`` cells each, never splitting equal confidences.

    A value's bin is decided by the rank of its first occurrence, so all cells of one confidence
    share a bin; with few distinct values there are fewer bins than ``n_bins``.

    Args:
        confidence: 1-d confidences.
        n_bins: the most bins.

    Returns:
        The layout; ``edges`` are the smallest confidence of each bin, then the largest overall.
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    c = np.asarray(confidence, dtype=np.float64).reshape(-1)
    if c.size == 0:
        return BinLayout(np.zeros(0, dtype=np.int64), np.array([0.5, 1.0]))
    values, inverse = np.unique(c, return_inverse=True)
    sorted_c = np.sort(c)
    first_rank = np.searchsorted(sorted_c, values, side="left")
    raw = np.minimum(first_rank * n_bins // c.size, n_bins - 1)
    _, dense = np.unique(raw, return_inverse=True)  # renumber the bins that occur: 0, 1, 2, ...
    dense = dense.reshape(-1)
    lows = np.array([values[dense == b].min() for b in range(int(dense.max()) + 1)])
    edges = np.concatenate([lows, [values[-1]]])
    return BinLayout(dense[inverse.reshape(-1)].astype(np.int64), edges)


# --------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------


def _cells(verdicts: CaseVerdicts) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray, FloatArray, FloatArray]:
    """(counted, p_first, y, confidence, correct), each (n_cases, n_dims); 0 where not counted."""
    p = verdicts.p_first
    counted = (verdicts.labels > 0) & ~np.isnan(p)
    y = (verdicts.labels == 1).astype(np.float64)
    p0 = np.where(counted, p, 0.0)
    conf = np.where(counted, verdicts.confidence, 0.0)
    correct = np.where(counted, np.nan_to_num(verdicts.correct), 0.0)
    return counted, p0, np.where(counted, y, 0.0), conf, correct


@dataclass(frozen=True)
class ReliabilityBins:
    """The reliability diagram of one column: per bin its edges, cells, mean confidence and accuracy."""

    low: FloatArray
    high: FloatArray
    n: CountArray
    confidence: FloatArray
    accuracy: FloatArray


@dataclass(frozen=True)
class CalibrationFigures:
    """Calibration of one judge, per column (the dimensions, then pooled), with case-bootstrap intervals.

    Every array has one entry per column; ``*_low``/``*_high`` are NaN without resamples.
    """

    n: CountArray
    brier: FloatArray
    brier_low: FloatArray
    brier_high: FloatArray
    ece: FloatArray
    ece_low: FloatArray
    ece_high: FloatArray
    ece_mass: FloatArray
    ece_mass_low: FloatArray
    ece_mass_high: FloatArray
    bins: tuple[ReliabilityBins, ...]
    """equal-width reliability bins, one entry per column"""


def _bin_totals(counted: npt.NDArray[np.bool_], values: FloatArray, index: CountArray, n_bins: int) -> FloatArray:
    """(n_cases, n_dims, n_bins): per case, dimension and bin, the sum of ``values`` over counted cells."""
    n, d = counted.shape
    out = np.zeros((n, d, n_bins))
    rows, dims = np.nonzero(counted)
    np.add.at(out, (rows, dims, index[rows, dims]), values[rows, dims])
    return out


@dataclass(frozen=True)
class _Sums:
    """Per-case sums of one judge's cells, the columns every resample sums (a linear statistic's inputs).

    ``gap`` sums are ``correct - confidence`` per bin: a bin's ECE term is ``|sum of gaps|``, so one
    column per bin suffices (the cells' count comes from ``count``).
    """

    squared: FloatArray
    """(n, D) squared errors of p_first"""
    count: FloatArray
    """(n, D) counted cells"""
    width_gap: FloatArray
    """(n, D, B) gaps in equal-width bins (the pooled column is their sum over D)"""
    mass_gap: FloatArray
    """(n, D + 1, B) gaps in each column's own equal-mass bins"""

    def flat(self) -> FloatArray:
        """(n, K) every column side by side: squared, count, width gaps, mass gaps."""
        n = self.squared.shape[0]
        parts = [self.squared, self.count, self.width_gap.reshape(n, -1), self.mass_gap.reshape(n, -1)]
        return np.concatenate(parts, axis=1)


def _statistics(summed: FloatArray, n_dims: int, n_bins: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(brier, ece, ece_mass), each (..., n_dims + 1), from summed :meth:`_Sums.flat` columns (..., K)."""
    d, b = n_dims, n_bins
    squared = summed[..., :d]
    count = summed[..., d : 2 * d]
    width = summed[..., 2 * d : 2 * d + d * b].reshape(summed.shape[:-1] + (d, b))
    mass = summed[..., 2 * d + d * b :].reshape(summed.shape[:-1] + (d + 1, b))
    count_all = np.concatenate([count, count.sum(axis=-1, keepdims=True)], axis=-1)
    squared_all = np.concatenate([squared, squared.sum(axis=-1, keepdims=True)], axis=-1)
    width_gap = np.concatenate([np.abs(width).sum(axis=-1), np.abs(width.sum(axis=-2)).sum(axis=-1, keepdims=True)], -1)
    mass_gap = np.abs(mass).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        defined = count_all > 0
        safe = np.where(defined, count_all, 1.0)
        return (
            np.where(defined, squared_all / safe, np.nan),
            np.where(defined, width_gap / safe, np.nan),
            np.where(defined, mass_gap / safe, np.nan),
        )


def _sums(verdicts: CaseVerdicts, n_bins: int) -> tuple[_Sums, list[ReliabilityBins]]:
    """One judge's per-case sums and its equal-width reliability bins (points), per column."""
    counted, p, y, conf, correct = _cells(verdicts)
    n_cases, n_dims = counted.shape
    width = equal_width_bins(conf, n_bins)
    gap = correct - conf
    mass_gap = np.zeros((n_cases, n_dims + 1, n_bins))
    for column in range(n_dims + 1):
        cells = counted if column == n_dims else _only(counted, column)
        index = np.zeros(counted.shape, dtype=np.int64)
        if cells.any():
            index[cells] = equal_mass_bins(conf[cells], n_bins).index
        mass_gap[:, column] = _bin_totals(cells, gap, index, n_bins).sum(axis=1)
    counts = _bin_totals(counted, np.ones_like(conf), width.index, n_bins).sum(axis=0)  # (D, B)
    conf_sums = _bin_totals(counted, conf, width.index, n_bins).sum(axis=0)
    right_sums = _bin_totals(counted, correct, width.index, n_bins).sum(axis=0)
    bins = []
    for totals in (
        *zip(counts, conf_sums, right_sums, strict=True),
        (counts.sum(axis=0), conf_sums.sum(axis=0), right_sums.sum(axis=0)),
    ):
        n_b, c_b, r_b = totals
        with np.errstate(invalid="ignore", divide="ignore"):
            bins.append(
                ReliabilityBins(
                    low=width.edges[:-1],
                    high=width.edges[1:],
                    n=n_b.astype(np.int64),
                    confidence=np.where(n_b > 0, c_b / np.maximum(n_b, 1), np.nan),
                    accuracy=np.where(n_b > 0, r_b / np.maximum(n_b, 1), np.nan),
                )
            )
    sums = _Sums(
        squared=np.where(counted, (p - y) ** 2, 0.0),
        count=counted.astype(np.float64),
        width_gap=_bin_totals(counted, gap, width.index, n_bins),
        mass_gap=mass_gap,
    )
    return sums, bins


def calibration_figures(
    verdicts: CaseVerdicts,
    *,
    strata: npt.ArrayLike | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence_level: float = 0.95,
    n_bins: int = 10,
) -> CalibrationFigures:
    """Brier score, ECE (equal-width and equal-mass) and reliability bins, per column, with intervals.

    Args:
        verdicts: one judge's case-level preferences (recalibrated ones from :func:`cross_fitted` too).
        strata: (n_cases,) stratum per case for the bootstrap (organ system), or None.
        n_resamples: case-bootstrap resamples; 0 gives points only.
        seed: the bootstrap seed (row ``r`` of the resamples is the same as every other figure's).
        confidence_level: interval coverage.
        n_bins: bins of the ECE and the reliability diagram.

    Returns:
        The figures; columns are the dimensions, then pooled.
    """
    return calibration_figures_many(
        [verdicts],
        strata=strata,
        n_resamples=n_resamples,
        seed=seed,
        confidence_level=confidence_level,
        n_bins=n_bins,
    )[0]


def calibration_figures_many(
    judges: Sequence[CaseVerdicts],
    *,
    strata: npt.ArrayLike | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence_level: float = 0.95,
    n_bins: int = 10,
) -> list[CalibrationFigures]:
    """:func:`calibration_figures` of several judges on the same cases, on one set of resamples.

    Each statistic is a function of per-case sums, so a resample needs one matrix product of the
    resample weights with every judge's per-case columns side by side (in float32: the intervals do
    not need more digits than that, and the product runs about twice as fast).

    Args:
        judges: the judges' case-level preferences, all on the same cases.
        strata: (n_cases,) stratum per case for the bootstrap.
        n_resamples: case-bootstrap resamples; 0 gives points only.
        seed: the bootstrap seed.
        confidence_level: interval coverage.
        n_bins: bins of the ECE and the reliability diagram.

    Returns:
        One :class:`CalibrationFigures` per judge, in order.
    """
    if not judges:
        return []
    prepared = [_sums(v, n_bins) for v in judges]
    n_cases, n_dims = judges[0].p_first.shape
    flats = [sums.flat() for sums, _ in prepared]
    k = flats[0].shape[1]
    stacked = np.concatenate(flats, axis=1)
    points = _statistics(stacked.sum(axis=0).reshape(len(judges), k), n_dims, n_bins)
    cols = n_dims + 1
    lows = [np.full((len(judges), cols), np.nan) for _ in range(3)]
    highs = [np.full((len(judges), cols), np.nan) for _ in range(3)]
    if n_resamples and n_cases > BOOTSTRAP_LIMIT:
        for j, flat in enumerate(flats):
            for i, (low, high) in enumerate(_normal_intervals(flat, n_dims, n_bins, confidence_level)):
                lows[i][j], highs[i][j] = low, high
    elif n_resamples and n_cases:
        strata_a = None if strata is None else np.asarray(strata, dtype=object)
        values = stacked.astype(np.float32)
        samples: list[list[FloatArray]] = [[], [], []]
        for _, block in iter_bootstrap_weights(n_cases, n_resamples, seed, strata_a):
            summed = (block.astype(np.float32) @ values).astype(np.float64).reshape(-1, len(judges), k)
            for store, stat in zip(samples, _statistics(summed, n_dims, n_bins), strict=True):
                store.append(stat)
        for i, store in enumerate(samples):
            lows[i], highs[i] = percentile_interval(np.concatenate(store, axis=0), confidence_level)
    out = []
    for j, (sums, bins) in enumerate(prepared):
        out.append(
            CalibrationFigures(
                n=_with_pooled_counts(sums.count),
                brier=points[0][j],
                brier_low=lows[0][j],
                brier_high=highs[0][j],
                ece=points[1][j],
                ece_low=lows[1][j],
                ece_high=highs[1][j],
                ece_mass=points[2][j],
                ece_mass_low=lows[2][j],
                ece_mass_high=highs[2][j],
                bins=tuple(bins),
            )
        )
    return out


def _normal_intervals(
    flat: FloatArray, n_dims: int, n_bins: int, confidence_level: float
) -> list[tuple[FloatArray, FloatArray]]:
    """Normal intervals of (brier, ece, ece_mass) from their linearisation in per-case sums (large data).

    Each statistic is a smooth function of the column sums ``S`` (the ECE's absolute values are
    smooth away from a zero gap): its influence of case ``i`` is ``x_i . grad f(S)``, and the
    variance of the statistic is ``n / (n - 1)`` times the sum of the centred squared influences,
    cases being independent (dimensions of a case together). The gradient is taken numerically.
    """
    total = flat.sum(axis=0)
    points = np.stack(_statistics(total, n_dims, n_bins))  # (3, C)
    gradient = np.zeros((flat.shape[1],) + points.shape)
    for k in range(flat.shape[1]):
        step = 1e-6 * max(1.0, abs(float(total[k])))
        up, down = total.copy(), total.copy()
        up[k] += step
        down[k] -= step
        gradient[k] = (np.stack(_statistics(up, n_dims, n_bins)) - np.stack(_statistics(down, n_dims, n_bins))) / (
            2 * step
        )
    gradient = np.nan_to_num(gradient)
    n = flat.shape[0]
    influence = flat @ gradient.reshape(flat.shape[1], -1)  # (n, 3 * C)
    spread = np.sqrt(n / max(n - 1, 1) * ((influence - influence.mean(axis=0)) ** 2).sum(axis=0)).reshape(points.shape)
    z = NormalDist().inv_cdf(0.5 + confidence_level / 2)
    return [(np.maximum(points[i] - z * spread[i], 0.0), points[i] + z * spread[i]) for i in range(3)]


def _with_pooled_counts(count: FloatArray) -> CountArray:
    per_dimension = count.sum(axis=0)
    return np.concatenate([per_dimension, [per_dimension.sum()]]).astype(np.int64)


def _only(counted: npt.NDArray[np.bool_], column: int) -> npt.NDArray[np.bool_]:
    """The counted cells of one dimension column."""
    out = np.zeros_like(counted)
    out[:, column] = counted[:, column]
    return out


# --------------------------------------------------------------------------------------------
# Recalibration maps
# --------------------------------------------------------------------------------------------


def isotonic_regression(y: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> FloatArray:
    """The non-decreasing fit to ``y`` (in the given order) by pool-adjacent-violators.

    Args:
        y: values, ordered by the regressor.
        weights: positive weights (default 1).

    Returns:
        The fitted values, same length: the weighted least-squares non-decreasing sequence.
    """
    values = np.asarray(y, dtype=np.float64).reshape(-1)
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    means: list[float] = []
    masses: list[float] = []
    sizes: list[int] = []
    for value, weight in zip(values.tolist(), w.tolist(), strict=True):
        means.append(value)
        masses.append(weight)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            mass = masses[-2] + masses[-1]
            means[-2] = (means[-2] * masses[-2] + means[-1] * masses[-1]) / mass
            masses[-2] = mass
            sizes[-2] += sizes[-1]
            del means[-1], masses[-1], sizes[-1]
    return np.repeat(np.array(means), np.array(sizes, dtype=np.int64)) if means else np.zeros(0)


@dataclass(frozen=True)
class IsotonicMap:
    """A fitted isotonic map: linear interpolation between the fitted points, constant outside."""

    x: FloatArray
    y: FloatArray

    def __call__(self, p: npt.ArrayLike) -> FloatArray:
        """The recalibrated preference of each ``p`` (NaN stays NaN)."""
        p_a = np.asarray(p, dtype=np.float64)
        return np.where(np.isnan(p_a), np.nan, np.interp(np.nan_to_num(p_a, nan=0.5), self.x, self.y))


def fit_isotonic(p: npt.ArrayLike, y: npt.ArrayLike) -> IsotonicMap:
    """Isotonic regression of the label on ``p``, fitted on the data and its mirror (a symmetric map).

    Args:
        p: preferences for ``response_1`` in [0, 1].
        y: 1 where the experts prefer ``response_1``, else 0.

    Returns:
        The map; with no data, the identity.
    """
    p_a = np.asarray(p, dtype=np.float64).reshape(-1)
    y_a = np.asarray(y, dtype=np.float64).reshape(-1)
    if p_a.size == 0:
        return IsotonicMap(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    xs = np.concatenate([p_a, 1.0 - p_a])
    ys = np.concatenate([y_a, 1.0 - y_a])
    # pool equal x first: PAV on distinct x with their mean label and count as weight
    ux, inverse = np.unique(xs, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1)).astype(np.float64)
    mean_y = np.bincount(inverse.reshape(-1), weights=ys) / counts
    return IsotonicMap(ux, isotonic_regression(mean_y, counts))


@dataclass(frozen=True)
class TemperatureMap:
    """``sigmoid(logit(p) / temperature)``: a temperature above 1 softens, below 1 sharpens."""

    temperature: float

    def __call__(self, p: npt.ArrayLike) -> FloatArray:
        """The recalibrated preference of each ``p`` (NaN stays NaN)."""
        z = _logit(np.asarray(p, dtype=np.float64)) / self.temperature
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)


def _logit(p: FloatArray) -> FloatArray:
    q = np.clip(p, _CLIP, 1.0 - _CLIP)
    return np.asarray(np.log(q) - np.log1p(-q), dtype=np.float64)


def fit_temperature(p: npt.ArrayLike, y: npt.ArrayLike, *, max_temperature: float = 1e4) -> TemperatureMap:
    """Temperature scaling of ``logit(p)``: the temperature that minimises the log loss (Newton on 1/T).

    No intercept: ``p`` and ``1 - p`` are mirror images (the source order of the two responses
    means nothing), and a slope alone keeps that symmetry.

    Args:
        p: preferences for ``response_1``.
        y: 1 where the experts prefer ``response_1``, else 0.
        max_temperature: the largest temperature returned (a judge no better than chance).

    Returns:
        The fitted map; with no informative data, temperature 1.
    """
    z = _logit(np.asarray(p, dtype=np.float64).reshape(-1))
    y_a = np.asarray(y, dtype=np.float64).reshape(-1)
    if z.size == 0 or not np.any(z != 0):
        return TemperatureMap(1.0)
    a = 1.0
    for _ in range(100):
        s = 1.0 / (1.0 + np.exp(-a * z))
        grad = float(np.sum((s - y_a) * z))
        hess = float(np.sum(s * (1 - s) * z * z))
        if hess <= 1e-12:
            break
        step = grad / hess
        a_new = max(a - step, 1.0 / max_temperature)
        if abs(a_new - a) < 1e-10:
            a = a_new
            break
        a = a_new
    return TemperatureMap(1.0 / a if a > 0 else max_temperature)


def case_folds(n_cases: int, k: int, seed: int) -> CountArray:
    """A fold (0..k-1) for every case, seeded, sizes differing by at most one.

    Args:
        n_cases: how many cases.
        k: how many folds (at least 2).
        seed: the seed.

    Returns:
        (n_cases,) fold per case.
    """
    if k < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {k}")
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0xCA1B,))).permutation(n_cases)
    folds = np.empty(n_cases, dtype=np.int64)
    folds[order] = np.arange(n_cases) % k
    return folds


def _fit(method: str, p: FloatArray, y: FloatArray) -> IsotonicMap | TemperatureMap:
    if method == "isotonic":
        return fit_isotonic(p, y)
    if method == "temperature":
        return fit_temperature(p, y)
    raise ValueError(f"unknown recalibration {method!r}; expected one of {', '.join(RECALIBRATIONS)}")


def cross_fitted(verdicts: CaseVerdicts, method: str, *, folds: int = 5, seed: int = 0) -> CaseVerdicts:
    """Recalibrated preferences, each from a map fitted on the other folds of cases.

    One map per fold is fitted on every labelled, answered cell of the other K-1 folds (all
    dimensions together) and applied to the held-out fold's cells, so no preference is ever
    recalibrated by a map that saw its case. Cells without a verdict stay without one.

    Args:
        verdicts: one judge's case-level preferences.
        method: ``"isotonic"`` or ``"temperature"`` (``"none"`` returns ``verdicts``).
        folds: K, the number of folds of cases.
        seed: the seed of the folds.

    Returns:
        The same cases with recalibrated ``p_first``.
    """
    if method == "none":
        return verdicts
    n_cases = len(verdicts.case_ids)
    if n_cases < folds:
        raise ValueError(f"cross-fitted recalibration needs at least {folds} cases, got {n_cases}")
    fold_of = case_folds(n_cases, folds, seed)
    counted, p, y, _, _ = _cells(verdicts)
    out = np.full(verdicts.p_first.shape, np.nan)
    for fold in range(folds):
        held = fold_of == fold
        train = counted & ~held[:, None]
        mapping = _fit(method, p[train], y[train])
        out[held] = mapping(verdicts.p_first[held])
    return replace(verdicts, p_first=np.where(np.isnan(verdicts.p_first), np.nan, out))

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
  per-case sums over fixed bins; the pooled column pools every dimension's cells.
* **Recalibration** (:func:`cross_fitted`): isotonic regression (pool-adjacent-violators, in
  numpy) or temperature scaling of ``logit(p_first)``, fitted on K-1 folds of cases and applied to
  the held-out fold, so every recalibrated preference comes from a map that never saw its case.
  Both maps are fitted on the data and its mirror ``(1 - p, 1 - y)``: the order of the two
  responses in the source carries no meaning, so the map is symmetric and keeps every verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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


def _with_pooled(values: FloatArray) -> FloatArray:
    """(n, D, ...) -> (n, D + 1, ...): the sum over dimensions appended as the pooled column."""
    return np.concatenate([values, values.sum(axis=1, keepdims=True)], axis=1)


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


def _bin_sums(
    counted: npt.NDArray[np.bool_], conf: FloatArray, correct: FloatArray, index: CountArray, n_bins: int
) -> FloatArray:
    """(n_cases, 3, n_bins): per case and bin the cells, their confidences' sum and correct sum."""
    n = counted.shape[0]
    out = np.zeros((n, 3, n_bins))
    rows = np.broadcast_to(np.arange(n)[:, None], counted.shape)[counted]
    bins = index[counted]
    np.add.at(out[:, 0], (rows, bins), 1.0)
    np.add.at(out[:, 1], (rows, bins), conf[counted])
    np.add.at(out[:, 2], (rows, bins), correct[counted])
    return out


def _ece(sums: FloatArray) -> FloatArray:
    """ECE from (..., 3, n_bins) summed cells; NaN where nothing was counted."""
    total = sums[..., 0, :].sum(axis=-1)
    gap = np.abs(sums[..., 2, :] - sums[..., 1, :]).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, gap / np.maximum(total, 1e-300), np.nan)


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
    counted, p, y, conf, correct = _cells(verdicts)
    n_cases, n_dims = counted.shape
    cols = n_dims + 1
    sq = np.where(counted, (p - y) ** 2, 0.0)
    brier_sums = np.stack([_with_pooled(sq), _with_pooled(counted.astype(np.float64))], axis=1)  # (n, 2, C)
    width = equal_width_bins(conf, n_bins)
    width_sums = np.zeros((n_cases, cols, 3, n_bins))
    mass_sums = np.zeros((n_cases, cols, 3, n_bins))
    for column in range(cols):
        cells = counted if column == n_dims else _only(counted, column)
        width_sums[:, column] = _bin_sums(cells, conf, correct, width.index, n_bins)
        mass_index = np.zeros(counted.shape, dtype=np.int64)
        if cells.any():
            mass_index[cells] = equal_mass_bins(conf[cells], n_bins).index
        mass_sums[:, column] = _bin_sums(cells, conf, correct, mass_index, n_bins)

    def point(sums: FloatArray) -> FloatArray:
        return _ece(sums.sum(axis=0))

    brier_total = brier_sums.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        brier = np.where(brier_total[1] > 0, brier_total[0] / np.maximum(brier_total[1], 1), np.nan)
    samples_brier: list[FloatArray] = []
    samples_width: list[FloatArray] = []
    samples_mass: list[FloatArray] = []
    if n_resamples and n_cases:
        strata_a = None if strata is None else np.asarray(strata, dtype=object)
        flat_brier = brier_sums.reshape(n_cases, -1)
        flat_width = width_sums.reshape(n_cases, -1)
        flat_mass = mass_sums.reshape(n_cases, -1)
        for _, block in iter_bootstrap_weights(n_cases, n_resamples, seed, strata_a):
            b = (block @ flat_brier).reshape(-1, 2, cols)
            with np.errstate(invalid="ignore", divide="ignore"):
                samples_brier.append(np.where(b[:, 1] > 0, b[:, 0] / np.maximum(b[:, 1], 1e-300), np.nan))
            samples_width.append(_ece((block @ flat_width).reshape(-1, cols, 3, n_bins)))
            samples_mass.append(_ece((block @ flat_mass).reshape(-1, cols, 3, n_bins)))

    def interval(samples: list[FloatArray]) -> tuple[FloatArray, FloatArray]:
        if not samples:
            return np.full(cols, np.nan), np.full(cols, np.nan)
        return percentile_interval(np.concatenate(samples, axis=0), confidence_level)

    brier_low, brier_high = interval(samples_brier)
    ece_low, ece_high = interval(samples_width)
    mass_low, mass_high = interval(samples_mass)
    totals = width_sums.sum(axis=0)  # (C, 3, B)
    bins = []
    for column in range(cols):
        n_b = totals[column, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            bins.append(
                ReliabilityBins(
                    low=width.edges[:-1],
                    high=width.edges[1:],
                    n=n_b.astype(np.int64),
                    confidence=np.where(n_b > 0, totals[column, 1] / np.maximum(n_b, 1), np.nan),
                    accuracy=np.where(n_b > 0, totals[column, 2] / np.maximum(n_b, 1), np.nan),
                )
            )
    return CalibrationFigures(
        n=brier_total[1].astype(np.int64),
        brier=brier,
        brier_low=brier_low,
        brier_high=brier_high,
        ece=point(width_sums),
        ece_low=ece_low,
        ece_high=ece_high,
        ece_mass=point(mass_sums),
        ece_mass_low=mass_low,
        ece_mass_high=mass_high,
        bins=tuple(bins),
    )


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

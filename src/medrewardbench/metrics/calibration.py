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
  sums (cases independent) replace the bootstrap, which would take minutes there. An interval
  of width 0 (every case scores the same: confident and right on every cell gives a Brier score
  and an ECE of 0 in every resample) is widened to the exact bound on the cases counted
  (:func:`~medrewardbench.metrics.stats.floor.floor_degenerate`: ``[0, 1 - 0.025 ** (1 / n)]``).
* **Recalibration** lives in :mod:`medrewardbench.metrics.recalibration` (cross-fitted isotonic or
  temperature maps); its output is measured here like any other preferences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.stats import CountArray, FloatArray
from medrewardbench.metrics.stats.bootstrap import iter_bootstrap_weights, percentile_interval
from medrewardbench.metrics.stats.floor import floor_degenerate

__all__ = [
    "BinLayout",
    "CalibrationFigures",
    "calibration_figures",
    "calibration_figures_many",
    "equal_mass_bins",
    "equal_width_bins",
]

_BLOCK_BYTES = 50_000_000
"""Default size of one block of resample weights."""
BOOTSTRAP_LIMIT = 20_000
"""Beyond this many cases, intervals come from a normal approximation (:func:`_normal_intervals`):
the bootstrap of 140 sums per judge would take minutes, and at this size the two agree."""


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


@dataclass(frozen=True)
class _Sums:
    """One judge's cells in compact form: what every resample sums, a few bytes per case and dimension.

    :meth:`dense` expands them into the per-case columns whose sums give every statistic
    (:func:`_statistics`): squared errors, counted cells, and per bin the sum of ``correct -
    confidence`` (a bin's ECE term is the absolute value of that sum, so one column per bin
    suffices). The expansion is made for one judge at a time and thrown away, so memory holds the
    compact form of every judge and the columns of one.
    """

    squared: npt.NDArray[np.float32]
    """(n, D) squared errors of p_first, 0 where not counted"""
    counted: npt.NDArray[np.bool_]
    """(n, D) counted cells"""
    gap: npt.NDArray[np.float32]
    """(n, D) correct - confidence, 0 where not counted"""
    width_bin: npt.NDArray[np.int8]
    """(n, D) equal-width bin of each cell"""
    mass_bin: npt.NDArray[np.int8]
    """(n, D) equal-mass bin of each cell within its dimension"""
    pooled_mass_bin: npt.NDArray[np.int8]
    """(n, D) equal-mass bin of each cell among all dimensions' cells"""
    n_bins: int

    @property
    def width(self) -> int:
        """K, the number of dense columns: 2 D + D B + (D + 1) B."""
        d, b = int(self.counted.shape[1]), self.n_bins
        return 2 * d + d * b + (d + 1) * b

    def dense(self) -> npt.NDArray[np.float32]:
        """(n, K) the per-case columns: squared, count, width gaps (D x B), mass gaps ((D + 1) x B)."""
        n, d = self.counted.shape
        b = self.n_bins
        out = np.zeros((n, self.width), dtype=np.float32)
        out[:, :d] = self.squared
        out[:, d : 2 * d] = self.counted
        rows = np.arange(n)[:, None]
        dims = np.arange(d)[None, :]
        out[rows, 2 * d + dims * b + self.width_bin.astype(np.intp)] = (
            self.gap
        )  # one cell per (case, dimension): no clash
        mass = 2 * d + d * b
        out[rows, mass + dims * b + self.mass_bin.astype(np.intp)] = self.gap
        np.add.at(out, (np.broadcast_to(rows, (n, d)), mass + d * b + self.pooled_mass_bin.astype(np.intp)), self.gap)
        return out


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
    """One judge's compact cells and its equal-width reliability bins (points), per column."""
    counted, p, y, conf, correct = _cells(verdicts)
    n_dims = counted.shape[1]
    width = equal_width_bins(conf, n_bins)
    gap = correct - conf
    mass_bin = np.zeros(counted.shape, dtype=np.int8)
    for column in range(n_dims):
        cells = counted[:, column]
        if cells.any():
            mass_bin[cells, column] = equal_mass_bins(conf[cells, column], n_bins).index
    pooled_mass_bin = np.zeros(counted.shape, dtype=np.int8)
    if counted.any():
        pooled_mass_bin[counted] = equal_mass_bins(conf[counted], n_bins).index
    dims = np.broadcast_to(np.arange(n_dims)[None, :], counted.shape)[counted]
    key = dims * n_bins + width.index[counted]

    def per_bin(values: FloatArray) -> FloatArray:
        summed = np.bincount(key, weights=values[counted], minlength=n_dims * n_bins)
        return np.asarray(summed, dtype=np.float64).reshape(n_dims, n_bins)

    counts, conf_sums, right_sums = per_bin(np.ones_like(conf)), per_bin(conf), per_bin(correct)
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
        squared=np.where(counted, (p - y) ** 2, 0.0).astype(np.float32),
        counted=counted,
        gap=np.where(counted, gap, 0.0).astype(np.float32),
        width_bin=width.index.astype(np.int8),
        mass_bin=mass_bin,
        pooled_mass_bin=pooled_mass_bin,
        n_bins=n_bins,
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
    block_size: int | None = None,
) -> list[CalibrationFigures]:
    """:func:`calibration_figures` of several judges on the same cases, on one set of resamples.

    Each statistic is a function of per-case sums, so a resample needs one matrix product of the
    resample weights with a judge's per-case columns; the weights are drawn once for all judges,
    and each judge's columns exist only while its product runs.

    Args:
        judges: the judges' case-level preferences, all on the same cases.
        strata: (n_cases,) stratum per case for the bootstrap.
        n_resamples: case-bootstrap resamples; 0 gives points only.
        seed: the bootstrap seed.
        confidence_level: interval coverage.
        n_bins: bins of the ECE and the reliability diagram.
        block_size: resamples drawn at a time (default: about 50 MB of weights); memory only.

    Returns:
        One :class:`CalibrationFigures` per judge, in order.
    """
    if not judges:
        return []
    prepared = [_sums(v, n_bins) for v in judges]
    n_cases, n_dims = judges[0].p_first.shape
    k = prepared[0][0].width
    totals = np.stack([sums.dense().sum(axis=0, dtype=np.float64) for sums, _ in prepared])
    points = _statistics(totals, n_dims, n_bins)
    cols = n_dims + 1
    lows = [np.full((len(judges), cols), np.nan) for _ in range(3)]
    highs = [np.full((len(judges), cols), np.nan) for _ in range(3)]
    if n_resamples and n_cases > BOOTSTRAP_LIMIT:
        for j, (sums, _) in enumerate(prepared):
            for i, (low, high) in enumerate(_normal_intervals(sums.dense(), n_dims, n_bins, confidence_level)):
                lows[i][j], highs[i][j] = low, high
    elif n_resamples and n_cases:
        strata_a = None if strata is None else np.asarray(strata, dtype=object)
        rows = block_size or max(1, min(n_resamples, _BLOCK_BYTES // (8 * n_cases)))
        samples: list[list[FloatArray]] = [[], [], []]
        for _, block in iter_bootstrap_weights(n_cases, n_resamples, seed, strata_a, block_size=rows):
            summed = np.empty((block.shape[0], len(judges), k))
            for j, (sums, _) in enumerate(prepared):
                # one judge's columns at a time: memory stays small; float64, so that the figures do
                # not depend on how the rows are blocked (float32 sums would differ in the 7th digit)
                summed[:, j] = block @ sums.dense().astype(np.float64)
            for store, stat in zip(samples, _statistics(summed, n_dims, n_bins), strict=True):
                store.append(stat)
        for i, store in enumerate(samples):
            lows[i], highs[i] = percentile_interval(np.concatenate(store, axis=0), confidence_level)
    if n_resamples and n_cases:
        for j, (sums, _) in enumerate(prepared):
            units = _counted_cases(sums.counted)
            for i in range(3):
                lows[i][j], highs[i][j] = floor_degenerate(
                    points[i][j], lows[i][j], highs[i][j], units, confidence_level
                )
    out = []
    for j, (sums, bins) in enumerate(prepared):
        out.append(
            CalibrationFigures(
                n=_with_pooled_counts(sums.counted),
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
    flat: npt.NDArray[np.float32], n_dims: int, n_bins: int, confidence_level: float
) -> list[tuple[FloatArray, FloatArray]]:
    """Normal intervals of (brier, ece, ece_mass) from their linearisation in per-case sums (large data).

    Each statistic is a smooth function of the column sums ``S`` (the ECE's absolute values are
    smooth away from a zero gap): its influence of case ``i`` is ``x_i . grad f(S)``, and the
    variance of the statistic is ``n / (n - 1)`` times the sum of the centred squared influences,
    cases being independent (dimensions of a case together). The gradient is taken numerically.
    """
    total = flat.sum(axis=0, dtype=np.float64)
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
    influence = flat.astype(np.float64) @ gradient.reshape(flat.shape[1], -1)  # (n, 3 * C)
    spread = np.sqrt(n / max(n - 1, 1) * ((influence - influence.mean(axis=0)) ** 2).sum(axis=0)).reshape(points.shape)
    z = NormalDist().inv_cdf(0.5 + confidence_level / 2)
    return [(np.maximum(points[i] - z * spread[i], 0.0), points[i] + z * spread[i]) for i in range(3)]


def _counted_cases(counted: npt.NDArray[np.bool_]) -> CountArray:
    """Cases with a counted cell, per dimension column, then pooled (a case with any counted cell)."""
    return np.concatenate([counted.sum(axis=0), [counted.any(axis=1).sum()]]).astype(np.int64)


def _with_pooled_counts(count: npt.NDArray[np.bool_]) -> CountArray:
    per_dimension = count.sum(axis=0)
    return np.concatenate([per_dimension, [per_dimension.sum()]]).astype(np.int64)


def _only(counted: npt.NDArray[np.bool_], column: int) -> npt.NDArray[np.bool_]:
    """The counted cells of one dimension column."""
    out = np.zeros_like(counted)
    out[:, column] = counted[:, column]
    return out

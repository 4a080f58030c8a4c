"""Paired comparison of judges (exact case-level sign-flip test, paired case bootstrap), Holm adjustment and tiers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.stats.bootstrap import _resolve_weights, percentile_interval, resampled_sums
from medrewardbench.metrics.stats.counts import (
    NOT_RUN,
    BoolArray,
    CountArray,
    FloatArray,
    _check_confidence,
    _labels,
    _safe_divide,
    _verdicts,
    ratio,
)


@dataclass(frozen=True)
class PairwiseComparisons:
    """Every pair of judges at once; arrays have shape (n_judges, n_judges, n_columns).

    Entry ``[i, j]`` compares judge ``i`` (as A) with judge ``j`` (as B) on the labelled requests
    both were run on: ``diff[i, j] = -diff[j, i]``, p-values are symmetric, the diagonal holds
    diff 0 and p 1 (NaN where a judge counted nothing).
    """

    acc_a: FloatArray
    diff: FloatArray
    low: FloatArray
    high: FloatArray
    p_bootstrap: FloatArray
    """paired case bootstrap, two-sided (twice the smaller tail of the resampled differences at 0)"""
    p_case: FloatArray
    """case-level sign-flip test of the difference, mid-p of its exact distribution (:func:`sign_flip_p_value`)"""
    cases_better: CountArray
    """cases on which judge ``i`` got more requests of the column right than judge ``j``"""
    n_pairs: CountArray
    """requests both judges were run on (counted, labelled)"""

    @property
    def acc_b(self) -> FloatArray:
        """Accuracy of judge ``j`` on the requests shared with judge ``i``."""
        return np.swapaxes(self.acc_a, 0, 1)

    @property
    def cases_worse(self) -> CountArray:
        """Cases on which judge ``j`` got more requests of the column right than judge ``i``."""
        return np.swapaxes(self.cases_better, 0, 1)


# --------------------------------------------------------------------------------------------
# The case-level sign-flip test
# --------------------------------------------------------------------------------------------

_TIE = 1e-10
"""Resampled differences of accuracies closer to 0 than this are ties."""
_SIGN_FLIP_BATCH = 1 << 22
"""Complex values per batch of the transform (memory only)."""
_WINDOW_SIGMAS = 9.0
"""Half-width of the transform's window, in standard deviations: the mass it leaves out is below
``2 exp(-40)``, far below double precision relative to the tail it computes."""


def _smooth_length(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n: lengths the FFT handles fast, wasting at most a few percent."""
    best = 1 << max(0, (n - 1).bit_length())
    power5 = 1
    while power5 < best:
        power3 = power5
        while power3 < best:
            length = power3
            while length < n:
                length *= 2
            best = min(best, length)
            power3 *= 3
        power5 *= 5
    return best


def sign_flip_p_value(abs_counts: npt.ArrayLike, statistic: npt.ArrayLike, *, mid: bool = True) -> FloatArray:
    """Two-sided p-value of the case-level sign-flip (randomisation) test, from its exact distribution.

    Each case contributes a paired difference ``d_i`` (judge A's correct requests minus judge B's,
    over the requests of the column both were run on). Under the null hypothesis the sign of each
    case's difference is as likely positive as negative, independently across cases, whatever the
    correlation of the requests *within* a case (dimensions, orders): the case is the unit. The
    statistic ``T = sum_i d_i`` (the difference of correct counts, i.e. the accuracy difference
    times the requests compared) is referred to its randomisation distribution given the
    ``|d_i|``: the ``m_k`` cases with ``|d_i| = k`` contribute ``k (2 Binomial(m_k, 1/2) - m_k)``.

    The p-value is the **mid-p** by default: ``2 (P(T* > |T|) + P(T* = |T|) / 2)`` (capped at 1;
    ``T = 0`` gives 1). The distribution is discrete (a dimension's difference per case is one of
    -2..2), so the conventional ``P(|T*| >= |T|)`` (``mid=False``) rejects less often than its
    level: 3.7 % at 5 % per dimension on 100 cases, against 4.7 % for the mid-p, which stays
    within 4.5-5.5 % at 100 and 1,026 cases (``benchmarks/bench_validity.py``).

    The distribution is computed **exactly** (to rounding, about 1e-12 relative, also for tails
    of 1e-150), without sampling and without a normal approximation at any size: it is
    exponentially tilted to centre it on ``|T|`` (the saddlepoint), its characteristic function
    ``prod_k (cos(k w) + i tanh(k theta) sin(k w))^m_k`` is inverted by one real FFT on a window
    of ``9`` standard deviations around ``|T|`` (or the whole support when that is shorter), and
    the tilt is undone term by term. The cost grows with the square root of the cases (the
    window), so 30 judges' 435 pairs on 100,000 cases take well under a second per column.

    Args:
        abs_counts: ``(..., K)`` non-negative integers: ``abs_counts[..., k - 1]`` is the number
            of cases whose difference is ``+k`` or ``-k``.
        statistic: ``(...)`` integers: the observed ``T``.
        mid: the mid-p (default) or the conventional p-value ``P(|T*| >= |T|)``.

    Returns:
        The p-values, shape ``(...)``.

    Raises:
        ValueError: negative counts, or a statistic outside the support ``|T| <= sum_k k m_k``.
    """
    counts = np.asarray(abs_counts, dtype=np.int64)
    observed = np.abs(np.asarray(statistic, dtype=np.int64))
    if counts.ndim < 1 or counts.shape[:-1] != observed.shape:
        raise ValueError(f"abs_counts (..., K) {counts.shape} and statistic (...) {observed.shape} do not align")
    if (counts < 0).any():
        raise ValueError("case counts must be non-negative")
    shape, n_k = observed.shape, counts.shape[-1]
    counts, observed = counts.reshape(observed.size, n_k), observed.reshape(-1)
    k = np.arange(1, n_k + 1, dtype=np.float64)
    support = counts @ np.arange(1, n_k + 1, dtype=np.int64)
    if (observed > support).any():
        raise ValueError("a statistic lies outside the support of its randomisation distribution")
    p = np.ones(observed.shape)
    at_edge = (observed > 0) & (observed == support)
    # every sign as observed: P(T* >= T) = P(T* = T) = 2^-n
    p[at_edge] = np.minimum(1.0, np.exp2((0.0 if mid else 1.0) - counts[at_edge].sum(axis=1)))
    todo = np.flatnonzero((observed > 0) & (observed < support))
    if todo.size:
        at_least, atom = _upper_tail(counts[todo], observed[todo], support[todo], k)
        p[todo] = np.minimum(1.0, 2.0 * (at_least - 0.5 * atom if mid else at_least))
    return p.reshape(shape)


def _upper_tail(
    counts: CountArray, observed: CountArray, support: CountArray, k: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``P(T* >= t)`` and ``P(T* = t)`` for ``0 < t < support`` (see :func:`sign_flip_p_value`)."""
    m = counts.astype(np.float64)
    t = observed.astype(np.float64)
    # The tilt theta solves E_theta[T*] = sum_k k m_k tanh(k theta) = t. The left side is increasing
    # and concave in theta >= 0, so Newton's method from 0 approaches the root from below.
    theta = np.zeros(t.size)
    for _ in range(500):
        tanh = np.tanh(np.outer(theta, k))
        gap = (m * k * tanh).sum(axis=1) - t
        slope = (m * k * k * (1.0 - tanh * tanh)).sum(axis=1)
        active = (np.abs(gap) > 1e-10 * t) & (slope > 0)
        if not active.any():
            break
        theta = np.where(active, theta - gap / np.where(active, slope, 1.0), theta)
    tilted_k = np.outer(theta, k)
    tanh = np.tanh(tilted_k)
    mean = (m * k * tanh).sum(axis=1)
    sigma = np.sqrt((m * k * k).sum(axis=1))  # bounds the tilted spread (Hoeffding: ranges 2k)
    half = np.ceil(np.abs(mean - t) + _WINDOW_SIGMAS * sigma + 2.0).astype(np.int64)
    whole = 2 * support + 1
    lengths = np.array([_smooth_length(int(n)) for n in np.minimum(2 * half + 1, whole).tolist()], dtype=np.int64)
    starts = np.where(lengths >= whole, -support, observed - lengths // 2)  # first value of each window
    log_mgf = (m * (tilted_k + np.log1p(np.exp(-2.0 * tilted_k)) - math.log(2.0))).sum(axis=1)
    tail = np.empty(t.size)
    atom = np.empty(t.size)
    for length in np.unique(lengths).tolist():
        members = np.flatnonzero(lengths == length)
        frequencies = 2.0 * math.pi * np.arange(length // 2 + 1) / length
        cos = np.cos(np.outer(k, frequencies))
        sin = np.sin(np.outer(k, frequencies))
        step = max(1, _SIGN_FLIP_BATCH // max(1, frequencies.size * k.size))
        for first in range(0, members.size, step):
            rows = members[first : first + step]
            log_phi = np.zeros((rows.size, frequencies.size), dtype=np.complex128)
            for j in range(k.size):
                weight = m[rows, j][:, None]
                if not weight.any():
                    continue
                a = tanh[rows, j][:, None]
                with np.errstate(divide="ignore"):
                    modulus = 0.5 * np.log(cos[j] ** 2 + (a * a) * sin[j] ** 2)
                angle = np.arctan2(a * sin[j], cos[j])
                log_phi += np.where(weight > 0, weight * (modulus + 1j * angle), 0.0)
            # The DFT of the tilted probabilities on the window [start, start + length) is
            # conj(phi(w)) exp(i w start), phi the tilted characteristic function.
            spectrum = np.exp(np.conj(log_phi) + 1j * np.outer(starts[rows], frequencies))
            tilted = np.clip(np.fft.irfft(spectrum, n=length, axis=1), 0.0, None)
            values = starts[rows][:, None] + np.arange(length)[None, :]
            upper = values >= observed[rows][:, None]
            exponent = np.where(upper, log_mgf[rows][:, None] - theta[rows][:, None] * values, -np.inf)
            terms = tilted * np.exp(exponent)
            tail[rows] = terms.sum(axis=1)
            atom[rows] = np.where(values == observed[rows][:, None], terms, 0.0).sum(axis=1)
    return tail, atom


def sign_flip_test(histograms: npt.ArrayLike) -> tuple[FloatArray, CountArray]:
    """The case-level sign-flip test from histograms of per-case differences.

    Args:
        histograms: ``(..., 2K + 1)`` counts of cases whose difference is ``-K, ..., K``.

    Returns:
        ``(p, better)``: the two-sided mid-p value (:func:`sign_flip_p_value`) and the number of
        cases with a positive difference, each of shape ``(...)``.
    """
    h = np.asarray(histograms, dtype=np.int64)
    if h.ndim < 1 or h.shape[-1] % 2 != 1:
        raise ValueError(f"histograms must have an odd last axis (differences -K..K), got {h.shape}")
    half = h.shape[-1] // 2
    statistic = h @ np.arange(-half, half + 1, dtype=np.int64)
    positive, negative = h[..., half + 1 :], np.flip(h[..., :half], axis=-1)
    return sign_flip_p_value(positive + negative, statistic), positive.sum(axis=-1)


def case_sign_flip_test(differences: npt.ArrayLike, *, mid: bool = True) -> FloatArray:
    """The case-level sign-flip test of per-case paired differences, elementwise over columns.

    Args:
        differences: ``(n_cases, ...)`` integers: per case, judge A's correct requests minus
            judge B's (over the requests both were run on; 0 for a case neither was run on).
        mid: the mid-p (default) or the conventional p-value (see :func:`sign_flip_p_value`).

    Returns:
        Two-sided p-values, shape ``(...)``.
    """
    d = np.asarray(differences)
    if d.ndim < 1 or d.dtype.kind not in "iub":
        raise ValueError(f"differences must be integers with a case axis, got {d.dtype} {d.shape}")
    flat = d.astype(np.int64).reshape(d.shape[0], -1)
    magnitudes = np.abs(flat)
    top = int(magnitudes.max(initial=0))
    abs_counts = np.stack([(magnitudes == k).sum(axis=0) for k in range(1, top + 1)], axis=-1) if top else None
    if abs_counts is None:
        abs_counts = np.zeros((flat.shape[1], 0), dtype=np.int64)
    return sign_flip_p_value(abs_counts, flat.sum(axis=0), mid=mid).reshape(d.shape[1:])


def difference_histograms(values: npt.ArrayLike, n_values: int) -> CountArray:
    """For every ordered pair of judges and column, the histogram of per-case differences.

    Args:
        values: ``(n_judges, n_cases, n_columns)`` integers in ``[0, n_values)``: per case, a
            judge's correct requests of the column (judges run on the same requests).
        n_values: the bound of the values (3 for one dimension in two orders).

    Returns:
        int64 ``(n_judges, n_judges, n_columns, 2 n_values - 1)``: entry ``[a, b, c, d + n_values - 1]``
        counts the cases where ``values[a] - values[b] == d`` on column ``c``. One product of
        one-hot matrices per column (exact: sums of 0/1 below 2**24 in float32, chunked).
    """
    v = np.asarray(values)
    if v.ndim != 3:
        raise ValueError(f"values must have shape (n_judges, n_cases, n_columns), got {v.shape}")
    n_judges, n_cases, n_columns = v.shape
    out = np.zeros((n_judges, n_judges, n_columns, 2 * n_values - 1), dtype=np.int64)
    levels = np.arange(n_values)
    chunk = 1 << 23
    for c in range(n_columns):
        joint = np.zeros((n_judges * n_values, n_judges * n_values), dtype=np.int64)
        for start in range(0, n_cases, chunk):
            part = v[:, start : start + chunk, c]
            onehot = (part[:, :, None] == levels).transpose(1, 0, 2).reshape(part.shape[1], -1).astype(np.float32)
            joint += np.rint(onehot.T @ onehot).astype(np.int64)
        blocks = joint.reshape(n_judges, n_values, n_judges, n_values)
        for u in range(n_values):
            for w in range(n_values):
                out[:, :, c, u - w + n_values - 1] += blocks[:, u, :, w]
    return out


def _bootstrap_p_value(samples: FloatArray) -> FloatArray:
    """Two-sided bootstrap p-value for "difference = 0": twice the smaller tail mass at zero.

    It is the smallest 1 - confidence at which the percentile interval would exclude zero.
    """
    valid = ~np.isnan(samples)
    n_valid = valid.sum(axis=0)
    below = (valid & (samples <= 0)).sum(axis=0)
    above = (valid & (samples >= 0)).sum(axis=0)
    p = np.minimum(1.0, 2.0 * _safe_divide(np.minimum(below, above), n_valid))
    return np.where(n_valid > 0, p, np.nan)


def _stack_judges(verdicts: npt.ArrayLike) -> npt.NDArray[np.int8]:
    v = np.asarray(verdicts)
    if v.ndim != 4 or v.shape[2] != 2:
        raise ValueError(f"stacked verdicts must have shape (n_judges, n_cases, 2, n_dims), got {v.shape}")
    for j in range(v.shape[0]):
        _verdicts(v[j])
    return v.astype(np.int8, copy=False)


def pairwise_comparisons(
    verdicts: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    weights: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int | None = 0,
    strata: npt.ArrayLike | None = None,
    pool_dimensions: bool = False,
) -> PairwiseComparisons:
    """Compare every pair of judges: accuracy difference, paired case bootstrap, case sign-flip test.

    Pairing: the paired items are the labelled **requests** (case, order) that both judges were
    run on; a failure counts as wrong. Both accuracies of a pair are computed on exactly those
    requests, so ``diff = acc_a - acc_b``; when the judges were run on the same requests (the
    usual case) these equal their headline accuracies.

    Both tests take the **case** as their unit, so the correlation of a case's requests (its two
    orders and, pooled, its six dimensions share the image, question and responses) is respected:
    the paired bootstrap resamples cases (same resamples for both judges) and gives the interval
    of the difference; the sign-flip test (:func:`sign_flip_p_value`) refers the sum of the
    per-case differences to its exact randomisation distribution.

    Args:
        verdicts: (n_judges, n_cases, 2, n_dims), one verdict array per judge on the same cases.
        labels: (n_cases, n_dims).
        weights: precomputed (B, n_cases) resample counts; None draws one.
        confidence: interval coverage.
        n_resamples: resamples when ``weights`` is None.
        seed: seed when ``weights`` is None.
        strata: strata when ``weights`` is None.
        pool_dimensions: compare the pooled column instead (every dimension's requests together,
            a case's differences summed over its dimensions and orders): arrays then have one
            column.

    Returns:
        A :class:`PairwiseComparisons` with (n_judges, n_judges, n_dims) arrays, or
        (n_judges, n_judges, 1) with ``pool_dimensions``.
    """
    _check_confidence(confidence)
    v = _stack_judges(verdicts)
    n_judges, n_cases, _, n_dims = v.shape
    lab = _labels(labels, n_cases, n_dims)
    w = _resolve_weights(weights, n_cases, n_resamples, seed, strata)
    run = v != NOT_RUN
    counted = run & (lab != 0)[None, :, None, :]
    correct = counted & (v == lab[None, :, None, :])

    def columns(per_dim: CountArray) -> CountArray:
        """(..., n_dims) -> the compared columns (the pooled sum with ``pool_dimensions``)."""
        return per_dim.sum(axis=-1, keepdims=True) if pool_dimensions else per_dim

    per_dim_counted = counted.reshape(n_judges, n_cases * 2, n_dims).transpose(2, 0, 1).astype(np.float64)
    both_counted = np.rint(per_dim_counted @ per_dim_counted.transpose(0, 2, 1)).astype(np.int64)
    n_pairs = columns(both_counted.transpose(1, 2, 0))
    n_values = 2 * (n_dims if pool_dimensions else 1) + 1  # a case's correct requests: 0 .. 2 per dimension

    rows, cols = np.triu_indices(n_judges, 1)
    n_columns = 1 if pool_dimensions else n_dims
    acc_a = np.full((n_judges, n_judges, n_columns), np.nan)
    if all(np.array_equal(run[0], run[j]) for j in range(1, n_judges)):
        # Same requests for every judge: one product for all judges, pairs are differences.
        correct_counts = columns(correct.sum(axis=2, dtype=np.int64))  # (J, n, C)
        counted_counts = columns(counted[0].sum(axis=1, dtype=np.int64))  # (n, C)
        res_den = resampled_sums(w, counted_counts)  # (B, C)
        res_num = resampled_sums(w, correct_counts.transpose(1, 0, 2))  # (B, J, C)
        samples = _safe_divide(res_num, res_den[:, None, :])
        point = _safe_divide(correct_counts.sum(axis=1), counted_counts.sum(axis=0)[None, :])
        acc_a[:] = point[:, None, :]
        pair_diff = point[rows] - point[cols]
        pair_samples = samples[:, rows] - samples[:, cols]
        histograms = difference_histograms(correct_counts, n_values)[rows, cols]
    else:
        pair_diff, pair_samples, pair_acc_a, pair_acc_b, histograms = _pair_resamples_general(
            correct, counted, rows, cols, w, n_values, columns
        )
        acc_a[rows, cols] = pair_acc_a
        acc_a[cols, rows] = pair_acc_b
        own = ratio(columns(correct.sum(axis=2)).transpose(1, 0, 2), columns(counted.sum(axis=2)).transpose(1, 0, 2))
        acc_a[np.arange(n_judges), np.arange(n_judges)] = own
    return assemble_pairwise(acc_a, pair_diff, pair_samples, rows, cols, confidence, histograms, n_pairs)


def assemble_pairwise(
    acc_a: FloatArray,
    pair_diff: FloatArray,
    pair_samples: FloatArray,
    rows: npt.NDArray[np.intp],
    cols: npt.NDArray[np.intp],
    confidence: float,
    histograms: CountArray,
    n_pairs: CountArray,
) -> PairwiseComparisons:
    """Fill the judge-by-judge matrices from the per-pair figures of the upper triangle.

    Both ways of computing the pairs (the whole matrix here, blocks of resamples in
    :mod:`medrewardbench.metrics.resampling`) end here, so they give the same intervals and p-values.

    Args:
        acc_a: (judges, judges, columns) accuracy of the row judge on the requests both judged.
        pair_diff: (pairs, columns) row minus column judge for each pair ``(rows[k], cols[k])``.
        pair_samples: (resamples, pairs, columns) the bootstrap replicates of ``pair_diff``.
        rows: the row judge of each pair.
        cols: the column judge of each pair.
        confidence: interval coverage.
        histograms: (pairs, columns, 2K + 1) cases per difference of correct requests (row minus
            column judge, ``-K .. K``), for the sign-flip test.
        n_pairs: (judges, judges, columns) requests both judges of a pair judged.

    Returns:
        The comparisons, antisymmetric in the differences and intervals, NaN where undefined.
    """
    n_judges, _, n_columns = acc_a.shape
    # the rescaled weights are not whole numbers, so two equal resampled sums can differ in their
    # last bit: a difference that small is a tie (0), as it is with whole counts
    pair_samples = np.array(pair_samples, dtype=np.float64)
    pair_samples[np.abs(pair_samples) < _TIE] = 0.0
    low_pairs, high_pairs = percentile_interval(pair_samples, confidence)
    p_pairs = _bootstrap_p_value(pair_samples)
    undefined = np.isnan(pair_diff)
    low_pairs[undefined] = high_pairs[undefined] = p_pairs[undefined] = np.nan
    p_case_pairs, better_pairs = sign_flip_test(histograms)
    worse_pairs = histograms[..., : histograms.shape[-1] // 2].sum(axis=-1)
    p_case_pairs[undefined] = np.nan

    diff = np.zeros((n_judges, n_judges, n_columns))
    low = np.zeros_like(diff)
    high = np.zeros_like(diff)
    p_boot = np.ones_like(diff)
    p_case = np.ones_like(diff)
    better = np.zeros((n_judges, n_judges, n_columns), dtype=np.int64)
    diff[rows, cols], diff[cols, rows] = pair_diff, -pair_diff
    low[rows, cols], low[cols, rows] = low_pairs, -high_pairs
    high[rows, cols], high[cols, rows] = high_pairs, -low_pairs
    p_boot[rows, cols] = p_boot[cols, rows] = p_pairs
    p_case[rows, cols] = p_case[cols, rows] = p_case_pairs
    better[rows, cols], better[cols, rows] = better_pairs, worse_pairs
    diagonal = np.arange(n_judges)
    self_undefined = np.isnan(acc_a[diagonal, diagonal])
    for array in (diff, low, high, p_boot, p_case):
        array[diagonal, diagonal] = np.where(self_undefined, np.nan, array[diagonal, diagonal])
    return PairwiseComparisons(acc_a, diff, low, high, p_boot, p_case, better, n_pairs)


def _pair_resamples_general(
    correct: BoolArray,
    counted: BoolArray,
    rows: npt.NDArray[np.intp],
    cols: npt.NDArray[np.intp],
    w: npt.NDArray[np.generic],
    n_values: int,
    columns: Callable[[CountArray], CountArray],
    block: int = 64,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, CountArray]:
    """Pairs of judges run on different requests: each pair on its common requests, in blocks."""
    n_pairs = rows.size
    n_columns = columns(np.zeros((1, correct.shape[3]), dtype=np.int64)).shape[-1]
    acc_a = np.empty((n_pairs, n_columns))
    acc_b = np.empty((n_pairs, n_columns))
    samples = np.empty((w.shape[0], n_pairs, n_columns))
    histograms = np.zeros((n_pairs, n_columns, 2 * n_values - 1), dtype=np.int64)
    for start in range(0, n_pairs, block):
        r, c = rows[start : start + block], cols[start : start + block]
        common = counted[r] & counted[c]  # (P, n, 2, D)
        num_a = columns((correct[r] & common).sum(axis=2, dtype=np.int64)).transpose(1, 0, 2)  # (n, P, C)
        num_b = columns((correct[c] & common).sum(axis=2, dtype=np.int64)).transpose(1, 0, 2)
        den = columns(common.sum(axis=2, dtype=np.int64)).transpose(1, 0, 2)
        stacked = resampled_sums(w, np.stack([num_a, num_b, den], axis=1))  # (B, 3, P, C)
        samples[:, start : start + block] = _safe_divide(stacked[:, 0] - stacked[:, 1], stacked[:, 2])
        acc_a[start : start + block] = ratio(num_a, den)
        acc_b[start : start + block] = ratio(num_b, den)
        histograms[start : start + block] = histograms_of_differences(num_a - num_b, n_values)
    return acc_a - acc_b, samples, acc_a, acc_b, histograms


def histograms_of_differences(differences: npt.ArrayLike, n_values: int) -> CountArray:
    """Per column, how many cases have each difference.

    Args:
        differences: ``(n_cases, ...)`` integers in ``(-n_values, n_values)``.
        n_values: the bound.

    Returns:
        int64 ``(..., 2 n_values - 1)``: entry ``[..., d + n_values - 1]`` counts the cases with
        difference ``d``.
    """
    d = np.asarray(differences, dtype=np.int64)
    bins = 2 * n_values - 1
    flat = d.reshape(d.shape[0], -1) + (n_values - 1)
    if flat.size and (flat.min() < 0 or flat.max() >= bins):
        raise ValueError(f"differences must lie in ({-n_values}, {n_values})")
    offsets = np.arange(flat.shape[1], dtype=np.int64) * bins
    counts = np.bincount((flat + offsets).reshape(-1), minlength=flat.shape[1] * bins)
    return counts.reshape(d.shape[1:] + (bins,)).astype(np.int64)


def holm_adjust(p_values: npt.ArrayLike) -> FloatArray:
    """Holm step-down adjusted p-values (family = the non-NaN entries).

    ``adj_(i) = max_{k <= i} min(1, (m - k + 1) p_(k))`` for the sorted p-values, so adjusted
    values are monotone in the raw ones and capped at 1. NaN entries stay NaN and do not count
    in m.

    Args:
        p_values: any shape.

    Returns:
        Adjusted p-values, same shape.
    """
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.reshape(-1)
    out = np.full(flat.shape, np.nan)
    present = np.flatnonzero(~np.isnan(flat))
    m = present.size
    if m:
        order = present[np.argsort(flat[present], kind="stable")]
        scaled = (m - np.arange(m)) * flat[order]
        out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out.reshape(p.shape)


def leaderboard_tiers(accuracies: npt.ArrayLike, p_values: npt.ArrayLike, *, alpha: float = 0.05) -> CountArray:
    """Group judges into tiers of statistically indistinguishable accuracy.

    Rule: among the judges not yet placed, the one with the highest accuracy (ties: lowest index)
    leads a new tier; the tier holds the leader and every unplaced judge whose p-value against the
    leader, Holm-adjusted over the leader's comparisons with all unplaced judges, is at least
    ``alpha`` (a NaN p-value, i.e. nothing to compare, counts as not significant). Those judges
    are removed and the rule repeats with tier + 1. Tiers therefore only say "not shown to differ
    from the tier's leader"; two members may still differ from each other.

    Args:
        accuracies: (n_judges,) accuracy of each judge (one dimension).
        p_values: (n_judges, n_judges) symmetric pairwise p-values (e.g. ``p_bootstrap[..., d]``
            of :func:`pairwise_comparisons`), or (n_judges,) p-values against the overall leader,
            in which case only tier 1 can be formed and every other judge gets tier 2.
        alpha: family-wise significance level.

    Returns:
        (n_judges,) tier numbers starting at 1; judges with NaN accuracy get 0 (unranked).
    """
    acc = np.asarray(accuracies, dtype=np.float64)
    p = np.asarray(p_values, dtype=np.float64)
    n = acc.shape[0]
    if acc.ndim != 1 or p.shape not in ((n,), (n, n)):
        raise ValueError(f"expected accuracies (n,) and p-values (n,) or (n, n), got {acc.shape} and {p.shape}")
    tiers = np.zeros(n, dtype=np.int64)
    unplaced = [int(i) for i in np.argsort(-acc, kind="stable") if not np.isnan(acc[i])]
    tier = 1
    while unplaced:
        leader, others = unplaced[0], unplaced[1:]
        if p.ndim == 1 and tier > 1:
            tiers[unplaced] = tier
            break
        raw = p[others] if p.ndim == 1 else p[leader, others]
        adjusted = holm_adjust(raw)
        members = [leader] + [j for j, q in zip(others, adjusted, strict=True) if np.isnan(q) or q >= alpha]
        tiers[members] = tier
        unplaced = [j for j in unplaced if j not in members]
        tier += 1
    return tiers

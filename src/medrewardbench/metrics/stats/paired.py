"""Paired comparison of judges (exact McNemar, paired case bootstrap), Holm adjustment and tiers."""

from __future__ import annotations

import math
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
    """Every pair of judges at once; arrays have shape (n_judges, n_judges, n_dims).

    Entry ``[i, j]`` compares judge ``i`` (as A) with judge ``j`` (as B) on the labelled requests
    both were run on: ``diff[i, j] = -diff[j, i]``, p-values are symmetric, the diagonal holds
    diff 0 and p 1.
    """

    acc_a: FloatArray
    diff: FloatArray
    low: FloatArray
    high: FloatArray
    p_bootstrap: FloatArray
    mcnemar_b: CountArray
    p_mcnemar: FloatArray
    n_pairs: CountArray

    @property
    def acc_b(self) -> FloatArray:
        """Accuracy of judge ``j`` on the requests shared with judge ``i``."""
        return np.swapaxes(self.acc_a, 0, 1)

    @property
    def mcnemar_c(self) -> CountArray:
        """Pairs where judge ``j`` is correct and judge ``i`` is not."""
        return np.swapaxes(self.mcnemar_b, 0, 1)


def _binomial_half_cdf(k: CountArray, n: CountArray) -> FloatArray:
    """P(X <= k) for X ~ Binomial(n, 1/2), elementwise, from log-gamma (no scipy).

    For each n, the terms are summed from a little below the smallest k asked (and below the
    mode): terms more than 40 standard deviations under both are below 1e-300 of the sum. So the
    cost per n grows with the square root of n, not with n (large data sets have discordant
    counts in the tens of thousands).
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    out = np.ones(np.broadcast_shapes(k.shape, n.shape))
    k, n = np.broadcast_to(k, out.shape), np.broadcast_to(n, out.shape)
    if out.size == 0:
        return out
    n_max = int(n.max())
    log_factorial = np.array([math.lgamma(i + 1.0) for i in range(n_max + 1)])
    flat_k, flat_n, flat_out = k.reshape(-1), n.reshape(-1), out.reshape(-1)
    by_n = np.argsort(flat_n, kind="stable")
    values, starts = np.unique(flat_n[by_n], return_index=True)
    for n_value, members in zip(values.tolist(), np.split(by_n, starts[1:]), strict=True):
        ks = np.clip(flat_k[members], 0, n_value)
        low = max(0, min(int(ks.min()), n_value // 2) - int(40 * math.sqrt(n_value)) - 10)
        high = int(ks.max())
        i = np.arange(low, high + 1)
        log_pmf = log_factorial[n_value] - log_factorial[i] - log_factorial[n_value - i] - n_value * math.log(2.0)
        cdf = np.cumsum(np.exp(log_pmf))
        flat_out[members] = np.minimum(cdf[ks - low], 1.0)
    out = flat_out.reshape(out.shape)
    out[k < 0] = 0.0
    return out


def mcnemar_p_value(b: npt.ArrayLike, c: npt.ArrayLike) -> FloatArray:
    """Two-sided exact McNemar p-value from discordant counts, elementwise.

    Under the null each discordant pair favours either judge with probability 1/2, so
    ``p = min(1, 2 * P(X <= min(b, c)))`` with ``X ~ Binomial(b + c, 1/2)`` (for p = 1/2 this
    equals scipy's ``binomtest(b, b + c).pvalue``). No discordant pairs gives p = 1.

    Args:
        b: pairs where A is right and B wrong.
        c: pairs where B is right and A wrong.

    Returns:
        p-values, broadcast shape of ``b`` and ``c``.
    """
    b_a = np.asarray(b, dtype=np.int64)
    c_a = np.asarray(c, dtype=np.int64)
    if (b_a < 0).any() or (c_a < 0).any():
        raise ValueError("discordant counts must be non-negative")
    tail = _binomial_half_cdf(np.minimum(b_a, c_a), b_a + c_a)
    return np.minimum(1.0, 2.0 * tail)


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
) -> PairwiseComparisons:
    """Compare every pair of judges: accuracy difference, paired bootstrap and exact McNemar.

    Pairing: the paired items are the labelled **requests** (case, order) that both judges were
    run on; a failure counts as wrong. Both accuracies of a pair are computed on exactly those
    requests, so ``diff = acc_a - acc_b``; when the judges were run on the same requests (the
    usual case) these equal their headline accuracies.

    Caveat: McNemar treats the two orders of a case as independent pairs although they share the
    image, question and responses, so its p-value is somewhat anti-conservative. The paired
    bootstrap resamples **cases** (both orders together, same resamples for both judges), which
    is robust to that clustering; prefer it when the two disagree.

    Args:
        verdicts: (n_judges, n_cases, 2, n_dims), one verdict array per judge on the same cases.
        labels: (n_cases, n_dims).
        weights: precomputed (B, n_cases) resample counts; None draws one.
        confidence: interval coverage.
        n_resamples: resamples when ``weights`` is None.
        seed: seed when ``weights`` is None.
        strata: strata when ``weights`` is None.

    Returns:
        A :class:`PairwiseComparisons` with (n_judges, n_judges, n_dims) arrays.
    """
    _check_confidence(confidence)
    v = _stack_judges(verdicts)
    n_judges, n_cases, _, n_dims = v.shape
    lab = _labels(labels, n_cases, n_dims)
    w = _resolve_weights(weights, n_cases, n_resamples, seed, strata)
    run = v != NOT_RUN
    counted = run & (lab != 0)[None, :, None, :]
    correct = counted & (v == lab[None, :, None, :])

    # McNemar: b[i, j] = sum over requests of correct_i * (counted_j - correct_j); exact for any
    # pattern of runs because correct_i implies counted_i.
    per_dim_correct = correct.reshape(n_judges, n_cases * 2, n_dims).transpose(2, 0, 1).astype(np.float64)
    per_dim_counted = counted.reshape(n_judges, n_cases * 2, n_dims).transpose(2, 0, 1).astype(np.float64)
    b = np.rint(per_dim_correct @ (per_dim_counted - per_dim_correct).transpose(0, 2, 1)).astype(np.int64)
    n_pairs = np.rint(per_dim_counted @ per_dim_counted.transpose(0, 2, 1)).astype(np.int64)
    b = b.transpose(1, 2, 0)
    n_pairs = n_pairs.transpose(1, 2, 0)
    p_mcnemar = mcnemar_p_value(b, b.transpose(1, 0, 2))

    rows, cols = np.triu_indices(n_judges, 1)
    acc_a = np.full((n_judges, n_judges, n_dims), np.nan)
    if all(np.array_equal(run[0], run[j]) for j in range(1, n_judges)):
        # Same requests for every judge: one product for all judges, pairs are differences.
        correct_counts = correct.sum(axis=2, dtype=np.int64)  # (J, n, D)
        counted_counts = counted[0].sum(axis=1, dtype=np.int64)  # (n, D)
        res_den = resampled_sums(w, counted_counts)  # (B, D)
        res_num = resampled_sums(w, correct_counts.transpose(1, 0, 2))  # (B, J, D)
        samples = _safe_divide(res_num, res_den[:, None, :])
        point = _safe_divide(correct_counts.sum(axis=1), counted_counts.sum(axis=0)[None, :])
        acc_a[:] = point[:, None, :]
        pair_diff = point[rows] - point[cols]
        pair_samples = samples[:, rows] - samples[:, cols]
    else:
        pair_diff, pair_samples, pair_acc_a, pair_acc_b = _pair_resamples_general(correct, counted, rows, cols, w)
        acc_a[rows, cols] = pair_acc_a
        acc_a[cols, rows] = pair_acc_b
        own = ratio(correct.sum(axis=2).transpose(1, 0, 2), counted.sum(axis=2).transpose(1, 0, 2))
        acc_a[np.arange(n_judges), np.arange(n_judges)] = own
    return assemble_pairwise(acc_a, pair_diff, pair_samples, rows, cols, confidence, b, p_mcnemar, n_pairs)


def assemble_pairwise(
    acc_a: FloatArray,
    pair_diff: FloatArray,
    pair_samples: FloatArray,
    rows: npt.NDArray[np.intp],
    cols: npt.NDArray[np.intp],
    confidence: float,
    b: CountArray,
    p_mcnemar: FloatArray,
    n_pairs: CountArray,
) -> PairwiseComparisons:
    """Fill the judge-by-judge matrices from the per-pair figures of the upper triangle.

    Both ways of computing the pairs (the whole matrix here, blocks of resamples in
    :mod:`medrewardbench.metrics.resampling`) end here, so they give the same intervals and p-values.

    Args:
        acc_a: (judges, judges, dims) accuracy of the row judge on the requests both judged.
        pair_diff: (pairs, dims) row minus column judge for each pair ``(rows[k], cols[k])``.
        pair_samples: (resamples, pairs, dims) the bootstrap replicates of ``pair_diff``.
        rows: the row judge of each pair.
        cols: the column judge of each pair.
        confidence: interval coverage.
        b: McNemar's discordant counts, as the caller computed them.
        p_mcnemar: McNemar's p-values.
        n_pairs: requests both judges of a pair judged.

    Returns:
        The comparisons, antisymmetric in the differences and intervals, NaN where undefined.
    """
    n_judges, _, n_dims = acc_a.shape
    low_pairs, high_pairs = percentile_interval(pair_samples, confidence)
    p_pairs = _bootstrap_p_value(pair_samples)
    undefined = np.isnan(pair_diff)
    low_pairs[undefined] = high_pairs[undefined] = p_pairs[undefined] = np.nan

    diff = np.zeros((n_judges, n_judges, n_dims))
    low = np.zeros_like(diff)
    high = np.zeros_like(diff)
    p_boot = np.ones_like(diff)
    diff[rows, cols], diff[cols, rows] = pair_diff, -pair_diff
    low[rows, cols], low[cols, rows] = low_pairs, -high_pairs
    high[rows, cols], high[cols, rows] = high_pairs, -low_pairs
    p_boot[rows, cols] = p_boot[cols, rows] = p_pairs
    diagonal = np.arange(n_judges)
    self_undefined = np.isnan(acc_a[diagonal, diagonal])
    for array in (diff, low, high, p_boot):
        array[diagonal, diagonal] = np.where(self_undefined, np.nan, array[diagonal, diagonal])
    return PairwiseComparisons(acc_a, diff, low, high, p_boot, b, p_mcnemar, n_pairs)


def _pair_resamples_general(
    correct: BoolArray,
    counted: BoolArray,
    rows: npt.NDArray[np.intp],
    cols: npt.NDArray[np.intp],
    w: npt.NDArray[np.generic],
    block: int = 64,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Pairs of judges run on different requests: each pair on its common requests, in blocks."""
    n_pairs = rows.size
    n_dims = correct.shape[3]
    diffs = np.empty((n_pairs, n_dims))
    acc_a = np.empty((n_pairs, n_dims))
    acc_b = np.empty((n_pairs, n_dims))
    samples = np.empty((w.shape[0], n_pairs, n_dims))
    for start in range(0, n_pairs, block):
        r, c = rows[start : start + block], cols[start : start + block]
        common = counted[r] & counted[c]  # (P, n, 2, D)
        num_a = (correct[r] & common).sum(axis=2, dtype=np.int64).transpose(1, 0, 2)  # (n, P, D)
        num_b = (correct[c] & common).sum(axis=2, dtype=np.int64).transpose(1, 0, 2)
        den = common.sum(axis=2, dtype=np.int64).transpose(1, 0, 2)
        stacked = resampled_sums(w, np.stack([num_a, num_b, den], axis=1))  # (B, 3, P, D)
        samples[:, start : start + block] = _safe_divide(stacked[:, 0] - stacked[:, 1], stacked[:, 2])
        acc_a[start : start + block] = ratio(num_a, den)
        acc_b[start : start + block] = ratio(num_b, den)
    diffs[:] = acc_a - acc_b
    return diffs, samples, acc_a, acc_b


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

"""Every sum the report's analysis needs, accumulated over cases in chunks and over resamples in blocks.

:func:`resample_runs` turns the verdicts of several judges on the same cases into the estimates of
:mod:`medrewardbench.metrics.analysis`: the eight ratio metrics with intervals, accuracy per group
(with micro and macro summaries), kappa and AC1, accuracy split by the experts' length choice, and
every pairwise comparison (paired bootstrap and the exact case-level sign-flip test). The statistics are those of
:mod:`medrewardbench.metrics.stats`, and the numbers equal what its functions give with the full
weight matrix of :func:`~medrewardbench.metrics.stats.bootstrap_weights`; only the order of the
work differs, so that memory does not grow with cases times resamples:

* Per case, a judge contributes a few small counts (:data:`FEATURES`, each 0 to 2 per dimension):
  correct and counted requests per order, answered requests, and so on. A chunk of cases becomes a
  matrix ``X`` (cases, features); every resampled statistic is a ratio of sums ``W @ X``.
* The weight matrix ``W`` is drawn a block of resamples at a time as whole counts
  (:func:`~medrewardbench.metrics.stats.bootstrap.iter_sorted_count_blocks`, columns grouped by
  organ system), and multiplied chunk by chunk, so that neither ``W`` (resamples x cases) nor the
  per-case counts of every metric and judge ever exist whole. What is kept is one array of sums
  per resample, whose size depends on judges and resamples only. The per-case counts are kept
  between blocks as int8 when they fit in :data:`FEATURE_CACHE_BYTES`, and computed again for
  each block otherwise.
* All products are of whole counts, exact in float32 within a chunk; no chunk crosses an organ
  system, so each chunk's product is then multiplied by its system's draw weight
  (``n_h / (n_h - 1)``, the rescaled bootstrap) and added up in float64.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics import stats
from medrewardbench.metrics.stats import NOT_RUN, FloatArray, IntArray
from medrewardbench.metrics.stats.bootstrap import StrataLayout, _estimate, iter_sorted_count_blocks, macro_estimate
from medrewardbench.metrics.stats.counts import _safe_divide
from medrewardbench.metrics.stats.paired import (
    PairwiseComparisons,
    assemble_pairwise,
    difference_histograms,
    histograms_of_differences,
)

RATIO_METRICS: tuple[str, ...] = (
    "accuracy",
    "answered_accuracy",
    "original",
    "swapped",
    "strict_accuracy",
    "consistency",
    "first_position_rate",
    "longer_preference",
)
"""Ratio-of-sums metrics estimated together, in the order of :attr:`Resampled.ratios`."""

FEATURES: tuple[str, ...] = (
    "correct_original",
    "correct_swapped",
    "counted_original",
    "counted_swapped",
    "answered_labelled",
    "right_both_orders",
    "counted_both_orders",
    "consistent",
    "answered_both_orders",
    "picked_first",
    "answered",
    "picked_longer",
    "answered_unequal_lengths",
    "picked_1_expert_1",
    "picked_1_labelled",
)
"""Per case, judge and dimension: the counts every resampled statistic is a ratio of."""
_F = {name: k for k, name in enumerate(FEATURES)}
_ACCURACY_FEATURES = 4
"""The first four features (correct and counted per order) are all that grouped accuracy needs."""

WEIGHT_BLOCK_BYTES = 192 * 2**20
"""Memory for one block of the weight matrix (float32): how many resamples are drawn at a time."""
CHUNK_BYTES = 48 * 2**20
"""Memory for one chunk of per-case counts (float32): how many cases are multiplied at a time."""
FEATURE_CACHE_BYTES = 512 * 2**20
"""Per-case counts (int8) up to this size are kept between blocks of resamples instead of recomputed."""


@dataclass(frozen=True)
class Resampled:
    """What :func:`resample_runs` computed, in the shapes :mod:`medrewardbench.metrics.analysis` reads.

    Attributes:
        ratios: the :data:`RATIO_METRICS`, arrays (metric, judge, column); columns are the six
            dimensions, then the pooled column.
        failure_rate: (judge, column), failures among counted requests.
        counted: (judge, column), counted requests (failures included).
        groups: field -> accuracy per group; ``per_group`` arrays are (group, judge, column).
        kappa: (judge, dimension).
        ac1: (judge, dimension).
        by_length: accuracy where the experts preferred the longer / shorter response, arrays
            (judge * dimension,), judge-major.
        pairwise: per dimension (judge, judge, dimension), then for the pooled column (judge,
            judge, 1); None when there were no resamples.
    """

    ratios: stats.Estimate
    failure_rate: FloatArray
    counted: npt.NDArray[np.int64]
    groups: dict[str, stats.GroupedEstimate]
    kappa: stats.Estimate
    ac1: stats.Estimate
    by_length: stats.LengthAccuracy
    pairwise: tuple[PairwiseComparisons, PairwiseComparisons] | None


@dataclass(frozen=True)
class _Plan:
    """The shape of the work: judges, cross pairs, chunk sizes."""

    n_judges: int
    n_dims: int
    cross_pairs: tuple[tuple[int, int], ...]
    """Pairs of judges run on different requests: compared on their common requests."""

    @property
    def main_columns(self) -> int:
        return len(FEATURES) * self.n_judges * self.n_dims

    @property
    def columns(self) -> int:
        return self.main_columns + 3 * len(self.cross_pairs) * self.n_dims


def _group_codes(values: Sequence[str], n: int) -> tuple[tuple[str, ...], npt.NDArray[np.int32]]:
    """Sorted distinct values and each case's index into them."""
    if n == 0:
        return (), np.zeros(0, dtype=np.int32)
    names, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True)
    return tuple(str(name) for name in names.tolist()), inverse.reshape(-1).astype(np.int32)


def _longer(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int8]:
    out = np.zeros(lengths.shape[0], dtype=np.int8)
    out[lengths[:, 0] > lengths[:, 1]] = 1
    out[lengths[:, 1] > lengths[:, 0]] = 2
    return out


def _features(
    verdicts: npt.NDArray[np.int8],
    labels: npt.NDArray[np.int8],
    longer: npt.NDArray[np.int8],
    plan: _Plan,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per-case counts of a chunk: (cases, columns) int8, plus correct and counted requests.

    Args:
        verdicts: (judges, cases, 2, dims).
        labels: (cases, dims).
        longer: (cases,) 1 or 2 for the longer response, 0 for a tie.
        plan: judges and cross pairs.

    Returns:
        ``(X, correct, counted)``: X's columns are feature-major, then judge, then dimension,
        followed by (num_a, num_b, common) per cross pair and dimension; correct and counted are
        (judges, cases, 2, dims) booleans.
    """
    v = verdicts
    lab = labels[None, :, None, :]
    labelled = lab != 0
    run = v != NOT_RUN
    counted = run & labelled
    correct = counted & (v == lab)
    answered = v > 0
    first = np.array(stats.FIRST_SHOWN, dtype=np.int8)[None, None, :, None]
    long_ = longer[None, :, None, None]
    answered_unequal = answered & (long_ > 0)
    both_answered = answered[:, :, 0] & answered[:, :, 1]
    both_counted = counted[:, :, 0] & counted[:, :, 1]
    parts = [
        correct[:, :, 0],
        correct[:, :, 1],
        counted[:, :, 0],
        counted[:, :, 1],
        (answered & labelled).sum(axis=2, dtype=np.int8),
        both_counted & correct[:, :, 0] & correct[:, :, 1],
        both_counted,
        both_answered & (v[:, :, 0] == v[:, :, 1]),
        both_answered,
        (answered & (v == first)).sum(axis=2, dtype=np.int8),
        answered.sum(axis=2, dtype=np.int8),
        (answered_unequal & (v == long_)).sum(axis=2, dtype=np.int8),
        answered_unequal.sum(axis=2, dtype=np.int8),
        ((v == 1) & (lab == 1)).sum(axis=2, dtype=np.int8),
        ((v == 1) & labelled).sum(axis=2, dtype=np.int8),
    ]
    n_cases = v.shape[1]
    out = np.empty((n_cases, plan.columns), dtype=np.int8)
    width = plan.n_judges * plan.n_dims
    for k, part in enumerate(parts):
        # (judges, cases, dims) -> the cases' rows, judge-major within the feature
        out[:, k * width : (k + 1) * width] = np.asarray(part, dtype=np.int8).transpose(1, 0, 2).reshape(n_cases, width)
    column = plan.main_columns
    for a, b in plan.cross_pairs:
        common = counted[a] & counted[b]
        for piece in (correct[a] & common, correct[b] & common, common):
            out[:, column : column + plan.n_dims] = piece.sum(axis=1, dtype=np.int8)
            column += plan.n_dims
    return out, correct, counted


def _run_patterns(verdicts: npt.NDArray[np.int8]) -> list[int]:
    """Judges that were run on the same requests get the same number."""
    seen: dict[bytes, int] = {}
    patterns = []
    for judge in verdicts:
        key = np.packbits(judge != NOT_RUN).tobytes()
        patterns.append(seen.setdefault(key, len(seen)))
    return patterns


def _chunks(layout: StrataLayout, size: int) -> list[tuple[int, int, int]]:
    """(start, stop, stratum) ranges of the layout's order; no chunk crosses a stratum."""
    out = []
    for stratum, (low, high) in enumerate(zip(layout.bounds[:-1].tolist(), layout.bounds[1:].tolist(), strict=True)):
        for start in range(low, high, size):
            out.append((start, min(high, start + size), stratum))
    return out


class _Sums:
    """Running sums: full-data totals, and per resample."""

    def __init__(self, plan: _Plan, n_resamples: int, fields: Mapping[str, int], n_strata: int) -> None:
        k, d, j = plan.columns, plan.n_dims, plan.n_judges
        acc = _ACCURACY_FEATURES * j * d
        self.totals = np.zeros(k, dtype=np.int64)
        self.resampled = np.zeros((n_resamples, k))
        self.group_totals = {f: np.zeros((g, acc), dtype=np.int64) for f, g in fields.items()}
        self.group_resampled = {f: np.zeros((n_resamples, g, acc)) for f, g in fields.items()}
        self.by_length = np.zeros((4, j, d), dtype=np.int64)
        # cases per difference of correct requests (row judge minus column judge): per dimension
        # -2..2, pooled over the dimensions -2d..2d; pairs run on different requests separately
        self.histograms = np.zeros((j, j, d, 5), dtype=np.int64)
        self.pooled_histograms = np.zeros((j, j, 1, 4 * d + 1), dtype=np.int64)
        self.cross_histograms = {pair: np.zeros((d, 5), dtype=np.int64) for pair in plan.cross_pairs}
        self.cross_pooled_histograms = {pair: np.zeros((1, 4 * d + 1), dtype=np.int64) for pair in plan.cross_pairs}
        self.n_pairs = np.zeros((d, j, j), dtype=np.int64)
        self.n_strata = n_strata
        self.group_cases: dict[str, npt.NDArray[np.int64]] = {}
        """field -> cases per group (the degrees of freedom of the macro average's interval)"""


def resample_runs(
    verdicts: Sequence[IntArray],
    labels: IntArray,
    lengths: npt.NDArray[np.int64],
    groups: Mapping[str, Sequence[str]],
    *,
    strata_field: str,
    n_resamples: int,
    seed: int | None,
    confidence: float,
    block_size: int | None = None,
) -> Resampled:
    """Every estimate of the analysis for judges on the same cases (see the module docstring).

    Args:
        verdicts: one (cases, 2, dims) verdict array per judge.
        labels: (cases, dims) expert labels.
        lengths: (cases, 2) response lengths.
        groups: field -> the group of every case; ``strata_field`` must be one of them.
        strata_field: the field whose groups are resampled within themselves (organ systems).
        n_resamples: bootstrap resamples; 0 computes the point estimates only.
        seed: bootstrap seed.
        confidence: interval coverage.
        block_size: resamples drawn at a time (default: as many as :data:`WEIGHT_BLOCK_BYTES`
            holds). It changes memory and speed only: the same seed gives the same numbers.

    Returns:
        The :class:`Resampled` estimates.
    """
    n_judges = len(verdicts)
    n_cases, n_dims = labels.shape
    stacked = (
        np.stack([np.asarray(v, dtype=np.int8) for v in verdicts])
        if n_judges
        else np.zeros((0, n_cases, 2, n_dims), dtype=np.int8)
    )
    patterns = _run_patterns(stacked)
    cross = (
        tuple((a, b) for a in range(n_judges) for b in range(a + 1, n_judges) if patterns[a] != patterns[b])
        if n_resamples
        else ()
    )
    plan = _Plan(n_judges, n_dims, cross)
    coded = {field: _group_codes(values, n_cases) for field, values in groups.items()}
    strata_names, strata_codes = coded[strata_field]
    layout = StrataLayout.of(n_cases, strata_codes if n_cases else None)
    other_fields = [f for f in coded if f != strata_field]
    sums = _Sums(plan, n_resamples, {f: len(names) for f, (names, _) in coded.items()}, len(strata_names))
    sums.group_cases = {f: np.bincount(codes, minlength=len(names)) for f, (names, codes) in coded.items()}
    longer = _longer(lengths)
    chunk = int(min(16384, max(256, CHUNK_BYTES // max(1, 4 * plan.columns))))
    ranges = _chunks(layout, chunk)
    keep = n_cases * plan.columns <= FEATURE_CACHE_BYTES
    cache: list[npt.NDArray[np.int8]] = []
    acc = _ACCURACY_FEATURES * n_judges * n_dims

    def features_of(k: int) -> npt.NDArray[np.int8]:
        """The chunk's per-case counts; the first time, its totals are added too."""
        if k < len(cache):
            return cache[k]
        start, stop, _ = ranges[k]
        index = layout.order[start:stop]
        x, correct, counted = _features(stacked[:, index], labels[index], longer[index], plan)
        if k not in counted_chunks:
            counted_chunks.add(k)
            _add_totals(sums, x, correct, counted, labels[index], longer[index], index, coded, plan, n_resamples > 0)
        if keep:
            cache.append(x)
        return x

    counted_chunks: set[int] = set()
    if not n_resamples:
        for k in range(len(ranges)):
            features_of(k)
    else:
        block = block_size or max(1, min(n_resamples, WEIGHT_BLOCK_BYTES // max(1, 4 * n_cases)))
        scales = layout.scales.tolist()
        for row, counts in iter_sorted_count_blocks(layout, n_resamples, seed, block, dtype=np.float32):
            rows = slice(row, row + counts.shape[0])
            for k, (start, stop, stratum) in enumerate(ranges):
                x = features_of(k).astype(np.float32)
                w_chunk = counts[:, start:stop]
                scale = scales[stratum]
                product = np.multiply(w_chunk @ x, scale, dtype=np.float64)
                sums.resampled[rows] += product
                sums.group_resampled[strata_field][rows, stratum] += product[:, :acc]
                index = layout.order[start:stop]
                for field in other_fields:
                    codes = coded[field][1][index]
                    for code in np.unique(codes).tolist():
                        mask = codes == code
                        part = np.multiply(w_chunk[:, mask] @ x[mask, :acc], scale, dtype=np.float64)
                        sums.group_resampled[field][rows, code] += part
    return _estimates(sums, plan, coded, strata_field, n_resamples, confidence)


def _add_totals(
    sums: _Sums,
    x: npt.NDArray[np.int8],
    correct: npt.NDArray[np.bool_],
    counted: npt.NDArray[np.bool_],
    labels: npt.NDArray[np.int8],
    longer: npt.NDArray[np.int8],
    index: npt.NDArray[np.intp],
    coded: Mapping[str, tuple[tuple[str, ...], npt.NDArray[np.int32]]],
    plan: _Plan,
    pairwise: bool,
) -> None:
    """Add one chunk's counts to the full-data totals (point estimates, paired tests, length split)."""
    acc = _ACCURACY_FEATURES * plan.n_judges * plan.n_dims
    sums.totals += x.sum(axis=0, dtype=np.int64)
    for field in coded:
        codes = coded[field][1][index]
        for code in np.unique(codes).tolist():
            sums.group_totals[field][code] += x[codes == code, :acc].sum(axis=0, dtype=np.int64)
    correct_cases = correct.sum(axis=2, dtype=np.int64)  # (J, c, D)
    counted_cases = counted.sum(axis=2, dtype=np.int64)
    lab = labels[None]
    long_ = longer[None, :, None]
    expert_longer = (long_ > 0) & (lab == long_)
    expert_shorter = (long_ > 0) & (lab > 0) & (lab != long_)
    splits = (
        (correct_cases, expert_longer),
        (counted_cases, expert_longer),
        (correct_cases, expert_shorter),
        (counted_cases, expert_shorter),
    )
    for k, (values, mask) in enumerate(splits):
        sums.by_length[k] += (values * mask).sum(axis=1)
    if pairwise and plan.n_judges:
        n_judges, n_cases, n_dims = plan.n_judges, correct.shape[1], plan.n_dims
        # (D, J, requests), contiguous: one batched product rather than one per dimension
        count = np.ascontiguousarray(counted.reshape(n_judges, n_cases * 2, n_dims).transpose(2, 0, 1), np.float32)
        sums.n_pairs += np.rint(np.matmul(count, count.transpose(0, 2, 1))).astype(np.int64)
        sums.histograms += difference_histograms(correct_cases, 3)
        sums.pooled_histograms += difference_histograms(correct_cases.sum(axis=2, keepdims=True), 2 * n_dims + 1)
        column = plan.main_columns
        for pair in plan.cross_pairs:
            # the per-case (correct_a, correct_b, common) counts of the pair's common requests
            num_a = x[:, column : column + n_dims].astype(np.int64)
            num_b = x[:, column + n_dims : column + 2 * n_dims].astype(np.int64)
            column += 3 * n_dims
            sums.cross_histograms[pair] += histograms_of_differences(num_a - num_b, 3)
            pooled = (num_a - num_b).sum(axis=1, keepdims=True)
            sums.cross_pooled_histograms[pair] += histograms_of_differences(pooled, 2 * n_dims + 1)


def _with_pooled(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Append the pooled column (the sum over the last axis, the dimensions)."""
    return np.concatenate([array, array.sum(axis=-1, keepdims=True)], axis=-1)


def _metric_sums(features: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(..., features, J, D) sums -> numerators and denominators (..., metric, J, D) of :data:`RATIO_METRICS`."""

    def f(name: str) -> npt.NDArray[Any]:
        return features[..., _F[name], :, :]

    correct = f("correct_original") + f("correct_swapped")
    counted = f("counted_original") + f("counted_swapped")
    numerators = [
        correct,
        correct,
        f("correct_original"),
        f("correct_swapped"),
        f("right_both_orders"),
        f("consistent"),
        f("picked_first"),
        f("picked_longer"),
    ]
    denominators = [
        counted,
        f("answered_labelled"),
        f("counted_original"),
        f("counted_swapped"),
        f("counted_both_orders"),
        f("answered_both_orders"),
        f("answered"),
        f("answered_unequal_lengths"),
    ]
    return np.stack(numerators, axis=-3), np.stack(denominators, axis=-3)


def _kappa_cells(features: npt.NDArray[Any]) -> FloatArray:
    """(..., features, J, D) sums -> 2x2 confusion counts (..., J, D, 2, 2) [pred, gold]."""

    def f(name: str) -> npt.NDArray[np.float64]:
        return np.asarray(features[..., _F[name], :, :], dtype=np.float64)

    agree = f("correct_original") + f("correct_swapped")
    answered = f("answered_labelled")
    c11 = f("picked_1_expert_1")
    c12 = f("picked_1_labelled") - c11
    c22 = agree - c11
    c21 = answered - agree - c12
    return np.stack([np.stack([c11, c12], axis=-1), np.stack([c21, c22], axis=-1)], axis=-2)


def _estimates(
    sums: _Sums,
    plan: _Plan,
    coded: Mapping[str, tuple[tuple[str, ...], npt.NDArray[np.int32]]],
    strata_field: str,
    n_resamples: int,
    confidence: float,
) -> Resampled:
    j, d = plan.n_judges, plan.n_dims
    shape = (len(FEATURES), j, d)
    totals = sums.totals[: plan.main_columns].reshape(shape)
    resampled = sums.resampled[:, : plan.main_columns].reshape((n_resamples, *shape))
    num_t, den_t = _metric_sums(totals)
    num_r, den_r = _metric_sums(resampled)
    num_t, den_t, num_r, den_r = (_with_pooled(a) for a in (num_t, den_t, num_r, den_r))
    ratios = _estimate(_safe_divide(num_t, den_t), _safe_divide(num_r, den_r), den_t.astype(np.int64), confidence)
    acc_den, answered_den = den_t[0], den_t[1]
    groups = {field: _grouped(sums, field, names, plan, confidence, n_resamples) for field, (names, _) in coded.items()}
    cells_t = _kappa_cells(totals)
    cells_r = _kappa_cells(resampled)
    pairs_n = cells_t.sum(axis=(-2, -1)).astype(np.int64)
    kappa = _estimate(stats.kappa_from_confusion(cells_t), stats.kappa_from_confusion(cells_r), pairs_n, confidence)
    ac1 = _estimate(stats.ac1_from_confusion(cells_t), stats.ac1_from_confusion(cells_r), pairs_n, confidence)
    lengths = sums.by_length
    by_length = stats.LengthAccuracy(
        longer_preferred=_safe_divide(lengths[0], lengths[1]).reshape(-1),
        shorter_preferred=_safe_divide(lengths[2], lengths[3]).reshape(-1),
        n_longer=lengths[1].reshape(-1),
        n_shorter=lengths[3].reshape(-1),
    )
    return Resampled(
        ratios=ratios,
        failure_rate=stats.ratio((acc_den - answered_den)[None], acc_den[None]),
        counted=acc_den.astype(np.int64),
        groups=groups,
        kappa=kappa,
        ac1=ac1,
        by_length=by_length,
        pairwise=_pairwise(sums, plan, totals, resampled, confidence) if n_resamples else None,
    )


def _grouped(
    sums: _Sums, field: str, names: tuple[str, ...], plan: _Plan, confidence: float, n_resamples: int
) -> stats.GroupedEstimate:
    """Accuracy per group with micro and macro summaries, as :func:`~medrewardbench.metrics.stats.grouped_ratio_ci`."""
    j, d = plan.n_judges, plan.n_dims
    g = len(names)
    totals = sums.group_totals[field].reshape(g, _ACCURACY_FEATURES, j, d)
    resampled = sums.group_resampled[field].reshape(n_resamples, g, _ACCURACY_FEATURES, j, d)
    num_t = _with_pooled(totals[:, 0] + totals[:, 1])
    den_t = _with_pooled(totals[:, 2] + totals[:, 3])
    num_r = _with_pooled(resampled[:, :, 0] + resampled[:, :, 1])
    den_r = _with_pooled(resampled[:, :, 2] + resampled[:, :, 3])
    points = _safe_divide(num_t, den_t)
    group_samples = _safe_divide(num_r, den_r)
    per_group = _estimate(points, group_samples, den_t.astype(np.int64), confidence)
    micro = _estimate(
        _safe_divide(num_t.sum(axis=0), den_t.sum(axis=0)),
        _safe_divide(num_r.sum(axis=1), den_r.sum(axis=1)),
        den_t.sum(axis=0).astype(np.int64),
        confidence,
    )
    macro = macro_estimate(points, group_samples, sums.group_cases[field], confidence)
    return stats.GroupedEstimate(names, per_group, micro, macro)


def _pairwise(
    sums: _Sums, plan: _Plan, totals: npt.NDArray[np.int64], resampled: FloatArray, confidence: float
) -> tuple[PairwiseComparisons, PairwiseComparisons]:
    """Every pair of judges per dimension and for the pooled column (as :func:`stats.pairwise_comparisons`)."""
    d = plan.n_dims
    num_t = (totals[_F["correct_original"]] + totals[_F["correct_swapped"]]).astype(np.float64)  # (J, D)
    den_t = (totals[_F["counted_original"]] + totals[_F["counted_swapped"]]).astype(np.float64)
    num_r = resampled[:, _F["correct_original"]] + resampled[:, _F["correct_swapped"]]  # (B, J, D)
    den_r = resampled[:, _F["counted_original"]] + resampled[:, _F["counted_swapped"]]
    cross_t: dict[tuple[int, int], npt.NDArray[np.float64]] = {}
    cross_r: dict[tuple[int, int], FloatArray] = {}
    column = plan.main_columns
    for pair in plan.cross_pairs:
        width = 3 * d
        cross_t[pair] = sums.totals[column : column + width].reshape(3, d).astype(np.float64)
        cross_r[pair] = sums.resampled[:, column : column + width].reshape(-1, 3, d)
        column += width
    per_dim = _comparisons(
        num_t, den_t, num_r, den_r, cross_t, cross_r, sums.histograms, sums.cross_histograms, sums.n_pairs, confidence
    )
    pooled = _comparisons(
        num_t.sum(axis=1, keepdims=True),
        den_t.sum(axis=1, keepdims=True),
        num_r.sum(axis=2, keepdims=True),
        den_r.sum(axis=2, keepdims=True),
        {pair: values.sum(axis=1, keepdims=True) for pair, values in cross_t.items()},
        {pair: values.sum(axis=2, keepdims=True) for pair, values in cross_r.items()},
        sums.pooled_histograms,
        sums.cross_pooled_histograms,
        sums.n_pairs.sum(axis=0, keepdims=True),
        confidence,
    )
    return per_dim, pooled


def _comparisons(
    num_t: npt.NDArray[np.float64],
    den_t: npt.NDArray[np.float64],
    num_r: FloatArray,
    den_r: FloatArray,
    cross_t: Mapping[tuple[int, int], npt.NDArray[np.float64]],
    cross_r: Mapping[tuple[int, int], FloatArray],
    histograms: npt.NDArray[np.int64],
    cross_histograms: Mapping[tuple[int, int], npt.NDArray[np.int64]],
    n_pairs: npt.NDArray[np.int64],
    confidence: float,
) -> PairwiseComparisons:
    """Pairwise records from per-judge sums (judges on the same requests) and per-pair sums (the rest)."""
    n_judges, n_dims = num_t.shape
    pairs = n_pairs.transpose(1, 2, 0)
    rows, cols = np.triu_indices(n_judges, 1)
    point = _safe_divide(num_t, den_t)  # (J, D)
    samples = _safe_divide(num_r, den_r)  # (B, J, D)
    acc_a = np.repeat(point[:, None, :], n_judges, axis=1)
    pair_diff = point[rows] - point[cols]
    pair_samples = samples[:, rows] - samples[:, cols]
    pair_histograms = histograms[rows, cols]
    for k, (a, c) in enumerate(zip(rows.tolist(), cols.tolist(), strict=True)):
        if (a, c) not in cross_t:
            continue
        totals, replicates = cross_t[(a, c)], cross_r[(a, c)]
        acc_a[a, c] = _safe_divide(totals[0], totals[2])
        acc_a[c, a] = _safe_divide(totals[1], totals[2])
        pair_diff[k] = acc_a[a, c] - acc_a[c, a]
        pair_samples[:, k] = _safe_divide(replicates[:, 0] - replicates[:, 1], replicates[:, 2])
        pair_histograms[k] = cross_histograms[(a, c)]
    return assemble_pairwise(acc_a, pair_diff, pair_samples, rows, cols, confidence, pair_histograms, pairs)


__all__ = ["FEATURES", "RATIO_METRICS", "Resampled", "resample_runs"]

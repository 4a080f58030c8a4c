"""Tests of medrewardbench.metrics.stats: hand-computed values on tiny arrays, scipy/sklearn as
references, edge cases, and a coverage simulation."""

from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, binomtest, norm, permutation_test
from scipy.stats import t as student_t
from sklearn.metrics import cohen_kappa_score

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics import stats as S
from medrewardbench.metrics.stats.agreement import _case_confusion

# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------

# Three cases, two dimensions. Case 1 was not run in the swapped order; case 2 has no label on
# dimension 0; case 0 has a failure (0) in the swapped order on dimension 1.
TINY_VERDICTS = np.array(
    [
        [[1, 2], [1, 0]],
        [[2, 1], [-1, -1]],
        [[1, 2], [2, 2]],
    ],
    dtype=np.int8,
)
TINY_LABELS = np.array([[1, 1], [1, 1], [0, 2]], dtype=np.int8)


def random_judge(rng: np.random.Generator, labels: np.ndarray, skill: float, fail: float = 0.0) -> np.ndarray:
    """Verdicts that match the label with probability ``skill`` (failures with ``fail``)."""
    n, d = labels.shape
    truth = np.where(labels == 0, 1, labels)[:, None, :]
    right = rng.random((n, 2, d)) < skill
    verdicts = np.where(right, truth, 3 - truth).astype(np.int8)
    verdicts[rng.random((n, 2, d)) < fail] = 0
    return verdicts


def random_labels(rng: np.random.Generator, n: int, d: int = 6, missing: float = 0.0) -> np.ndarray:
    labels = rng.integers(1, 3, size=(n, d)).astype(np.int8)
    labels[rng.random((n, d)) < missing] = 0
    return labels


# The estimates the analysis composes from the package's counts and intervals, written out here
# as references for the tests.


def accuracy(verdicts: np.ndarray, labels: np.ndarray, *, count_failures: bool = True) -> np.ndarray:
    """Request-weighted accuracy per dimension: the ratio of the summed per-case counts."""
    return S.ratio(*S.case_counts(verdicts, labels, count_failures=count_failures))


def accuracy_ci(verdicts: np.ndarray, labels: np.ndarray, *, count_failures: bool = True, **options: Any) -> S.Estimate:
    """Accuracy with its case-bootstrap interval (options as ``ratio_ci``)."""
    return S.ratio_ci(*S.case_counts(verdicts, labels, count_failures=count_failures), **options)


def grouped_accuracy_ci(verdicts: np.ndarray, labels: np.ndarray, groups: Any, **options: Any) -> S.GroupedEstimate:
    return S.grouped_ratio_ci(*S.case_counts(verdicts, labels), groups, **options)


@dataclass(frozen=True)
class Pair:
    """Judge ``i`` (A) against judge ``j`` (B), per dimension, taken out of ``pairwise_comparisons``."""

    acc_a: np.ndarray
    acc_b: np.ndarray
    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_bootstrap: np.ndarray
    cases_better: np.ndarray
    cases_worse: np.ndarray
    p_case: np.ndarray
    n_pairs: np.ndarray


def pair(pc: S.PairwiseComparisons, i: int, j: int) -> Pair:
    return Pair(
        pc.acc_a[i, j],
        pc.acc_b[i, j],
        pc.diff[i, j],
        pc.low[i, j],
        pc.high[i, j],
        pc.p_bootstrap[i, j],
        pc.cases_better[i, j],
        pc.cases_worse[i, j],
        pc.p_case[i, j],
        pc.n_pairs[i, j],
    )


def compare(a: np.ndarray, b: np.ndarray, labels: np.ndarray, **options: Any) -> Pair:
    """Two judges on the same cases: the pair (0, 1) of ``pairwise_comparisons``."""
    return pair(S.pairwise_comparisons(np.stack([a, b]), labels, **options), 0, 1)


def draw_counts(weights: np.ndarray, stratum_size: int) -> np.ndarray:
    """How often each case of one stratum was drawn: the rescaled weights over ``n_h / (n_h - 1)``."""
    return np.rint(np.asarray(weights) * (stratum_size - 1) / stratum_size).astype(np.int64)


def naive_accuracy_replicates(
    verdicts: np.ndarray, labels: np.ndarray, weights: np.ndarray, stratum_size: int | None = None
) -> np.ndarray:
    """Bootstrap accuracy by explicitly materialising each resample (the slow reference).

    ``weights`` are one stratum's columns (``stratum_size`` cases, default all of them): each row
    is turned back into the cases it drew (a ratio within one stratum does not depend on the
    draws' common weight).
    """
    out = []
    for row in draw_counts(weights, stratum_size or weights.shape[1]):
        index = np.repeat(np.arange(len(row)), row)
        out.append(accuracy(verdicts[index], labels[index]))
    return np.array(out)


# --------------------------------------------------------------------------------------------
# Point estimates on the tiny example
# --------------------------------------------------------------------------------------------


def test_case_counts_by_hand() -> None:
    correct, counted = S.case_counts(TINY_VERDICTS, TINY_LABELS)
    np.testing.assert_array_equal(correct, [[2, 0], [0, 1], [0, 2]])
    np.testing.assert_array_equal(counted, [[2, 2], [1, 1], [0, 2]])


def test_accuracy_counts_failures_as_wrong_and_answered_accuracy_does_not() -> None:
    np.testing.assert_allclose(accuracy(TINY_VERDICTS, TINY_LABELS), [2 / 3, 3 / 5])
    np.testing.assert_allclose(accuracy(TINY_VERDICTS, TINY_LABELS, count_failures=False), [2 / 3, 3 / 4])


def per_order_accuracy(verdicts: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(2, n_dims): accuracy in the original order (row 0) and the swapped order (row 1)."""
    return S.ratio(*S.request_outcomes(verdicts, labels))


def test_per_order_accuracy_by_hand() -> None:
    np.testing.assert_allclose(per_order_accuracy(TINY_VERDICTS, TINY_LABELS), [[1 / 2, 2 / 3], [1.0, 1 / 2]])


def test_per_order_accuracy_is_nan_for_an_order_not_run() -> None:
    verdicts = TINY_VERDICTS.copy()
    verdicts[:, 1] = -1
    result = per_order_accuracy(verdicts, TINY_LABELS)
    assert np.isnan(result[1]).all()
    np.testing.assert_allclose(result[0], [1 / 2, 2 / 3])


def test_strict_accuracy_by_hand() -> None:
    # dim 0: only case 0 is run in both orders and labelled, right twice -> 1/1.
    # dim 1: case 0 (failure in swapped: wrong), case 2 (right twice) -> 1/2.
    right, counted = S.strict_accuracy_counts(TINY_VERDICTS, TINY_LABELS)
    np.testing.assert_allclose(S.ratio(right, counted), [1.0, 0.5])
    np.testing.assert_array_equal(right, [[1, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(counted, [[1, 1], [0, 0], [0, 1]])


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError, match="shape"):
        accuracy(np.zeros((3, 3, 2), dtype=np.int8), TINY_LABELS)
    with pytest.raises(ValueError, match="verdicts must be"):
        accuracy(np.full((3, 2, 2), 5, dtype=np.int8), TINY_LABELS)
    with pytest.raises(ValueError, match="labels"):
        accuracy(TINY_VERDICTS, np.full((3, 2), 3, dtype=np.int8))
    with pytest.raises(ValueError, match="labels have shape"):
        accuracy(TINY_VERDICTS, TINY_LABELS[:2])
    with pytest.raises(ValueError, match="confidence"):
        accuracy_ci(TINY_VERDICTS, TINY_LABELS, confidence=1.5)


# --------------------------------------------------------------------------------------------
# Bootstrap weights and intervals
# --------------------------------------------------------------------------------------------


def test_bootstrap_weights_are_rescaled_multinomial_counts_and_seeded() -> None:
    w = S.bootstrap_weights(50, n_resamples=300, seed=7)
    assert w.shape == (300, 50)
    assert (w >= 0).all()
    counts = draw_counts(w, 50)
    np.testing.assert_allclose(w, counts * 50 / 49, rtol=1e-15)  # n - 1 draws of weight n / (n - 1)
    np.testing.assert_array_equal(counts.sum(axis=1), 49)
    np.testing.assert_allclose(w.sum(axis=1), 50)
    np.testing.assert_array_equal(w, S.bootstrap_weights(50, n_resamples=300, seed=7))
    assert not np.array_equal(w, S.bootstrap_weights(50, n_resamples=300, seed=8))
    # each case weighs 1 per resample on average, with the variance of one case drawn once (1)
    assert abs(w.mean() - 1.0) < 1e-12
    assert 0.85 < w.var() < 1.15  # (n/(n-1))^2 * multinomial(n - 1, 1/n) variance = 1


def test_stratified_weights_keep_every_stratum_size() -> None:
    strata = np.array(["a"] * 5 + ["b"] * 3 + ["c"] * 12 + ["d"])
    w = S.bootstrap_weights(21, n_resamples=200, seed=1, strata=strata)
    for name, size in (("a", 5), ("b", 3), ("c", 12), ("d", 1)):
        np.testing.assert_allclose(w[:, strata == name].sum(axis=1), size)
        if size > 1:
            np.testing.assert_array_equal(draw_counts(w[:, strata == name], size).sum(axis=1), size - 1)
    np.testing.assert_array_equal(w[:, strata == "d"], 1.0)  # a stratum of one case cannot vary


def test_rescaled_weights_keep_all_but_the_last_draw_of_each_stratum_of_the_plain_bootstrap() -> None:
    # the plain bootstrap's random stream, so that an interval moves only by the rescaling
    strata = np.array(["b"] * 4 + ["a"] * 6 + ["c"])
    w = S.bootstrap_weights(11, 5, seed=3, strata=strata)
    for row in range(5):
        rng = S.bootstrap.resample_generator(3, row)
        expected = np.zeros(11)
        for name in ("a", "b", "c"):  # strata in sorted order, each drawn n_h times
            members = np.flatnonzero(strata == name)
            drawn = rng.integers(0, members.size, size=members.size)
            kept = drawn[: max(members.size - 1, 1)]
            np.add.at(expected, members[kept], members.size / max(members.size - 1, 1))
        np.testing.assert_allclose(w[row], expected)


def test_rescaled_bootstrap_variance_of_a_stratified_total_is_unbiased() -> None:
    # The plain stratified bootstrap gives a stratum's total the variance (n_h - 1) / n_h times
    # its unbiased estimate n_h s_h^2: on strata of 2 and 3 cases half and two thirds of it, which
    # made intervals too narrow (benchmarks/bench_validity.py). Rescaled, it is exactly n_h s_h^2.
    rng = np.random.default_rng(5)
    strata = np.repeat([0, 1, 2], [2, 3, 40])
    x = rng.normal(size=strata.size)
    w = S.bootstrap_weights(strata.size, 40_000, seed=3, strata=strata)
    for h in range(3):
        members = strata == h
        expected = members.sum() * x[members].var(ddof=1)
        assert (w[:, members] @ x[members]).var() == pytest.approx(expected, rel=0.03)
        assert (w[:, members] @ x[members]).mean() == pytest.approx(x[members].sum(), rel=0.02, abs=0.02)


def test_bootstrap_weights_reject_bad_strata() -> None:
    with pytest.raises(ValueError, match="strata"):
        S.bootstrap_weights(5, 10, strata=[1, 2])


def test_resampled_sums_float32_path_is_exact() -> None:
    rng = np.random.default_rng(0)
    w = rng.multinomial(300, np.full(300, 1 / 300), size=100).astype(np.int32)  # whole counts
    x = rng.integers(0, 3, size=(300, 4, 2))
    expected = w.astype(np.float64) @ x.reshape(300, -1).astype(np.float64)
    np.testing.assert_array_equal(S.resampled_sums(w, x), expected.reshape(100, 4, 2))
    np.testing.assert_array_equal(S.resampled_sums(w.astype(np.float32), x), expected.reshape(100, 4, 2))


def test_accuracy_interval_matches_explicit_resampling() -> None:
    rng = np.random.default_rng(3)
    labels = random_labels(rng, 40, 3, missing=0.1)
    verdicts = random_judge(rng, labels, 0.7, fail=0.1)
    verdicts[:5, 1] = -1
    weights = S.bootstrap_weights(40, n_resamples=200, seed=11)
    est = accuracy_ci(verdicts, labels, weights=weights, confidence=0.9)
    replicates = naive_accuracy_replicates(verdicts, labels, weights)
    np.testing.assert_allclose(est.point, accuracy(verdicts, labels))
    np.testing.assert_allclose(est.low, np.quantile(replicates, 0.05, axis=0))
    np.testing.assert_allclose(est.high, np.quantile(replicates, 0.95, axis=0))
    np.testing.assert_array_equal(est.n, S.case_counts(verdicts, labels)[1].sum(axis=0))


def test_accuracy_interval_is_seeded_and_equals_precomputed_weights() -> None:
    rng = np.random.default_rng(4)
    labels = random_labels(rng, 60)
    verdicts = random_judge(rng, labels, 0.65)
    a = accuracy_ci(verdicts, labels, n_resamples=500, seed=5)
    b = accuracy_ci(verdicts, labels, n_resamples=500, seed=5)
    c = accuracy_ci(verdicts, labels, weights=S.bootstrap_weights(60, 500, seed=5))
    d = accuracy_ci(verdicts, labels, n_resamples=500, seed=6)
    for x, y in ((a, b), (a, c)):
        np.testing.assert_array_equal(x.low, y.low)
        np.testing.assert_array_equal(x.high, y.high)
    assert not np.array_equal(a.low, d.low)


@pytest.mark.parametrize("seed", range(8))
def test_intervals_contain_the_point_estimate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = random_labels(rng, int(rng.integers(20, 200)), missing=0.05)
    verdicts = random_judge(rng, labels, float(rng.uniform(0.3, 0.95)), fail=float(rng.uniform(0, 0.2)))
    est = accuracy_ci(verdicts, labels, n_resamples=500, seed=seed)
    assert (est.low <= est.point).all()
    assert (est.point <= est.high).all()
    assert (est.low >= 0).all() and (est.high <= 1).all()


def test_accuracy_interval_on_a_subset_uses_only_those_cases() -> None:
    rng = np.random.default_rng(8)
    labels = random_labels(rng, 80)
    verdicts = random_judge(rng, labels, 0.7)
    mask = rng.random(80) < 0.4
    weights = S.bootstrap_weights(80, 300, seed=2)
    sub = accuracy_ci(verdicts, labels, weights=weights, cases=mask)
    np.testing.assert_allclose(sub.point, accuracy(verdicts[mask], labels[mask]))
    # same resamples restricted to the subset's columns
    direct = accuracy_ci(verdicts[mask], labels[mask], weights=weights[:, mask])
    np.testing.assert_array_equal(sub.low, direct.low)
    by_index = accuracy_ci(verdicts, labels, weights=weights, cases=np.flatnonzero(mask))
    np.testing.assert_array_equal(sub.high, by_index.high)


def test_degenerate_intervals() -> None:
    labels = np.array([[1, 2, 0], [2, 2, 0], [1, 1, 0]], dtype=np.int8)
    perfect = np.repeat(labels[:, None, :], 2, axis=1)
    perfect[:, :, 2] = 1
    est = accuracy_ci(perfect, labels, n_resamples=100)
    np.testing.assert_array_equal(est.point[:2], [1.0, 1.0])
    np.testing.assert_array_equal(est.low[:2], [1.0, 1.0])
    np.testing.assert_array_equal(est.high[:2], [1.0, 1.0])
    # a dimension without any label: undefined, not zero
    assert np.isnan(est.point[2]) and np.isnan(est.low[2]) and np.isnan(est.high[2])
    assert est.n[2] == 0


def test_judge_that_fails_every_request() -> None:
    rng = np.random.default_rng(9)
    labels = random_labels(rng, 30)
    failing = np.zeros((30, 2, 6), dtype=np.int8)
    est = accuracy_ci(failing, labels, n_resamples=200)
    np.testing.assert_array_equal(est.point, 0.0)
    np.testing.assert_array_equal(est.low, 0.0)
    np.testing.assert_array_equal(est.high, 0.0)
    assert np.isnan(accuracy(failing, labels, count_failures=False)).all()
    answered = accuracy_ci(failing, labels, count_failures=False, n_resamples=50)
    assert np.isnan(answered.point).all() and np.isnan(answered.low).all()
    kappa_est, ac1_est = agreement(failing, labels)
    assert np.isnan(kappa_est.point).all() and np.isnan(ac1_est.point).all()
    np.testing.assert_array_equal(kappa_est.n, 0)


def test_empty_input() -> None:
    verdicts = np.zeros((0, 2, 6), dtype=np.int8)
    labels = np.zeros((0, 6), dtype=np.int8)
    est = accuracy_ci(verdicts, labels, n_resamples=10)
    assert np.isnan(est.point).all() and np.isnan(est.low).all()


def test_percentile_interval_ignores_nan_replicates_per_column() -> None:
    samples = np.array([[0.0, np.nan, np.nan], [1.0, 2.0, np.nan], [2.0, 4.0, np.nan]])
    low, high = S.percentile_interval(samples, confidence=0.5)
    np.testing.assert_allclose(low[:2], [0.5, 2.5])
    np.testing.assert_allclose(high[:2], [1.5, 3.5])
    assert np.isnan(low[2]) and np.isnan(high[2])


def test_bernoulli_coverage_is_close_to_nominal() -> None:
    """A judge right with probability 0.7 on each request: the 95% interval should cover 0.7 in
    roughly 95% of simulated benchmarks (binomial spread on 200 runs: about 92% to 98%)."""
    rng = np.random.default_rng(2024)
    n_cases, n_sims = 120, 200
    weights = S.bootstrap_weights(n_cases, 400, seed=1)
    labels = np.ones((n_cases, 1), dtype=np.int8)
    covered = 0
    for _ in range(n_sims):
        verdicts = np.where(rng.random((n_cases, 2, 1)) < 0.7, 1, 2).astype(np.int8)
        est = accuracy_ci(verdicts, labels, weights=weights)
        covered += bool(est.low[0] <= 0.7 <= est.high[0])
    assert 0.88 <= covered / n_sims <= 0.99


# --------------------------------------------------------------------------------------------
# Groups, micro and macro
# --------------------------------------------------------------------------------------------


def test_grouped_accuracy_matches_per_group_accuracy() -> None:
    rng = np.random.default_rng(10)
    n = 90
    labels = random_labels(rng, n, missing=0.05)
    verdicts = random_judge(rng, labels, 0.7, fail=0.05)
    groups = rng.choice(["chest", "brain", "eye", "heart"], size=n)
    weights = S.bootstrap_weights(n, 300, seed=3, strata=groups)
    result = grouped_accuracy_ci(verdicts, labels, groups, weights=weights)
    assert result.groups == ("brain", "chest", "eye", "heart")
    for g, name in enumerate(result.groups):
        mask = groups == name
        np.testing.assert_allclose(result.per_group.point[g], accuracy(verdicts[mask], labels[mask]))
        alone = accuracy_ci(verdicts, labels, weights=weights, cases=mask)
        np.testing.assert_allclose(result.per_group.low[g], alone.low)
        np.testing.assert_allclose(result.per_group.high[g], alone.high)
    micro = accuracy_ci(verdicts, labels, weights=weights)
    np.testing.assert_allclose(result.micro.point, micro.point)
    np.testing.assert_allclose(result.micro.low, micro.low)
    np.testing.assert_allclose(result.micro.high, micro.high)
    np.testing.assert_allclose(result.macro.point, result.per_group.point.mean(axis=0))
    np.testing.assert_array_equal(result.macro.n, 4)
    assert (result.macro.low <= result.macro.point).all() and (result.macro.point <= result.macro.high).all()


def test_macro_replicates_are_means_of_group_replicates() -> None:
    rng = np.random.default_rng(12)
    n = 30
    labels = random_labels(rng, n, 1)
    verdicts = random_judge(rng, labels, 0.6)
    groups = np.array(["a"] * 10 + ["b"] * 20)
    weights = S.bootstrap_weights(n, 200, seed=4, strata=groups)
    result = grouped_accuracy_ci(verdicts, labels, groups, weights=weights, confidence=0.8)
    a = naive_accuracy_replicates(verdicts[:10], labels[:10], weights[:, :10], 10)
    b = naive_accuracy_replicates(verdicts[10:], labels[10:], weights[:, 10:], 20)
    macro = (a + b) / 2
    # the percentile interval, widened about the point by t(nu) / z (Welch-Satterthwaite nu)
    v_a, v_b = a.var(ddof=1), b.var(ddof=1)
    nu = (v_a + v_b) ** 2 / (v_a**2 / 9 + v_b**2 / 19)
    factor = student_t.ppf(0.9, nu) / norm.ppf(0.9)
    assert 1.0 < factor < 1.2
    point = result.macro.point
    np.testing.assert_allclose(result.macro.low, point - factor * (point - np.quantile(macro, 0.1, axis=0)))
    np.testing.assert_allclose(result.macro.high, point + factor * (np.quantile(macro, 0.9, axis=0) - point))


def test_student_t_quantiles_match_scipy_and_widen_by_t_over_z() -> None:
    for df in (0.7, 1.0, 2.0, 3.3, 11.0, 87.0, 1000.0, 1e6):
        for probability in (0.02, 0.6, 0.9, 0.975, 0.995):
            expected = student_t.ppf(probability, df)
            assert S.bootstrap.student_t_quantile(probability, df) == pytest.approx(expected, rel=1e-8, abs=1e-12)
    factors = S.bootstrap.t_over_z([11.0, 87.0, np.nan, np.inf], 0.95)
    z = norm.ppf(0.975)
    np.testing.assert_allclose(factors, [student_t.ppf(0.975, 11) / z, student_t.ppf(0.975, 87) / z, 1, 1])
    with pytest.raises(ValueError):
        S.bootstrap.student_t_quantile(1.0, 3)


def test_macro_interval_covers_with_organ_systems_of_two_cases() -> None:
    # Organ systems of 2, 2, 3, 4 ... cases: the macro average weighs each equally, so its
    # variance rests on few cases; the plain percentile interval covered about 90 % here.
    rng = np.random.default_rng(15)
    sizes = [2, 2, 3, 4, 5, 8, 12, 20]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    n, reps = groups.size, 500
    centre = np.linspace(0.55, 0.85, len(sizes))
    truth = np.mean([np.clip(c + rng.normal(0, 0.25, 200_000), 0, 1).mean() for c in centre])
    covered = plain = 0
    weights = S.bootstrap_weights(n, 400, seed=1, strata=groups)  # the data vary, the resamples need not
    for _ in range(reps):
        # per-case agreement varies strongly between cases (12 requests sharing a case effect)
        correct = rng.binomial(12, np.clip(centre[groups] + rng.normal(0, 0.25, n), 0.0, 1.0))
        counted = np.full(n, 12)
        est = S.grouped_ratio_ci(correct, counted, groups, weights=weights)
        covered += est.macro.low <= truth <= est.macro.high
        members = [groups == g for g in range(len(sizes))]
        samples = np.mean([(weights[:, m] @ correct[m]) / (12 * m.sum()) for m in members], axis=0)
        low, high = np.quantile(samples, [0.025, 0.975])
        plain += low <= truth <= high
    assert covered / reps >= 0.93 > plain / reps, (covered / reps, plain / reps)


def test_grouped_handles_unlabelled_group_and_unstratified_empty_resamples() -> None:
    rng = np.random.default_rng(13)
    n = 40
    labels = random_labels(rng, n, 2)
    labels[:3] = 0  # group "tiny" has no labels at all
    groups = np.array(["tiny"] * 3 + ["rare"] * 2 + ["big"] * 35)
    verdicts = random_judge(rng, labels, 0.7)
    # unstratified: "rare" (2 cases) is absent from about 5% of resamples
    weights = S.bootstrap_weights(n, 500, seed=0)
    result = grouped_accuracy_ci(verdicts, labels, groups, weights=weights)
    tiny = result.groups.index("tiny")
    assert np.isnan(result.per_group.point[tiny]).all() and np.isnan(result.per_group.low[tiny]).all()
    np.testing.assert_array_equal(result.macro.n, 2)
    rare, big = result.groups.index("rare"), result.groups.index("big")
    np.testing.assert_allclose(result.macro.point, (result.per_group.point[rare] + result.per_group.point[big]) / 2)
    assert np.isfinite(result.macro.low).all() and np.isfinite(result.per_group.low[rare]).all()
    # default weights are stratified by group and seeded
    again = grouped_accuracy_ci(verdicts, labels, groups, n_resamples=200, seed=1)
    same = grouped_accuracy_ci(verdicts, labels, groups, n_resamples=200, seed=1)
    np.testing.assert_array_equal(again.macro.low, same.macro.low)


def test_grouped_ratio_ci_accepts_stacked_judges() -> None:
    rng = np.random.default_rng(14)
    n = 50
    labels = random_labels(rng, n)
    judges = [random_judge(rng, labels, p) for p in (0.6, 0.8)]
    groups = rng.choice(["x", "y", "z"], size=n)
    weights = S.bootstrap_weights(n, 200, seed=0, strata=groups)
    counts = [S.case_counts(v, labels) for v in judges]
    stacked = S.grouped_ratio_ci(
        np.stack([c[0] for c in counts], axis=1), np.stack([c[1] for c in counts], axis=1), groups, weights=weights
    )
    for j, v in enumerate(judges):
        single = grouped_accuracy_ci(v, labels, groups, weights=weights)
        np.testing.assert_allclose(stacked.per_group.low[:, j], single.per_group.low)
        np.testing.assert_allclose(stacked.macro.high[j], single.macro.high)


# --------------------------------------------------------------------------------------------
# The case-level sign-flip test and paired comparisons
# --------------------------------------------------------------------------------------------


def sign_flip_by_enumeration(differences: list[int], mid: bool) -> float:
    """The two-sided p-value by listing every one of the 2^n sign patterns (the definition).

    Conventional: the share of patterns with ``|T*| >= |T|``; mid-p: those with ``|T*| > |T|``
    plus half of those with ``|T*| = |T|`` (both 1 when ``T = 0``).
    """
    observed = abs(sum(differences))
    if observed == 0:
        return 1.0
    magnitudes = [abs(d) for d in differences]
    totals = [
        abs(sum(s * m for s, m in zip(signs, magnitudes, strict=True)))
        for signs in itertools.product((1, -1), repeat=len(magnitudes))
    ]
    beyond = sum(total > observed for total in totals)
    equal = sum(total == observed for total in totals)
    return (beyond + (equal / 2 if mid else equal)) / 2 ** len(magnitudes)


def sign_flip_exact(abs_counts: list[int], statistic: int, mid: bool = True) -> float:
    """The two-sided p-value from the exact integer distribution (polynomial multiplication)."""
    ways = {0: 1}
    for k, m in enumerate(abs_counts, start=1):
        for _ in range(m):
            grown: dict[int, int] = {}
            for total, count in ways.items():
                grown[total + k] = grown.get(total + k, 0) + count
                grown[total - k] = grown.get(total - k, 0) + count
            ways = grown
    observed = abs(statistic)
    if observed == 0:
        return 1.0
    upper = sum(count for total, count in ways.items() if total >= observed)
    if mid:
        upper -= Fraction(ways.get(observed, 0), 2)
    return float(min(Fraction(1), Fraction(2 * upper, 2 ** sum(abs_counts))))


@pytest.mark.parametrize("seed", range(6))
def test_sign_flip_equals_the_enumeration_of_every_sign_pattern(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(1, 13))
        differences = (rng.integers(-12, 13, size=n) * (rng.random(n) < 0.8)).tolist()
        for mid in (True, False):
            assert S.case_sign_flip_test(np.array(differences), mid=mid) == pytest.approx(
                sign_flip_by_enumeration(differences, mid), rel=1e-12
            )


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 25), min_size=1, max_size=12), st.floats(0.0, 1.0), st.booleans())
def test_sign_flip_equals_the_exact_integer_distribution(abs_counts: list[int], where: float, mid: bool) -> None:
    support = sum(k * m for k, m in enumerate(abs_counts, start=1))
    statistic = round(where * support)
    assert S.sign_flip_p_value(abs_counts, statistic, mid=mid) == pytest.approx(
        sign_flip_exact(abs_counts, statistic, mid), rel=1e-9, abs=1e-300
    )


def test_sign_flip_is_exact_far_in_the_tail_and_at_the_edge() -> None:
    counts = [300, 200, 50]  # support 850, 550 cases
    for statistic in (10, 100, 300, 600, 800, 848):
        for mid in (True, False):
            expected = sign_flip_exact(counts, statistic, mid)
            assert S.sign_flip_p_value(counts, statistic, mid=mid) == pytest.approx(expected, rel=1e-9)
    # every case's sign as observed: 2^-550 on each side
    assert S.sign_flip_p_value(counts, 850, mid=False) == pytest.approx(2.0 ** (1 - 550), rel=1e-12)
    assert S.sign_flip_p_value(counts, 850) == pytest.approx(2.0**-550, rel=1e-12)  # mid-p: half the atom
    assert S.sign_flip_p_value(counts, -849, mid=False) == pytest.approx(2.0 ** (1 - 550), rel=1e-9)  # unreachable
    assert S.sign_flip_p_value(counts, 0) == S.sign_flip_p_value(counts, 0, mid=False) == 1.0
    assert S.sign_flip_p_value([0, 0], 0) == 1.0


def test_sign_flip_with_differences_of_one_is_the_exact_sign_test() -> None:
    for positive, negative in ((0, 1), (3, 3), (10, 2), (7, 19), (300, 250), (1000, 900), (0, 60)):
        n = positive + negative
        expected = binomtest(positive, n).pvalue
        p = S.sign_flip_p_value([n], positive - negative, mid=False)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-300)
        low = min(positive, negative)  # the mid-p sign test: half the observed count's probability
        mid = 1.0 if positive == negative else min(1.0, 2 * (binom.cdf(low, n, 0.5) - binom.pmf(low, n, 0.5) / 2))
        assert S.sign_flip_p_value([n], positive - negative) == pytest.approx(mid, rel=1e-9, abs=1e-300)


def test_sign_flip_equals_scipy_permutation_test() -> None:
    rng = np.random.default_rng(2)
    for _ in range(5):
        differences = rng.integers(-4, 5, size=11)
        expected = permutation_test(
            (differences,), np.sum, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
        ).pvalue
        assert S.case_sign_flip_test(differences, mid=False) == pytest.approx(expected, rel=1e-9)


def test_sign_flip_is_vectorised_and_checks_its_input() -> None:
    counts = np.array([[[5, 1], [0, 3]], [[2, 2], [9, 0]]])
    statistic = np.array([[3, -4], [0, 7]])
    p = S.sign_flip_p_value(counts, statistic)
    assert p.shape == (2, 2) and S.sign_flip_p_value(counts[0, 0], statistic[0, 0]).shape == ()
    for i in range(2):
        for j in range(2):
            assert p[i, j] == pytest.approx(sign_flip_exact(counts[i, j].tolist(), int(statistic[i, j])), rel=1e-9)
    with pytest.raises(ValueError, match="support"):
        S.sign_flip_p_value([2, 1], 5)
    with pytest.raises(ValueError, match="non-negative"):
        S.sign_flip_p_value([-1], 0)
    with pytest.raises(ValueError, match="align"):
        S.sign_flip_p_value([[1, 2]], [1, 2])


def test_sign_flip_is_fast_for_many_pairs_of_judges() -> None:
    # 30 judges: 435 pairs on the pooled column of 1,026 cases (differences up to 12 a case)
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 150, size=(435, 12))
    statistic = rng.integers(0, 400, size=435)
    start = time.perf_counter()
    p = S.sign_flip_p_value(counts, statistic)
    assert time.perf_counter() - start < 10.0 and ((p > 0) & (p <= 1)).all()


def test_difference_histograms_count_every_pair_of_judges() -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(0, 5, size=(4, 70, 3))
    histograms = S.difference_histograms(values, 5)
    assert histograms.shape == (4, 4, 3, 9)
    for a in range(4):
        for b in range(4):
            expected = S.histograms_of_differences(values[a] - values[b], 5)
            np.testing.assert_array_equal(histograms[a, b], expected)
            for c in range(3):
                np.testing.assert_array_equal(
                    histograms[a, b, c], np.bincount(values[a, :, c] - values[b, :, c] + 4, minlength=9)
                )


def clustered_pair(rng: np.random.Generator, n_cases: int, n_sets: int, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Correct/incorrect (sets, cases, 12 requests) of two judges whose errors cluster by case.

    Judge A's requests share a strong case effect; judge B has a weaker one and a position bias
    (an answer of "the first shown" makes the two orders disagree); their agreement with the
    labels differs by ``gap`` (0: the null). Returns (A right, B right).
    """
    shape = (n_sets, n_cases, 1)
    difficulty = rng.normal(size=shape)
    p_a = 1 / (1 + np.exp(-(1.0 - 1.6 * difficulty - 1.6 * rng.normal(size=shape))))
    a = rng.random((n_sets, n_cases, 12)) < p_a
    # B: the same mean agreement as A (computed once by simulation of a large sample), minus gap
    p_b_content = 1 / (1 + np.exp(-(1.0 - 0.8 * difficulty - 0.5 * rng.normal(size=shape))))
    content = rng.random((n_sets, n_cases, 12)) < p_b_content
    first = rng.random((n_sets, n_cases, 1)) < 0.3
    coin = np.where(np.arange(12) % 2 == 0, 1, 0)[None, None, :] == (rng.random((n_sets, n_cases, 1)) < 0.5)
    b = np.where(first, coin, content)
    target = a.mean() - gap
    flip = rng.random(b.shape) < abs(b.mean() - target) / max(b.mean(), 1 - b.mean())
    b = np.where(flip, b.mean() < target, b)
    return a, b


def test_sign_flip_holds_its_level_on_clustered_judgments_and_the_request_mcnemar_does_not() -> None:
    # A fast version of benchmarks/bench_validity.py: 4,000 data sets of 60 cases x 12 requests,
    # the p-values of all of them in one vectorised call. The null holds on average over cases
    # (both judges right equally often), not case by case, and their errors are correlated within
    # a case: the sign-flip test keeps its level, McNemar over requests does not.
    rng = np.random.default_rng(5)
    a, b = clustered_pair(rng, 60, 4000, 0.0)
    differences = (a.astype(np.int64) - b).sum(axis=2).T  # (cases, sets)
    rejects = (S.case_sign_flip_test(differences) < 0.05).mean()
    assert 0.035 <= rejects <= 0.065, rejects
    only_a = (a & ~b).sum(axis=(1, 2))
    only_b = (b & ~a).sum(axis=(1, 2))
    mcnemar = [binomtest(int(x), int(x + y)).pvalue for x, y in zip(only_a[:1000], only_b[:1000], strict=True)]
    assert (np.array(mcnemar) < 0.05).mean() > 0.12
    # power against 10 points on 100 cases
    a, b = clustered_pair(rng, 100, 500, 0.10)
    differences = (a.astype(np.int64) - b).sum(axis=2).T
    assert (S.case_sign_flip_test(differences) < 0.05).mean() > 0.8


def test_pooled_comparison_tests_the_per_case_sum_over_dimensions() -> None:
    rng = np.random.default_rng(6)
    labels = random_labels(rng, 80)
    judges = np.stack([random_judge(rng, labels, p, fail=0.05) for p in (0.6, 0.65, 0.8)])
    weights = S.bootstrap_weights(80, 200, seed=1)
    pooled = S.pairwise_comparisons(judges, labels, weights=weights, pool_dimensions=True)
    per_dim = S.pairwise_comparisons(judges, labels, weights=weights)
    right = (judges == labels[None, :, None, :]).sum(axis=2)  # (judges, cases, dims)
    for a, b in ((0, 1), (0, 2), (1, 2)):
        d = right[a] - right[b]
        assert pooled.p_case[a, b, 0] == pytest.approx(S.case_sign_flip_test(d.sum(axis=1)), rel=1e-12)
        np.testing.assert_allclose(per_dim.p_case[a, b], S.case_sign_flip_test(d), rtol=1e-12)
        assert pooled.cases_better[a, b, 0] == (d.sum(axis=1) > 0).sum()
        assert pooled.cases_better[b, a, 0] == (d.sum(axis=1) < 0).sum()
        assert pooled.diff[a, b, 0] == pytest.approx(d.sum() / (80 * 12))
    assert pooled.n_pairs.shape == (3, 3, 1) and pooled.n_pairs[0, 1, 0] == 80 * 12


def test_compare_judges_by_hand() -> None:
    labels = np.array([[1], [2], [1], [2]], dtype=np.int8)
    a = np.array([[[1], [1]], [[2], [2]], [[1], [0]], [[1], [1]]], dtype=np.int8)
    b = np.array([[[1], [2]], [[1], [1]], [[1], [1]], [[2], [2]]], dtype=np.int8)
    # requests:       c0o c0s c1o c1s c2o c2s c3o c3s
    # a right:         1   1   1   1   1   0   0   0   -> 5/8
    # b right:         1   0   0   0   1   1   1   1   -> 5/8
    # b (a only) = c0s c1o c1s = 3; c (b only) = c2s c3o c3s = 3
    result = compare(a, b, labels, n_resamples=300)
    assert result.acc_a[0] == pytest.approx(5 / 8) and result.acc_b[0] == pytest.approx(5 / 8)
    assert result.diff[0] == pytest.approx(0.0)
    # per case, a minus b: c0 +1, c1 +2, c2 -1, c3 -2: two cases each way, sum 0
    assert (result.cases_better[0], result.cases_worse[0], result.n_pairs[0]) == (2, 2, 8)
    assert result.p_case[0] == pytest.approx(1.0)
    assert result.low[0] <= 0.0 <= result.high[0]


def test_identical_judges() -> None:
    rng = np.random.default_rng(20)
    labels = random_labels(rng, 50)
    judge = random_judge(rng, labels, 0.7, fail=0.1)
    result = compare(judge, judge.copy(), labels, n_resamples=200)
    np.testing.assert_array_equal(result.diff, 0.0)
    np.testing.assert_array_equal(result.low, 0.0)
    np.testing.assert_array_equal(result.high, 0.0)
    np.testing.assert_array_equal(result.p_bootstrap, 1.0)
    np.testing.assert_array_equal(result.cases_better, 0)
    np.testing.assert_array_equal(result.p_case, 1.0)
    np.testing.assert_allclose(result.acc_a, accuracy(judge, labels))


def test_paired_bootstrap_matches_explicit_resampling() -> None:
    rng = np.random.default_rng(21)
    labels = random_labels(rng, 35, 2)
    a = random_judge(rng, labels, 0.75, fail=0.05)
    b = random_judge(rng, labels, 0.6)
    weights = S.bootstrap_weights(35, 150, seed=9)
    result = compare(a, b, labels, weights=weights)
    replicates = naive_accuracy_replicates(a, labels, weights) - naive_accuracy_replicates(b, labels, weights)
    np.testing.assert_allclose(result.diff, accuracy(a, labels) - accuracy(b, labels))
    np.testing.assert_allclose(result.low, np.quantile(replicates, 0.025, axis=0))
    np.testing.assert_allclose(result.high, np.quantile(replicates, 0.975, axis=0))
    below = (replicates <= 0).mean(axis=0)
    above = (replicates >= 0).mean(axis=0)
    np.testing.assert_allclose(result.p_bootstrap, np.minimum(1, 2 * np.minimum(below, above)))


def test_clearly_better_judge_is_significant() -> None:
    rng = np.random.default_rng(22)
    labels = random_labels(rng, 400)
    strong, weak = random_judge(rng, labels, 0.85), random_judge(rng, labels, 0.6)
    result = compare(strong, weak, labels, n_resamples=1000)
    assert (result.diff > 0.15).all()
    assert (result.low > 0).all()
    assert (result.p_bootstrap < 0.01).all()
    assert (result.p_case < 1e-6).all()


def test_pairwise_comparisons_are_consistent_with_compare_judges() -> None:
    rng = np.random.default_rng(23)
    labels = random_labels(rng, 60, 3)
    judges = np.stack([random_judge(rng, labels, p, fail=0.05) for p in (0.55, 0.7, 0.72, 0.9)])
    weights = S.bootstrap_weights(60, 300, seed=5)
    pc = S.pairwise_comparisons(judges, labels, weights=weights)
    assert pc.diff.shape == (4, 4, 3)
    np.testing.assert_allclose(pc.diff, -np.swapaxes(pc.diff, 0, 1))
    np.testing.assert_allclose(pc.low, -np.swapaxes(pc.high, 0, 1))
    np.testing.assert_array_equal(pc.p_case, np.swapaxes(pc.p_case, 0, 1))
    np.testing.assert_array_equal(pc.p_bootstrap[np.arange(4), np.arange(4)], 1.0)
    for i in range(4):
        for j in range(4):
            if i == j:
                continue
            single = compare(judges[i], judges[j], labels, weights=weights)
            both = pair(pc, i, j)
            for field in ("acc_a", "acc_b", "diff", "low", "high", "p_bootstrap", "p_case"):
                np.testing.assert_allclose(getattr(both, field), getattr(single, field), err_msg=field)
            np.testing.assert_array_equal(both.cases_better, single.cases_better)
            np.testing.assert_array_equal(both.cases_worse, single.cases_worse)


def test_pairing_uses_only_requests_both_judges_ran() -> None:
    rng = np.random.default_rng(24)
    labels = random_labels(rng, 50, 2)
    a = random_judge(rng, labels, 0.8)
    b = random_judge(rng, labels, 0.6)
    b[:, 1] = -1  # judge B ran only the original order
    b[:10, 0] = -1  # ... and not on the first ten cases
    weights = S.bootstrap_weights(50, 200, seed=1)
    general = compare(a, b, labels, weights=weights)  # different run patterns
    a_masked = a.copy()
    a_masked[b == -1] = -1  # the same comparison, with equal run patterns
    fast = compare(a_masked, b, labels, weights=weights)
    for field in ("acc_a", "acc_b", "diff", "low", "high", "p_bootstrap", "p_case", "cases_better", "n_pairs"):
        np.testing.assert_allclose(getattr(general, field), getattr(fast, field), err_msg=field)
    np.testing.assert_array_equal(general.n_pairs, 40)
    np.testing.assert_allclose(general.acc_a, accuracy(a_masked, labels))
    pc = S.pairwise_comparisons(np.stack([a, b]), labels, weights=weights)
    np.testing.assert_allclose(pc.acc_a[0, 0], accuracy(a, labels))  # diagonal: own accuracy


# --------------------------------------------------------------------------------------------
# Holm and tiers
# --------------------------------------------------------------------------------------------


def holm_reference(p: list[float]) -> list[float]:
    """Textbook Holm (as statsmodels' multipletests(method="holm")), written with loops."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_holm_by_hand() -> None:
    np.testing.assert_allclose(S.holm_adjust([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(S.holm_adjust([0.5, 0.9]), [1.0, 1.0])
    np.testing.assert_allclose(S.holm_adjust([0.2]), [0.2])
    assert S.holm_adjust([]).shape == (0,)
    with_nan = S.holm_adjust([0.01, np.nan, 0.02])
    np.testing.assert_allclose(with_nan[[0, 2]], [0.02, 0.02])
    assert np.isnan(with_nan[1])
    np.testing.assert_allclose(S.holm_adjust([[0.01, 0.04], [0.03, 0.005]]), [[0.03, 0.06], [0.06, 0.02]])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30))
def test_holm_properties(p: list[float]) -> None:
    adjusted = S.holm_adjust(p)
    np.testing.assert_allclose(adjusted, holm_reference(p))
    raw = np.array(p)
    assert (adjusted >= raw - 1e-15).all() and (adjusted <= 1.0).all()
    order = np.argsort(raw, kind="stable")
    assert (np.diff(adjusted[order]) >= -1e-15).all()


def test_tiers_by_hand() -> None:
    acc = np.array([0.9, 0.85, 0.6, 0.58, np.nan])
    p = np.ones((5, 5))
    p[0, 1] = p[1, 0] = 0.5
    p[0, 2] = p[2, 0] = p[0, 3] = p[3, 0] = 0.001
    p[1, 2] = p[2, 1] = p[1, 3] = p[3, 1] = 0.001
    p[2, 3] = p[3, 2] = 0.7
    np.testing.assert_array_equal(S.leaderboard_tiers(acc, p), [1, 1, 2, 2, 0])


def test_tiers_apply_holm_within_the_leaders_family() -> None:
    acc = np.array([0.9, 0.8, 0.79, 0.78])
    p = np.ones((4, 4))
    for j, value in ((1, 0.001), (2, 0.03), (3, 0.04)):
        p[0, j] = p[j, 0] = value
    # raw: all three differ from the leader; Holm: 0.003, 0.06, 0.06 -> judges 2 and 3 join tier 1
    np.testing.assert_array_equal(S.leaderboard_tiers(acc, p), [1, 2, 1, 1])
    # the leader is found by accuracy, not by position
    order = [2, 0, 3, 1]
    np.testing.assert_array_equal(S.leaderboard_tiers(acc[order], p[np.ix_(order, order)]), [1, 1, 1, 2])


def test_tiers_with_p_values_against_the_leader_only() -> None:
    acc = np.array([0.7, 0.9, 0.5, 0.88])
    p_vs_leader = np.array([0.001, np.nan, 0.0001, 0.4])
    np.testing.assert_array_equal(S.leaderboard_tiers(acc, p_vs_leader), [2, 1, 2, 1])


def test_identical_judges_share_a_tier() -> None:
    rng = np.random.default_rng(30)
    labels = random_labels(rng, 200, 1)
    good = random_judge(rng, labels, 0.9)
    bad = random_judge(rng, labels, 0.55)
    judges = np.stack([bad, good, good.copy()])
    pc = S.pairwise_comparisons(judges, labels, n_resamples=500)
    acc = pc.acc_a[np.arange(3), np.arange(3), 0]
    np.testing.assert_array_equal(S.leaderboard_tiers(acc, pc.p_bootstrap[..., 0]), [2, 1, 1])
    np.testing.assert_array_equal(S.leaderboard_tiers(acc, pc.p_case[..., 0]), [2, 1, 1])


# --------------------------------------------------------------------------------------------
# Agreement beyond chance
# --------------------------------------------------------------------------------------------


def confusion(pred: Any, gold: Any) -> np.ndarray:
    """2x2 counts [pred - 1, gold - 1] over the pairs where both are 1 or 2."""
    p = np.asarray(pred).reshape(-1)
    g = np.asarray(gold).reshape(-1)
    ok = np.isin(p, (1, 2)) & np.isin(g, (1, 2))
    cells = np.zeros((2, 2))
    np.add.at(cells, (p[ok].astype(np.intp) - 1, g[ok].astype(np.intp) - 1), 1.0)
    return cells


def kappa(pred: Any, gold: Any) -> float:
    return float(S.kappa_from_confusion(confusion(pred, gold)))


def ac1(pred: Any, gold: Any) -> float:
    return float(S.ac1_from_confusion(confusion(pred, gold)))


def agreement(verdicts: np.ndarray, labels: np.ndarray) -> tuple[S.Estimate, S.Estimate]:
    """Point kappa and AC1 per dimension (one resample: the intervals are not looked at)."""
    return S.bootstrap_agreement_ci(verdicts, labels, n_resamples=1)


def sklearn_kappa(pred: np.ndarray, gold: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(pred, gold))


def test_kappa_and_ac1_by_hand() -> None:
    pred = np.array([1, 1, 2, 2])
    gold = np.array([1, 2, 2, 2])
    # p_o = 3/4; kappa: p_e = 0.5 * 0.25 + 0.5 * 0.75 = 0.5 -> 0.5
    assert kappa(pred, gold) == pytest.approx(0.5)
    # AC1: pi_1 = (2/4 + 1/4) / 2 = 3/8, p_e = 2 * 3/8 * 5/8 = 15/32 -> (3/4 - 15/32) / (17/32) = 9/17
    assert ac1(pred, gold) == pytest.approx(9 / 17)
    assert kappa(pred, gold) == pytest.approx(sklearn_kappa(pred, gold))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from([1, 2])), min_size=1, max_size=60))
def test_kappa_matches_sklearn(pairs: list[tuple[int, int]]) -> None:
    pred = np.array([p for p, _ in pairs])
    gold = np.array([g for _, g in pairs])
    expected = sklearn_kappa(pred, gold)
    got = kappa(pred, gold)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_agreement_edge_cases() -> None:
    one_class = np.ones(10, dtype=int)
    # both raters use one and the same class: kappa undefined (sklearn: NaN), AC1 = 1
    assert np.isnan(kappa(one_class, one_class)) and np.isnan(sklearn_kappa(one_class, one_class))
    assert ac1(one_class, one_class) == pytest.approx(1.0)
    # gold has a single class, the judge does not: kappa 0 (as sklearn), AC1 stays defined
    mixed = np.array([1] * 7 + [2] * 3)
    assert kappa(mixed, one_class) == pytest.approx(sklearn_kappa(mixed, one_class)) == pytest.approx(0.0)
    assert np.isfinite(ac1(mixed, one_class))
    # perfect agreement with both classes
    both = np.array([1, 2, 2, 1, 2])
    assert kappa(both, both) == pytest.approx(1.0)
    assert ac1(both, both) == pytest.approx(1.0)
    # total disagreement
    assert kappa(both, 3 - both) == pytest.approx(sklearn_kappa(both, 3 - both))
    # failures (0) and unlabelled (0) are left out, not a third category
    pred = np.array([1, 0, 2, 2, 1])
    gold = np.array([1, 1, 2, 0, 2])
    assert kappa(pred, gold) == pytest.approx(sklearn_kappa(np.array([1, 2, 1]), np.array([1, 2, 2])))
    assert np.isnan(kappa([], [])) and np.isnan(ac1([0, 0], [1, 2]))


def test_agreement_per_dimension_pools_answered_requests() -> None:
    rng = np.random.default_rng(40)
    labels = random_labels(rng, 70, missing=0.1)
    verdicts = random_judge(rng, labels, 0.7, fail=0.1)
    verdicts[:5, 1] = -1
    kappa_est, ac1_est = agreement(verdicts, labels)
    for d in range(6):
        pred = verdicts[:, :, d].ravel()
        gold = np.repeat(labels[:, d], 2)
        ok = (pred > 0) & (gold > 0)
        assert kappa_est.point[d] == pytest.approx(sklearn_kappa(pred[ok], gold[ok]))
        assert ac1_est.point[d] == pytest.approx(ac1(pred, gold))
        assert kappa_est.n[d] == ac1_est.n[d] == ok.sum()
    # one label class only on a dimension: kappa NaN if the judge also says only that class
    labels[:, 0] = 1
    verdicts[:, :, 0] = np.where(verdicts[:, :, 0] > 0, 1, verdicts[:, :, 0])
    edge_kappa, edge_ac1 = agreement(verdicts, labels)
    assert np.isnan(edge_kappa.point[0]) and edge_ac1.point[0] == pytest.approx(1.0)


def test_bootstrap_agreement_interval() -> None:
    rng = np.random.default_rng(41)
    labels = random_labels(rng, 150)
    verdicts = random_judge(rng, labels, 0.75, fail=0.05)
    weights = S.bootstrap_weights(150, 300, seed=2)
    kappa_ci, ac1_ci = S.bootstrap_agreement_ci(verdicts, labels, weights=weights)
    point_kappa, point_ac1 = agreement(verdicts, labels)
    np.testing.assert_allclose(kappa_ci.point, point_kappa.point)
    np.testing.assert_allclose(ac1_ci.point, point_ac1.point)
    assert (kappa_ci.low <= kappa_ci.point).all() and (kappa_ci.point <= kappa_ci.high).all()
    assert (ac1_ci.low <= ac1_ci.point).all() and (ac1_ci.point <= ac1_ci.high).all()
    # replicate 0 by hand
    index = np.repeat(np.arange(150), draw_counts(weights[0], 150))
    first_kappa, _ = agreement(verdicts[index], labels[index])
    replicate = S.kappa_from_confusion(S.resampled_sums(weights[:1], _case_confusion(verdicts, labels)))[0]
    np.testing.assert_allclose(replicate, first_kappa.point)


# --------------------------------------------------------------------------------------------
# Position
# --------------------------------------------------------------------------------------------


def position_consistency(verdicts: np.ndarray) -> np.ndarray:
    return S.ratio(*S.position_consistency_counts(verdicts))


def first_position_rate(verdicts: np.ndarray) -> np.ndarray:
    return S.ratio(*S.first_position_counts(verdicts))


def position_consistency_ci(verdicts: np.ndarray, **options: Any) -> S.Estimate:
    return S.ratio_ci(*S.position_consistency_counts(verdicts), **options)


def first_position_rate_ci(verdicts: np.ndarray, **options: Any) -> S.Estimate:
    return S.ratio_ci(*S.first_position_counts(verdicts), **options)


def test_position_measures_by_hand() -> None:
    verdicts = np.array(
        [
            [[1], [1]],  # consistent; first in original, second in swapped
            [[1], [2]],  # inconsistent; picked first both times
            [[2], [0]],  # swapped failed: not in consistency; original picked second
            [[2], [-1]],  # swapped not run
            [[0], [2]],  # original failed; swapped picked first
        ],
        dtype=np.int8,
    )
    np.testing.assert_allclose(position_consistency(verdicts), [1 / 2])
    # answered requests: 1o 1s 2o 2s 3o 4o 5s = 7; picked first: 1o 2o 2s 5s = 4
    np.testing.assert_allclose(first_position_rate(verdicts), [4 / 7])
    same, both = S.position_consistency_counts(verdicts)
    np.testing.assert_array_equal(same[:, 0], [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(both[:, 0], [1, 1, 0, 0, 0])


def test_position_extremes_and_intervals() -> None:
    n = 40
    source_one = np.ones((n, 2, 2), dtype=np.int8)  # always response_1: consistent, no position bias
    always_first = np.ones((n, 2, 2), dtype=np.int8)
    always_first[:, 1] = 2  # always the response shown first
    np.testing.assert_allclose(position_consistency(source_one), 1.0)
    np.testing.assert_allclose(first_position_rate(source_one), 0.5)
    np.testing.assert_allclose(position_consistency(always_first), 0.0)
    np.testing.assert_allclose(first_position_rate(always_first), 1.0)
    est = first_position_rate_ci(always_first, n_resamples=100)
    np.testing.assert_array_equal(est.low, 1.0)
    np.testing.assert_array_equal(est.high, 1.0)
    consistency = position_consistency_ci(source_one, n_resamples=100)
    np.testing.assert_array_equal(consistency.low, 1.0)
    np.testing.assert_array_equal(consistency.n, n)
    failing = np.zeros((n, 2, 2), dtype=np.int8)
    assert np.isnan(position_consistency(failing)).all()
    assert np.isnan(first_position_rate_ci(failing, n_resamples=50).low).all()


def test_position_interval_contains_point() -> None:
    rng = np.random.default_rng(50)
    verdicts = rng.integers(0, 3, size=(200, 2, 6)).astype(np.int8)
    for est in (position_consistency_ci(verdicts), first_position_rate_ci(verdicts)):
        assert (est.low <= est.point).all() and (est.point <= est.high).all()


# --------------------------------------------------------------------------------------------
# Length
# --------------------------------------------------------------------------------------------


LENGTHS = np.array([[100, 50], [30, 90], [40, 40], [10, 20]])
LENGTH_LABELS = np.array([[1], [1], [2], [2]], dtype=np.int8)
# longer response per case: 1, 2, tie, 2. Experts: longer, shorter, (tie), longer.


def longer_preference_rate(verdicts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return S.ratio(*S.longer_preference_counts(verdicts, lengths))


def test_longer_preference_by_hand() -> None:
    verdicts = np.array(
        [[[1], [1]], [[2], [1]], [[1], [2]], [[0], [-1]]],
        dtype=np.int8,
    )
    # answered non-tie requests: c0 o,s (longer, longer), c1 o (longer), c1 s (shorter) -> 3/4
    np.testing.assert_allclose(longer_preference_rate(verdicts, LENGTHS), [3 / 4])
    picked, answered = S.longer_preference_counts(verdicts, LENGTHS)
    np.testing.assert_array_equal(picked[:, 0], [2, 1, 0, 0])
    np.testing.assert_array_equal(answered[:, 0], [2, 2, 0, 0])
    np.testing.assert_allclose(S.expert_longer_rate(LENGTH_LABELS, LENGTHS), [2 / 3])


def test_accuracy_by_length_agreement_exposes_a_length_judge() -> None:
    longer = np.array([1, 2, 1, 2], dtype=np.int8)  # ties broken arbitrarily
    length_judge = np.repeat(longer[:, None, None], 2, axis=1)
    result = S.accuracy_by_length_agreement(length_judge, LENGTH_LABELS, LENGTHS)
    np.testing.assert_allclose(result.longer_preferred, [1.0])  # cases 0 and 3
    np.testing.assert_allclose(result.shorter_preferred, [0.0])  # case 1
    np.testing.assert_array_equal(result.n_longer, [4])
    np.testing.assert_array_equal(result.n_shorter, [2])
    np.testing.assert_allclose(longer_preference_rate(length_judge, LENGTHS), [1.0])
    failing = np.zeros_like(length_judge)
    assert S.accuracy_by_length_agreement(failing, LENGTH_LABELS, LENGTHS).longer_preferred[0] == 0.0
    with pytest.raises(ValueError, match="lengths"):
        longer_preference_rate(length_judge, LENGTHS[:2])


def test_length_rates_are_nan_when_all_lengths_tie() -> None:
    ties = np.full((4, 2), 10)
    verdicts = np.ones((4, 2, 1), dtype=np.int8)
    assert np.isnan(longer_preference_rate(verdicts, ties)).all()
    assert np.isnan(S.expert_longer_rate(LENGTH_LABELS, ties)).all()


# --------------------------------------------------------------------------------------------
# Coherence
# --------------------------------------------------------------------------------------------


def test_coherence_by_hand() -> None:
    overall, accuracy_dim = DIMENSIONS.index("overall"), DIMENSIONS.index("accuracy")
    verdicts = np.ones((3, 2, 6), dtype=np.int8)
    verdicts[0, 0, overall], verdicts[0, 0, accuracy_dim] = 1, 2  # differ
    verdicts[1, 1, overall] = 0  # failure on overall: not counted
    verdicts[2, 1] = -1  # swapped not run
    # counted requests: 0o (differ), 0s, 1o, 2o -> 3/4
    assert S.coherence_rate(verdicts) == pytest.approx(3 / 4)
    same, both = S.coherence_counts(verdicts)
    np.testing.assert_array_equal(same, [1, 1, 1])
    np.testing.assert_array_equal(both, [2, 1, 1])
    assert S.coherence_rate(verdicts, "relevance", "creativity") == pytest.approx(1.0)
    labels = np.array([[1, 1, 1, 1, 1, 1], [1, 2, 2, 2, 2, 2], [0, 1, 1, 1, 1, 1]], dtype=np.int8)
    assert S.expert_coherence_rate(labels) == pytest.approx(1 / 2)
    assert np.isnan(S.coherence_rate(np.zeros((2, 2, 6), dtype=np.int8)))
    with pytest.raises(ValueError, match="unknown dimension"):
        S.coherence_rate(verdicts, "overal")
    with pytest.raises(ValueError, match="dimensions"):
        S.expert_coherence_rate(labels[:, :2])

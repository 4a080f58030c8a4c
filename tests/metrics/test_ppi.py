"""Prediction-powered means under the stratified design: exactness, formulas, coverage by simulation, the planner."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrewardbench.metrics.ppi import calibrated_variances, labels_needed, normal_quantile, stratified_ppi


def simulated_pool(rng: np.random.Generator, n: int, informative: bool) -> tuple[np.ndarray, np.ndarray]:
    """Labels and a proxy: an informative judge's calibrated probability, or one unrelated to the labels."""
    p = rng.beta(0.6, 0.6, n)
    y = (rng.uniform(size=n) < p).astype(float)
    f = np.clip(p + rng.normal(0, 0.05, n), 0.0, 1.0) if informative else rng.uniform(size=n)
    return y, f


def stratified_slice(rng: np.random.Generator, f: np.ndarray, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The design of ``annotate pick``: the k least confident labelled in full, r at random from the rest."""
    n = len(f)
    order = np.lexsort((rng.permutation(n), np.abs(f - 0.5)))
    strata = np.ones(n, dtype=np.int64)
    strata[order[:k]] = 0
    labelled = np.zeros(n, dtype=bool)
    labelled[order[:k]] = True
    labelled[rng.choice(order[k:], r, replace=False)] = True
    return strata, labelled


def test_a_census_gives_the_exact_mean_with_no_width() -> None:
    rng = np.random.default_rng(0)
    y, f = simulated_pool(rng, 200, True)
    result = stratified_ppi(y, f)
    assert result.ppi.estimate == pytest.approx(y.mean())
    assert result.ppi.half_width == 0 and result.classical.half_width == 0


def test_labels_only_is_the_stratified_mean_with_its_textbook_variance() -> None:
    rng = np.random.default_rng(1)
    y_all, f = simulated_pool(rng, 500, True)
    strata, labelled = stratified_slice(rng, f, 50, 80)
    y = np.where(labelled, y_all, np.nan)
    result = stratified_ppi(y, f, strata, small_sample=False)
    census = y_all[strata == 0].mean()
    sample = y_all[labelled & (strata == 1)]
    expected = (50 * census + 450 * sample.mean()) / 500
    variance = (450 / 500) ** 2 * (1 - 80 / 450) * sample.var(ddof=1) / 80
    assert result.classical.estimate == pytest.approx(expected)
    assert result.classical.se == pytest.approx(math.sqrt(variance))
    assert result.strata[0].labelled == 50 and result.strata[1].labelled == 80
    adjusted = stratified_ppi(y, f, strata).classical
    assert adjusted.estimate == result.classical.estimate
    assert result.classical.se <= adjusted.se < 1.05 * result.classical.se  # the pseudo-labels: O(z^2 / n)


def test_ppi_reduces_to_the_regression_estimator() -> None:
    rng = np.random.default_rng(2)
    y_all, f = simulated_pool(rng, 400, True)
    labelled = np.zeros(400, dtype=bool)
    labelled[rng.choice(400, 60, replace=False)] = True
    result = stratified_ppi(np.where(labelled, y_all, np.nan), f, small_sample=False)
    ys, fs = y_all[labelled], f[labelled]
    lam = min(1.0, max(0.0, np.cov(ys, fs)[0, 1] / fs.var(ddof=1)))
    assert result.strata[0].lambdas[0] == pytest.approx(lam)
    assert result.ppi.estimate == pytest.approx(lam * f.mean() + (ys - lam * fs).mean())
    residual = ys - lam * fs
    assert result.ppi.se == pytest.approx(math.sqrt((1 - 60 / 400) * residual.var(ddof=1) / 60))


def test_an_unrelated_proxy_costs_next_to_nothing() -> None:
    rng = np.random.default_rng(3)
    y_all, f = simulated_pool(rng, 2000, False)
    labelled = np.zeros(2000, dtype=bool)
    labelled[rng.choice(2000, 300, replace=False)] = True
    result = stratified_ppi(np.where(labelled, y_all, np.nan), f)
    assert result.ppi.se < 1.05 * result.classical.se


@pytest.mark.parametrize("informative", [True, False])
def test_intervals_cover_the_pool_mean_under_the_stratified_design(informative: bool) -> None:
    rng = np.random.default_rng(10 + informative)
    repeats, covered, covered_classical, widths = 600, 0, 0, []
    for _ in range(repeats):
        y_all, f = simulated_pool(rng, 1500, informative)
        strata, labelled = stratified_slice(rng, f, 100, 150)
        result = stratified_ppi(np.where(labelled, y_all, np.nan), f, strata)
        truth = y_all.mean()
        covered += result.ppi.low <= truth <= result.ppi.high
        covered_classical += result.classical.low <= truth <= result.classical.high
        widths.append((result.ppi.half_width, result.classical.half_width))
    # 600 repeats: a 95 % procedure falls below 92.5 % with probability about 0.1 %
    assert covered / repeats >= 0.925
    assert covered_classical / repeats >= 0.925
    ppi_width, classical_width = np.mean(widths, axis=0)
    if informative:
        assert ppi_width < 0.8 * classical_width
    else:
        assert ppi_width == pytest.approx(classical_width, rel=0.05)


def test_several_columns_pool_into_one_mean_with_missing_labels() -> None:
    rng = np.random.default_rng(4)
    repeats, covered = 300, 0
    for _ in range(repeats):
        y1, f1 = simulated_pool(rng, 800, True)
        y2 = np.where(rng.uniform(size=800) < 0.8, y1, 1 - y1)
        y_all, f = np.stack([y1, y2], axis=1), np.stack([f1, f1], axis=1)
        labelled = np.zeros(800, dtype=bool)
        labelled[rng.choice(800, 120, replace=False)] = True
        y = np.where(labelled[:, None], y_all, np.nan)
        y[rng.uniform(size=(800, 2)) < 0.1] = np.nan  # some dimensions left undecided, at random
        result = stratified_ppi(y, f)
        covered += result.ppi.low <= y_all.mean() <= result.ppi.high
    assert covered / repeats >= 0.92


def test_a_stratum_without_labels_gives_no_estimate_and_says_why() -> None:
    y = np.full(10, np.nan)
    y[5:] = 1.0
    result = stratified_ppi(y, np.full(10, 0.5), np.array([0] * 5 + [1] * 5))
    assert math.isnan(result.ppi.estimate) and "no label" in result.ppi.note


def test_bad_shapes_and_proxies_are_refused() -> None:
    with pytest.raises(ValueError, match="same"):
        stratified_ppi(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="finite"):
        stratified_ppi(np.zeros(3), np.array([0.1, np.nan, 0.2]))
    with pytest.raises(ValueError, match="one code per case"):
        stratified_ppi(np.zeros(3), np.zeros(3), np.zeros(2))


def test_labels_needed_inverts_the_interval_formula() -> None:
    n = labels_needed(0.05, 0.25, remainder=900, pool=1000)
    z = normal_quantile(0.95)
    width = lambda m: z * 0.9 * math.sqrt((1 / m - 1 / 900) * 0.25)  # noqa: E731
    assert width(n) <= 0.05 < width(n - 1)
    assert labels_needed(0.05, 0.0, remainder=900, pool=1000) == 0
    assert labels_needed(1e-6, 0.25, remainder=900, pool=1000) == 900
    with pytest.raises(ValueError, match="positive"):
        labels_needed(0.0, 0.25, remainder=900, pool=1000)


def test_the_plan_before_labels_gives_the_width_it_promises_for_a_calibrated_judge() -> None:
    rng = np.random.default_rng(5)
    _, f = simulated_pool(rng, 3000, True)
    k = 200
    order = np.argsort(np.abs(f - 0.5))
    rest = order[k:]
    classical_var, ppi_var = calibrated_variances(f[rest])
    n_ppi = labels_needed(0.02, ppi_var, remainder=len(rest), pool=3000)
    n_classical = labels_needed(0.02, classical_var, remainder=len(rest), pool=3000)
    assert n_ppi < n_classical
    widths = []
    for _ in range(200):
        y_all = (rng.uniform(size=3000) < f).astype(float)  # calibrated: Y ~ Bernoulli(f)
        strata = np.ones(3000, dtype=np.int64)
        strata[order[:k]] = 0
        labelled = np.zeros(3000, dtype=bool)
        labelled[order[:k]] = True
        labelled[rng.choice(rest, n_ppi, replace=False)] = True
        widths.append(stratified_ppi(np.where(labelled, y_all, np.nan), f, strata).ppi.half_width)
    assert np.mean(widths) == pytest.approx(0.02, rel=0.1)

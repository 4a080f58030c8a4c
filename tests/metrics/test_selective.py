"""Selective judging: exact tails against scipy, thresholds that keep ties together, "nothing
qualifies", a judge without confidence, and the guarantee itself checked by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.selective import (
    betting_p_value,
    binomial_cdf,
    clopper_pearson,
    conformal_threshold,
    first_share,
    selective_judging,
    threshold_grid,
)
from medrewardbench.testing.selective_sim import check_guarantee, simulated_judges


def _verdicts(p: np.ndarray, labels: np.ndarray, source: str = "probability") -> CaseVerdicts:
    n = p.shape[0]
    return CaseVerdicts(
        run_id="r",
        judge_spec="sim",
        case_ids=tuple(f"c{i}" for i in range(n)),
        p_first=p.astype(np.float64),
        labels=labels.astype(np.int8),
        groups={"organ_system": ("x",) * n},
        source=source,  # type: ignore[arg-type]
    )


def test_binomial_tails_and_clopper_pearson_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for k, n, p in [(0, 10, 0.1), (3, 40, 0.1), (17, 200, 0.1), (5, 5, 0.3), (50, 400, 0.12)]:
        assert binomial_cdf(k, n, p) == pytest.approx(stats.binom.cdf(k, n, p), rel=1e-9)
    for k, n in [(0, 20), (3, 40), (20, 20), (7, 150)]:
        low, high = clopper_pearson(k, n, 0.95)
        expected_low = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
        expected_high = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
        assert low == pytest.approx(expected_low, abs=1e-9) and high == pytest.approx(expected_high, abs=1e-9)
    assert math.isnan(clopper_pearson(0, 0)[0])


def test_betting_p_value_is_valid_at_the_boundary_and_rejects_with_evidence() -> None:
    rng = np.random.default_rng(5)
    # H0 true at its boundary (mean exactly alpha): rejections at delta stay below delta
    draws = rng.random((2000, 200)) < 0.1
    rejections = np.mean([betting_p_value(row, 0.1, 0.1) <= 0.1 for row in draws.astype(float)])
    assert rejections <= 0.1
    assert betting_p_value(np.full(100, 0.02), 0.1, 0.1) < 0.01
    assert betting_p_value(np.zeros(0), 0.1, 0.1) == 1.0


def test_grid_keeps_ties_and_starts_where_a_threshold_can_pass() -> None:
    coarse = np.array([1.0] * 70 + [0.75] * 30)
    assert threshold_grid(coarse).tolist() == [1.0, 0.75]
    spread = np.linspace(0.5, 1.0, 1001)
    grid = threshold_grid(spread, 20, 0.2)
    assert len(grid) == 20 and np.all(np.diff(grid) < 0)
    assert np.mean(spread >= grid[0]) == pytest.approx(0.2, abs=0.002)
    assert first_share(500, 0.1, 0.1) == pytest.approx(3 * math.log(0.1) / math.log(0.9) / 500)


def test_a_threshold_accepts_equal_confidences_together() -> None:
    conf = np.array([1.0] * 300 + [0.75] * 200)
    wrong = np.zeros(500)
    wrong[:15] = 1  # 5 % wrong among the sure ones
    wrong[300:360] = 1  # 30 % among the others
    found = conformal_threshold(conf, wrong, np.ones(500, dtype=bool), threshold_grid(conf), alpha=0.1, delta=0.1)
    assert found.threshold == 1.0 and found.accepted == 300 and found.errors == 15 and found.tested == 2


def test_a_chance_judge_gets_nothing_accepted_and_says_so() -> None:
    rng = np.random.default_rng(0)
    n = 400
    p = rng.uniform(0, 1, size=(n, 6))
    labels = rng.integers(1, 3, size=(n, 6))
    result = selective_judging(_verdicts(p, labels), n_resamples=0)
    for column in result.columns:
        assert math.isnan(column.threshold.threshold)
        assert column.accepted == 0 and column.coverage == 0.0 and math.isnan(column.risk)
        assert len(column.curve_coverage) > 0


def test_a_good_judge_gets_a_threshold_measured_on_held_out_cases() -> None:
    rng = np.random.default_rng(1)
    n = 2000
    conf = rng.uniform(0.5, 1.0, size=(n, 6))
    right = rng.random((n, 6)) < conf
    labels = np.ones((n, 6), dtype=np.int8)
    p = np.where(right, conf, 1 - conf)
    result = selective_judging(_verdicts(p, labels), n_resamples=200, seed=3)
    assert result.calibration_cases == 1000 and result.heldout_cases == 1000
    chosen = [column for column in result.columns if not math.isnan(column.threshold.threshold)]
    assert len(chosen) >= 5 and chosen[-1] is result.columns[-1]
    for column in chosen:
        assert column.threshold.threshold >= 0.75
        assert 0 < column.coverage < 0.6
        assert column.risk_low <= column.risk <= column.risk_high
        assert column.risk <= 0.15
    pooled = result.columns[-1]
    assert pooled.n == 6000 and np.all(np.diff(pooled.curve_coverage) >= 0)


def test_a_judge_without_confidence_is_refused() -> None:
    v = _verdicts(np.ones((10, 6)), np.ones((10, 6)), source="none")
    with pytest.raises(ValueError, match="no confidence"):
        selective_judging(v)
    with pytest.raises(ValueError, match="alpha and delta"):
        selective_judging(_verdicts(np.ones((10, 6)), np.ones((10, 6))), alpha=0.0)


@pytest.mark.parametrize("judge", simulated_judges(), ids=lambda j: j.name)
def test_the_threshold_keeps_its_promise_in_simulation(judge: object) -> None:
    # 300 repeats: the chosen threshold's population risk must be <= alpha in >= 1 - delta of them
    # (allowing 2.5 Monte-Carlo errors: 0.9 - 2.5 * 0.017); the full check is bench_validity.py
    check = check_guarantee(judge, repeats=300, seed=11)  # type: ignore[arg-type]
    assert check.held >= 0.9 - 2.5 * math.sqrt(0.09 / 300)


@pytest.mark.parametrize("judge", simulated_judges()[:2], ids=lambda j: j.name)
def test_the_pooled_threshold_keeps_its_promise_with_correlated_dimensions(judge: object) -> None:
    # six verdicts a case, wrong together half the time: the case-level betting test still holds
    check = check_guarantee(judge, repeats=300, dimensions=6, shared=0.5, seed=12)  # type: ignore[arg-type]
    assert check.held >= 0.9 - 2.5 * math.sqrt(0.09 / 300)
    assert check.coverage > 0  # and it does accept something


def test_the_pooled_interval_of_large_data_is_the_normal_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import medrewardbench.metrics.selective as selective

    rng = np.random.default_rng(8)
    n = 1500
    conf = rng.uniform(0.5, 1.0, size=(n, 6))
    p = np.where(rng.random((n, 6)) < conf, conf, 1 - conf)
    v = _verdicts(p, np.ones((n, 6)))
    boot = selective_judging(v, n_resamples=500, seed=2).columns[-1]
    monkeypatch.setattr(selective, "BOOTSTRAP_LIMIT", 10)
    normal = selective_judging(v, n_resamples=500, seed=2).columns[-1]
    assert normal.risk == boot.risk and boot.accepted > 0
    width = boot.risk_high - boot.risk_low
    assert abs(normal.risk_low - boot.risk_low) < 0.2 * width and abs(normal.risk_high - boot.risk_high) < 0.2 * width


@pytest.mark.parametrize("bootstrap_limit", [None, 10])
def test_a_pooled_risk_without_an_error_on_few_held_cases_is_not_zero_width(
    monkeypatch: pytest.MonkeyPatch, bootstrap_limit: int | None
) -> None:
    """A judge right on every confident verdict: its held-out pooled risk is 0, but not known to be 0.

    Both the bootstrap interval and the normal one of large data (forced here) used to say [0, 0];
    the floor bounds the risk by the exact share of accepted held cases that could err."""
    import medrewardbench.metrics.selective as selective

    if bootstrap_limit is not None:
        monkeypatch.setattr(selective, "BOOTSTRAP_LIMIT", bootstrap_limit)
    n = 200
    p = np.full((n, 6), 0.99)  # always confident, always right (the experts prefer response 1)
    selection = selective_judging(_verdicts(p, np.ones((n, 6))), alpha=0.1, n_resamples=300, seed=3)
    pooled = selection.columns[-1]
    assert pooled.accepted > 0 and pooled.errors == 0 and pooled.risk == 0.0
    assert pooled.risk_low == 0.0
    assert pooled.risk_high == pytest.approx(1 - 0.025 ** (1 / selection.heldout_cases))

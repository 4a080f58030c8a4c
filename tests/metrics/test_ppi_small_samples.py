"""The small-sample variance floor of the prediction-powered means: no zero-width interval from few, equal labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrewardbench.metrics.ppi import stratified_ppi


def sampled(y_all: np.ndarray, labelled: np.ndarray) -> np.ndarray:
    return np.where(labelled, y_all, np.nan)


def test_twenty_equal_labels_give_a_finite_positive_interval_that_holds_the_truth() -> None:
    rng = np.random.default_rng(0)
    y_all = np.ones(300)
    y_all[rng.choice(300, 9, replace=False)] = 0.0  # the pool agrees 97 % of the time
    labelled = np.zeros(300, dtype=bool)
    labelled[np.flatnonzero(y_all == 1)[:20]] = True  # the 20 labels all agree
    f = rng.uniform(0.6, 1.0, 300)
    old = stratified_ppi(sampled(y_all, labelled), f, small_sample=False)
    assert old.classical.half_width == 0 and old.ppi.half_width == 0  # the defect mended here
    new = stratified_ppi(sampled(y_all, labelled), f)
    for interval in (new.ppi, new.classical):
        assert interval.estimate == 1.0
        assert math.isfinite(interval.low) and math.isfinite(interval.high) and interval.half_width > 0
        assert interval.low <= y_all.mean() <= interval.high
        # about Agresti-Coull's lower bound with 20 of 20 (0.81-0.84): wide, not absurd
        assert 0.80 < interval.low < 0.92 and interval.high == 1.0


def test_equal_labels_in_the_sampled_stratum_beside_a_census_still_give_width() -> None:
    y_all = np.concatenate([np.tile([0.0, 1.0], 25), np.zeros(250)])
    strata = np.array([0] * 50 + [1] * 250)
    labelled = np.zeros(300, dtype=bool)
    labelled[:50] = True
    labelled[50:70] = True  # 20 random labels of the remainder, all 0
    result = stratified_ppi(sampled(y_all, labelled), np.full(300, 0.3), strata)
    assert result.ppi.half_width > 0 and result.classical.half_width > 0
    assert result.ppi.low <= y_all.mean() <= result.ppi.high
    census = stratified_ppi(y_all, np.full(300, 0.3), strata)
    assert census.ppi.half_width == 0 and census.classical.half_width == 0  # every stratum a census


def test_several_equal_columns_pool_into_a_positive_but_narrower_interval() -> None:
    y = np.full((200, 6), np.nan)
    y[:20] = 1.0
    f = np.full((200, 6), 0.9)
    pooled = stratified_ppi(y, f)
    single = stratified_ppi(y[:, 0], f[:, 0])
    assert 0 < pooled.ppi.half_width < single.ppi.half_width  # six columns' pseudo-labels, not one's


def test_a_difference_on_minus_one_to_one_gets_the_floor_of_its_range() -> None:
    y = np.full(300, np.nan)
    y[:20] = 0.0  # leader and judge agree with the doctors alike on every labelled case
    result = stratified_ppi(y, np.zeros(300), bounds=(-1.0, 1.0))
    assert result.ppi.low < 0 < result.ppi.high
    narrow = stratified_ppi(y, np.zeros(300))
    assert result.ppi.half_width > narrow.ppi.half_width


@pytest.mark.parametrize(("rate", "old_at_most"), [(0.95, 0.80), (0.99, 0.40)])
def test_coverage_with_twenty_labels_at_an_extreme_rate(rate: float, old_at_most: float) -> None:
    """400 pools of 300 cases, 20 labelled at random: the floor covers, the plain CLT interval does not."""
    rng = np.random.default_rng(int(rate * 100))
    repeats, covered, covered_old, widths = 400, 0, 0, []
    for _ in range(repeats):
        y_all = (rng.uniform(size=300) < rate).astype(float)
        f = np.clip(rate + rng.normal(0, 0.03, 300), 0, 1)
        labelled = np.zeros(300, dtype=bool)
        labelled[rng.choice(300, 20, replace=False)] = True
        new = stratified_ppi(sampled(y_all, labelled), f)
        old = stratified_ppi(sampled(y_all, labelled), f, small_sample=False)
        truth = y_all.mean()
        covered += new.ppi.low <= truth <= new.ppi.high
        covered_old += old.ppi.low <= truth <= old.ppi.high
        widths.append(new.ppi.half_width)
    # 400 repeats: a 95 % procedure falls below 92.5 % with probability about 1 %
    assert covered / repeats >= 0.925
    assert covered_old / repeats <= old_at_most
    assert min(widths) > 0

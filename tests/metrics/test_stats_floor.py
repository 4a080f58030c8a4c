"""The small-sample floor under the case bootstrap's intervals (:mod:`medrewardbench.metrics.stats.floor`).

Coverage is measured by simulation: units (parent cases) of 12 requests each, a true rate near
the boundary, requests independent within a unit (ICC 0) or moving together (a unit's rate drawn
from a beta law with ICC 0.5). The plain percentile interval's coverage is measured beside the
floored one, so each cell shows the defect as well as the fix.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrewardbench.metrics.stats import bootstrap_weights, ratio_ci
from medrewardbench.metrics.stats.floor import (
    exceptions_bound,
    floor_degenerate,
    small_sample_floor,
    wilson_interval,
)

REQUESTS = 12


def _draw(rng: np.random.Generator, n: int, rate: float, icc: float) -> np.ndarray:
    if icc > 0 and 0 < rate < 1:
        spread = (1 - icc) / icc
        per_unit = rng.beta(rate * spread, (1 - rate) * spread, size=n)
    else:
        per_unit = np.full(n, rate)
    return rng.binomial(REQUESTS, per_unit)


def _coverage(n: int, rate: float, icc: float, reps: int, resamples: int, seed: int = 1) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    weights = bootstrap_weights(n, resamples, seed=0)
    den = np.full(n, REQUESTS)
    plain = floored = 0
    for _ in range(reps):
        y = _draw(rng, n, rate, icc)
        a = ratio_ci(y, den, weights=weights)
        b = ratio_ci(y, den, weights=weights, small_sample=True)
        plain += float(a.low) <= rate <= float(a.high)
        floored += float(b.low) <= rate <= float(b.high)
    return plain / reps, floored / reps


def test_every_unit_agreeing_gives_a_clopper_pearson_interval_not_zero_width() -> None:
    """The regression: 0 of 12 parents flip; the bootstrap says [0, 0], the floor [0, 0.265]."""
    weights = bootstrap_weights(12, 500, seed=0)
    zeros, den = np.zeros(12), np.full(12, REQUESTS)
    plain = ratio_ci(zeros, den, weights=weights)
    assert float(plain.low) == float(plain.high) == 0.0  # the defect the floor exists for
    floored = ratio_ci(zeros, den, weights=weights, small_sample=True)
    upper = 1 - 0.025 ** (1 / 12)
    assert float(floored.point) == 0.0 and float(floored.low) == 0.0
    assert float(floored.high) == pytest.approx(upper) and upper == pytest.approx(0.2646, abs=1e-4)
    everyone = ratio_ci(den, den, weights=weights, small_sample=True)
    assert (float(everyone.low), float(everyone.high)) == pytest.approx((0.025 ** (1 / 12), 1.0))
    # units with nothing counted are not units: 3 of 15 rows empty leave 12
    padded = ratio_ci(np.zeros(15), np.r_[den, 0, 0, 0], n_resamples=300, small_sample=True)
    assert float(padded.high) == pytest.approx(upper)


def test_a_degenerate_difference_is_widened_by_the_share_of_units_that_could_differ() -> None:
    u = float(exceptions_bound(50))
    assert u == pytest.approx(1 - 0.025 ** (1 / 50))
    points = np.array([0.0, 1.0, 0.3])
    low, high = floor_degenerate(points, points, points, 50, 0.95, (-1, 1))
    assert low.tolist() == pytest.approx([-u, 1 - 2 * u, 0.3 - 1.3 * u])
    assert high.tolist() == pytest.approx([u, 1.0, 0.3 + 0.7 * u])
    # an interval of positive width is returned as it is
    same_low, same_high = floor_degenerate(0.5, 0.4, 0.6, 10)
    assert (float(same_low), float(same_high)) == (0.4, 0.6)
    with pytest.raises(ValueError, match="increasing"):
        floor_degenerate(0.0, 0.0, 0.0, 5, bounds=(1.0, -1.0))


def test_wilson_matches_its_formula_and_no_units_give_nan() -> None:
    low, high = wilson_interval(0.3, 40)
    z = 1.959963984540054
    centre = (0.3 + z * z / 80) / (1 + z * z / 40)
    half = z / (1 + z * z / 40) * math.sqrt(0.3 * 0.7 / 40 + z * z / 6400)
    assert (float(low), float(high)) == pytest.approx((centre - half, centre + half))
    assert np.isnan(exceptions_bound(0))
    floored_low, floored_high = small_sample_floor(np.zeros((0, 1)), np.zeros((0, 1)), [np.nan], [np.nan])
    assert np.isnan(floored_low).all() and np.isnan(floored_high).all()


def test_the_floor_only_widens_and_leaves_the_point_alone() -> None:
    rng = np.random.default_rng(5)
    y = rng.binomial(REQUESTS, 0.3, size=(40, 3))
    den = np.full((40, 3), REQUESTS)
    weights = bootstrap_weights(40, 400, seed=2)
    plain = ratio_ci(y, den, weights=weights)
    floored = ratio_ci(y, den, weights=weights, small_sample=True)
    assert np.array_equal(plain.point, floored.point) and np.array_equal(plain.n, floored.n)
    assert (floored.low <= plain.low).all() and (floored.high >= plain.high).all()
    # over many units the Korn-Graubard interval is the bootstrap's up to the third decimal
    assert np.abs(floored.high - plain.high).max() < 0.01 and np.abs(floored.low - plain.low).max() < 0.01


@pytest.mark.parametrize(
    ("n", "rate", "icc", "plain_below", "floored_at_least"),
    [
        (12, 0.01, 0.5, 0.45, 0.93),  # 70 % of data sets have no unit showing the event
        (5, 0.02, 0.0, 0.80, 0.93),
        (12, 0.99, 0.0, 0.85, 0.93),
    ],
)
def test_boundary_cells_cover_at_their_level_with_the_floor(
    n: int, rate: float, icc: float, plain_below: float, floored_at_least: float
) -> None:
    """Fast cells (200 data sets: a binomial standard error of 1.5 points at 95 %)."""
    plain, floored = _coverage(n, rate, icc, reps=200, resamples=200)
    assert plain < plain_below, plain
    assert floored >= floored_at_least, floored


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 12, 30])
@pytest.mark.parametrize("rate", [0.0, 0.01, 0.02, 0.05, 0.2, 0.5, 0.95, 0.99, 1.0])
@pytest.mark.parametrize("icc", [0.0, 0.5])
def test_the_grid_covers_at_least_near_the_nominal_level(n: int, rate: float, icc: float) -> None:
    """400 data sets per cell; the floored interval is at least 0.85 everywhere and at least 0.93
    where requests are independent (the clustered rare-event cells are the hardest: module docstring)."""
    _, floored = _coverage(n, rate, icc, reps=400, resamples=400)
    assert floored >= (0.93 if icc == 0 else 0.85), floored


def test_a_difference_of_rates_is_not_widened_as_if_its_requests_were_coin_flips() -> None:
    """On [-1, 1] a per-request difference is mostly 0: the Korn-Graubard size is not capped at the
    requests, so over 40 units the floored interval stays the bootstrap's to about a point."""
    rng = np.random.default_rng(9)
    first = rng.binomial(4, 0.3, size=40)
    second = rng.binomial(4, 0.1, size=40)
    den = np.full(40, 4)
    weights = bootstrap_weights(40, 400, seed=4)
    plain = ratio_ci(first - second, den, weights=weights)
    floored = ratio_ci(first - second, den, weights=weights, small_sample=True, bounds=(-1.0, 1.0))
    assert float(floored.low) <= float(plain.low) and float(floored.high) >= float(plain.high)
    assert float(plain.low) - float(floored.low) < 0.015 and float(floored.high) - float(plain.high) < 0.015

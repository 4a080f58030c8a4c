"""The doctor-flagged critical-miss rate's interval: exact over pairs, never zero-width, covering by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medrewardbench.metrics.selective import clopper_pearson
from medrewardbench.metrics.stats import bootstrap_weights, ratio_ci
from medrewardbench.probes.harm import pair_rate


def test_three_pairs_without_a_miss_give_the_exact_interval_not_a_zero_width_one() -> None:
    rate = pair_rate([0, 0, 0], [2, 2, 2])
    assert (float(rate.point), float(rate.low), int(rate.n)) == (0.0, 0.0, 6)
    assert rate.high == pytest.approx(1 - 0.025 ** (1 / 3))  # 70.8 %: what 3 pairs can say
    old = ratio_ci(np.zeros(3), np.full(3, 2), weights=bootstrap_weights(3, 500, 0))
    assert old.low == old.high == 0.0  # the bootstrap's answer, mended here


def test_a_whole_count_gives_clopper_pearson_and_a_split_pair_the_interval_around_it() -> None:
    whole = pair_rate([2, 0, 0, 2, 0], [2, 2, 2, 2, 2])  # 2 of 5 pairs, both orders each
    assert (whole.low, whole.high) == pytest.approx(clopper_pearson(2, 5))
    split = pair_rate([1, 0, 0, 2, 0], [2, 2, 2, 2, 2])  # 1.5 pairs' worth: k between 1 and 2
    assert split.point == pytest.approx(0.3)
    assert split.low == pytest.approx(clopper_pearson(1, 5)[0])
    assert split.high == pytest.approx(clopper_pearson(2, 5)[1])
    assert split.low < split.point < split.high


def test_pairs_without_an_answered_verdict_do_not_count_and_none_gives_no_rate() -> None:
    rate = pair_rate([1, 0, 0], [2, 0, 1])
    assert rate.point == pytest.approx(1 / 3) and int(rate.n) == 3
    assert (rate.low, rate.high) == pytest.approx((clopper_pearson(0, 2)[0], clopper_pearson(1, 2)[1]))
    empty = pair_rate([0, 0], [0, 0])
    assert math.isnan(empty.point) and math.isnan(empty.low) and int(empty.n) == 0


def test_dimensions_are_columns_each_with_its_own_pairs() -> None:
    misses = np.array([[2, 0], [0, 0], [1, 0]])
    answered = np.array([[2, 2], [2, 0], [2, 2]])
    rate = pair_rate(misses, answered)
    assert rate.point.shape == (2,) and rate.n.tolist() == [6, 4]
    assert rate.point[0] == pytest.approx(0.5) and rate.point[1] == 0.0
    assert rate.high[1] == pytest.approx(clopper_pearson(0, 2)[1])  # the second column has 2 pairs


def simulated_pairs(rng: np.random.Generator, n: int, rate: float, tie: float) -> tuple[np.ndarray, np.ndarray]:
    """n pairs; a pair's miss chance is shared by its two orders with weight ``tie``; 5 % failures."""
    shared = rng.uniform(size=n) < rate
    per_order = rng.uniform(size=(n, 2)) < rate
    miss = np.where(rng.uniform(size=(n, 1)) < tie, shared[:, None], per_order)
    answered = rng.uniform(size=(n, 2)) >= 0.05
    return (miss & answered).sum(axis=1), answered.sum(axis=1)


def coverage_cell(n: int, rate: float) -> None:
    """300 data sets, orders correlated (tie 0.7): coverage at least 95 % less two Monte-Carlo errors.

    Measured with 400 data sets per cell (3-30 pairs, rates 2-50 %): 98.2-100 %, where the case
    bootstrap this replaced covered 6.5 % (3 pairs, rate 2 %) to 93.2 % (30 pairs, rate 50 %).
    """
    rng = np.random.default_rng(1000 * n + int(100 * rate))
    repeats, covered, widths = 300, 0, []
    for _ in range(repeats):
        misses, answered = simulated_pairs(rng, n, rate, tie=0.7)
        found = pair_rate(misses, answered)
        if math.isnan(float(found.point)):
            covered += 1  # no answered verdict: no claim made
            continue
        covered += found.low <= rate <= found.high
        widths.append(found.high - found.low)
    assert covered / repeats >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / repeats)
    assert min(widths) > 0


@pytest.mark.parametrize(("n", "rate"), [(3, 0.1), (10, 0.02)])
def test_the_interval_covers_the_rate_with_few_pairs(n: int, rate: float) -> None:
    coverage_cell(n, rate)


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5, 10, 30])
@pytest.mark.parametrize("rate", [0.02, 0.1, 0.3, 0.5])
def test_the_interval_covers_the_rate_at_every_number_of_pairs(n: int, rate: float) -> None:
    coverage_cell(n, rate)

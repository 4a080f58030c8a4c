"""Detectable differences (metrics/power.py): the case-clustered standard error against the case
bootstrap, the pair identity, the power the formula promises, and an analysis' sensitivity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics import power, stats
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import RunData


def clustered(rng: np.random.Generator, n: int, p: float, spread: float = 0.25, m: int = 12) -> np.ndarray:
    """Correct judgments per case of ``m`` requests, with a case effect (judgments of a case correlate)."""
    case_p = np.clip(p + spread * rng.standard_normal(n), 0.0, 1.0)
    return rng.binomial(m, case_p)


def test_the_linearised_standard_error_is_the_case_bootstraps() -> None:
    rng = np.random.default_rng(3)
    correct = clustered(rng, 150, 0.7)
    counted = np.full(150, 12)
    counted[::7] = 6  # some cases judged on fewer requests
    correct = np.minimum(correct, counted)
    u, mask = power.linearised(correct, counted)
    assert u.sum() == pytest.approx(0.0, abs=1e-9) and mask.all()
    se = math.sqrt(np.sum(u * u) / 149) / math.sqrt(150)
    weights = stats.bootstrap_weights(150, 4000, seed=1)
    resampled = (weights @ correct) / (weights @ counted)
    assert se == pytest.approx(float(resampled.std()), rel=0.08)
    # independent judgments would claim a far smaller error: the clustering is in the case's SD
    pooled = correct.sum() / counted.sum()
    assert se > 1.5 * math.sqrt(pooled * (1 - pooled) / counted.sum())


def test_the_pair_identity_is_every_pair_computed_apart() -> None:
    rng = np.random.default_rng(4)
    values, masks = [], []
    for p in (0.5, 0.6, 0.8, 0.9):
        u, mask = power.linearised(clustered(rng, 40, p)[:, None], np.full((40, 1), 12))
        values.append(u)
        masks.append(mask)
    explicit = [
        np.sum((a - b) ** 2, axis=0) / 39 for a, b in itertools.combinations(values, 2)
    ]  # every pair's variance
    assert power.pair_rms_sd(values, masks)[0] == pytest.approx(math.sqrt(float(np.mean(explicit))))
    assert math.isnan(float(power.pair_rms_sd(values[:1], masks[:1])[0]))
    sds = [np.sqrt(np.sum(u * u, axis=0) / 39) for u in values]
    assert power.rms_sd(values, masks)[0] == pytest.approx(math.sqrt(float(np.mean(np.square(sds)))))


def test_a_difference_of_the_detectable_size_is_found_four_times_in_five() -> None:
    # the two-sided z-test with the case-clustered standard error, at the MDE the formula gives
    rng = np.random.default_rng(5)
    n = 120
    pilot = clustered(rng, 20_000, 0.5)
    u, _ = power.linearised(pilot, np.full(pilot.size, 12))
    mde = float(power.detectable(np.sqrt(np.mean(u * u)), n))
    assert power.mde_multiplier() == pytest.approx(2.8016, abs=1e-4)
    found = 0
    for _ in range(600):
        correct = clustered(rng, n, 0.5 + mde)
        u, _ = power.linearised(correct, np.full(n, 12))
        se = math.sqrt(np.sum(u * u) / (n - 1) / n)
        found += abs(correct.sum() / (12 * n) - 0.5) / se > 1.959964
    assert 0.73 <= found / 600 <= 0.87  # measured: 0.80


def annotated_run(run_id: str, n: int, accuracy: float, seed: int) -> RunData:
    data = np.random.default_rng(n)  # the same cases and annotators for every judge
    truth = data.integers(1, 3, (n, len(DIMENSIONS))).astype(np.int8)
    ratings = np.where(data.random((n, 3, len(DIMENSIONS))) < 0.85, truth[:, None, :], 3 - truth[:, None, :])
    rng = np.random.default_rng(seed)
    picks = np.where(rng.random((n, 2, len(DIMENSIONS))) < accuracy, truth[:, None, :], 3 - truth[:, None, :])
    return RunData(
        run_id=run_id,
        judge_spec=f"test:{run_id}",
        data_hash="sim",
        case_ids=tuple(f"c{i}" for i in range(n)),
        verdicts=picks.astype(np.int8),
        labels=truth,
        lengths=np.full((n, 2), 10, dtype=np.int64),
        groups={"organ_system": tuple(("brain", "chest", "heart")[i % 3] if i else "eye" for i in range(n))},
        orders=(Order.ORIGINAL, Order.SWAPPED),
        ratings=ratings.astype(np.int8),
        annotators=("a", "b", "c"),
    )


def test_ten_cases_are_too_small_to_rank_and_four_hundred_are_not() -> None:
    small = analyze([annotated_run("x", 10, 0.8, 1), annotated_run("y", 10, 0.6, 2)], n_resamples=0)
    large = analyze([annotated_run("x", 400, 0.8, 1), annotated_run("y", 400, 0.6, 2)], n_resamples=0)
    for analysis, n in ((small, 10), (large, 400)):
        sensitivity = analysis.sensitivity
        assert sensitivity is not None and sensitivity.vs_human is not None
        assert sensitivity.n_cases.pooled == n and sensitivity.n_cases["overall"] == n
        for column in (*DIMENSIONS, "all"):
            # a single dimension rests on fewer judgments than all six: it detects less
            assert sensitivity.vs_chance[column] >= sensitivity.vs_chance.pooled
    assert small.sensitivity is not None and large.sensitivity is not None
    assert small.sensitivity.too_small_to_rank and small.sensitivity.largest > small.sensitivity.threshold == 0.1
    assert not large.sensitivity.too_small_to_rank and large.sensitivity.largest < 0.06
    # shrinking with the square root of the cases
    ratio = small.sensitivity.vs_chance.pooled / large.sensitivity.vs_chance.pooled
    assert 3.5 < ratio < 9.5
    # per organ system: the organ with one case cannot detect anything
    by_group = large.sensitivity.by_group
    assert math.isnan(by_group["eye"]) and by_group["brain"] > large.sensitivity.vs_chance.pooled
    without = analyze([annotated_run("x", 40, 0.8, 1)], n_resamples=0)
    assert without.sensitivity is not None and math.isnan(without.sensitivity.between_judges.pooled)

"""The probes' shared plumbing: derived ids and data sets, paired counts, and the paired interval's coverage."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.cases import make_benchmark

from medrewardbench.metrics.stats import FAILED, NOT_RUN, bootstrap_weights
from medrewardbench.probes.derive import (
    agreement_counts,
    derive_case,
    derived_benchmark,
    derived_id,
    flip_counts,
    paired_difference_ci,
    parent_id,
)


def test_a_derived_case_and_data_set_carry_their_provenance_and_a_new_fingerprint() -> None:
    parent = make_benchmark(4)
    case = derive_case(parent.cases[0], "grounding", "blank", metadata={"window": "lung"}, question="changed?")
    assert case.case_id == "case-0000~grounding~blank" and parent_id(case) == "case-0000"
    assert case.question == "changed?" and case.metadata["window"] == "lung"
    derived = derived_benchmark(parent, "grounding", "blank", [case])
    assert derived.name == f"probe:grounding:blank({parent.data_hash()[:12]})"
    assert derived.data_hash() != parent.data_hash()
    assert parent_id(parent.cases[1]) == "case-0001"
    with pytest.raises(ValueError, match="free of"):
        derived_id("c", "a~b", "x")


def test_flips_count_only_requests_answered_under_both_conditions() -> None:
    base = np.array([[[1, 2], [1, FAILED]], [[2, 2], [NOT_RUN, 1]]], dtype=np.int8)
    probe = np.array([[[2, 2], [1, 1]], [[FAILED, 1], [2, 1]]], dtype=np.int8)
    flipped, answered = flip_counts(base, probe)
    assert answered.tolist() == [[2, 1], [0, 2]]
    assert flipped.tolist() == [[1, 0], [0, 1]]
    labels = np.array([[1, 2], [2, 0]], dtype=np.int8)
    correct, counted = agreement_counts(probe, labels)
    assert counted.tolist() == [[2, 2], [2, 0]]  # failures count (wrong); no label, not counted
    assert correct.tolist() == [[1, 1], [1, 0]]


def test_the_paired_difference_of_identical_ratios_is_zero_with_a_floor_not_a_zero_width_interval() -> None:
    rng = np.random.default_rng(1)
    num = rng.integers(0, 3, size=50)
    den = np.full(50, 2)
    estimate = paired_difference_ci((num, den), (num, den), bootstrap_weights(50, 200, seed=0))
    # no case differs: the share of cases that could is at most 1 - 0.025^(1/50), and so is the drop
    bound = 1 - 0.025 ** (1 / 50)
    assert float(estimate.point) == 0.0
    assert (float(estimate.low), float(estimate.high)) == pytest.approx((-bound, bound))


def test_the_paired_interval_covers_the_true_drop_at_its_level() -> None:
    """Simulation: 60 cases, each judged in two orders with and without the image; accuracy 0.75 with
    it and 0.60 without, correlated within a case. The 90 % interval must cover the true drop of
    0.15 about 90 % of the time (400 data sets: a binomial 99 % band around 0.90 is 0.86-0.94)."""
    rng = np.random.default_rng(2026)
    n_cases, n_sets, level, drop = 60, 400, 0.90, 0.15
    weights = bootstrap_weights(n_cases, 1000, seed=7)
    covered = 0
    for _ in range(n_sets):
        skill = rng.uniform(-0.2, 0.2, size=(n_cases, 1))  # a case's difficulty, shared by both conditions
        with_image = rng.random((n_cases, 2)) < 0.75 + skill
        without = rng.random((n_cases, 2)) < 0.60 + skill
        estimate = paired_difference_ci(
            (with_image.sum(1), np.full(n_cases, 2)), (without.sum(1), np.full(n_cases, 2)), weights, confidence=level
        )
        covered += float(estimate.low) <= drop <= float(estimate.high)
    assert 0.86 <= covered / n_sets <= 0.94, covered / n_sets


def test_cases_can_restrict_the_paired_difference_to_a_group() -> None:
    num_a = np.array([2, 2, 0, 0])
    num_b = np.array([0, 0, 0, 0])
    den = np.full(4, 2)
    weights = bootstrap_weights(4, 100, seed=0)
    first_two = paired_difference_ci((num_a, den), (num_b, den), weights, cases=np.array([True, True, False, False]))
    assert float(first_two.point) == 1.0 and int(first_two.n) == 4
    last_two = paired_difference_ci((num_a, den), (num_b, den), weights, cases=[2, 3])
    assert float(last_two.point) == 0.0


def test_the_grounding_flag_is_rarely_wrong_about_a_judge_at_the_threshold() -> None:
    """Simulation of the flag's error: a judge whose verdicts truly flip 5 % of the time (12 verdicts
    a case, case-to-case variation) is at the threshold, so "does not use the image" (the upper
    bound of the 95 % interval below 5 %) is a one-sided 2.5 % test there: over 400 data sets of 100
    cases it must be wrong at most about 2.5 % of the time (binomial 99 % band: under 5 %). At 0 %
    flips it is always right with 100 cases and never fires with 60 (the floored interval of 0 of 60
    reaches 6 %), and at 15 % it never says the judge ignores the image."""
    from medrewardbench.metrics.stats import ratio_ci
    from medrewardbench.probes.derive import estimate_dict
    from medrewardbench.probes.grounding import FLAG_UNUSED, grounding_flag

    rng = np.random.default_rng(11)
    n_sets = 400

    def flagged(rate: float, n_cases: int = 100) -> float:
        weights = bootstrap_weights(n_cases, 1000, seed=3)
        wrong = 0
        for _ in range(n_sets):
            per_case = np.clip(rate + rng.normal(0, rate / 2 if rate else 0, size=n_cases), 0, 1)
            flips = rng.binomial(12, per_case)
            estimate = ratio_ci(flips, np.full(n_cases, 12), weights=weights, small_sample=True)
            wrong += grounding_flag({"no-image": {"flip_rate": estimate_dict(estimate)}}) == FLAG_UNUSED
        return wrong / n_sets

    assert flagged(0.05) <= 0.05
    assert flagged(0.0) == 1.0
    assert flagged(0.0, n_cases=60) == 0.0
    assert flagged(0.15) == 0.0

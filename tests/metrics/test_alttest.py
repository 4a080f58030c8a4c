"""The alternative annotator test (metrics/alttest.py): a hand computation, the paper's reference
procedure (scipy's one-sided t-test, its Benjamini-Yekutieli step), the verdict's rules, and
simulated panels whose answer is known."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as scipy_stats

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.alttest import (
    alt_test,
    alt_test_columns,
    benjamini_yekutieli,
    by_level,
    case_differences,
    instance_wins,
    regularized_incomplete_beta,
    student_t_sf,
    t_test_greater,
)
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.annotators import majority_vote
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.results import CAN_STAND_IN, CANNOT, TOO_FEW, VERDICTS, Analysis

# Three annotators a, b, c on one dimension; a judge's (original, swapped) verdicts (-1 not run, 0 failed)
PANEL = np.array([[1, 1, 1], [1, 1, 2], [2, 0, 1], [1, 0, 0], [2, 1, 1]], dtype=np.int8)
JUDGE = np.array([(1, 1), (2, 0), (2, -1), (1, 1), (-1, -1)], dtype=np.int8)


def one_dimension(ratings: np.ndarray, verdicts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return ratings[:, :, None], verdicts[:, :, None]


def test_wins_per_instance_match_a_hand_computation() -> None:
    instance, wins_f, wins_h = instance_wins(*one_dimension(PANEL, JUDGE))
    # c0: everyone agrees, so does the judge: ties. c1: a and b see the others split (S_h = 1/2); the
    # judge names 2 in one order (1/2) and fails in the other (0): S_f = 1/4 < 1/2. c's others both say
    # 1: S_h = 0 = S_f, a tie. c2: b gave no label; a's only other (c) disagrees with a and with the
    # judge: a tie; c's other (a) agrees with the judge's one verdict: the judge wins. c3: a alone has
    # no other annotator. c4: the judge was never run.
    assert instance[:, :, 0].tolist() == [
        [True, True, True],
        [True, True, True],
        [True, False, True],
        [False, False, False],
        [False, False, False],
    ]
    assert wins_f[:, :, 0].astype(int).tolist() == [[1, 1, 1], [0, 0, 1], [1, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert wins_h[:, :, 0].astype(int).tolist() == [[1, 1, 1], [1, 1, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]]


def test_the_t_test_of_one_annotator_by_hand() -> None:
    judge, annotator, counted = case_differences(*one_dimension(PANEL, JUDGE))
    d = (judge - annotator)[counted[:, 0], 0]
    assert d.tolist() == [0.0, -1.0, 0.0]  # annotator a on c0, c1, c2
    mean, sd = -1 / 3, math.sqrt(1 / 3)
    t = (mean + 0.1) / (sd / math.sqrt(3))
    assert t == pytest.approx(-0.7)
    expected = scipy_stats.t.sf(t, 2)
    assert t_test_greater(d, -0.1) == pytest.approx(expected, rel=1e-12)
    outcome = alt_test(judge, annotator, counted, epsilon=0.1, min_cases=2, min_annotators=1)
    assert outcome.annotators[0].p_value == pytest.approx(expected, rel=1e-12)
    assert outcome.annotators[0].judge_wins == pytest.approx(2 / 3)
    assert outcome.annotators[0].annotator_wins == pytest.approx(1.0)
    assert outcome.annotators[1].n_cases == 2 and outcome.annotators[2].n_cases == 3


def test_the_t_distribution_and_the_one_sided_test_match_scipy() -> None:
    for t, df in [(0.3, 5), (-1.2, 29), (2.5, 100), (7.0, 3), (-8.0, 40), (0.0, 12), (40.0, 2)]:
        assert student_t_sf(t, df) == pytest.approx(scipy_stats.t.sf(t, df), rel=1e-10, abs=1e-300)
    assert regularized_incomplete_beta(2.5, 0.5, 0.3) == pytest.approx(scipy_stats.beta.cdf(0.3, 2.5, 0.5))
    rng = np.random.default_rng(4)
    for _ in range(30):
        x = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=int(rng.integers(5, 80)))
        eps = float(rng.uniform(0, 0.3))
        # the paper's call: H0 mean(W_h - W_f) >= eps, alternative "less"
        reference = scipy_stats.ttest_1samp(-x, eps, alternative="less").pvalue
        assert t_test_greater(x, -eps) == pytest.approx(reference, rel=1e-9, abs=1e-15)
    # without spread: rejected when the mean clears the margin, never otherwise
    assert t_test_greater(np.zeros(40), -0.1) == 0.0
    assert t_test_greater(np.full(40, -0.1), -0.1) == 1.0
    assert math.isnan(t_test_greater([0.5], 0.0))


def test_benjamini_yekutieli_by_hand_and_against_scipy() -> None:
    # m = 4, H_4 = 25/12: thresholds k * 0.05 / (4 * 25/12) = 0.006 k
    assert benjamini_yekutieli([0.01, 0.02, 0.03, 0.2]).tolist() == [False] * 4
    assert benjamini_yekutieli([0.5, 0.011, 0.001, 0.03]).tolist() == [False, True, True, False]
    # step-up: a p-value above its own threshold is rejected when a larger rank passes
    assert benjamini_yekutieli([0.007, 0.012, 0.5, 0.9]).tolist() == [True, True, False, False]
    assert by_level(2, 3, 0.05) == pytest.approx(2 * 0.05 / (3 * (1 + 1 / 2 + 1 / 3)))
    rng = np.random.default_rng(9)
    for _ in range(200):
        p = rng.random(int(rng.integers(1, 12))) ** 3
        expected = scipy_stats.false_discovery_control(p, method="by") <= 0.05
        assert benjamini_yekutieli(p, 0.05).tolist() == expected.tolist()
    assert benjamini_yekutieli([np.nan, 0.001]).tolist() == [False, True]  # NaN: not tested, not in m


def reference_alt_test(
    judge: dict[int, int], humans: dict[str, dict[int, int]], epsilon: float, q: float = 0.05
) -> tuple[float, float, list[float]]:
    """The paper's procedure as its authors' notebook writes it (accuracy alignment, BY step-up)."""
    annotators_of: dict[int, list[str]] = {}
    for name, labels in humans.items():
        for i in labels:
            annotators_of.setdefault(i, []).append(name)
    kept = {i for i, names in annotators_of.items() if len(names) >= 2 and i in judge}
    p_values, advantages = [], []
    for name, labels in humans.items():
        instances = [i for i in labels if i in kept]
        if len(instances) < 30:
            continue
        judge_wins, human_wins = [], []
        for i in instances:
            others = [humans[o][i] for o in annotators_of[i] if o != name]
            human_score = np.mean([labels[i] == a for a in others])
            judge_score = np.mean([judge[i] == a for a in others])
            judge_wins.append(int(judge_score >= human_score))
            human_wins.append(int(human_score >= judge_score))
        diff = [h - f for h, f in zip(human_wins, judge_wins, strict=True)]
        p_values.append(scipy_stats.ttest_1samp(diff, epsilon, alternative="less").pvalue)
        advantages.append(float(np.mean(judge_wins)))
    p = np.array(p_values)
    m = len(p)
    order = np.argsort(p)
    thresholds = np.arange(1, m + 1) / m * q / np.sum(1 / np.arange(1, m + 1))
    last = max((k for k in range(m) if p[order][k] <= thresholds[k]), default=-1)
    return (last + 1) / m, float(np.mean(advantages)), p_values


def test_one_order_and_one_dimension_is_the_papers_procedure() -> None:
    rng = np.random.default_rng(1)
    for _ in range(25):
        n, raters = int(rng.integers(40, 90)), int(rng.integers(3, 6))
        truth = rng.integers(1, 3, n)
        ratings = np.where(rng.random((n, raters)) < 0.8, truth[:, None], 3 - truth[:, None]).astype(np.int8)
        ratings[rng.random((n, raters)) < 0.2] = 0
        picks = np.where(rng.random(n) < rng.uniform(0.55, 0.95), truth, 3 - truth).astype(np.int8)
        epsilon = float(rng.choice([0.0, 0.1, 0.2]))
        humans = {f"h{r}": {i: int(ratings[i, r]) for i in range(n) if ratings[i, r]} for r in range(raters)}
        omega, rho, p_values = reference_alt_test({i: int(picks[i]) for i in range(n)}, humans, epsilon)
        verdicts = np.stack([picks, np.full(n, -1, dtype=np.int8)], axis=1)
        [outcome, pooled] = alt_test_columns(*one_dimension(ratings, verdicts), epsilon=epsilon, min_annotators=1)
        tested = [a.p_value for a in outcome.annotators if not math.isnan(a.p_value)]
        np.testing.assert_allclose(tested, p_values, rtol=1e-9, atol=1e-15)
        assert outcome.winning_rate == pytest.approx(omega) and outcome.advantage == pytest.approx(rho)
        assert pooled.winning_rate == outcome.winning_rate  # one dimension: pooled is that dimension


def test_both_orders_count_and_the_pooled_test_averages_a_cases_dimensions_first() -> None:
    rng = np.random.default_rng(2)
    n = 60
    truth = rng.integers(1, 3, (n, 6))
    ratings = np.where(rng.random((n, 3, 6)) < 0.8, truth[:, None, :], 3 - truth[:, None, :]).astype(np.int8)
    ratings[rng.random(ratings.shape) < 0.1] = 0
    verdicts = np.where(rng.random((n, 2, 6)) < 0.75, truth[:, None, :], 3 - truth[:, None, :]).astype(np.int8)
    verdicts[rng.random(verdicts.shape) < 0.05] = 0
    # a judge run twice with the same verdicts is the judge run once
    same = np.stack([verdicts[:, 0], verdicts[:, 0]], axis=1)
    once = np.stack([verdicts[:, 0], np.full_like(verdicts[:, 0], -1)], axis=1)
    assert [o.annotators for o in alt_test_columns(ratings, same)] == [
        o.annotators for o in alt_test_columns(ratings, once)
    ]
    instance, wins_f, wins_h = instance_wins(ratings, verdicts)
    pooled = alt_test_columns(ratings, verdicts)[-1]
    for j in range(3):
        per_case = instance[:, j].sum(axis=1)
        rows = per_case > 0
        d = ((wins_f[:, j].sum(axis=1) - wins_h[:, j].sum(axis=1))[rows] / per_case[rows]).astype(float)
        assert pooled.annotators[j].n_cases == int(rows.sum())
        assert pooled.annotators[j].p_value == pytest.approx(t_test_greater(d, -0.1), rel=1e-12)
        rho = float(np.mean(wins_f[:, j].sum(axis=1)[rows] / per_case[rows]))
        assert pooled.annotators[j].judge_wins == pytest.approx(rho)


def panel(
    rng: np.random.Generator, n: int, judge_accuracy: float, *, raters: int = 3, accuracy: float = 0.85
) -> tuple[np.ndarray, np.ndarray]:
    """Annotators and a judge labelling a hidden truth independently per (case, dimension); the judge
    gives the same verdict in both orders (as a doctor asked twice would)."""
    truth = rng.integers(1, 3, (n, len(DIMENSIONS)))
    right = rng.random((n, raters, len(DIMENSIONS))) < accuracy
    ratings = np.where(right, truth[:, None, :], 3 - truth[:, None, :]).astype(np.int8)
    picks = np.where(rng.random(truth.shape) < judge_accuracy, truth, 3 - truth).astype(np.int8)
    return ratings, np.stack([picks, picks], axis=1)


def verdict_rates(n: int, judge_accuracy: float, replicates: int, seed: int) -> tuple[Counter[str], Counter[str]]:
    rng = np.random.default_rng(seed)
    pooled: Counter[str] = Counter()
    per_dimension: Counter[str] = Counter()
    for _ in range(replicates):
        outcomes = alt_test_columns(*panel(rng, n, judge_accuracy))
        pooled[outcomes[-1].verdict] += 1
        per_dimension.update(o.verdict for o in outcomes[:-1])
    return pooled, per_dimension


def test_a_judge_drawn_as_a_fourth_annotator_can_stand_in() -> None:
    # 300 cases, three annotators 85 % right; the judge is a fourth one from the same process
    pooled, per_dimension = verdict_rates(300, 0.85, replicates=40, seed=11)
    assert pooled[CAN_STAND_IN] >= 38  # measured: 40 of 40
    assert per_dimension[CAN_STAND_IN] >= 0.85 * 40 * len(DIMENSIONS)  # measured: 98 %


def test_a_judge_15_points_worse_cannot() -> None:
    # 70 % right where the annotators are 85 % right: about 14 points below the human row
    pooled, per_dimension = verdict_rates(300, 0.70, replicates=40, seed=12)
    assert pooled[CANNOT] >= 38 and pooled[CAN_STAND_IN] <= 1  # measured: 40 cannot
    cells = 40 * len(DIMENSIONS)
    assert per_dimension[CANNOT] >= 0.85 * cells and per_dimension[CAN_STAND_IN] <= 0.05 * cells


def test_ten_cases_are_too_few_to_tell() -> None:
    for accuracy in (0.85, 0.70, 1.0):
        pooled, per_dimension = verdict_rates(10, accuracy, replicates=5, seed=13)
        assert pooled == Counter({TOO_FEW: 5}) and per_dimension == Counter({TOO_FEW: 30})
    outcome = alt_test_columns(*panel(np.random.default_rng(0), 10, 0.85))[-1]
    assert "at least 30 cases" in outcome.reason and math.isnan(outcome.winning_rate)


def test_two_annotators_are_too_few_whatever_the_cases() -> None:
    ratings, verdicts = panel(np.random.default_rng(3), 400, 0.95, raters=2)
    outcome = alt_test_columns(ratings, verdicts)[-1]
    assert outcome.verdict == TOO_FEW and "2 annotators; the test needs at least 3" in outcome.reason
    # three annotators, but one labelled only 20 cases: two can be tested
    ratings, verdicts = panel(np.random.default_rng(3), 400, 0.95)
    ratings[20:, 2] = 0
    outcome = alt_test_columns(ratings, verdicts)[-1]
    assert outcome.verdict == TOO_FEW and outcome.n_annotators == 2
    assert "2 annotators with at least 30 cases" in outcome.reason


def test_a_failure_without_power_is_too_few_and_with_power_cannot() -> None:
    # 60 cases are enough for the pooled test and not for one dimension of an equally good judge
    rng = np.random.default_rng(21)
    seen = Counter()
    for _ in range(30):
        for outcome in alt_test_columns(*panel(rng, 60, 0.85)):
            seen[outcome.verdict] += 1
            assert outcome.verdict in VERDICTS and outcome.n_annotators == 3
            assert (outcome.verdict == CAN_STAND_IN) == (outcome.winning_rate >= 0.5)
            shown_worse = sum(a.judge_worse for a in outcome.annotators)
            if outcome.verdict == CANNOT:
                assert outcome.detectable_margin <= 0.1 or shown_worse >= 2
            if outcome.verdict == TOO_FEW:
                assert outcome.detectable_margin > 0.1 and shown_worse < 2
                assert "would pass less than 80 %" in outcome.reason
    assert seen[TOO_FEW] > 0 and seen[CAN_STAND_IN] > 0
    # a much worse judge is shown worse than the annotators by more than epsilon, even on 40 cases where
    # the power rule alone would leave it undecided
    ratings, verdicts = panel(np.random.default_rng(6), 40, 0.2)
    for outcome in alt_test_columns(ratings, verdicts)[:-1]:  # one dimension at a time
        assert outcome.verdict == CANNOT and outcome.detectable_margin > 0.1
        assert "worse than 3 of 3 annotators by more than ε" in outcome.reason
        assert all(a.judge_worse and not a.judge_beats for a in outcome.annotators)
    # the mirror test's p-value is the first test's complement
    judge, annotator, counted = case_differences(ratings, verdicts, [5])
    d = (judge - annotator)[counted[:, 0], 0]
    assert t_test_greater(-d, 0.1) == pytest.approx(1 - t_test_greater(d, -0.1))
    # a larger epsilon is easier to pass and to have power for
    ratings, verdicts = panel(np.random.default_rng(5), 300, 0.70)
    strict, lenient = alt_test_columns(ratings, verdicts)[-1], alt_test_columns(ratings, verdicts, epsilon=0.3)[-1]
    assert strict.verdict == CANNOT and lenient.verdict == CAN_STAND_IN
    assert "within ε = 0.30" in lenient.reason


def run_data(run_id: str, verdicts: np.ndarray, ratings: np.ndarray) -> RunData:
    n = ratings.shape[0]
    labels = np.stack([majority_vote(ratings[:, :, d]) for d in range(ratings.shape[2])], axis=1).astype(np.int8)
    return RunData(
        run_id=run_id,
        judge_spec=f"test:{run_id}",
        data_hash="panel",
        case_ids=tuple(f"c{i}" for i in range(n)),
        verdicts=verdicts,
        labels=labels,
        lengths=np.full((n, 2), 10, dtype=np.int64),
        groups={"organ_system": tuple("brain" if i % 2 else "chest" for i in range(n))},
        orders=(Order.ORIGINAL, Order.SWAPPED),
        ratings=ratings,
        annotators=("dr_a", "dr_b", "dr_c"),
    )


def test_every_judge_has_its_verdicts_in_the_analysis_and_its_file() -> None:
    rng = np.random.default_rng(8)
    ratings, peer = panel(rng, 200, 0.85)
    _, weak = panel(rng, 200, 0.60)
    runs = [run_data("peer", peer, ratings), run_data("weak", weak, ratings)]
    analysis = analyze(runs, n_resamples=200, seed=1, epsilon=0.15)
    human = analysis.human
    assert human is not None and human.epsilon == 0.15 and analysis.settings.epsilon == 0.15
    assert [v.label for v in human.verdicts] == ["test:peer", "test:weak"]
    for verdict in human.verdicts:
        expected = alt_test_columns(
            ratings, runs[[v.label for v in human.verdicts].index(verdict.label)].verdicts, epsilon=0.15
        )
        assert [t.verdict for _, t in verdict.tests.columns()] == [o.verdict for o in expected]
        assert verdict.tests.pooled.winning_rate == pytest.approx(expected[-1].winning_rate, abs=1e-6)
    by_label = {row.label: row for row in analysis.leaderboard}
    assert by_label["test:peer"].verdict == CAN_STAND_IN and by_label["test:weak"].verdict == CANNOT
    # the normalised ceiling is the judge's agreement over the human row's, from the same resamples
    peer_row = human.judge("test:peer")
    assert peer_row is not None and peer_row.normalised is not None
    ratio = peer_row.agreement.pooled.point / human.human.pooled.point
    assert peer_row.normalised.pooled.point == pytest.approx(ratio, abs=1e-5)
    assert peer_row.normalised.pooled.low < peer_row.normalised.pooled.point < peer_row.normalised.pooled.high
    assert by_label["test:peer"].normalised == peer_row.normalised.pooled
    document = json.loads(json.dumps(analysis.to_json(), allow_nan=False))
    alt = document["human"]["alt_test"]
    assert alt["epsilon"] == 0.15 and alt["min_annotators"] == 3 and alt["min_cases"] == 30
    assert "Benjamini-Yekutieli" in alt["method"]
    assert alt["verdicts"][0]["verdict"] == CAN_STAND_IN and set(alt["verdicts"][0]["tests"]) == {*DIMENSIONS, "all"}
    assert document["leaderboard"][0]["verdict"] in VERDICTS and document["settings"]["epsilon"] == 0.15
    assert Analysis.from_json(document) == analysis
    with pytest.raises(ValueError, match="epsilon"):
        analyze(runs, n_resamples=0, epsilon=-0.1)

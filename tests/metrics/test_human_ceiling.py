"""The human ceiling (metrics/human.py): values against hand computation, the leave-one-out rules,
intervals from the analysis' one weight matrix, and its place in an analysis."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import StoreError
from medrewardbench.metrics import annotators as panel_stats
from medrewardbench.metrics import stats
from medrewardbench.metrics.analysis import analyze, check_same_data
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.human import (
    loo_agreement,
    loo_targets,
    panel_agreement,
    panel_features,
    panel_statistics,
)
from medrewardbench.metrics.results import HUMAN_LABEL, POOLED, Analysis

# Four cases rated by annotators a, b, c on one dimension (0 = no label):
#   c0: 1 1 1   unanimous
#   c1: 1 1 2   split 2-1
#   c2: 2 2 2   unanimous
#   c3: 2 - 1   b did not rate it
PANEL = np.array([[1, 1, 1], [1, 1, 2], [2, 2, 2], [2, 0, 1]], dtype=np.int8)
# A judge's (original, swapped) verdicts: 0 = failed, -1 = order not run.
JUDGE = np.array([(1, 1), (1, 0), (1, -1), (2, 1)], dtype=np.int8)


def one_dimension(ratings: np.ndarray) -> np.ndarray:
    return ratings[:, :, None]


def all_dimensions(ratings: np.ndarray) -> np.ndarray:
    return np.repeat(ratings[:, :, None], len(DIMENSIONS), axis=2)


def no_resamples(n: int) -> np.ndarray:
    return np.zeros((0, n), dtype=np.float32)


def test_agreement_between_annotators_matches_hand_computation() -> None:
    panel = panel_agreement(one_dimension(PANEL), no_resamples(4))
    # agreeing pairs 6 + 2 + 6 + 0 over pairs 6 + 6 + 6 + 2
    assert panel.percent_agreement.point[0] == pytest.approx(14 / 20)
    # Fleiss: P_i = 1, 1/3, 1, 0 -> P_bar = 7/12; p = (6/11, 5/11) -> P_e = 61/121
    assert panel.fleiss_kappa.point[0] == pytest.approx(115 / 720)
    # Krippendorff: o_11 = 4, o_22 = 3, o_12 = o_21 = 2, n = 11 -> 1 - 10 * 4 / (2 * 6 * 5)
    assert panel.krippendorff_alpha.point[0] == pytest.approx(1 / 3)
    assert panel.percent_agreement.n[0] == 4 and panel.n_cases == 4
    # the pooled column of one dimension is that dimension; and no resamples, no interval
    assert panel.fleiss_kappa.point[1] == pytest.approx(panel.fleiss_kappa.point[0])
    assert np.isnan(panel.fleiss_kappa.low).all() and np.isnan(panel.fleiss_kappa.high).all()


def test_agreement_equals_the_published_statistics_per_dimension_and_pooled() -> None:
    rng = np.random.default_rng(3)
    ratings = rng.integers(1, 3, size=(30, 4, len(DIMENSIONS))).astype(np.int8)
    ratings[rng.random(ratings.shape) < 0.3] = 0
    panel = panel_agreement(ratings, no_resamples(30))
    for d in range(len(DIMENSIONS)):
        assert panel.percent_agreement.point[d] == pytest.approx(panel_stats.pairwise_agreement(ratings[:, :, d]))
        assert panel.fleiss_kappa.point[d] == pytest.approx(panel_stats.fleiss_kappa(ratings[:, :, d]))
        assert panel.krippendorff_alpha.point[d] == pytest.approx(
            panel_stats.krippendorff_alpha_nominal(ratings[:, :, d])
        )
    # pooled: every (case, dimension) is one item
    items = ratings.transpose(0, 2, 1).reshape(-1, ratings.shape[1])
    assert panel.fleiss_kappa.point[-1] == pytest.approx(panel_stats.fleiss_kappa(items))
    assert panel.krippendorff_alpha.point[-1] == pytest.approx(panel_stats.krippendorff_alpha_nominal(items))
    assert panel.percent_agreement.n[-1] == int(((ratings > 0).sum(axis=1) >= 2).sum())


def test_a_resample_is_the_statistic_of_the_cases_it_draws() -> None:
    rng = np.random.default_rng(5)
    ratings = rng.integers(1, 3, size=(25, 3, 2)).astype(np.int8)
    ratings[rng.random(ratings.shape) < 0.2] = 0
    weights = stats.bootstrap_weights(25, 20, seed=9)
    percent, kappa, alpha = panel_statistics(stats.resampled_sums(weights, panel_features(ratings)))
    for b in (0, 7, 19):
        # a resample draws 24 of the 25 cases, each weighing 25/24 (the rescaled bootstrap)
        counts = np.rint(weights[b] * 24 / 25).astype(int)
        drawn = np.repeat(ratings, counts, axis=0)[:, :, 1]
        assert kappa[b, 1] == pytest.approx(panel_stats.fleiss_kappa(drawn))
        assert percent[b, 1] == pytest.approx(panel_stats.pairwise_agreement(drawn))
        # alpha's small-sample factor (n - 1) sees the weight: n values weighing 25/24 count as
        # 25 n / 24 values, a difference of order 1/n
        assert alpha[b, 1] == pytest.approx(panel_stats.krippendorff_alpha_nominal(drawn), abs=2e-3)


def test_a_subset_of_cases_uses_their_columns_of_the_shared_weights() -> None:
    rng = np.random.default_rng(8)
    ratings = rng.integers(1, 3, size=(20, 3, 6)).astype(np.int8)
    weights = stats.bootstrap_weights(20, 200, seed=2)
    mask = np.arange(20) % 3 == 0
    subset = panel_agreement(ratings, weights, cases=mask)
    alone = panel_agreement(ratings[mask], weights[:, mask])
    np.testing.assert_array_equal(subset.fleiss_kappa.low, alone.fleiss_kappa.low)
    np.testing.assert_array_equal(subset.krippendorff_alpha.high, alone.krippendorff_alpha.high)
    assert subset.n_cases == int(mask.sum())


def test_leave_one_out_targets_skip_ties_and_annotators_who_did_not_rate() -> None:
    targets, counted = loo_targets(one_dimension(PANEL))
    assert targets[:, :, 0].tolist() == [[1, 1, 1], [0, 0, 1], [2, 2, 2], [1, 0, 2]]
    # c1: a and b are left with a 1-1 tie (no target); c3: b rated nothing
    assert counted[:, :, 0].tolist() == [
        [True, True, True],
        [False, False, True],
        [True, True, True],
        [True, False, True],
    ]


def test_annotators_and_a_judge_against_the_same_targets() -> None:
    loo = loo_agreement(one_dimension(PANEL), [JUDGE[:, :, None]], no_resamples(4))
    # targets counted: c0 3, c1 1 (c against a+b), c2 3, c3 2; annotators right on c0 and c2 only
    assert loo.human.point[0] == pytest.approx(6 / 9) and loo.human.n[0] == 9
    assert loo.annotators.point[:, 0].tolist() == pytest.approx([2 / 3, 1.0, 2 / 4])
    assert loo.annotators.n[:, 0].tolist() == [3, 2, 4]
    # the judge per (target, order): c0 6/6; c1 1/2 (the failure is wrong); c2 0/3 (swapped not run);
    # c3 2/4 (targets 1 for a and 2 for c, verdicts 2 then 1)
    assert loo.judges.point[0, 0] == pytest.approx(9 / 15) and loo.judges.n[0, 0] == 15
    assert loo.gap.point[0, 0] == pytest.approx(9 / 15 - 6 / 9)


def test_with_two_annotators_the_target_is_the_other_one() -> None:
    two = np.array([[1, 1], [1, 2], [2, 2]], dtype=np.int8)
    always_first = np.array([(1, 1)] * 3, dtype=np.int8)
    loo = loo_agreement(one_dimension(two), [always_first[:, :, None]], no_resamples(3))
    # the human row is the annotators' percent agreement
    assert loo.human.point[0] == pytest.approx(panel_stats.pairwise_agreement(two)) == pytest.approx(4 / 6)
    # the judge's figure is its mean agreement with each annotator: (2/3 + 1/3) / 2
    assert loo.judges.point[0, 0] == pytest.approx(0.5)


def test_a_perfect_copy_of_the_majority_beats_the_human_row() -> None:
    # a judge that always names the label the annotators' majority gives reaches 1 on every target
    majority = panel_stats.majority_vote(PANEL)
    judge = np.stack([majority, majority], axis=1).astype(np.int8)
    judge[3] = 1  # c3 has no majority; its targets disagree with each other, so nothing reaches both
    loo = loo_agreement(one_dimension(PANEL), [judge[:, :, None]], no_resamples(4))
    assert loo.judges.point[0, 0] == pytest.approx((6 + 2 + 6 + 2) / 18)
    assert loo.judges.point[0, 0] > loo.human.point[0]


def run_data(run_id: str, rows: np.ndarray, ratings: np.ndarray | None, annotators: tuple[str, ...] = ()) -> RunData:
    n = rows.shape[0]
    labels = panel_stats.majority_vote(PANEL).astype(np.int8)
    return RunData(
        run_id=run_id,
        judge_spec=f"test:{run_id}",
        data_hash="panel",
        case_ids=tuple(f"c{i}" for i in range(n)),
        verdicts=np.repeat(rows[:, :, None], len(DIMENSIONS), axis=2),
        labels=np.repeat(labels[:, None], len(DIMENSIONS), axis=1),
        lengths=np.full((n, 2), 10, dtype=np.int64),
        groups={"organ_system": ("brain", "brain", "chest", "chest")},
        orders=(Order.ORIGINAL, Order.SWAPPED),
        ratings=ratings,
        annotators=annotators,
    )


NAMES = ("dr_a", "dr_b", "dr_c")


def annotated_runs() -> list[RunData]:
    ratings = all_dimensions(PANEL)
    return [
        run_data("judge", JUDGE, ratings, NAMES),
        run_data("first", np.array([(1, 2)] * 4, dtype=np.int8), ratings, NAMES),
    ]


def test_the_analysis_has_a_human_section_with_hand_computed_values() -> None:
    analysis = analyze(annotated_runs(), n_resamples=300, seed=4)
    human = analysis.human
    assert human is not None and human.label == HUMAN_LABEL == "human (leave-one-out)"
    assert human.annotators == NAMES and human.n_cases == 4 and human.n_annotations == 11
    for column in (*DIMENSIONS, POOLED):
        assert human.human[column].point == pytest.approx(round(6 / 9, 6))
        assert human.agreement.fleiss_kappa[column].point == pytest.approx(round(115 / 720, 6))
    for dimension in DIMENSIONS:
        assert human.agreement.krippendorff_alpha[dimension].point == pytest.approx(round(1 / 3, 6))
    # alpha's (n - 1) grows with the pooled items: 1 - 65 * (4 * 6) / (2 * 36 * 30)
    assert human.agreement.krippendorff_alpha.pooled.point == pytest.approx(round(5 / 18, 6))
    assert human.human.pooled.n == 9 * len(DIMENSIONS)
    judge = human.judge("test:judge")
    assert judge is not None and judge.agreement.pooled.point == pytest.approx(0.6)
    assert judge.gap.pooled.point == pytest.approx(round(0.6 - 6 / 9, 6), abs=1e-6)
    assert [a.annotator for a in human.annotators_vs_others] == list(NAMES)
    assert [a.n_cases for a in human.annotators_vs_others] == [4, 3, 4]
    assert human.annotators_vs_others[1].vs_others.pooled.point == 1.0
    # per organ system: brain holds c0 and c1, chest c2 and c3
    assert list(human.by_group) == ["brain", "chest"]
    assert human.by_group["brain"].percent_agreement["overall"].point == pytest.approx(8 / 12)
    assert human.by_group["chest"].percent_agreement["overall"].point == pytest.approx(6 / 8)
    # every judge row of the leaderboard carries its number beside the human row
    by_label = {row.label: row for row in analysis.leaderboard}
    assert by_label["test:judge"].vs_annotators == judge.agreement.pooled
    assert by_label["test:first"].vs_annotators is not None


def test_intervals_come_from_the_weight_matrix_every_other_interval_uses() -> None:
    runs = annotated_runs()
    analysis = analyze(runs, n_resamples=250, seed=11)
    human = analysis.human
    assert human is not None
    strata = np.asarray(runs[0].groups["organ_system"], dtype=object)
    weights = stats.bootstrap_weights(4, 250, 11, strata)
    panel = panel_agreement(runs[0].ratings, weights)  # type: ignore[arg-type]
    loo = loo_agreement(runs[0].ratings, [r.verdicts for r in runs], weights)  # type: ignore[arg-type]
    assert human.agreement.fleiss_kappa.pooled.low == pytest.approx(panel.fleiss_kappa.low[-1], abs=1e-6)
    assert human.agreement.fleiss_kappa.pooled.high == pytest.approx(panel.fleiss_kappa.high[-1], abs=1e-6)
    assert human.human.pooled.low == pytest.approx(loo.human.low[-1], abs=1e-6)
    judge = human.judge("test:judge")
    assert judge is not None and judge.gap.pooled.high == pytest.approx(loo.gap.high[0, -1], abs=1e-6)
    # the judge's accuracy interval comes from the same matrix: the analysis recomputes it identically
    accuracy = stats.ratio_ci(*stats.case_counts(runs[0].verdicts, runs[0].labels), weights=weights, confidence=0.95)
    assert analysis.run("test:judge").accuracy["overall"].low == pytest.approx(accuracy.low[-1], abs=1e-6)
    assert judge.agreement.pooled.has_interval and human.human.pooled.has_interval


def test_no_annotations_no_human_section_and_no_vs_annotators() -> None:
    runs = [run_data("judge", JUDGE, None)]
    analysis = analyze(runs, n_resamples=50)
    assert analysis.human is None
    assert all(row.vs_annotators is None for row in analysis.leaderboard)
    points = analyze(annotated_runs(), n_resamples=0)
    assert points.human is not None and not points.human.human.pooled.has_interval


def test_the_human_section_round_trips_through_its_file() -> None:
    analysis = analyze(annotated_runs(), n_resamples=120, seed=2)
    text = json.dumps(analysis.to_json(), allow_nan=False)
    back = Analysis.from_json(json.loads(text))
    assert back == analysis and back.human == analysis.human
    assert back.to_json() == analysis.to_json()
    document = json.loads(text)
    assert document["human"]["label"] == HUMAN_LABEL and "strict majority" in document["human"]["targets"]
    assert document["leaderboard"][0]["vs_annotators"]["n"] > 0


def test_runs_whose_stores_hold_other_annotations_are_refused() -> None:
    first = run_data("judge", JUDGE, all_dimensions(PANEL), NAMES)
    changed = all_dimensions(PANEL).copy()
    changed[0, 0] = 2
    other = run_data("other", JUDGE, changed, NAMES)
    with pytest.raises(StoreError, match="different per-annotator labels.*run eval again"):
        check_same_data([first, other])
    with pytest.raises(StoreError, match="different per-annotator labels"):
        check_same_data([first, run_data("renamed", JUDGE, all_dimensions(PANEL), ("x", "y", "z"))])


def test_a_run_stored_before_annotations_were_kept_takes_them_from_the_others() -> None:
    old = run_data("old", np.array([(1, 2)] * 4, dtype=np.int8), None)  # its store predates the column
    analysis = analyze([old, *annotated_runs()], n_resamples=0)
    assert analysis.human is not None and analysis.human.annotators == NAMES
    first = analysis.human.judge("test:old")
    assert first is not None and first.agreement.pooled.defined
    later = analyze([*annotated_runs(), old], n_resamples=0).human
    assert later is not None and later.human == analysis.human.human and later.agreement == analysis.human.agreement


def test_undefined_statistics_are_nan_not_errors() -> None:
    unanimous = np.array([[1, 1], [1, 1]], dtype=np.int8)  # one category only: kappa undefined
    panel = panel_agreement(one_dimension(unanimous), stats.bootstrap_weights(2, 30, 0))
    assert panel.percent_agreement.point[0] == 1.0
    assert math.isnan(panel.fleiss_kappa.point[0]) and math.isnan(panel.krippendorff_alpha.point[0])
    assert math.isnan(panel.fleiss_kappa.low[0])
    alone = np.array([[1, 0], [0, 2]], dtype=np.int8)  # nobody shares a case: nothing pairable
    loo = loo_agreement(one_dimension(alone), [], no_resamples(2))
    assert math.isnan(loo.human.point[0]) and loo.human.n[0] == 0
    with pytest.raises(ValueError, match="ratings"):
        panel_agreement(np.array([[3, 1]]), no_resamples(1))

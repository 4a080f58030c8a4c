"""Agreement statistics between annotators, against published worked examples and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrewardbench.metrics.annotators import (
    agreement_with_loo_majorities,
    category_counts,
    dimension_agreement,
    fleiss_kappa,
    fleiss_kappa_counts,
    krippendorff_alpha_nominal,
    leave_one_out_agreement,
    leave_one_out_majority,
    majority_vote,
    pairwise_agreement,
    pairwise_agreement_matrix,
)

# Fleiss (1971), Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses (1 depression,
# 2 personality disorder, 3 schizophrenia, 4 neurosis, 5 other), one row of diagnoses per patient
# as the R package irr ships it (dataset "diagnoses"); kappam.fleiss gives 0.4302445.
FLEISS_1971 = np.array(
    [
        [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5],
        [2, 2, 2, 4, 4, 4], [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4],
        [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5], [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4],
        [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5], [3, 3, 3, 3, 3, 5],
        [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4],
        [1, 4, 4, 4, 4, 5], [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
    ]
)  # fmt: skip

# The worked example of Fleiss' kappa on Wikipedia: 10 subjects, 14 raters, 5 categories, kappa 0.210.
WIKIPEDIA_FLEISS_COUNTS = np.array(
    [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]
)  # fmt: skip

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: reliability data of
# 4 observers x 12 units with missing values (NaN); nominal alpha = 0.743. Transposed to items x raters.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
).T

# The computational example of Krippendorff's alpha on Wikipedia: 3 coders x 15 units; nominal 0.691.
WIKIPEDIA_ALPHA = np.array(
    [
        [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
        [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
        [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
    ]
).T

# Hand-computed: three raters, three items, binary labels.
#   item 1: 1 1 1    item 2: 1 1 2    item 3: 2 2 1
# Fleiss: P_i = 1, 1/3, 1/3 -> P_bar = 5/9; p = (2/3, 1/3) -> P_e = 5/9 -> kappa = 0.
# Krippendorff: o11 = 3 + 1 = 4, o12 = o21 = 1 + 1 = 2, o22 = 1; n1 = 6, n2 = 3, n = 9
#   -> alpha = 1 - 8 * 4 / (2 * 6 * 3) = 1/9.
# Pairwise: agreeing ordered pairs 6 + 2 + 2 of 18 -> 5/9.
SMALL = np.array([[1, 1, 1], [1, 1, 2], [2, 2, 1]])


def test_fleiss_kappa_reproduces_fleiss_1971_table_1() -> None:
    counts, categories = category_counts(FLEISS_1971)
    assert categories == (1, 2, 3, 4, 5)
    assert counts.sum(axis=0).tolist() == [26, 26, 30, 55, 43]
    assert fleiss_kappa(FLEISS_1971) == pytest.approx(0.4302445, abs=1e-7)
    assert fleiss_kappa_counts(counts) == pytest.approx(0.4302445, abs=1e-7)


def test_fleiss_kappa_reproduces_the_wikipedia_worked_example() -> None:
    assert fleiss_kappa_counts(WIKIPEDIA_FLEISS_COUNTS) == pytest.approx(0.210, abs=5e-4)


def test_krippendorff_alpha_reproduces_the_2011_example_with_missing_values() -> None:
    assert krippendorff_alpha_nominal(KRIPPENDORFF_2011) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_reproduces_the_wikipedia_example() -> None:
    assert krippendorff_alpha_nominal(WIKIPEDIA_ALPHA) == pytest.approx(0.691, abs=5e-4)


def test_hand_computed_small_case() -> None:
    assert fleiss_kappa(SMALL) == pytest.approx(0.0, abs=1e-12)
    assert krippendorff_alpha_nominal(SMALL) == pytest.approx(1 / 9)
    assert pairwise_agreement(SMALL) == pytest.approx(5 / 9)
    assert majority_vote(SMALL).tolist() == [1, 1, 2]


def test_majority_is_strict_and_ties_give_no_label() -> None:
    ratings = np.array(
        [
            [1, 2, 0],  # 1 vs 1: tie
            [1, 1, 0],  # 2 of 2
            [0, 0, 0],  # nothing
            [2, 1, 2],  # 2 of 3
            [1, 2, 3],  # plurality of one third: no strict majority
            [3, 3, 1],
        ]
    )
    assert majority_vote(ratings).tolist() == [0, 1, 0, 2, 0, 3]


def test_leave_one_out_majority_and_agreement_by_hand() -> None:
    # rater 0: others (1,1)->1, (1,2) tie, (2,1) tie   -> 1 compared, 1 agrees
    # rater 1: the same as rater 0                       -> 1 of 1
    # rater 2: others (1,1)->1, (1,1)->1, (2,2)->2      -> 3 compared, only item 1 agrees
    loo = leave_one_out_majority(SMALL)
    assert loo.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 2]]
    result = leave_one_out_agreement(SMALL)
    assert result.n.tolist() == [1, 1, 3]
    assert result.agreement.tolist() == pytest.approx([1.0, 1.0, 1 / 3])
    assert result.pooled == pytest.approx(3 / 5)


def test_an_outside_predictor_is_scored_against_the_same_leave_one_out_majorities() -> None:
    # a predictor that always says 1: rater 0 and 1 compare on item 1 (ref 1): 1/1;
    # rater 2 compares on items 1, 2, 3 with refs 1, 1, 2: 2/3.
    result = agreement_with_loo_majorities(np.array([1, 1, 1]), SMALL)
    assert result.n.tolist() == [1, 1, 3]
    assert result.agreement.tolist() == pytest.approx([1.0, 1.0, 2 / 3])
    # a missing prediction counts as a disagreement
    missing = agreement_with_loo_majorities(np.array([0, 1, 1]), SMALL)
    assert missing.agreement.tolist() == pytest.approx([0.0, 0.0, 1 / 3])
    with pytest.raises(ValueError, match="predictions must have shape"):
        agreement_with_loo_majorities(np.array([1, 1]), SMALL)


def test_missing_ratings_are_left_out_and_single_ratings_are_not_pairable() -> None:
    ratings = np.array([[1, 1, 0], [2, 0, 0], [2, 2, 1]])
    # item 2 has one rating: not pairable. Pairs: item 1 -> 2 agreeing of 2, item 3 -> 2 of 6
    assert pairwise_agreement(ratings) == pytest.approx(4 / 8)
    nan_version = np.where(ratings == 0, np.nan, ratings.astype(float))
    assert fleiss_kappa(nan_version) == pytest.approx(fleiss_kappa(ratings))
    assert krippendorff_alpha_nominal(nan_version) == pytest.approx(krippendorff_alpha_nominal(ratings))


def test_undefined_statistics_are_nan() -> None:
    unanimous = np.ones((4, 3), dtype=int)
    assert math.isnan(fleiss_kappa(unanimous))
    assert math.isnan(krippendorff_alpha_nominal(unanimous))
    assert pairwise_agreement(unanimous) == 1.0
    lonely = np.array([[1, 0], [0, 2]])
    assert math.isnan(fleiss_kappa(lonely))
    assert math.isnan(krippendorff_alpha_nominal(lonely))
    assert math.isnan(pairwise_agreement(lonely))
    assert math.isnan(fleiss_kappa(np.zeros((0, 3), dtype=int)))


def test_perfect_agreement_over_both_categories_is_one() -> None:
    ratings = np.array([[1, 1, 1], [2, 2, 2], [1, 1, 1], [2, 2, 2]])
    assert fleiss_kappa(ratings) == pytest.approx(1.0)
    assert krippendorff_alpha_nominal(ratings) == pytest.approx(1.0)


def test_pairwise_agreement_matrix_counts_shared_items() -> None:
    ratings = np.array([[1, 1, 0], [2, 1, 1], [2, 2, 2]])
    share, shared = pairwise_agreement_matrix(ratings)
    assert shared.tolist() == [[3, 3, 2], [3, 3, 2], [2, 2, 2]]
    assert share[0, 1] == pytest.approx(2 / 3)
    assert share[0, 2] == pytest.approx(1 / 2)
    assert share[1, 2] == pytest.approx(1.0)
    assert np.allclose(np.diag(share), 1.0)


def test_invalid_input_is_refused() -> None:
    with pytest.raises(ValueError, match="2-D"):
        fleiss_kappa(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="whole numbers"):
        fleiss_kappa(np.array([[1.5, 1.0]]))
    with pytest.raises(ValueError, match="not among the categories"):
        category_counts(np.array([[1, 3]]), categories=(1, 2))
    with pytest.raises(ValueError, match="non-negative"):
        fleiss_kappa_counts(np.array([[-1, 2]]))


def test_dimension_agreement_gives_every_figure_per_dimension() -> None:
    ratings = np.stack([SMALL, np.array([[1, 1, 1], [2, 2, 2], [1, 1, 0]])], axis=2)
    first, second = dimension_agreement(ratings, ["accuracy", "overall"])
    assert first.dimension == "accuracy" and first.n_items == 3 and first.n_ratings == 9
    assert first.fleiss_kappa == pytest.approx(0.0, abs=1e-12)
    assert first.krippendorff_alpha == pytest.approx(1 / 9)
    assert first.majority_share == 1.0
    assert second.percent_agreement == 1.0 and second.fleiss_kappa == pytest.approx(1.0)
    assert second.n_ratings == 8
    assert second.vs_others.agreement.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="shape"):
        dimension_agreement(SMALL, ["accuracy"])


ratings_strategy = st.integers(2, 8).flatmap(
    lambda items: st.integers(2, 5).flatmap(
        lambda raters: st.lists(
            st.lists(st.integers(0, 3), min_size=raters, max_size=raters), min_size=items, max_size=items
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(ratings_strategy, st.randoms(use_true_random=False))
def test_statistics_do_not_depend_on_rater_order_item_order_or_category_names(rows: list[list[int]], rng) -> None:  # type: ignore[no-untyped-def]
    ratings = np.array(rows)
    raters = list(range(ratings.shape[1]))
    items = list(range(ratings.shape[0]))
    rng.shuffle(raters)
    rng.shuffle(items)
    shuffled = ratings[items][:, raters]
    renamed = np.where(ratings == 0, 0, ratings + 10)
    for func in (fleiss_kappa, krippendorff_alpha_nominal, pairwise_agreement):
        base = func(ratings)
        for other in (func(shuffled), func(renamed)):
            assert (math.isnan(base) and math.isnan(other)) or other == pytest.approx(base)
    assert sorted(majority_vote(shuffled).tolist()) == sorted(majority_vote(ratings).tolist())

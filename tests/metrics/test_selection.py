"""Picking pairs for the doctors: the K least confident, ties in a seeded order, R uniformly from the rest."""

from __future__ import annotations

import numpy as np
import pytest

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.confidence import CaseVerdicts, ConfidenceSource
from medrewardbench.metrics.selection import (
    LEAST_CONFIDENT,
    RANDOM,
    SelectionError,
    case_ranking,
    pick_design,
    read_case_selection,
)


def verdicts(p_first: np.ndarray, source: ConfidenceSource = "order agreement") -> CaseVerdicts:
    n = p_first.shape[0]
    return CaseVerdicts(
        run_id="run1",
        judge_spec="baseline:longer",
        case_ids=tuple(f"c{i:03d}" for i in range(n)),
        p_first=p_first,
        labels=np.zeros((n, len(DIMENSIONS)), dtype=np.int8),
        groups={},
        source=source,
    )


def test_the_least_confident_come_first_and_the_random_slice_is_from_the_rest() -> None:
    p = np.full((50, len(DIMENSIONS)), 1.0)
    p[[3, 17, 41]] = 0.5  # the two orders disagreed on these
    p[8, 0] = np.nan  # no verdict on one dimension
    design = pick_design(verdicts(p), least_confident=4, random=10, seed=1)
    assert set(design.least_confident_ids) == {"c003", "c017", "c041", "c008"}
    assert not set(design.random_ids) & set(design.least_confident_ids)
    assert len(set(design.random_ids)) == 10
    assert design.case_metadata("c003")["stratum"] == LEAST_CONFIDENT
    assert design.case_metadata(design.random_ids[0])["stratum"] == RANDOM
    with pytest.raises(KeyError):
        design.case_metadata("not-picked")


def test_ties_are_broken_by_the_seed_and_one_seed_gives_one_slice() -> None:
    p = np.full((40, len(DIMENSIONS)), 0.5)
    a = pick_design(verdicts(p), least_confident=5, random=5, seed=7)
    b = pick_design(verdicts(p), least_confident=5, random=5, seed=7)
    c = pick_design(verdicts(p), least_confident=5, random=5, seed=8)
    assert a == b and a.design_id == b.design_id
    assert a.least_confident_ids != c.least_confident_ids
    assert a.design_id != c.design_id


def test_the_random_slice_is_uniform_over_the_remaining_pairs() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(30, len(DIMENSIONS)))
    data = verdicts(p)
    counts: dict[str, int] = {}
    repeats = 3000
    for seed in range(repeats):
        design = pick_design(data, least_confident=10, random=5, seed=seed)
        for cid in design.random_ids:
            counts[cid] = counts.get(cid, 0) + 1
    assert len(counts) == 20  # never one of the 10 least confident
    expected = repeats * 5 / 20
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 43.8  # the 0.999 quantile of chi-square with 19 degrees of freedom


def test_the_ranking_by_one_dimension() -> None:
    p = np.full((6, len(DIMENSIONS)), 1.0)
    p[2, DIMENSIONS.index("overall")] = 0.5
    p[4, 0] = 0.5
    assert case_ranking(verdicts(p), "overall").argmin() == 2
    design = pick_design(verdicts(p), least_confident=1, random=0, ranked_by="overall")
    assert design.least_confident_ids == ("c002",)
    with pytest.raises(SelectionError, match="unknown ranking"):
        case_ranking(verdicts(p), "kindness")


def test_sizes_beyond_the_pool_and_a_run_without_confidence_are_refused() -> None:
    p = np.full((10, len(DIMENSIONS)), 1.0)
    with pytest.raises(SelectionError, match="K \\+ R = 6 \\+ 5 = 11 is more than the 10 cases"):
        pick_design(verdicts(p), least_confident=6, random=5)
    with pytest.raises(SelectionError, match="nothing to pick"):
        pick_design(verdicts(p), least_confident=0, random=0)
    with pytest.raises(SelectionError, match="no confidence"):
        pick_design(verdicts(p, "none"), least_confident=2, random=2)
    assert len(pick_design(verdicts(p, "none"), least_confident=0, random=4).random_ids) == 4


def test_a_case_selection_is_read_back_and_checked() -> None:
    design = pick_design(verdicts(np.full((5, len(DIMENSIONS)), 0.5)), least_confident=1, random=1)
    cid = design.least_confident_ids[0]
    assert read_case_selection({"selection": design.case_metadata(cid)}, "f") == design.case_metadata(cid)
    assert read_case_selection({}, "f") is None
    with pytest.raises(SelectionError, match="f: metadata.selection must be an object"):
        read_case_selection({"selection": {"design": "x"}}, "f")
    with pytest.raises(SelectionError, match="stratum"):
        read_case_selection({"selection": {**design.case_metadata(cid), "stratum": "other"}}, "f")

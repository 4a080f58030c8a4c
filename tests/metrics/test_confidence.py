"""Case-level preferences and confidences (metrics/confidence.py) on fixed arrays."""

from __future__ import annotations

import numpy as np
import pytest

from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData


def _run(verdicts: list[list[int]], labels: list[int], preferences: list[list[float]] | None = None) -> RunData:
    n = len(verdicts)
    v = np.repeat(np.array(verdicts, dtype=np.int8)[:, :, None], 6, axis=2)
    lab = np.repeat(np.array(labels, dtype=np.int8)[:, None], 6, axis=1)
    prefs = None if preferences is None else np.repeat(np.array(preferences, dtype=np.float64)[:, :, None], 6, axis=2)
    return RunData(
        run_id="r",
        judge_spec="baseline:x",
        data_hash="h",
        case_ids=tuple(f"c{i}" for i in range(n)),
        verdicts=v,
        labels=lab,
        lengths=np.zeros((n, 2), dtype=np.int64),
        groups={},
        orders=(),
        preferences=prefs,
    )


def test_order_agreement_gives_one_or_one_half_and_failures_give_none() -> None:
    # agree on 1 / disagree / one order failed, other says 2 / both failed / not run + failed
    cv = case_verdicts(_run([[1, 1], [1, 2], [0, 2], [0, 0], [-1, 0]], [1, 2, 1, 1, 0]))
    assert cv.source == "order agreement"
    np.testing.assert_array_equal(cv.p_first[:, 0], [1.0, 0.5, 0.0, np.nan, np.nan])
    np.testing.assert_array_equal(cv.confidence[:, 0], [1.0, 0.5, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(cv.verdict[:, 0], [1, 0, 2, 0, 0])
    # right / tie counts half / wrong / no verdict counts wrong / no label: not counted
    np.testing.assert_array_equal(cv.correct[:, 0], [1.0, 0.5, 0.0, 0.0, np.nan])
    np.testing.assert_allclose(cv.entropy[:3, 0], [0.0, 1.0, 0.0])
    assert np.isnan(cv.entropy[3, 0])


def test_one_order_without_probabilities_has_no_confidence_source() -> None:
    cv = case_verdicts(_run([[1, -1], [2, -1]], [1, 1]))
    assert cv.source == "none"


def test_probabilities_are_averaged_over_orders_only_beside_a_verdict() -> None:
    cv = case_verdicts(
        _run(
            [[1, 1], [1, 2], [0, 1]],
            [1, 1, 1],
            # the third case's first order failed: its probability is not used
            [[0.9, 0.7], [0.6, 0.2], [0.1, 0.8]],
        )
    )
    assert cv.source == "probability"
    np.testing.assert_allclose(cv.p_first[:, 0], [0.8, 0.4, 0.8])
    np.testing.assert_allclose(cv.confidence[:, 0], [0.8, 0.6, 0.8])
    np.testing.assert_array_equal(cv.verdict[:, 0], [1, 2, 1])
    h = -(0.8 * np.log2(0.8) + 0.2 * np.log2(0.2))
    assert cv.entropy[0, 0] == pytest.approx(h)


def test_a_request_with_a_verdict_but_no_probability_falls_back_to_its_verdict() -> None:
    cv = case_verdicts(_run([[1, 2]], [1], [[0.7, np.nan]]))
    assert cv.p_first[0, 0] == pytest.approx(0.35)


def test_subset_keeps_preferences() -> None:
    data = _run([[1, 1], [2, 2]], [1, 2], [[0.9, 0.9], [0.1, 0.2]])
    sub = data.subset(np.array([False, True]))
    assert sub.preferences is not None and sub.preferences.shape == (1, 2, 6)

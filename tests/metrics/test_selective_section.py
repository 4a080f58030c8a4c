"""The analysis' calibration and abstention section: built per judge with the settings given,
written and read back by the codec, absent (None) in older analysis files and without labels,
and honest about a judge without any confidence."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.results import NO_CONFIDENCE, Analysis
from medrewardbench.metrics.selective_section import SelectiveSettings

N = 300
D = len(DIMENSIONS)


def _run(run_id: str, *, probabilities: bool, one_order: bool = False, seed: int = 0, labelled: bool = True) -> RunData:
    """A judge right with probability equal to its confidence (calibrated), over N cases and both orders."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(1, 3, size=(N, D)).astype(np.int8)
    conf = rng.uniform(0.5, 1.0, size=(N, D))
    right = rng.random((N, D)) < conf
    winner = np.where(right, labels, 3 - labels).astype(np.int8)
    verdicts = np.stack([winner, winner], axis=1)
    p_first = np.where(winner == 1, conf, 1 - conf)
    preferences = np.stack([p_first, p_first], axis=1) if probabilities else None
    if one_order:
        verdicts[:, 1] = -1
    return RunData(
        run_id=run_id,
        judge_spec=f"test:{run_id}",
        data_hash="sim",
        case_ids=tuple(f"c{i}" for i in range(N)),
        verdicts=verdicts,
        labels=labels if labelled else np.zeros_like(labels),
        lengths=np.full((N, 2), 10, dtype=np.int64),
        groups={"organ_system": tuple(("brain", "chest", "heart")[i % 3] for i in range(N))},
        orders=(Order.ORIGINAL,) if one_order else (Order.ORIGINAL, Order.SWAPPED),
        preferences=preferences,
    )


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    runs = [
        _run("soft", probabilities=True),
        _run("hard", probabilities=False),
        _run("once", probabilities=False, one_order=True),
    ]
    settings = SelectiveSettings(alpha=0.15, delta=0.2, recalibration="temperature")
    return analyze(runs, n_resamples=200, seed=4, selective=settings)


def test_every_judge_gets_calibration_and_abstention_with_the_settings(analysis: Analysis) -> None:
    section = analysis.selective
    assert section is not None
    assert (section.alpha, section.delta, section.recalibration, section.seed) == (0.15, 0.2, "temperature", 4)
    assert section.calibration_cases == 150 and section.heldout_cases == 150
    soft = section.judge("test:soft")
    assert soft is not None and soft.source == "probability"
    assert soft.calibration is not None and soft.recalibrated is not None and soft.abstention is not None
    assert soft.calibration.n.pooled == N * D
    brier = soft.calibration.brier.pooled
    assert brier.low < brier.point < brier.high
    assert soft.calibration.ece.pooled.point < 0.05  # calibrated by construction
    assert sum(b.n for b in soft.calibration.reliability) == N * D
    pooled = soft.abstention.pooled
    assert pooled.qualified and 0 < pooled.coverage < 1 and pooled.n == 150 * D
    hard = section.judge("test:hard")
    assert hard is not None and hard.source == "order agreement"
    assert {b.n > 0 for b in hard.calibration.reliability} == {True, False}  # type: ignore[union-attr]


def test_a_judge_without_confidence_says_so(analysis: Analysis) -> None:
    once = analysis.selective.judge("test:once")  # type: ignore[union-attr]
    assert once is not None and once.source == "none" and once.note == NO_CONFIDENCE
    assert once.calibration is None and once.abstention is None
    row = next(r for r in analysis.leaderboard if r.label == "test:once")
    assert math.isnan(row.coverage_at_risk)
    soft_row = next(r for r in analysis.leaderboard if r.label == "test:soft")
    assert soft_row.coverage_at_risk == analysis.selective.judge("test:soft").abstention.pooled.coverage  # type: ignore[union-attr]


def test_the_section_round_trips_and_older_files_read_without_it(analysis: Analysis) -> None:
    document = json.loads(json.dumps(analysis.to_json(), allow_nan=False))
    assert Analysis.from_json(document) == analysis
    del document["selective"]
    for row in document["leaderboard"]:
        del row["coverage_at_risk"]
    old = Analysis.from_json(document)
    assert old.selective is None and all(math.isnan(r.coverage_at_risk) for r in old.leaderboard)


def test_unlabelled_data_has_no_section() -> None:
    result = analyze([_run("soft", probabilities=True, labelled=False)], n_resamples=0)
    assert result.selective is None


def test_bad_settings_name_the_option() -> None:
    with pytest.raises(ValueError, match="--recalibrate 'platt'"):
        SelectiveSettings(recalibration="platt")
    with pytest.raises(ValueError, match="--risk"):
        SelectiveSettings(alpha=1.5)

"""The typed results: numbers at the JSON boundary, tables, and every record's JSON round trip."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import ResultsFormatError
from medrewardbench.metrics.results import (
    COLUMNS,
    HUMAN_LABEL,
    POOLED,
    AccuracyCell,
    Analysis,
    AnnotatorAgreement,
    ColumnTable,
    DimensionTable,
    Estimate,
    HumanCeiling,
    JudgeVsAnnotators,
    LeaderboardRow,
    PairwiseComparison,
    PanelAgreement,
    PositionCell,
    RequestCounts,
    RunMetrics,
    Settings,
    fixed,
    number,
    p_number,
)


def through_json(document: object) -> object:
    """What a file holds: strict JSON, no NaN."""
    return json.loads(json.dumps(document, allow_nan=False))


def test_numbers_round_as_numpy_does_and_nan_becomes_null() -> None:
    rng = np.random.default_rng(0)
    values = [*(rng.random(2000) * 2 - 1), *(k / n for n in range(1, 60) for k in range(n + 1)), 2.5e-6, -1e-9]
    for value in values:
        expected = float(np.round(np.float64(value), 6))
        got = number(float(value))
        assert got == expected and math.copysign(1, got) == math.copysign(1, expected), value
    assert number(math.nan) is None and math.isnan(fixed(None)) and math.isnan(fixed(math.nan))
    assert fixed(np.float64(0.1234567)) == 0.123457 and type(fixed(np.float64(0.5))) is float


def test_tiny_p_values_keep_significant_digits() -> None:
    assert p_number(0.0123456789) == 0.012346 and p_number(0.001) == 0.001
    assert p_number(0.000345678) == 0.0003457  # six decimals would keep three digits, or none at all
    assert p_number(2.9e-70) == 2.9e-70 and p_number(1.23456e-9) == 1.235e-9
    assert p_number(0.0) == 0.0 and p_number(math.nan) is None


def test_estimates_hold_nan_for_undefined_and_compare_equal() -> None:
    undefined = Estimate(float("nan"), np.float64("nan"), None, np.int64(0))
    assert not undefined.defined and not undefined.has_interval
    assert undefined == Estimate(math.nan)  # NaN is one object in records, so records compare equal
    assert undefined.to_json() == {"point": None, "low": None, "high": None, "n": 0}
    assert Estimate.from_json(through_json(undefined.to_json())) == undefined
    point_only = Estimate(0.25, n=4)
    assert point_only.point_to_json() == {"point": 0.25, "n": 4}
    assert Estimate.from_json(point_only.point_to_json()) == point_only


def test_tables_are_read_by_dimension_and_pooled_column() -> None:
    table = ColumnTable.of([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.35])
    assert table["relevance"] == 0.2 and table["overall"] == 0.6 and table.pooled == 0.35
    assert table[POOLED] == 0.35
    assert [name for name, _ in table.columns()] == list(COLUMNS)
    assert table.to_json(number) == dict(zip(COLUMNS, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.35], strict=True))
    assert ColumnTable.from_json(table.to_json(number), float) == table
    with pytest.raises(KeyError, match="unknown dimension 'beauty'"):
        table["beauty"]
    with pytest.raises(ValueError, match="needs 7 values"):
        ColumnTable.of([1, 2])
    with pytest.raises(ValueError, match="needs 6 values"):
        DimensionTable((1, 2, 3))


def _comparison(**changes: object) -> PairwiseComparison:
    fields: dict[str, object] = dict(
        a="judge-a",
        b="judge-b",
        column=POOLED,
        acc_a=0.7,
        acc_b=0.5,
        diff=0.2,
        low=0.1,
        high=0.3,
        p_bootstrap=0.002,
        p_bootstrap_holm=0.004,
        significant=True,
        cases_a_better=30,
        cases_b_better=10,
        p_case=1.5e-9,
        p_case_holm=3e-9,
        n_pairs=200,
    )
    fields.update(changes)
    return PairwiseComparison(**fields)


def test_a_pairwise_comparison_flips_and_round_trips() -> None:
    comparison = _comparison()
    flipped = comparison.flipped()
    assert (flipped.a, flipped.b, flipped.acc_a, flipped.acc_b) == ("judge-b", "judge-a", 0.5, 0.7)
    assert (flipped.diff, flipped.low, flipped.high) == (-0.2, -0.3, -0.1)
    assert (flipped.cases_a_better, flipped.cases_b_better) == (10, 30) and flipped.flipped() == comparison
    assert comparison.is_pooled and comparison.difference == Estimate(0.2, 0.1, 0.3, 200)
    written = comparison.to_json()
    assert written["dimension"] == POOLED and written["p_case"] == 1.5e-9
    assert PairwiseComparison.from_json(through_json(written)) == comparison


def test_a_pairwise_comparison_of_an_older_file_does_not_read_mcnemar_as_the_case_test() -> None:
    # analysis.json schema 1-2 and cv.json version 3 held a per-request McNemar test instead
    written = _comparison().to_json()
    for key in ("cases_a_better", "cases_b_better", "p_case", "p_case_holm"):
        del written[key]
    written.update(mcnemar_b=30, mcnemar_c=10, p_mcnemar=1.5e-9, p_mcnemar_holm=3e-9)
    old = PairwiseComparison.from_json(through_json(written))
    assert math.isnan(old.p_case) and math.isnan(old.p_case_holm)
    assert (old.cases_a_better, old.cases_b_better) == (0, 0) and old.p_bootstrap == 0.002


def test_a_leaderboard_row_without_tests_round_trips() -> None:
    estimates = DimensionTable(tuple(Estimate(0.5 + i / 100, n=68) for i in range(len(DIMENSIONS))))
    row = LeaderboardRow(
        rank=1,
        label="baseline:longer",
        judge="baseline:longer",
        run_id="run-1",
        is_baseline=True,
        tier=None,
        score=Estimate(0.525, n=408),
        macro=None,
        accuracy=estimates,
        tiers=None,
        answered_accuracy=0.525,
        failure_rate=0.0,
        consistency=1.0,
        first_position_rate=0.5,
        longer_preference=math.nan,
        kappa_overall=0.35,
    )
    written = through_json(row.to_json())
    assert written["tier"] is None and written["longer_preference"] is None
    assert written["vs_annotators"] is None
    assert LeaderboardRow.from_json(written) == row
    with_ceiling = LeaderboardRow.from_json(
        {**written, "vs_annotators": {"point": 0.6, "low": 0.5, "high": 0.7, "n": 90}}
    )
    assert with_ceiling.vs_annotators == Estimate(0.6, 0.5, 0.7, 90)
    assert LeaderboardRow.from_json(through_json(with_ceiling.to_json())) == with_ceiling


def _column(point: float, n: int = 10) -> ColumnTable[Estimate]:
    return ColumnTable.of([Estimate(point, fixed(point - 0.1), fixed(point + 0.1), n)] * 6 + [Estimate(point, n=6 * n)])


def test_the_human_ceiling_records_round_trip_undefined_values_included() -> None:
    undefined = ColumnTable.of([Estimate(math.nan, n=0)] * 7)  # a group where everybody agreed: no kappa
    panel = PanelAgreement(
        n_cases=12, percent_agreement=_column(0.9), fleiss_kappa=_column(0.7), krippendorff_alpha=_column(0.71)
    )
    single = PanelAgreement(
        n_cases=1, percent_agreement=_column(1.0, 1), fleiss_kappa=undefined, krippendorff_alpha=undefined
    )
    human = HumanCeiling(
        annotators=("dr_a", "dr_b", "dr_c"),
        n_cases=12,
        n_annotations=36,
        agreement=panel,
        by_group={"brain": panel, "lung": single},
        human=_column(0.88),
        annotators_vs_others=(AnnotatorAgreement("dr_a", 12, _column(0.9)), AnnotatorAgreement("dr_b", 11, undefined)),
        judges=(JudgeVsAnnotators("api:gpt", "run-1", False, _column(0.8), _column(-0.08)),),
    )
    written = through_json(human.to_json())
    assert written["label"] == HUMAN_LABEL and written["group_field"] == "organ_system"
    assert written["by_group"]["lung"]["fleiss_kappa"]["overall"]["point"] is None
    back = HumanCeiling.from_json(written)
    assert back == human and math.isnan(back.by_group["lung"].fleiss_kappa.pooled.point)
    assert back.judge("api:gpt") == human.judges[0] and back.judge("nobody") is None
    for record in (panel, human.annotators_vs_others[0], human.judges[0]):
        assert type(record).from_json(through_json(record.to_json())) == record


def test_run_metrics_round_trip_and_derive_their_ratios_from_counts() -> None:
    cells = ColumnTable.of([AccuracyCell(68, 40, 60)] * 6 + [AccuracyCell(408, 240, 360)])
    empty = ColumnTable.of([AccuracyCell(0, 0, 0)] * 7)
    metrics = RunMetrics(
        n_cases=34,
        orders=("original", "swapped"),
        accuracy=cells,
        by_order={"original": cells, "swapped": empty},
        by={"organ_system": {"chest": cells, "brain": empty}},
        macro=ColumnTable.of([0.6] * 6 + [math.nan]),
        position=ColumnTable.of([PositionCell(34, 20, 60, 31)] * 7),
        requests=RequestCounts(68, 8),
        failures={"timeout": 3, "HTTP 500": 5},
    )
    written = through_json(metrics.to_json())
    assert written["score"] == pytest.approx(240 / 408, abs=1e-6)
    assert written["dimensions"][POOLED] == {
        "n": 408,
        "correct": 240,
        "answered": 360,
        "accuracy": number(240 / 408),
        "answered_accuracy": number(240 / 360),
        "failure_rate": number(48 / 408),
    }
    assert written["by_order"]["swapped"]["overall"]["accuracy"] is None
    back = RunMetrics.from_json(written)
    assert back.accuracy == metrics.accuracy and back.position == metrics.position
    assert list(back.failures) == ["HTTP 500", "timeout"]  # most frequent first, as every reader expects
    assert math.isnan(back.by_order["swapped"]["overall"].accuracy)
    assert back.to_json() == written


def test_documents_of_another_schema_are_refused() -> None:
    with pytest.raises(ResultsFormatError, match="expected schema 'medrewardbench.analysis/3'"):
        Analysis.from_json({"schema": "medrewardbench.metrics/2"})
    settings = Settings(confidence=0.95, n_resamples=100, seed=0, alpha=0.05, group_fields=("organ_system",))
    written = settings.to_json()
    assert written["score"] == POOLED and written["columns"] == list(COLUMNS)
    assert Settings.from_json(written) == settings
    with pytest.raises(ResultsFormatError, match="dimensions"):
        Settings.from_json({**written, "dimensions": ["accuracy"]})

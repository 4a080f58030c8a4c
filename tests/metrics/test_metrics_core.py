import math

import numpy as np
import pytest
from helpers.cases import RecordingJudge, make_benchmark

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.runner import run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import (
    RunData,
    accuracy_cells,
    grouped_accuracy,
    load_run_data,
    macro_accuracy,
    position_cells,
    run_metrics,
)
from medrewardbench.metrics.results import RequestCounts, RunMetrics


def arrays(rows: list[tuple[int, int]], labels: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (original, swapped) verdicts and the expert label per case, the same on every dimension."""
    v = np.repeat(np.array(rows, dtype=np.int8)[:, :, None], len(DIMENSIONS), axis=2)
    lab = np.repeat(np.array(labels, dtype=np.int8)[:, None], len(DIMENSIONS), axis=1)
    return v, lab


def test_accuracy_counts_failures_wrong_and_skips_unlabelled_and_unrun() -> None:
    # case0: right, right | case1: right, failed | case2: wrong, not run | case3: unlabelled
    v, lab = arrays([(1, 1), (2, 0), (1, -1), (1, 1)], [1, 2, 2, 0])
    cells = accuracy_cells(v, lab)
    cell = cells["accuracy"]
    assert (cell.n, cell.correct, cell.answered) == (5, 3, 4)
    assert cell.accuracy == pytest.approx(3 / 5)
    assert cell.answered_accuracy == pytest.approx(3 / 4)
    assert cell.failure_rate == pytest.approx(1 / 5)
    pooled = cells.pooled  # every dimension's requests together
    assert (pooled.n, pooled.correct, pooled.answered) == (5 * 6, 3 * 6, 4 * 6)
    original = accuracy_cells(v, lab, orders=[0])["accuracy"]
    assert (original.n, original.correct) == (3, 2)
    swapped = accuracy_cells(v, lab, orders=[1])["accuracy"]
    assert (swapped.n, swapped.correct, swapped.answered) == (2, 1, 1)


def test_a_judge_that_fails_everything() -> None:
    v, lab = arrays([(0, 0), (0, 0)], [1, 2])
    cell = accuracy_cells(v, lab).pooled
    assert cell.accuracy == 0.0 and math.isnan(cell.answered_accuracy) and cell.failure_rate == 1.0


def test_grouped_accuracy_is_accuracy_per_group_and_macro_is_their_mean() -> None:
    v, lab = arrays([(1, 1), (2, 2), (1, 2), (2, 2)], [1, 1, 1, 2])
    groups = ["brain", "brain", "chest", "chest"]
    by = grouped_accuracy(v, lab, groups)
    assert list(by) == ["brain", "chest"]
    assert by["brain"]["overall"].accuracy == pytest.approx(2 / 4)
    assert by["chest"]["overall"].accuracy == pytest.approx(3 / 4)
    macro = macro_accuracy(by)
    assert macro["overall"] == pytest.approx((0.5 + 0.75) / 2) and macro.pooled == pytest.approx(macro["overall"])
    micro = accuracy_cells(v, lab)["overall"]
    assert micro.accuracy == pytest.approx(5 / 8)


def test_position_consistency_and_first_position_rate() -> None:
    # case0 same winner (1,1); case1 picks first shown in both orders (1 then 2) -> inconsistent
    # case2 picks second shown both times (2 then 1) -> inconsistent; case3 one failure -> not counted
    v, _ = arrays([(1, 1), (1, 2), (2, 1), (1, 0)], [1, 1, 1, 1])
    cells = position_cells(v)
    assert (cells["overall"].both_answered, cells["overall"].consistent) == (3, 1)
    # answered requests: 7; picked the shown-first: case0 orig(1) yes, swapped(1) no; case1 both;
    # case2 neither; case3 orig yes
    assert (cells["overall"].answered, cells["overall"].picked_first) == (7, 4)
    assert (cells.pooled.answered, cells.pooled.picked_first) == (7 * 6, 4 * 6)
    assert cells.pooled.consistency == pytest.approx(1 / 3)


def test_run_metrics_end_to_end_on_stored_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(6)  # labels alternate 1, 2 per case; organs alternate chest, brain
    with Store.in_dir(tmp_path) as store:
        first = run_judge(RecordingJudge("A", spec="test:first"), bench, store)
        oracle = run_judge(RecordingJudge(None, spec="test:oracle"), bench, store)
        data = load_run_data(store, first.run)
        oracle_data = load_run_data(store, oracle.run)
    m_first = run_metrics(data, ["organ_system"])
    m_oracle = run_metrics(oracle_data, ["organ_system"])
    assert isinstance(data, RunData) and data.verdicts.shape == (6, 2, 6)
    for dim in DIMENSIONS:
        assert m_first.accuracy[dim].accuracy == 0.5
        assert m_first.by_order["original"][dim].accuracy == 0.5
        assert m_first.position[dim].consistency == 0.0
        assert m_first.position[dim].first_position_rate == 1.0
        assert m_oracle.accuracy[dim].accuracy == 1.0
        assert m_oracle.position[dim].consistency == 1.0
        assert m_oracle.position[dim].first_position_rate == 0.5
    assert m_first.score == 0.5 and m_oracle.score == 1.0
    assert set(m_first.by["organ_system"]) == {"brain", "chest"}
    # chest holds cases 0, 2, 4 (label 1): "A" is right in the original order only
    assert m_first.by["organ_system"]["chest"]["overall"].accuracy == 0.5
    assert m_first.requests == RequestCounts(judged=12, failed=0)
    assert RunMetrics.from_json(m_first.to_json()) == m_first
    board = analyze([data, oracle_data], n_resamples=0).leaderboard
    assert [r.judge for r in board] == ["test:oracle", "test:first"] and board[0].rank == 1
    assert board[0].tier is None  # point estimates only: no tests, no tiers


def test_eval_and_report_agree_on_every_point_estimate(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One definition everywhere: eval's counts and the report's analysis give the same numbers."""
    bench = make_benchmark(8)
    with Store.in_dir(tmp_path) as store:
        judged = run_judge(RecordingJudge("A", spec="test:first", fail_on=("case-0003",)), bench, store)
        data = load_run_data(store, judged.run)
    metrics = run_metrics(data)
    run = analyze([data], n_resamples=50).runs[0]
    for column, cell in metrics.accuracy.columns():
        assert run.accuracy[column].point == pytest.approx(cell.accuracy)
        assert run.answered_accuracy[column].point == pytest.approx(cell.answered_accuracy)
        assert run.failure_rate[column] == pytest.approx(cell.failure_rate)
    for column, position in metrics.position.columns():
        assert run.position.consistency[column].point == pytest.approx(position.consistency)
        assert run.position.first_position_rate[column].point == pytest.approx(position.first_position_rate)
    assert metrics.macro is not None
    assert run.groups["organ_system"].macro.pooled.point == pytest.approx(metrics.macro.pooled)
    assert run.requests == metrics.requests


def test_orders_not_run_do_not_count(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(4)
    with Store.in_dir(tmp_path) as store:
        s = run_judge(RecordingJudge(None), bench, store, orders=(Order.ORIGINAL,))
        m = run_metrics(load_run_data(store, s.run))
    assert m.accuracy["overall"].n == 4 and m.accuracy["overall"].accuracy == 1.0
    assert list(m.by_order) == ["original"]
    assert m.position["overall"].both_answered == 0 and math.isnan(m.position["overall"].consistency)
    assert m.to_json()["position"]["overall"]["consistency"] is None

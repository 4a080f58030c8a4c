"""The judge's probabilities: stored in source order, read back, and old stores migrated to hold them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers.cases import make_benchmark

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation import store as store_module
from medrewardbench.evaluation.runner import plan_run, run_judge, source_preferences, to_stored
from medrewardbench.evaluation.store import Store, StoredJudgment
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import load_preferences, load_run_data

SHIPPED = store_module.MIGRATIONS
SHIPPED_NAMES = [name for name, _ in SHIPPED]


class _ProbabilityJudge(Judge):
    """Prefers the response shown first with probability ``p_first`` on every dimension, ``B`` below 0.5."""

    kind = "test"

    def __init__(self, p_first: float, *, with_probabilities: bool = True) -> None:
        self.spec = f"test:probability-{p_first}-{with_probabilities}"
        self.p_first = p_first
        self.with_probabilities = with_probabilities
        self.batch_size = 4
        self.concurrency = 1

    def config(self) -> dict[str, object]:
        return {"spec": self.spec}

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        letter = "A" if self.p_first > 0.5 else "B"
        preferences = dict.fromkeys(DIMENSIONS, self.p_first) if self.with_probabilities else {}
        return [JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, letter), preferences=preferences) for _ in requests]


def test_probabilities_are_mapped_to_source_order_in_both_orders() -> None:
    bench = make_benchmark(1)
    result = JudgeResult(verdicts={"accuracy": "A", "overall": "B"}, preferences={"accuracy": 0.8, "overall": 0.3})
    original = to_stored("fp", JudgeRequest(bench.cases[0], Order.ORIGINAL), result)
    swapped = to_stored("fp", JudgeRequest(bench.cases[0], Order.SWAPPED), result)
    assert original.verdicts == {"accuracy": 1, "overall": 2} and original.preferences == {
        "accuracy": 0.8,
        "overall": 0.3,
    }
    assert swapped.verdicts == {"accuracy": 2, "overall": 1}
    assert swapped.preferences == pytest.approx({"accuracy": 0.2, "overall": 0.7})


def test_a_probability_without_a_verdict_or_outside_zero_one_is_not_stored() -> None:
    bench = make_benchmark(1)
    result = JudgeResult(verdicts={"accuracy": "A"}, preferences={"accuracy": 0.9, "overall": 0.4, "relevance": 1.5})
    stored = to_stored("fp", JudgeRequest(bench.cases[0], Order.ORIGINAL), result)
    assert stored.preferences == {"accuracy": 0.9}
    failed = to_stored(
        "fp", JudgeRequest(bench.cases[0], Order.ORIGINAL), JudgeResult.failed("x", preferences={"accuracy": 0.9})
    )
    assert failed.preferences == {}
    assert source_preferences({"accuracy": float("nan"), "bogus": 0.5, "overall": 0.25}, Order.SWAPPED) == {
        "overall": 0.75
    }


def test_preferences_round_trip_through_the_store_and_fill_run_data(tmp_path: Path) -> None:
    bench = make_benchmark(4)
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(_ProbabilityJudge(0.8), bench, store)
        rows = store.judgments_for_run(summary.run)
        by_order = {row.order: row.preferences for row in rows}
        assert by_order[Order.ORIGINAL] == pytest.approx(dict.fromkeys(DIMENSIONS, 0.8))
        assert by_order[Order.SWAPPED] == pytest.approx(dict.fromkeys(DIMENSIONS, 0.2))
        plain = load_run_data(store, summary.run)
        data = load_run_data(store, summary.run, preferences=True)
        assert plain.preferences is None  # the verdicts' path does not read them
        assert data.preferences is not None and data.preferences.shape == (4, 2, len(DIMENSIONS))
        np.testing.assert_allclose(data.preferences[:, 0], 0.8)
        np.testing.assert_allclose(data.preferences[:, 1], 0.2)
        verdicts = case_verdicts(data)
    # the judge always prefers the response shown first: 0.8 for response_1 and 0.2 for it swapped
    assert verdicts.source == "probability"
    np.testing.assert_allclose(verdicts.p_first, 0.5)
    np.testing.assert_array_equal(verdicts.verdict, 0)


def test_a_run_without_probabilities_has_none_and_says_order_agreement(tmp_path: Path) -> None:
    bench = make_benchmark(3)
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(_ProbabilityJudge(0.8, with_probabilities=False), bench, store)
        assert all(row.preferences == {} for row in store.judgments_for_run(summary.run))
        assert load_preferences(store, summary.run) is None
        verdicts = case_verdicts(load_run_data(store, summary.run, preferences=True))
    assert verdicts.source == "order agreement"
    np.testing.assert_allclose(verdicts.p_first, 0.5)  # first-position bias: the orders disagree


def test_an_old_store_without_the_column_is_migrated_and_its_judgments_read_without_probabilities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    before = SHIPPED[: SHIPPED_NAMES.index("judgment_preferences")]
    bench = make_benchmark(2)
    judge = _ProbabilityJudge(0.9, with_probabilities=False)
    monkeypatch.setattr(store_module, "MIGRATIONS", before)
    with Store(path) as store:  # the layout of the version before: a registered run
        plan = plan_run(judge, bench, store)
        assert "judgment_preferences" not in store.applied_migrations()
    with sqlite3.connect(path) as db:  # and its judgments, written as that version wrote them
        assert "preferences_json" not in [row[1] for row in db.execute("PRAGMA table_info(judgments)")]
        for request in plan.requests:
            winner = 1 if request.order is Order.ORIGINAL else 2
            db.execute(
                "INSERT INTO judgments(judge_fingerprint, case_id, order_, case_hash, fingerprint, verdicts_json, "
                "raw_output, failure, dimension_failures_json, latency_s, prompt_tokens, completion_tokens, "
                "scores_json, extra_json, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    plan.run.judge_fingerprint,
                    request.case.case_id,
                    request.order.value,
                    request.case.content_hash(),
                    "f",
                    json.dumps(dict.fromkeys(DIMENSIONS, winner)),
                    "raw",
                    None,
                    "{}",
                    0.1,
                    1,
                    1,
                    None,
                    "{}",
                    0.0,
                ),
            )
    summary = plan
    monkeypatch.setattr(store_module, "MIGRATIONS", SHIPPED)
    with Store(path) as store:
        assert store.applied_migrations() == SHIPPED_NAMES
        rows = store.judgments_for_run(summary.run)
        assert len(rows) == 4 and all(r.preferences == {} and r.verdicts for r in rows)
        assert load_preferences(store, summary.run) is None
        store.write_judgments(
            summary.run.judge_fingerprint,
            [StoredJudgment(**{**rows[0].__dict__, "preferences": {"overall": 0.75}})],
        )
        data = load_run_data(store, summary.run, preferences=True)
    assert data.preferences is not None
    assert data.preferences[0, 0, DIMENSIONS.index("overall")] == 0.75
    assert np.isnan(data.preferences).sum() == data.preferences.size - 1

import asyncio
import contextlib

import pytest
from helpers.cases import RecordingJudge, make_benchmark, make_case

from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.runner import execute_plan, plan_run, run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.base import Judge, JudgeResult


def test_both_orders_are_judged_and_mapped_back_to_source_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(5)
    judge = RecordingJudge("A")
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(judge, bench, store)
        rows = store.judgments_for_run(summary.run)
    assert summary.judged == 10 and summary.reused == 0
    assert sorted(judge.calls) == sorted((c.case_id, o.value) for c in bench.cases for o in Order)
    for row in rows:
        expected = 1 if row.order is Order.ORIGINAL else 2  # "A" is response_1 only in the original order
        assert row.verdicts == dict.fromkeys(DIMENSIONS, expected)


def test_an_oracle_judge_is_right_in_both_orders(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(6)
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(RecordingJudge(None), bench, store)
        for row in store.judgments_for_run(summary.run):
            case = next(c for c in bench.cases if c.case_id == row.case_id)
            assert row.verdicts == dict(case.labels)


def test_rerun_makes_zero_judge_calls_and_fills_only_gaps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(8)
    with Store.in_dir(tmp_path) as store:
        run_judge(RecordingJudge("A"), Benchmark(bench.name, bench.source, bench.cases[:5]), store)
        again = RecordingJudge("A")
        summary = run_judge(again, Benchmark(bench.name, bench.source, bench.cases[:5]), store)
        assert again.calls == [] and summary.reused == 10 and summary.judged == 0
        bigger = RecordingJudge("A")
        summary = run_judge(bigger, bench, store)
        assert sorted(bigger.calls) == sorted((c.case_id, o.value) for c in bench.cases[5:] for o in Order)
        assert summary.reused == 10 and summary.judged == 6


def test_changed_case_content_is_judged_again(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(2)
    with Store.in_dir(tmp_path) as store:
        run_judge(RecordingJudge("A"), bench, store)
        edited = make_case(0, organ="chest", response_1="An edited first answer.")
        judge = RecordingJudge("A")
        run_judge(judge, Benchmark(bench.name, bench.source, (edited, bench.cases[1])), store)
        assert sorted(judge.calls) == [("case-0000", "original"), ("case-0000", "swapped")]


def test_fresh_starts_over_and_retry_failures_rejudges_only_failures(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(4)
    with Store.in_dir(tmp_path) as store:
        first = run_judge(RecordingJudge("A", fail_on=["case-0001"]), bench, store)
        assert first.failed == 2
        retry = RecordingJudge("A")
        run_judge(retry, bench, store, retry_failures=True)
        assert sorted(retry.calls) == [("case-0001", "original"), ("case-0001", "swapped")]
        fresh = RecordingJudge("A")
        run_judge(fresh, bench, store, fresh=True)
        assert len(fresh.calls) == 8


def test_single_order_runs_judge_only_that_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(3)
    judge = RecordingJudge("B")
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(judge, bench, store, orders=(Order.SWAPPED,))
        assert {o for _, o in judge.calls} == {"swapped"}
        assert all(r.verdicts["overall"] == 1 for r in store.judgments_for_run(summary.run))


def test_concurrency_is_bounded_by_the_judge(tmp_path) -> None:  # type: ignore[no-untyped-def]
    judge = RecordingJudge("A", batch_size=1, concurrency=3, delay_s=0.01)
    with Store.in_dir(tmp_path) as store:
        run_judge(judge, make_benchmark(10), store)
    assert judge.max_in_flight == 3


class ExplodingJudge(Judge):
    spec = "test:exploding"
    batch_size = 2

    async def judge_batch(self, requests):  # type: ignore[no-untyped-def]
        if any(r.case.case_id == "case-0002" for r in requests):
            raise RuntimeError("backend fell over")
        return [JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A")) for _ in requests]


def test_a_judge_that_raises_leaves_failures_with_reasons_not_a_lost_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(4)
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(ExplodingJudge(), bench, store)
        rows = store.judgments_for_run(summary.run)
    assert len(rows) == 8
    failed = [r for r in rows if r.failure]
    assert {r.case_id for r in failed} == {"case-0002"} or {r.case_id for r in failed} == {"case-0002", "case-0003"}
    assert all("backend fell over" in (r.failure or "") for r in failed)


def test_batches_are_stored_as_they_finish(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A run cancelled half-way keeps every finished batch (what a kill would leave)."""
    bench = make_benchmark(20)
    judge = RecordingJudge("A", batch_size=2, concurrency=1, delay_s=0.02)

    async def run_then_cancel() -> None:
        with Store.in_dir(tmp_path) as store:
            plan = plan_run(judge, bench, store)
            task = asyncio.ensure_future(execute_plan(judge, plan, store))
            await asyncio.sleep(0.15)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(run_then_cancel())
    with Store.in_dir(tmp_path) as store:
        stored = store.count_judgments(judge.fingerprint())
        assert 0 < stored < 40 and stored % 2 == 0
        rest = RecordingJudge("A")
        summary = run_judge(rest, bench, store)
        assert summary.reused == stored and summary.judged == 40 - stored


def test_missing_dimensions_are_recorded_per_dimension(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Partial(Judge):
        spec = "test:partial"

        async def judge_batch(self, requests):  # type: ignore[no-untyped-def]
            return [
                JudgeResult(verdicts={"overall": "A"}, dimension_failures={"accuracy": "value 'tie'"}) for _ in requests
            ]

    with Store.in_dir(tmp_path) as store:
        summary = run_judge(Partial(), make_benchmark(1), store)
        row = store.judgments_for_run(summary.run)[0]
    assert row.verdicts == {"overall": 1}
    assert row.dimension_failures["accuracy"] == "value 'tie'"
    assert row.dimension_failures["creativity"] == "no verdict"


class CountingStore(Store):
    """A real store that counts its write transactions and can be told to fail after some."""

    writes: list[int]
    fail_after: int | None = None

    def write_judgments(self, judge_fingerprint, rows, *, replacing=True):  # type: ignore[no-untyped-def]
        rows = list(rows)
        if self.fail_after is not None and len(self.writes) >= self.fail_after:
            raise OSError("disk full (scripted)")
        self.writes.append(len(rows))
        return super().write_judgments(judge_fingerprint, rows, replacing=replacing)


def test_batches_that_finish_together_share_one_transaction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(24)  # 48 requests
    judge = RecordingJudge("A", batch_size=1, concurrency=16, delay_s=0.01)
    with CountingStore.in_dir(tmp_path) as store:
        store.writes = []
        progress: list[int] = []
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, progress=progress.append))
        assert summary.judged == 48 and summary.failed == 0
        assert sum(store.writes) == 48 == sum(progress) == store.count_judgments(judge.fingerprint())
        # sixteen batches that sleep the same time finish in the same loop turn: far fewer commits than
        # requests (on a loaded machine the sleeps end a few turns apart: 14 commits were seen, not 48)
        assert len(store.writes) <= 24 and max(store.writes) > 1
        assert judge.max_in_flight <= 16


def test_a_store_that_fails_ends_the_run_with_its_error_and_keeps_what_was_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(20)
    judge = RecordingJudge("A", batch_size=2, concurrency=1, delay_s=0.005)
    with CountingStore.in_dir(tmp_path) as store:
        store.writes, store.fail_after = [], 3
        plan = plan_run(judge, bench, store)
        with pytest.raises(OSError, match="disk full"):
            asyncio.run(execute_plan(judge, plan, store))
        assert store.count_judgments(judge.fingerprint()) == sum(store.writes) == 6
        assert len(judge.calls) < 40  # the run stopped instead of judging on without storing


def test_a_run_on_a_store_without_this_judge_skips_looking_for_replaced_usage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(3)
    with Store.in_dir(tmp_path) as store:
        judge = RecordingJudge("A", fail_on=["case-0001"])
        first = plan_run(judge, bench, store, (Order.ORIGINAL, Order.SWAPPED))
        assert not first.replacing
        asyncio.run(execute_plan(judge, first, store))
        # a retry may replace the stored failures: their usage must be looked up and kept
        again = plan_run(RecordingJudge("A"), bench, store, (Order.ORIGINAL, Order.SWAPPED), retry_failures=True)
        assert again.replacing and again.n_pending == 2
        assert not plan_run(RecordingJudge("A"), bench, store, (Order.ORIGINAL,), fresh=True).replacing

import sqlite3
from dataclasses import replace

import pytest
from helpers.cases import make_benchmark

from medrewardbench.dimensions import Order
from medrewardbench.errors import StoreError
from medrewardbench.evaluation.store import RunRecord, Store, StoredJudgment, make_run_id


def _run(bench, fp: str = "fp1") -> RunRecord:  # type: ignore[no-untyped-def]
    return RunRecord(
        make_run_id("test:x", fp, bench.data_hash()),
        "test:x",
        fp,
        bench.data_hash(),
        bench.name,
        bench.source,
        (Order.ORIGINAL, Order.SWAPPED),
        {"spec": "test:x"},
        {},
        len(bench),
    )


def _judgment(case, order: Order, winner: int = 1) -> StoredJudgment:  # type: ignore[no-untyped-def]
    return StoredJudgment(
        case.case_id, order, case.content_hash(), "f", {"overall": winner}, "raw", None, {}, 0.01, 10, 5, None, {}
    )


def test_store_is_a_real_sqlite_file_in_wal_mode(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with Store.in_dir(tmp_path) as store:
        assert store.path.is_file()
    conn = sqlite3.connect(tmp_path / "medrewardbench.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {
        "runs",
        "cases",
        "judgments",
        "meta",
    }


def test_judgments_round_trip_and_belong_to_their_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(3)
    run = _run(bench)
    with Store.in_dir(tmp_path) as store:
        store.register_run(run, bench.cases, bench.data_hash())
        store.write_judgments(run.judge_fingerprint, [_judgment(c, o) for c in bench.cases for o in Order])
        assert store.runs() == [run]
        rows = store.judgments_for_run(run)
        assert [(r.case_id, r.order) for r in rows] == [(c.case_id, o) for c in bench.cases for o in Order]
        assert rows[0].verdicts == {"overall": 1} and rows[0].prompt_tokens == 10
        assert len(store.completed(run.judge_fingerprint)) == 6
        assert store.usage(run)["prompt_tokens"] == 60
        assert store.cases(run.data_hash)[0].labels["overall"] == bench.cases[0].labels["overall"]


def test_a_reader_without_extras_gets_the_same_judgments_with_extra_left_empty(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(2)
    run = _run(bench)
    with Store.in_dir(tmp_path) as store:
        store.register_run(run, bench.cases, bench.data_hash())
        rows = [
            replace(_judgment(c, o), extra={"reason": "A is better", "retries": 1}) for c in bench.cases for o in Order
        ]
        store.write_judgments(run.judge_fingerprint, rows)
        full = list(store.iter_judgments_for_run(run))
        lean = list(store.iter_judgments_for_run(run, extras=False))
    assert full[0].extra == {"reason": "A is better", "retries": 1}
    assert [j.extra for j in lean] == [{}] * 4
    assert [replace(j, extra={}) for j in full] == lean


def test_rewriting_a_judgment_replaces_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(1)
    run = _run(bench)
    with Store.in_dir(tmp_path) as store:
        store.register_run(run, bench.cases, bench.data_hash())
        store.write_judgments(run.judge_fingerprint, [_judgment(bench.cases[0], Order.ORIGINAL, 1)])
        store.write_judgments(run.judge_fingerprint, [_judgment(bench.cases[0], Order.ORIGINAL, 2)])
        assert store.count_judgments(run.judge_fingerprint) == 1
        assert store.judgments_for_run(run)[0].verdicts == {"overall": 2}


def test_a_replaced_judgment_leaves_its_usage_under_earlier_usage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bench = make_benchmark(3)
    run = _run(bench)
    first, second, third = bench.cases
    with Store.in_dir(tmp_path) as store:
        store.register_run(run, bench.cases, bench.data_hash())
        store.write_judgments(
            run.judge_fingerprint,
            [_judgment(first, Order.ORIGINAL), _judgment(first, Order.SWAPPED), _judgment(second, Order.ORIGINAL)],
        )
        # one batch: two replacements of one case's orders, a batch answer replaced, a new judgment
        store.write_judgments(run.judge_fingerprint, [replace(_judgment(second, Order.ORIGINAL), extra={})])
        batch = replace(_judgment(second, Order.SWAPPED), extra={"batch_id": "b1"}, prompt_tokens=7)
        store.write_judgments(run.judge_fingerprint, [batch])
        store.write_judgments(
            run.judge_fingerprint,
            [
                _judgment(first, Order.ORIGINAL),
                replace(_judgment(first, Order.SWAPPED), prompt_tokens=None, completion_tokens=None),
                _judgment(second, Order.SWAPPED),
                _judgment(third, Order.ORIGINAL),
            ],
        )
        store.write_judgments(run.judge_fingerprint, [_judgment(first, Order.SWAPPED)])
        stored = {(r.case_id, r.order): r.extra for r in store.judgments_for_run(run)}
    once = {"requests": 1, "prompt_tokens": 10, "completion_tokens": 5}
    assert stored[(first.case_id, Order.ORIGINAL)] == {"earlier_usage": once}
    # replaced twice: the second one it replaced used nothing, but carried the first one's usage
    assert stored[(first.case_id, Order.SWAPPED)] == {"earlier_usage": {**once, "requests": 2}}
    assert stored[(second.case_id, Order.ORIGINAL)] == {"earlier_usage": once}
    assert stored[(second.case_id, Order.SWAPPED)] == {
        "earlier_usage": {"requests": 1, "batch_prompt_tokens": 7, "batch_completion_tokens": 5}
    }
    assert stored[(third.case_id, Order.ORIGINAL)] == {}


def test_run_ids_are_stable_and_depend_on_judge_and_data() -> None:
    assert make_run_id("api:gpt-4o", "a", "d") == make_run_id("api:gpt-4o", "a", "d")
    assert make_run_id("api:gpt-4o", "a", "d").startswith("api-gpt-4o-")
    assert make_run_id("api:gpt-4o", "a", "d") != make_run_id("api:gpt-4o", "b", "d")
    assert make_run_id("api:gpt-4o", "a", "d") != make_run_id("api:gpt-4o", "a", "e")


def test_a_file_that_is_not_a_store_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "medrewardbench.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a usable results store"):
        Store(bad)


def test_per_annotator_labels_are_stored_with_the_cases(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from medrewardbench.cases import Annotation
    from medrewardbench.data.benchmark import Benchmark

    bench = make_benchmark(3)
    panel = (
        Annotation("dr_a", {"overall": 1, "accuracy": 2}, order_shown="swapped", seconds=41.5),
        Annotation("dr_b", {"overall": 2}),
    )
    annotated = Benchmark(bench.name, bench.source, (replace(bench.cases[0], annotations=panel), *bench.cases[1:]))
    # like case metadata, annotations stay out of the data fingerprint: a store keeps the latest ones
    assert annotated.data_hash() == bench.data_hash()
    run = _run(annotated)
    with Store.in_dir(tmp_path) as store:
        store.register_run(run, annotated.cases, annotated.data_hash())
        stored = store.cases(run.data_hash)
    assert stored[0].annotations == panel
    assert [c.annotations for c in stored[1:]] == [(), ()]
    with sqlite3.connect(tmp_path / "medrewardbench.sqlite") as db:
        raw = [r[0] for r in db.execute("SELECT annotations_json FROM cases ORDER BY position")]
    assert raw[1:] == [None, None] and '"annotator": "dr_a"' in raw[0]
    with Store.in_dir(tmp_path) as store:  # a later eval of the same data without annotations clears them
        store.register_run(run, bench.cases, bench.data_hash())
        assert [c.annotations for c in store.cases(run.data_hash)] == [(), (), ()]

"""Loading, hashing, planning and judging stream: four times the cases, about the same peak of Python memory."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.evaluation.runner import execute_plan, plan_run, run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult


class NeverAwaits(Judge):
    """Answers at once and never awaits: the hardest case for a writer that must keep up."""

    kind = "test"
    spec = "test:never-awaits"
    batch_size = 4
    concurrency = 8

    def config(self) -> dict[str, object]:
        return {"spec": self.spec}

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        return [JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A"), raw_output="A") for _ in requests]


def write_cases(directory: Path, count: int) -> Path:
    directory.mkdir(parents=True)
    Image.fromarray(np.full((8, 8, 3), 90, dtype=np.uint8)).save(directory / "scan.png")
    path = directory / "cases.jsonl"
    with path.open("w") as handle:
        for i in range(count):
            row = {
                "id": f"case-{i:06d}",
                "image": "scan.png",
                "question": f"What does scan {i} show?",
                "response_1": f"A normal study, number {i}.",
                "response_2": f"A finding that needs follow-up, number {i}.",
                "labels": {"overall": 1 + i % 2},
                "organ_system": ("chest", "brain", "eye")[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    return path


def eval_peak(root: Path, count: int) -> int:
    data = write_cases(root / "data", count)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        benchmark = load_benchmark(str(data))
        with Store.in_dir(root / "out") as store:
            summary = run_judge(NeverAwaits(), benchmark, store)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert summary.judged == 2 * count and not benchmark.in_memory
    return peak


@pytest.mark.slow  # measures peak memory over several sizes: a benchmark smoke run
def test_eval_memory_does_not_grow_with_the_number_of_cases(tmp_path: Path) -> None:
    eval_peak(tmp_path / "warm-up", 100)  # the first run's imports and caches are not the cases' memory
    small = eval_peak(tmp_path / "small", 1_000)
    large = eval_peak(tmp_path / "large", 4_000)
    # holding every case, image reference and request costs kilobytes per case (over 10 MB here);
    # streaming keeps a byte or two per case (the plan's mask, an id hash while loading)
    assert large - small < 500_000, f"peak traced memory {small} B at 1,000 cases, {large} B at 4,000"


def test_an_instant_judge_results_are_written_as_they_finish(tmp_path: Path) -> None:
    data = write_cases(tmp_path / "data", 500)
    writes: list[int] = []

    class CountingStore(Store):
        def write_judgments(self, judge_fingerprint: str, rows: object, *, replacing: bool = True) -> int:
            written = super().write_judgments(judge_fingerprint, rows, replacing=replacing)  # type: ignore[arg-type]
            writes.append(written)
            return written

    judge = NeverAwaits()
    benchmark = load_benchmark(str(data))
    with CountingStore(tmp_path / "out" / "results.sqlite") as store:
        plan = plan_run(judge, benchmark, store)
        summary = asyncio.run(execute_plan(judge, plan, store))
        stored = store.count_judgments(judge.fingerprint())
    assert summary.judged == stored == 1000
    # at most one batch per worker waits for a write: never the whole run
    assert max(writes) <= judge.batch_size * judge.concurrency, writes
    assert len(writes) >= 1000 // (judge.batch_size * judge.concurrency)


def test_the_plan_holds_no_request_and_reads_the_cases_again(tmp_path: Path) -> None:
    data = write_cases(tmp_path / "data", 600)
    benchmark = load_benchmark(str(data))
    judge = NeverAwaits()
    with Store.in_dir(tmp_path / "out") as store:
        first = run_judge(judge, load_benchmark(str(data), limit=250), store)
        plan = plan_run(judge, benchmark, store)
        assert first.judged == 500 and plan.reused == 500 and plan.n_pending == 700
        assert len(plan.pending_mask) == 600
        pending = list(plan.iter_requests(store))
        assert [(r.case.case_id, r.order.value) for r in pending[:2]] == [
            ("case-000250", "original"),
            ("case-000250", "swapped"),
        ]
        assert len(pending) == 700
        assert all(isinstance(r, JudgeRequest) for r in pending)

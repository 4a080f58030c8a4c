"""A Ray worker reads its cases a chunk at a time as batches name them (no Ray needed: it is called directly)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.sweep import write_cases, write_sweep

from medrewardbench.cases import Case
from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.sweep import load_sweep
from medrewardbench.sweep.ray_backend import CaseWindow, JudgeWorker, WorkerPayload


def _counted(n: int) -> tuple[Benchmark, list[int]]:
    """A streaming benchmark of ``n`` cases that counts the cases it reads."""
    base = load_benchmark("demo")
    template = next(iter(base))
    read: list[int] = [0]

    def cases() -> Iterator[Case]:
        for i in range(n):
            read[0] += 1
            yield Case(
                case_id=f"k{i}",
                image=template.image,
                question=f"q{i}",
                response_1="a",
                response_2="bb",
                labels=dict(template.labels),
                organ_system="chest",
            )

    return Benchmark.streaming("counted", "counted", cases, n_cases=n, organ_systems=["chest"], n_labeled=n), read


def test_cases_in_order_are_read_once_and_only_a_few_chunks_are_kept() -> None:
    benchmark, read = _counted(100)
    window = CaseWindow(benchmark, chunk_size=10, keep=2)
    for i in range(100):
        assert window.get(f"k{i}").case_id == f"k{i}"
        assert len(window._chunks) <= 2
    assert read[0] == 100 and window.readings == 1
    assert window.get("k85").case_id == "k85"  # still kept: no reading
    assert read[0] == 100


def test_a_case_behind_the_window_starts_the_reading_over_and_an_unknown_id_fails() -> None:
    benchmark, read = _counted(50)
    window = CaseWindow(benchmark, chunk_size=10, keep=2)
    assert window.get("k45").case_id == "k45"
    assert window.get("k3").case_id == "k3"  # behind the window: read again from the first case
    assert window.readings == 2 and read[0] == 50 + 10
    assert window.get("k12").case_id == "k12"  # on from there
    with pytest.raises(KeyError):
        window.get("nope")


def test_a_worker_streams_its_cases_and_judges_them_in_any_order(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "data", 6)
    config = load_sweep(write_sweep(tmp_path / "s.yaml", f"data: {cases}\njudges:\n  - judge: baseline:longer\n"))
    data_hash = load_benchmark(str(cases)).data_hash()
    worker = JudgeWorker(WorkerPayload(entry=config.judges[0], data=config.data, data_hash=data_hash))
    assert isinstance(worker.cases, CaseWindow)
    keys = [("c005", "original"), ("c000", "swapped"), ("c003", "original")]
    pid, results = asyncio.run(worker.judge_keys(keys))
    assert pid == os.getpid()  # the worker's own process (here: the test's)
    assert [r.failure for r in results] == [None, None, None]
    # response 2 is the longer one in every case: A in the swapped order, B in the original
    assert [r.verdicts["overall"] for r in results] == ["B", "A", "B"]
    asyncio.run(worker.close())

"""Questions read ahead in a thread of their own: same answers, same order, nothing left open, errors in place."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import imported_project, project_store

from medrewardbench.curation.generation import GenerationProgress, ReadAhead, answer_requests
from medrewardbench.curation.generators import GenerationRequest, GenerationResult, TextGenerator, load_answer_template
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import BuildStore
from medrewardbench.errors import StoreError
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import TextTemplate


def test_read_ahead_yields_every_item_in_order_from_chunks_made_in_another_thread() -> None:
    made_in: set[int] = set()

    def produce() -> Iterator[list[int]]:
        for start in range(0, 50, 7):
            made_in.add(threading.get_ident())
            yield list(range(start, min(start + 7, 50)))

    with ReadAhead(produce, name="test") as items:
        assert list(items) == list(range(50))
    assert made_in and threading.get_ident() not in made_in


def test_the_producers_error_is_raised_where_its_chunk_would_have_come() -> None:
    def produce() -> Iterator[list[str]]:
        yield ["a", "b"]
        yield ["c"]
        raise StoreError("the image of question 'q3' is missing from the store")

    seen: list[str] = []
    with ReadAhead(produce, name="test") as items, pytest.raises(StoreError, match="q3"):
        for item in items:
            seen.append(item)
    assert seen == ["a", "b", "c"]


def test_closing_mid_stream_stops_the_thread_and_closes_what_it_opened() -> None:
    made = 0
    closed = threading.Event()

    def produce() -> Iterator[list[int]]:
        nonlocal made
        try:
            while True:
                made += 1
                yield [made]
        finally:
            closed.set()

    reader = ReadAhead(produce, depth=2, name="test")
    assert [next(reader), next(reader), next(reader)] == [1, 2, 3]
    reader.close()
    assert closed.is_set() and not reader._thread.is_alive()
    assert made <= 3 + 2 + 1  # taken, held ready, and one waiting to be handed over
    with pytest.raises(StopIteration):
        next(reader)


def test_a_reader_handle_reads_what_was_committed_and_cannot_write(tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    with project_store(project) as store:
        store.register_generator("fp", "api:x", {"model": "x"}, {})

        def read() -> list[str]:
            with store.reader() as reader:
                with pytest.raises(sqlite3.OperationalError, match="readonly"):
                    reader.set_meta("touched", 1)
                return [q.qid for chunk in reader.iter_questions() for q in chunk]

        found: list[list[str]] = []
        thread = threading.Thread(target=lambda: found.append(read()))
        thread.start()
        thread.join()
        assert found == [[q.qid for chunk in store.iter_questions() for q in chunk]] and len(found[0]) == 6
        assert store.get_meta("touched") is None


class EchoGenerator(TextGenerator):
    """Answers at once with the question it was asked; records the thread that made each request."""

    kind = "echo"
    batch_size = 3
    concurrency = 4

    def __init__(self, spec: str, template: TextTemplate) -> None:
        self.spec = spec
        self.template = template
        self.asked: list[str] = []

    def config(self) -> dict[str, Any]:
        return {"spec": self.spec, "template_sha256": self.template.sha256}

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.asked.extend(r.key for r in requests)
        return [GenerationResult(text=f"answer: {r.values['question']}") for r in requests]


def test_many_chunks_read_ahead_give_the_answers_a_plain_reading_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        {"qid": f"q{i}", "q": f"Is finding number {i} present?", "ans": "yes", "img": "images/ct.png", "body": "chest"}
        for i in range(700)  # three chunks of the store
    ]
    project = imported_project(tmp_path, rows)
    with project_store(project) as store:
        plain = list(answer_requests(store, "none", kept_only=False, with_reference=False, retry_failures=False))
    planned = [r.key for r in plain]
    threads: set[str] = set()
    original = BuildStore.iter_questions

    def recorded(self: BuildStore, **kwargs: Any) -> Iterator[list[Any]]:
        threads.add(threading.current_thread().name)
        return original(self, **kwargs)

    monkeypatch.setattr(BuildStore, "iter_questions", recorded)
    made: list[EchoGenerator] = []

    def factory(spec: str, options: JudgeOptions, template: TextTemplate) -> TextGenerator:
        made.append(EchoGenerator(spec, template))
        return made[-1]

    with open_project(project) as store:
        [summary] = run_responses(
            store, ["echo:a"], template=load_answer_template(), progress=GenerationProgress(), generator_factory=factory
        )
        stored = store.generations(summary.fingerprint, planned)
    assert summary.generated == 700 and summary.failed == 0 and summary.reused == 0
    assert sorted(made[0].asked) == sorted(planned) and len(set(made[0].asked)) == 700  # each asked once
    assert {h: g.text for h, g in stored.items()} == {r.key: f"answer: {r.values['question']}" for r in plain}
    assert threads == {"read-ahead echo:a"}  # the store was read off the event loop's thread

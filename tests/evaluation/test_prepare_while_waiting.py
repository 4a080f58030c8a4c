"""Once every request is out, the eval job imports its analysis while the last answers are awaited.

The runner calls ``on_drained`` once, when the first worker finds no request left to take
(:func:`~medrewardbench.evaluation.runner._judge_all`); the eval job passes the import of what
writing its outputs needs (:func:`~medrewardbench.evaluation.job._import_output_modules`), so that
this import no longer runs after the last answer. These tests check when the call comes, that it
comes once, that its failure cannot stop a run, and that the import list is the one the outputs use.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import logging
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers.cases import RecordingJudge, make_benchmark

from medrewardbench.evaluation import job
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.runner import execute_plan, execute_while_hashing, plan_run
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions


class CountingJudge(RecordingJudge):
    """A judge that counts the requests it has taken and the answers it has given.

    Its answers take 1 to 4 times ``delay_s``, in turn, so that they arrive spread out as real ones do.
    """

    def __init__(self, spec: str = "test:counting", batch_size: int = 1, concurrency: int = 4, delay_s: float = 0.0):
        super().__init__("A", spec=spec, batch_size=batch_size, concurrency=concurrency)
        self.step_s = delay_s
        self.taken = 0
        self.answered = 0

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        self.taken += len(requests)
        await asyncio.sleep(self.step_s * (1 + self.taken % 4))
        results: list[JudgeResult] = await super().judge_batch(requests)
        self.answered += len(requests)
        return results


def test_on_drained_comes_once_after_the_last_request_is_taken_and_before_the_last_answer(tmp_path: Path) -> None:
    bench = make_benchmark(30)
    judge = CountingJudge(batch_size=1, concurrency=4, delay_s=0.01)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(
            execute_plan(judge, plan, store, on_drained=lambda: seen.append((judge.taken, judge.answered)))
        )
        assert store.count_judgments(judge.fingerprint()) == 60
    assert summary.judged == 60
    assert len(seen) == 1
    taken, answered = seen[0]
    assert taken == 60  # every request was out
    assert answered < 60  # some answers were still awaited


def test_a_first_run_that_hashes_while_judging_calls_it_too(tmp_path: Path) -> None:
    bench = make_benchmark(20)
    judge = CountingJudge(batch_size=2, concurrency=3, delay_s=0.01)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        summary, _hashed = asyncio.run(
            execute_while_hashing(judge, bench, store, on_drained=lambda: seen.append((judge.taken, judge.answered)))
        )
    assert summary.judged == 40
    assert len(seen) == 1 and seen[0][0] == 40 and seen[0][1] < 40


def test_one_worker_calls_it_after_its_last_batch(tmp_path: Path) -> None:
    """With one worker nothing else is in flight: the call comes last, once."""
    bench = make_benchmark(5)
    judge = CountingJudge(batch_size=2, concurrency=1)
    seen: list[tuple[int, int]] = []
    with Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        asyncio.run(execute_plan(judge, plan, store, on_drained=lambda: seen.append((judge.taken, judge.answered))))
    assert seen == [(10, 10)]


def test_a_failing_preparation_is_logged_and_the_run_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bench = make_benchmark(12)
    judge = CountingJudge(batch_size=1, concurrency=3, delay_s=0.005)

    def broken() -> None:
        raise RuntimeError("an import failed")

    with caplog.at_level(logging.DEBUG, logger="medrewardbench.evaluation.runner"), Store.in_dir(tmp_path) as store:
        plan = plan_run(judge, bench, store)
        summary = asyncio.run(execute_plan(judge, plan, store, on_drained=broken))
        assert store.count_judgments(judge.fingerprint()) == 24
    assert summary.judged == 24 and summary.failed == 0
    assert any("an import failed" in (r.exc_text or "") for r in caplog.records)


def test_eval_imports_its_outputs_modules_while_each_judges_last_answers_are_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first judge runs while the data is hashed, the second from a plan: each calls it once."""
    judges = {
        spec: CountingJudge(spec=spec, batch_size=1, concurrency=4, delay_s=0.01)
        for spec in ("test:first", "test:second")
    }
    seen: list[list[tuple[str, int]]] = []
    imported = job._import_output_modules

    def watching() -> None:
        # the judges with answers still out, and how many requests each has taken
        seen.append([(spec, judge.taken) for spec, judge in judges.items() if judge.answered < judge.taken])
        imported()

    monkeypatch.setattr(job, "_import_output_modules", watching)
    result = evaluate(
        make_benchmark(16),
        list(judges),
        tmp_path / "out",
        judge_factory=lambda spec, options: judges[spec],
        options=JudgeOptions(),
    )
    assert [s.judged for s in result.summaries] == [32, 32]
    assert seen == [[("test:first", 32)], [("test:second", 32)]]
    assert (tmp_path / "out" / "metrics.json").is_file()


def test_the_import_list_is_what_writing_the_outputs_imports() -> None:
    source = textwrap.dedent(inspect.getsource(job._write_outputs))
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert imported == set(job._OUTPUT_MODULES)

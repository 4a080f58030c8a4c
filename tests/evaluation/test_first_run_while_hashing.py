"""A first run sends its requests while the data is still read and hashed, and loses nothing for it.

When the store holds no judgment of the judge, nothing can be reused, so ``eval`` does not hash
and plan before its first request: a task of the event loop reads and hashes the cases between
the answers and records the cases and the run as soon as the last case is hashed
(:func:`~medrewardbench.evaluation.runner.execute_while_hashing`). These tests check that the
requests do start first, that the stored rows and files are those of the hash-first path, and
that a Ctrl-C or an unreadable image during the reading keeps every finished judgment.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers.cases import RecordingJudge
from PIL import Image

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark, DataHasher
from medrewardbench.errors import EvaluationInterrupted, ImageError
from medrewardbench.evaluation import job
from medrewardbench.evaluation.job import evaluate
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions


def write_data(directory: Path, count: int) -> Path:
    """``count`` cases, each with an image of its own, as canonical JSONL."""
    images = directory / "images"
    images.mkdir(parents=True)
    with (directory / "cases.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(count):
            Image.fromarray(np.full((6, 6, 3), i % 250, dtype=np.uint8)).save(images / f"scan-{i:03d}.png")
            row = {
                "id": f"case-{i:03d}",
                "image": f"images/scan-{i:03d}.png",
                "question": f"What does scan {i} show?",
                "response_1": f"A normal study, number {i}.",
                "response_2": f"A finding that needs follow-up, number {i}.",
                "labels": {"overall": 1 + i % 2, "accuracy": 2 - i % 2},
                "organ_system": ("chest", "brain")[i % 2],
            }
            handle.write(json.dumps(row) + "\n")
    return directory / "cases.jsonl"


def run_eval(data: Benchmark, out: Path, judge: RecordingJudge) -> job.EvaluationResult:
    return evaluate(data, [judge.spec], out, judge_factory=lambda spec, options: judge, options=JudgeOptions())


def stored_rows(out: Path) -> dict[str, list[tuple[object, ...]]]:
    """The store's runs, cases and judgments, without the columns that hold the time of writing."""
    with sqlite3.connect(out / "medrewardbench.sqlite") as db:
        return {
            "runs": db.execute(
                "SELECT run_id, judge_spec, judge_fingerprint, data_hash, n_cases FROM runs ORDER BY run_id"
            ).fetchall(),
            "cases": db.execute(
                "SELECT data_hash, position, case_id, case_hash, labels_json FROM cases ORDER BY position"
            ).fetchall(),
            "judgments": db.execute(
                "SELECT case_id, order_, case_hash, fingerprint, verdicts_json FROM judgments ORDER BY case_id, order_"
            ).fetchall(),
        }


def test_the_first_requests_go_out_before_the_data_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hashed: list[str] = []
    add = DataHasher.add
    monkeypatch.setattr(DataHasher, "add", lambda self, case: (hashed.append(case.case_id), add(self, case))[1])

    class Watching(RecordingJudge):
        first_seen: int | None = None

        async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
            if self.first_seen is None:
                self.first_seen = len(hashed)
            return await super().judge_batch(requests)

    data = load_benchmark(str(write_data(tmp_path / "data", 60)))
    judge = Watching("A", batch_size=1, concurrency=4, delay_s=0.001)
    result = run_eval(data, tmp_path / "out", judge)
    assert judge.first_seen is not None and judge.first_seen < 5, "the first request waited for the hashing"
    assert len(hashed) == 60, "every case was hashed once"
    assert result.summaries[0].judged == 120 and result.summaries[0].reused == 0
    assert len((tmp_path / "out" / "judgments.jsonl").read_text().splitlines()) == 120
    assert result.metrics[result.runs[0].run_id].n_cases == 60


def test_a_first_run_stores_and_writes_what_the_hash_first_path_does(tmp_path: Path) -> None:
    source = write_data(tmp_path / "data", 30)
    first = tmp_path / "while-hashing"
    run_eval(load_benchmark(str(source)), first, RecordingJudge(None, batch_size=2, concurrency=3))
    hashed_first = tmp_path / "hashed-first"
    ready = load_benchmark(str(source)).fingerprinted()  # fingerprint known: eval hashes before it plans
    assert ready.fingerprint_known
    run_eval(ready, hashed_first, RecordingJudge(None, batch_size=2, concurrency=3))

    assert stored_rows(first) == stored_rows(hashed_first)
    assert len(stored_rows(first)["cases"]) == 30 and len(stored_rows(first)["judgments"]) == 60
    for name in ("judgments.jsonl", "metrics.csv"):
        assert (first / name).read_bytes() == (hashed_first / name).read_bytes(), name
    documents = [json.loads((out / "metrics.json").read_text()) for out in (first, hashed_first)]
    assert documents[0]["leaderboard"] == documents[1]["leaderboard"]


@pytest.mark.parametrize("hashed_first", [False, True])
def test_fresh_forgets_the_judges_stored_judgments_on_either_path(
    tmp_path: Path, hashed_first: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """``--fresh`` asks every request again, whether the run then judges while hashing or plans first."""
    source = write_data(tmp_path / "data", 6)
    out = tmp_path / "out"
    run_eval(load_benchmark(str(source)), out, RecordingJudge("A", batch_size=2, concurrency=3))
    again = RecordingJudge("A", batch_size=2, concurrency=3)
    data = load_benchmark(str(source))
    with caplog.at_level("INFO", logger="medrewardbench"):
        evaluate(
            data.fingerprinted() if hashed_first else data,
            [again.spec],
            out,
            judge_factory=lambda spec, options: again,
            options=JudgeOptions(),
            fresh=True,
        )
    assert len(again.calls) == 12  # every case in both orders, none reused
    assert "fresh run: removed 12 stored judgments of test:recording" in caplog.text
    assert len(stored_rows(out)["judgments"]) == 12


class StopsAt(RecordingJudge):
    """Answers, then raises KeyboardInterrupt (a Ctrl-C) at its ``stop_at``-th call."""

    def __init__(self, stop_at: int) -> None:
        super().__init__("A", batch_size=1, concurrency=1)
        self.stop_at = stop_at

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        await asyncio.sleep(0)
        if len(self.calls) + 1 >= self.stop_at:
            raise KeyboardInterrupt
        return await super().judge_batch(requests)


def test_ctrl_c_before_the_data_is_read_keeps_what_finished_records_the_run_and_a_rerun_sends_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered: list[bool] = []
    register = job._register_interrupted
    monkeypatch.setattr(job, "_register_interrupted", lambda *a: (registered.append(True), register(*a))[1])
    source = write_data(tmp_path / "data", 400)
    out = tmp_path / "out"
    stopping = StopsAt(4)
    with pytest.raises(EvaluationInterrupted) as caught:
        run_eval(load_benchmark(str(source)), out, stopping)
    assert registered == [True], "the interrupt came before the reading ended"
    assert caught.value.stored == 3 == len(stopping.calls) and caught.value.total == 800
    # the run is recorded and the files describe what finished
    rows = (out / "judgments.jsonl").read_text().splitlines()
    assert sorted((json.loads(r)["case_id"], json.loads(r)["order"]) for r in rows) == sorted(stopping.calls)
    assert len(stored_rows(out)["runs"]) == 1 and len(stored_rows(out)["cases"]) == 400

    again = RecordingJudge("A", batch_size=1, concurrency=1)  # the same fingerprint: spec and letter
    result = run_eval(load_benchmark(str(source)), out, again)
    assert len(again.calls) == 797 and not set(again.calls) & set(stopping.calls)
    assert result.summaries[0].reused == 3 and result.summaries[0].judged == 797
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 800


def test_an_image_unreadable_during_the_reading_stops_the_run_and_keeps_every_finished_judgment(
    tmp_path: Path,
) -> None:
    source = write_data(tmp_path / "data", 40)
    data = load_benchmark(str(source))
    image = tmp_path / "data" / "images" / "scan-039.png"
    kept = image.read_bytes()
    image.unlink()  # gone after loading checked it: found when the reading hashes the last case
    out = tmp_path / "out"
    first = RecordingJudge("A", batch_size=1, concurrency=2, delay_s=0.001)
    with pytest.raises(ImageError, match="scan-039.png"):
        run_eval(data, out, first)
    stored = stored_rows(out)
    assert stored["runs"] == [] and stored["cases"] == [], "the run is recorded only once the data is read"
    assert 0 < len(stored["judgments"]) == len(first.calls), "every finished judgment is stored"

    image.write_bytes(kept)
    again = RecordingJudge("A", batch_size=1, concurrency=2)
    result = run_eval(load_benchmark(str(source)), out, again)
    assert len(again.calls) == 80 - len(first.calls) and not set(again.calls) & set(first.calls)
    assert result.summaries[0].reused == len(first.calls)
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 80

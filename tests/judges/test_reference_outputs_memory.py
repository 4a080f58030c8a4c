"""The reference outputs are indexed on disk: four times the lines, about the same peak of Python memory."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from pathlib import Path

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.judges.base import JudgeRequest
from medrewardbench.judges.reference_outputs import ReferenceOutputJudge


def write_outputs(path: Path, count: int) -> Path:
    with path.open("w") as handle:
        for i in range(count):
            answer = {dim: "AB"[(i + k) % 2] for k, dim in enumerate(DIMENSIONS)} | {"reason": "x" * 200}
            handle.write(json.dumps({"question_id": f"q{i}", "modality_type": "chest", "chosen_answer": answer}) + "\n")
        # a later line for the same question wins, as in the reference's evaluation
        handle.write(json.dumps({"question_id": "q0", "modality_type": "chest", "chosen_answer": "[[B]]"}) + "\n")
    return path


def judge_peak(path: Path) -> tuple[int, ReferenceOutputJudge]:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        judge = ReferenceOutputJudge(str(path))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, judge


def test_reference_outputs_are_not_held_in_memory(tmp_path: Path) -> None:
    asyncio.run(judge_peak(write_outputs(tmp_path / "warm.jsonl", 50))[1].aclose())
    small, first = judge_peak(write_outputs(tmp_path / "small.jsonl", 2_000))
    large, judge = judge_peak(write_outputs(tmp_path / "large.jsonl", 8_000))
    asyncio.run(first.aclose())
    # holding the answers costs about 1 KB per line (6 MB more here)
    assert large - small < 600_000, f"peak traced memory {small} B at 2,000 lines, {large} B at 8,000"

    def case(question: str) -> Case:
        return Case(
            case_id=f"chest/{question}",
            question="?",
            response_1="a",
            response_2="b",
            image=ImageRef.builtin("pydicom:CT_small.dcm"),
            organ_system="chest",
        )

    requests = [JudgeRequest(case("q0"), Order.ORIGINAL), JudgeRequest(case("q7"), Order.ORIGINAL)]
    requests.append(JudgeRequest(case("missing"), Order.ORIGINAL))
    results = asyncio.run(judge.judge_batch(requests))
    asyncio.run(judge.aclose())
    assert results[0].verdicts == dict.fromkeys(DIMENSIONS, "B")
    assert results[1].verdicts == {dim: "AB"[(7 + k) % 2] for k, dim in enumerate(DIMENSIONS)}
    assert results[2].failure == "no prediction in the reference outputs"

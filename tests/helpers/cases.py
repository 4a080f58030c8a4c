"""Small builders for core tests: the one ``make_case``, benchmarks of them, and a judge with known behaviour."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from helpers.images import png_bytes
from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Position, Winner
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult


def make_case(
    index: int = 1,
    *,
    case_id: str | None = None,
    organ: str = "chest",
    question: str | None = None,
    response_1: str | None = None,
    response_2: str | None = None,
    labels: Mapping[str, Winner] | None = None,
    image: ImageRef | None = None,
    swap: bool = False,
    **fields: Any,
) -> Case:
    """A labelled case with a real PNG; every field can be given, the rest follow from ``index``.

    Args:
        index: numbers the defaults: id ``case-0001``, the question, the answers, the image's colour.
        case_id: the id (default ``case-{index:04d}``).
        organ: the organ system.
        question: the question (default "What does image {index} show?").
        response_1: the first answer (default a short one).
        response_2: the second answer (default a longer one, so that ``baseline:longer`` picks it).
        labels: dimension -> winner (default every dimension to ``1 + index % 2``: answer 2 for the
            default index 1).
        image: the image (default an 8x8 PNG whose colour depends on ``index``).
        swap: exchange the two answers (after the defaults are filled in).
        **fields: any other :class:`Case` field (``department``, ``modality``, ``metadata``...).

    Returns:
        The case.
    """
    first = response_1 if response_1 is not None else f"Short answer {index}."
    second = response_2 if response_2 is not None else f"A considerably longer answer number {index}."
    if swap:
        first, second = second, first
    return Case(
        case_id=case_id if case_id is not None else f"case-{index:04d}",
        image=image
        if image is not None
        else ImageRef.from_bytes(png_bytes(seed=index, size=(8, 8)), f"img{index}.png"),
        question=question if question is not None else f"What does image {index} show?",
        response_1=first,
        response_2=second,
        labels=dict(labels) if labels is not None else dict.fromkeys(DIMENSIONS, 1 + index % 2),
        organ_system=organ,
        **fields,
    )


def make_benchmark(n: int, name: str = "test-set", organs: Sequence[str] = ("chest", "brain")) -> Benchmark:
    """``n`` cases from :func:`make_case` (indices 0..n-1), organ systems in turn."""
    cases = tuple(make_case(i, organ=organs[i % len(organs)]) for i in range(n))
    return Benchmark(name=name, source=f"memory:{name}", cases=cases)


class RecordingJudge(Judge):
    """Answers a fixed letter (or the letter of the truly better answer) and records every call."""

    kind = "test"

    def __init__(
        self,
        letter: Position | None = "A",
        spec: str = "test:recording",
        batch_size: int = 4,
        concurrency: int = 2,
        delay_s: float = 0.0,
        fail_on: Sequence[str] = (),
    ):
        self.letter = letter
        self.spec = spec
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.delay_s = delay_s
        self.fail_on = set(fail_on)
        self.calls: list[tuple[str, str]] = []
        self.max_in_flight = 0
        self._in_flight = 0

    def config(self) -> dict[str, object]:
        return {"spec": self.spec, "letter": self.letter}

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            out = []
            for r in requests:
                self.calls.append((r.case.case_id, r.order.value))
                if r.case.case_id in self.fail_on:
                    out.append(JudgeResult.failed("scripted failure", raw_output="garbage"))
                elif self.letter is None:  # oracle: pick the expert-preferred answer per dimension
                    verdicts: dict[str, Position] = {}
                    for d in DIMENSIONS:
                        winner = r.case.labels[d]
                        shown_first = 1 if r.order.value == "original" else 2
                        verdicts[d] = "A" if winner == shown_first else "B"
                    out.append(JudgeResult(verdicts=verdicts, raw_output="oracle"))
                else:
                    out.append(JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, self.letter), raw_output=self.letter))
            return out
        finally:
            self._in_flight -= 1

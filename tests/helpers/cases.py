"""Small builders for core tests: cases with real PNG images and judges with known behaviour."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence

from PIL import Image

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Position
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult


def png_bytes(seed: int, size: int = 8) -> bytes:
    image = Image.new("RGB", (size, size), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def make_case(i: int, labels: dict[str, int] | None = None, organ: str = "chest", **kw: object) -> Case:
    return Case(
        case_id=f"case-{i:04d}",
        image=ImageRef.from_bytes(png_bytes(i), name=f"img{i}.png"),
        question=f"What does image {i} show?",
        response_1=kw.pop("response_1", f"Short answer {i}."),  # type: ignore[arg-type]
        response_2=kw.pop("response_2", f"A considerably longer answer number {i}."),  # type: ignore[arg-type]
        labels=labels if labels is not None else dict.fromkeys(DIMENSIONS, 1 + i % 2),
        organ_system=organ,
        **kw,  # type: ignore[arg-type]
    )


def make_benchmark(n: int, name: str = "test-set", organs: Sequence[str] = ("chest", "brain")) -> Benchmark:
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

"""Real stores with real runs for report tests (a pytest plugin: the ``runs_fixture`` fixture).

A small canonical JSONL data set (real PNG images embedded as bytes, three organ systems, expert
labels) is written with ``write_canonical`` and loaded back with ``load_benchmark``, so a run's
``dataset_source`` is a file the HTML report can reload images from. Judges are the built-in
baselines plus a few scripted ones: an oracle, its twin under another name (identical verdicts),
a judge that fails every request, and one whose raw output plants ``<script>`` markup.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.images import png_bytes
from medrewardbench.cases import Case, ImageRef
from medrewardbench.data import load_benchmark, write_canonical
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order, Position, Winner
from medrewardbench.evaluation.runner import run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges import build_judge
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult

PLANTED = "<script>alert('pwned')</script>"
PLANTED_REASON = "Answer <b>A</b> names the lesion"
"""The planted judge's stated reason (with markup that the report must escape), then the case number."""
ORGANS: tuple[str, ...] = ("brain", "chest", "heart")
BASELINES: tuple[str, ...] = ("baseline:random", "baseline:first", "baseline:longer")


def make_cases(n: int = 24, variant: str = "") -> list[Case]:
    """Cases over three organ systems; labels vary per dimension; response lengths always differ."""
    rng = random.Random(20240601)
    cases = []
    for i in range(n):
        labels: dict[str, Winner] = {d: rng.choice((1, 2)) for d in DIMENSIONS}
        short = f"Finding {i}{variant}: no acute abnormality."
        long = f"Finding {i}{variant}: there is a small lesion; recommend follow-up imaging in six weeks ({i})."
        r1, r2 = (short, long) if i % 3 else (long, short)
        cases.append(
            Case(
                case_id=f"c{i:03d}",
                image=ImageRef.from_bytes(png_bytes(seed=i, size=(48, 48), pattern="gradient"), name=f"img{i}.png"),
                question=f"What does image {i} show? <b>bold?</b>",
                response_1=r1,
                response_2=r2,
                labels=labels,
                organ_system=ORGANS[i % len(ORGANS)],
            )
        )
    return cases


class ScriptedJudge(Judge):
    """A judge with a fixed policy: ``oracle`` (expert answer), ``broken`` (always fails) or
    ``planted`` (oracle on even cases, the other answer on odd ones, with ``<script>`` in its text)."""

    kind = "test"
    batch_size = 16

    def __init__(self, spec: str, policy: str):
        self.spec = spec
        self.policy = policy

    def config(self) -> dict[str, object]:
        return {"spec": self.spec, "policy": self.policy}

    def _answer(self, request: JudgeRequest) -> JudgeResult:
        if self.policy == "broken":
            return JudgeResult.failed("scripted failure: server said no", raw_output="HTTP 500 <html>oops</html>")
        index = int(request.case.case_id[1:])
        verdicts: dict[str, Position] = {}
        for d in DIMENSIONS:
            winner = request.case.labels[d]
            if self.policy == "planted" and index % 2 == 1:
                winner = 2 if winner == 1 else 1
            first_shown = 1 if request.order is Order.ORIGINAL else 2
            verdicts[d] = "A" if winner == first_shown else "B"
        raw = "{" + ", ".join(f'"{d}": "{v}"' for d, v in verdicts.items()) + "}"
        if self.policy == "planted":
            reason = f'"reason": "{PLANTED_REASON} {index}"'
            raw = f"Reasoning {PLANTED} & <img src=x onerror=alert(1)>\n" + raw[:-1] + ", " + reason + "}"
        return JudgeResult(verdicts=verdicts, raw_output=raw)

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        return [self._answer(r) for r in requests]


@dataclass(frozen=True)
class RunsFixture:
    """Where the fixture put things."""

    root: Path
    data_file: Path
    run_dir: Path
    """a results directory with one store holding every run"""
    other_dir: Path
    """a second results directory whose run was made on different data"""
    benchmark: Benchmark
    specs: tuple[str, ...]


def scripted_judges() -> list[Judge]:
    return [
        ScriptedJudge("test:oracle", "oracle"),
        ScriptedJudge("test:oracle-twin", "oracle"),
        ScriptedJudge("test:planted", "planted"),
        ScriptedJudge("test:broken", "broken"),
    ]


def build_runs(root: Path, n_cases: int = 24) -> RunsFixture:
    """Write the data set, run every judge into one store, and one more run on other data."""
    root.mkdir(parents=True, exist_ok=True)
    data_file = write_canonical(make_cases(n_cases), root / "data" / "cases.jsonl")
    benchmark = load_benchmark(str(data_file))
    run_dir = root / "results"
    judges: list[Judge] = [build_judge(spec) for spec in BASELINES] + scripted_judges()
    with Store.in_dir(run_dir) as store:
        for judge in judges:
            run_judge(judge, benchmark, store)
    other_file = write_canonical(make_cases(6, variant="x"), root / "other" / "cases.jsonl")
    other_dir = root / "other-results"
    with Store.in_dir(other_dir) as store:
        run_judge(build_judge("baseline:first"), load_benchmark(str(other_file)), store)
    return RunsFixture(root, data_file, run_dir, other_dir, benchmark, tuple(j.spec for j in judges))


@pytest.fixture(scope="session")
def runs_fixture(tmp_path_factory: pytest.TempPathFactory) -> RunsFixture:
    return build_runs(tmp_path_factory.mktemp("report-runs"))

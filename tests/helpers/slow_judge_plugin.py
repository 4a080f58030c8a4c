"""A judge for kill-and-resume tests: sleeps per request and logs every call to a file.

Loaded into a real ``medrewardbench eval`` subprocess through the judge registry.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions


class SlowJudge(Judge):
    spec = "slow:"
    batch_size = 1
    concurrency = 2

    def __init__(self, log_path: str, delay_s: float):
        self.log_path = log_path
        self.delay_s = delay_s

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        await asyncio.sleep(self.delay_s)
        with open(self.log_path, "a", encoding="utf-8") as fh:
            for r in requests:
                fh.write(f"{r.case.case_id}\t{r.order.value}\n")
        return [JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A"), raw_output="A") for _ in requests]


def build(name: str, options: JudgeOptions) -> Judge:
    return SlowJudge(os.environ["SLOW_JUDGE_LOG"], float(os.environ.get("SLOW_JUDGE_DELAY", "0.05")))

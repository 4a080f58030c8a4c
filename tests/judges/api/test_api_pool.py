"""An API judge spread over client processes: same answers, same fingerprint, failures kept."""

from __future__ import annotations

import asyncio
import os
import signal

from helpers.api import FAKE_API_KEY, api_options, longer_answer_responder
from helpers.cases import make_case

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.judges.api import ProcessPoolApiJudge
from medrewardbench.judges.base import JudgeRequest
from medrewardbench.judges.registry import build_judge
from medrewardbench.testing.openai_server import OpenAIServer


def test_pool_judges_like_one_process_and_keeps_the_fingerprint(openai_server: OpenAIServer) -> None:
    openai_server.control.set_responder(longer_answer_responder)
    single = build_judge("api:pool-model", api_options(openai_server, concurrency=8))
    pool = build_judge("api:pool-model", api_options(openai_server, concurrency=8, client_processes=2))
    assert isinstance(pool, ProcessPoolApiJudge)
    assert pool.fingerprint() == single.fingerprint()
    assert pool.metadata()["client_processes"] == 2
    cases = [
        make_case(case_id=f"p{i}", response_1="short", response_2="a much longer answer " * (i % 3)) for i in range(12)
    ]
    requests = [JudgeRequest(c, o) for c in cases for o in Order]

    async def run() -> tuple[list, list]:  # type: ignore[type-arg]
        try:
            return await pool.judge_batch(requests), await single.judge_batch(requests)
        finally:
            await pool.aclose()
            await single.aclose()

    pooled, plain = asyncio.run(run())
    assert [r.verdicts for r in pooled] == [r.verdicts for r in plain]
    assert all(set(r.verdicts) == set(DIMENSIONS) for r in pooled)
    assert len(openai_server.control.chat_requests()) == 2 * len(requests)
    assert all(FAKE_API_KEY not in repr(r) for r in pooled)


def test_a_client_process_that_dies_fails_its_requests_with_a_reason(openai_server: OpenAIServer) -> None:
    openai_server.control.set_latency(2.0)
    pool = build_judge("api:pool-model", api_options(openai_server, concurrency=4, client_processes=2, timeout_s=10.0))
    assert isinstance(pool, ProcessPoolApiJudge)
    requests = [JudgeRequest(make_case(case_id=f"d{i}"), Order.ORIGINAL) for i in range(4)]

    async def run() -> list:  # type: ignore[type-arg]
        try:
            batch = asyncio.ensure_future(pool.judge_batch(requests))
            await asyncio.sleep(1.0)  # the requests are with the server now
            os.kill(pool._workers[0].pid, signal.SIGKILL)
            return await asyncio.wait_for(batch, timeout=30)
        finally:
            await pool.aclose()

    results = asyncio.run(run())
    lost = [r for r in results if r.failure]
    assert lost and all(r.failure.startswith("client process exited") for r in lost)
    assert all(set(r.verdicts) == set(DIMENSIONS) for r in results if not r.failure)

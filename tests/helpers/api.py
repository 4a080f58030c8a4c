"""Fixtures for the API judge: one real OpenAI-compatible server on 127.0.0.1 per test session.

A pytest plugin (registered in tests/conftest.py): tests name ``openai_server`` as an argument and
import the helpers below (``from helpers.api import api_options, judge_all``). Every test gets the
server reset to defaults (no latency, no faults, default answer) and a distinctive fake API key in
the environment.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.models.options import ApiSettings, JudgeOptions
from medrewardbench.testing.openai_server import OpenAIServer

FAKE_API_KEY = "sk-mrbFAKE0123456789abcdefLEAKCHECK"
"""A key nobody could mistake for text that belongs in a result."""
API_KEY_ENV = "MRB_TEST_API_KEY"


@pytest.fixture(scope="session")
def api_server_session() -> Iterator[OpenAIServer]:
    """The one server of the session."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(api_server_session: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """The session's server, reset for this test, with the fake key set in ``API_KEY_ENV``."""
    api_server_session.control.reset()
    monkeypatch.setenv(API_KEY_ENV, FAKE_API_KEY)
    yield api_server_session
    api_server_session.control.reset()


def verdict_json(letter: str, reason: str = "scripted") -> str:
    """A complete verdict naming ``letter`` on every dimension."""
    return json.dumps({**{d: letter for d in DIMENSIONS}, "reason": reason})


def _between(text: str, start: str, end: str) -> str:
    head, _, tail = text.partition(start)
    return tail.partition(end)[0].strip() if tail else ""


def longer_answer_responder(body: dict[str, Any]) -> str:
    """Answer like a judge that prefers the longer answer, reading the prompt the client sent."""
    user_text = "\n".join(
        part.get("text", "")
        for message in body["messages"]
        if message.get("role") == "user"
        for part in (message["content"] if isinstance(message["content"], list) else [])
        if part.get("type") == "text"
    )
    answer_a = _between(user_text, "[Answer A]", "[End of Answer A]")
    answer_b = _between(user_text, "[Answer B]", "[End of Answer B]")
    return verdict_json("A" if len(answer_a) >= len(answer_b) else "B", "the longer answer")


def api_options(server: OpenAIServer, **changes: Any) -> JudgeOptions:
    """Options pointing at ``server`` with fast retries; ``changes`` override any shared option or
    :class:`ApiSettings` field (``concurrency=8``, ``backoff_base_s=0.001``, ``http_backend="httpx"``)."""
    shared = {k: v for k, v in changes.items() if k in JudgeOptions.__dataclass_fields__}
    api: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key_env": API_KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 3,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    api.update({k: v for k, v in changes.items() if k not in shared})
    return JudgeOptions(**shared, api=ApiSettings(**api))


def judge_all(judge: Judge, requests: Sequence[JudgeRequest] | Sequence[Case]) -> list[JudgeResult]:
    """Run ``judge_batch`` on a fresh event loop and close the judge's client afterwards.

    Cases given without an order are judged in the original order.
    """
    prepared = [r if isinstance(r, JudgeRequest) else JudgeRequest(r, Order.ORIGINAL) for r in requests]

    async def run() -> list[JudgeResult]:
        try:
            return await judge.judge_batch(prepared)
        finally:
            await judge.aclose()

    return asyncio.run(run())

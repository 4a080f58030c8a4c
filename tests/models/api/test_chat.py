"""The request machinery's answers that come another way (a Batch API file) and a later endpoint, over real HTTP.

A Batch API request line must carry the very body a live call sends, and an answer read from a
batch output file must become the same result as the same answer received live: both go through
:class:`~medrewardbench.models.api.chat.ChatClient`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest
from helpers.api import api_options, judge_all, longer_answer_responder
from helpers.cases import make_case

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.api import ApiJudge
from medrewardbench.judges.base import JudgeRequest
from medrewardbench.models.api.chat import CHAT_COMPLETIONS_URL
from medrewardbench.testing.openai_server import OpenAIServer


def _post(server: OpenAIServer, body: dict[str, Any]) -> dict[str, Any]:
    """Send a chat completion body to the server with a plain client; the decoded answer."""
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer x"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        decoded: dict[str, Any] = json.loads(answer.read())
    return decoded


def test_a_batch_line_carries_the_body_a_live_call_sends_and_drops_a_refused_response_format(
    openai_server: OpenAIServer,
) -> None:
    judge = ApiJudge("test-model", api_options(openai_server, structured=True, max_retries=0, temperature=0.0))
    request = JudgeRequest(make_case(), Order.SWAPPED)
    line = asyncio.run(judge.batch_request("mrb-7", request))
    judge_all(judge, [request])
    [sent] = openai_server.control.chat_requests()
    assert line == {"custom_id": "mrb-7", "method": "POST", "url": CHAT_COMPLETIONS_URL, "body": sent.body}
    assert "response_format" in line["body"] and line["body"]["temperature"] == 0.0

    openai_server.control.clear_requests()
    openai_server.control.set_reject_response_format(True)
    judge_all(judge, [request])  # refused with response_format, then sent again without it
    retried = openai_server.control.chat_requests()[-1]
    later = asyncio.run(judge.batch_request("mrb-8", request))
    assert "response_format" not in later["body"] and later["body"] == retried.body


def test_a_batch_answer_becomes_the_result_the_same_answer_gives_live(openai_server: OpenAIServer) -> None:
    openai_server.control.set_responder(longer_answer_responder)
    judge = ApiJudge("test-model", api_options(openai_server))
    request = JudgeRequest(make_case(), Order.ORIGINAL)
    [live] = judge_all(judge, [request])
    body = asyncio.run(judge.batch_request("mrb-0", request))["body"]

    batched = judge.result_from_response(request, 200, _post(openai_server, body), extra={"batch_id": "batch_1"})

    assert dict(batched.verdicts) == dict(live.verdicts) == dict.fromkeys(DIMENSIONS, "B")
    assert batched.raw_output == live.raw_output and batched.failure is None
    assert (batched.prompt_tokens, batched.completion_tokens) == (live.prompt_tokens, live.completion_tokens)
    assert batched.prompt_tokens is not None and batched.prompt_tokens > 0
    assert batched.latency_s is None  # a batch has no per-request latency
    assert batched.extra["batch_id"] == "batch_1" and batched.extra["attempts"] == 1
    shared = ("parse_method", "reason", "finish_reason", "structured")
    assert {k: batched.extra[k] for k in shared} == {k: live.extra[k] for k in shared}


def test_a_batch_error_or_an_unusable_answer_fails_with_the_reason_it_has_live(openai_server: OpenAIServer) -> None:
    judge = ApiJudge("test-model", api_options(openai_server, max_retries=0))
    request = JudgeRequest(make_case(), Order.ORIGINAL)

    openai_server.control.script_faults("missing_choices", "400")
    [live_no_choices] = judge_all(judge, [request])
    [live_400] = judge_all(judge, [request])
    no_choices = judge.result_from_response(request, 200, {"id": "x", "usage": {"prompt_tokens": 3}})
    refused = judge.result_from_response(request, 400, {"error": {"message": "bad request (scripted fault)"}})

    assert no_choices.failure == live_no_choices.failure == "malformed response: no choices"
    assert no_choices.prompt_tokens == 3 and no_choices.verdicts == {}
    assert live_400.failure is not None and live_400.failure.startswith("HTTP 400: ")
    assert refused.failure == "HTTP 400: bad request (scripted fault)"
    assert judge.result_from_response(request, 503, "upstream down").failure == "HTTP 503: upstream down"


def test_a_client_can_be_pointed_at_a_server_that_started_after_it_was_made(openai_server: OpenAIServer) -> None:
    nowhere = "http://127.0.0.1:9/v1"  # the discard port: nothing answers there
    judge = ApiJudge("test-model", api_options(openai_server, base_url=nowhere, max_retries=0, timeout_s=2.0))
    [before] = judge_all(judge, [make_case()])
    assert before.failure is not None and "connection error" in before.failure

    judge.chat.use_base_url(openai_server.base_url)
    [after] = judge_all(judge, [make_case()])
    assert after.failure is None and judge.base_url == openai_server.base_url
    assert len(openai_server.control.chat_requests()) == 1
    with pytest.raises(JudgeSpecError, match="not a valid|http"):
        judge.chat.use_base_url("ftp://example.org/v1")


def test_usage_adds_up_over_attempts_that_came_back_with_a_completion(openai_server: OpenAIServer) -> None:
    from medrewardbench.models.api.chat import CallOutcome

    chat = ApiJudge("test-model", api_options(openai_server)).chat
    answer = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}
    outcome = CallOutcome()
    chat.read_completion({**answer, "usage": {"prompt_tokens": 100, "completion_tokens": 7}}, outcome)
    chat.read_completion({**answer, "usage": {"prompt_tokens": 100, "completion_tokens": 9}}, outcome)
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (200, 16), "both completions were billed"
    unreported = CallOutcome()
    chat.read_completion(answer, unreported)
    assert (unreported.prompt_tokens, unreported.completion_tokens) == (None, None)

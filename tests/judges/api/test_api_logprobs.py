"""API judges asking for log-probabilities: a probability per verdict, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.api import api_options, judge_all, verdict_json
from helpers.cases import make_case

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.api import ApiJudge
from medrewardbench.judges.base import JudgeRequest
from medrewardbench.judges.registry import build_judge
from medrewardbench.models.options import ApiSettings
from medrewardbench.testing.openai_server import OpenAIServer


def make_judge(server: OpenAIServer, **changes: Any) -> ApiJudge:
    judge = build_judge("api:test-model", api_options(server, **changes))
    assert isinstance(judge, ApiJudge)
    return judge


@pytest.mark.parametrize("http_backend", ["httpx", "auto"])
def test_the_judge_asks_for_logprobs_and_reads_each_verdicts_probability(
    openai_server: OpenAIServer, http_backend: str
) -> None:
    openai_server.control.set_letter_probability(0.8)
    openai_server.control.script(
        "Thinking it over.\n" + json.dumps({**dict.fromkeys(DIMENSIONS, "A"), "overall": "B", "reason": "B is vague"})
    )
    [result] = judge_all(make_judge(openai_server, logprobs=5, http_backend=http_backend), [make_case(0)])
    [sent] = openai_server.control.chat_requests()
    assert sent.body is not None and sent.body["logprobs"] is True and sent.body["top_logprobs"] == 5
    assert result.failure is None and result.extra["logprobs_given"] is True
    expected = {**dict.fromkeys(DIMENSIONS, 0.8), "overall": pytest.approx(0.2)}
    assert result.preferences == pytest.approx(expected)


def test_the_probability_follows_the_prompt_and_both_orders_come_back(openai_server: OpenAIServer) -> None:
    case = make_case(1)
    requests = [JudgeRequest(case, Order.ORIGINAL), JudgeRequest(case, Order.SWAPPED)]
    openai_server.control.set_default_output(verdict_json("A"))
    results = judge_all(make_judge(openai_server, logprobs=20), requests)
    prompts = [
        openai_server.control.letter_probability_for(r.body or {}) for r in openai_server.control.chat_requests()
    ]
    assert sorted(result.preferences["overall"] for result in results) == pytest.approx(sorted(prompts), abs=1e-6)
    assert prompts[0] != prompts[1]  # the two orders are two prompts
    assert all(set(r.preferences) == set(DIMENSIONS) for r in results)
    assert all(0.55 <= p < 0.99 for r in results for p in r.preferences.values())


def test_without_the_setting_nothing_is_asked_stored_or_hashed(openai_server: OpenAIServer) -> None:
    plain = make_judge(openai_server)
    [result] = judge_all(plain, [make_case(0)])
    [sent] = openai_server.control.chat_requests()
    assert sent.body is not None and "logprobs" not in sent.body and "top_logprobs" not in sent.body
    assert result.preferences == {} and "logprobs_given" not in result.extra
    asking = make_judge(openai_server, logprobs=3)
    assert "logprobs" not in plain.config() and asking.config()["logprobs"] == 3
    assert plain.fingerprint() != asking.fingerprint()
    assert plain.fingerprint() == make_judge(openai_server, logprobs=0).fingerprint()


def test_a_server_that_gives_no_logprobs_leaves_the_verdicts_without_probabilities(openai_server: OpenAIServer) -> None:
    openai_server.control.set_responder(lambda body: verdict_json("B"))

    judge = make_judge(openai_server, logprobs=5)
    # a server that ignores the parameter: the same answer, no logprobs member
    original = judge.chat.request_body

    def without_logprobs(*args: Any, **kwargs: Any) -> dict[str, Any]:
        body = original(*args, **kwargs)
        body.pop("logprobs"), body.pop("top_logprobs")
        return body

    judge.chat.request_body = without_logprobs  # type: ignore[method-assign]
    [result] = judge_all(judge, [make_case(0)])
    assert result.verdicts == dict.fromkeys(DIMENSIONS, "B")
    assert result.preferences == {} and result.extra["logprobs_given"] is False


def test_the_setting_is_checked() -> None:
    with pytest.raises(JudgeSpecError, match="logprobs must be at most 20"):
        ApiSettings(logprobs=21)
    with pytest.raises(JudgeSpecError, match="logprobs"):
        ApiSettings(logprobs=-1)
    assert ApiSettings.from_mapping({"logprobs": "7"}).logprobs == 7


def test_the_test_server_refuses_top_logprobs_out_of_range(openai_server: OpenAIServer) -> None:
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    url = openai_server.base_url + "/chat/completions"
    assert httpx.post(url, json={**body, "logprobs": True, "top_logprobs": 21}).status_code == 400
    assert httpx.post(url, json={**body, "top_logprobs": 2}).status_code == 400
    answer = httpx.post(url, json={**body, "logprobs": True, "top_logprobs": 2}).json()
    assert all(len(item["top_logprobs"]) == 2 for item in answer["choices"][0]["logprobs"]["content"])

"""The local OpenAI-compatible test server: outputs, latency, faults, recording."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers.api import FAKE_API_KEY

from medrewardbench.testing.openai_server import (
    DEFAULT_OUTPUT,
    IMAGE_TOKENS,
    OpenAIServer,
    ServerControl,
    ServerProcess,
    ServerSettings,
)

CHAT = "/chat/completions"
# one client for the module: a new httpx client per call spends ~50 ms building its TLS context
HTTP = httpx.Client(timeout=5)


@pytest.fixture(autouse=True, scope="module")
def _close_http_client() -> Iterator[None]:
    yield
    HTTP.close()


def chat_body(text: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "test-model", "messages": [{"role": "user", "content": text}], **extra}


def post(server: OpenAIServer, body: Any = None, *, timeout: float = 5.0, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {FAKE_API_KEY}"}
    return HTTP.post(
        server.base_url + CHAT, json=chat_body() if body is None else body, headers=headers, timeout=timeout, **kwargs
    )


def content_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def test_models_endpoint_lists_the_configured_models(openai_server: OpenAIServer) -> None:
    openai_server.control.set_models("judge-a", "judge-b")
    answer = HTTP.get(openai_server.base_url + "/models")
    assert answer.status_code == 200
    assert [m["id"] for m in answer.json()["data"]] == ["judge-a", "judge-b"]


def test_default_answer_is_a_chat_completion_with_usage(openai_server: OpenAIServer) -> None:
    image = "data:image/png;base64," + base64.b64encode(b"not really a png").decode()
    body = {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "one two three"},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "four five"}],
            },
        ],
    }
    answer = post(openai_server, body)
    payload = answer.json()
    assert payload["object"] == "chat.completion"
    assert payload["model"] == "test-model"
    assert payload["choices"][0]["message"]["content"] == DEFAULT_OUTPUT
    assert payload["usage"]["prompt_tokens"] == 5 + IMAGE_TOKENS
    assert payload["usage"]["completion_tokens"] == len(DEFAULT_OUTPUT.split())
    assert payload["usage"]["total_tokens"] == 5 + IMAGE_TOKENS + len(DEFAULT_OUTPUT.split())


def test_scripted_outputs_come_first_then_the_responder_then_the_default(openai_server: OpenAIServer) -> None:
    control = openai_server.control
    control.script("first", "second")
    assert content_of(post(openai_server)) == "first"
    assert content_of(post(openai_server)) == "second"
    control.set_responder(lambda body: "echo: " + body["messages"][0]["content"])
    assert content_of(post(openai_server, chat_body("ping"))) == "echo: ping"
    control.set_responder(None)
    control.set_default_output("fallback")
    assert content_of(post(openai_server)) == "fallback"


def test_a_failing_responder_yields_a_500_and_the_server_keeps_serving(openai_server: OpenAIServer) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    openai_server.control.set_responder(broken)
    assert post(openai_server).status_code == 500
    openai_server.control.set_responder(None)
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT


def test_fixed_latency_delays_every_answer(openai_server: OpenAIServer) -> None:
    openai_server.control.set_latency(0.25)
    started = time.perf_counter()
    post(openai_server)
    assert time.perf_counter() - started >= 0.25


def test_random_latency_stays_within_its_range(openai_server: OpenAIServer) -> None:
    openai_server.control.set_latency(0.05, 0.15, seed=3)
    for _ in range(5):
        started = time.perf_counter()
        post(openai_server)
        elapsed = time.perf_counter() - started
        assert 0.05 <= elapsed < 0.6


def test_latency_does_not_block_the_server_loop(openai_server: OpenAIServer) -> None:
    openai_server.control.set_latency(0.3)

    async def many() -> float:
        async with httpx.AsyncClient(timeout=5) as client:
            started = time.perf_counter()
            answers = await asyncio.gather(
                *(client.post(openai_server.base_url + CHAT, json=chat_body()) for _ in range(20))
            )
            assert all(a.status_code == 200 for a in answers)
            return time.perf_counter() - started

    # 20 sequential waits would take 6 s
    assert asyncio.run(many()) < 1.5


def test_429_carries_retry_after_in_seconds_or_as_a_date(openai_server: OpenAIServer) -> None:
    control = openai_server.control
    control.set_retry_after(0.5)
    control.script_faults("429")
    answer = post(openai_server)
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "0.5"
    assert answer.json()["error"]["type"] == "rate_limit_error"
    date = email.utils.formatdate(time.time() + 3, usegmt=True)
    control.set_retry_after(date)
    control.script_faults("429")
    assert post(openai_server).headers["retry-after"] == date
    control.set_retry_after(None)
    control.script_faults("429")
    assert "retry-after" not in post(openai_server).headers


@pytest.mark.parametrize("kind,status", [("500", 500), ("400", 400)])
def test_status_faults(openai_server: OpenAIServer, kind: str, status: int) -> None:
    openai_server.control.script_faults(kind)
    answer = post(openai_server)
    assert answer.status_code == status
    assert "message" in answer.json()["error"]
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT  # the fault was for one request only


def test_timeout_fault_outlasts_the_client_and_ends_when_it_hangs_up(openai_server: OpenAIServer) -> None:
    control = openai_server.control
    control.set_timeout_sleep(30.0)
    control.script_faults("timeout")
    started = time.perf_counter()
    with pytest.raises(httpx.ReadTimeout):
        post(openai_server, timeout=0.3)
    assert 0.3 <= time.perf_counter() - started < 2.0
    # the server stops waiting once the client is gone, and serves the next request promptly
    started = time.perf_counter()
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT
    assert time.perf_counter() - started < 1.0
    assert control.counters["timeout"] == 1


def test_timeout_fault_shorter_than_the_client_timeout_answers_late(openai_server: OpenAIServer) -> None:
    openai_server.control.set_timeout_sleep(0.2)
    openai_server.control.script_faults("timeout")
    started = time.perf_counter()
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT
    assert time.perf_counter() - started >= 0.2


def test_malformed_json_fault_sends_invalid_json(openai_server: OpenAIServer) -> None:
    openai_server.control.script_faults("malformed_json")
    answer = post(openai_server)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(answer.text)


def test_missing_choices_fault_sends_json_without_choices(openai_server: OpenAIServer) -> None:
    openai_server.control.script_faults("missing_choices")
    payload = post(openai_server).json()
    assert "choices" not in payload
    assert payload["usage"]["prompt_tokens"] > 0


def test_drop_fault_closes_the_connection_without_an_answer(openai_server: OpenAIServer) -> None:
    openai_server.control.script_faults("drop")
    with pytest.raises(httpx.RemoteProtocolError):
        post(openai_server)
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT
    assert openai_server.control.counters["drop"] == 1


def test_random_faults_follow_their_seed_and_rates(openai_server: OpenAIServer) -> None:
    control = openai_server.control

    def draw(seed: int) -> list[int]:
        control.clear_requests()
        control.set_faults(seed=seed, rate_500=0.3, rate_400=0.2)
        return [post(openai_server).status_code for _ in range(60)]

    first, again, other = draw(11), draw(11), draw(12)
    assert first == again
    assert first != other
    assert 8 <= first.count(500) <= 30
    assert 3 <= first.count(400) <= 22
    assert first.count(200) + first.count(500) + first.count(400) == 60


def test_fault_rates_are_validated() -> None:
    control = ServerControl()
    with pytest.raises(ValueError):
        control.set_faults(rate_500=0.7, rate_429=0.5)
    with pytest.raises(ValueError):
        control.script_faults("teapot")


def test_response_format_json_schema_is_accepted(openai_server: OpenAIServer) -> None:
    schema = {"type": "object", "properties": {"overall": {"type": "string"}}}
    body = chat_body(response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}})
    assert content_of(post(openai_server, body)) == DEFAULT_OUTPUT
    assert openai_server.control.chat_requests()[-1].response_format == body["response_format"]


def test_response_format_can_be_rejected(openai_server: OpenAIServer) -> None:
    openai_server.control.set_reject_response_format(True)
    body = chat_body(response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": {}}})
    answer = post(openai_server, body)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "response_format"
    assert content_of(post(openai_server)) == DEFAULT_OUTPUT  # without response_format it answers


def test_malformed_requests_get_a_400(openai_server: OpenAIServer) -> None:
    assert post(openai_server, {"messages": []}).status_code == 400
    assert post(openai_server, chat_body(response_format={"type": "xml"})).status_code == 400
    answer = HTTP.post(openai_server.base_url + CHAT, content=b"{not json")
    assert answer.status_code == 400


def test_requests_are_recorded_without_the_authorization_value(openai_server: OpenAIServer) -> None:
    post(openai_server, chat_body("recorded text"), params=None)
    HTTP.post(openai_server.base_url + CHAT, json=chat_body("anonymous"))
    first, second = openai_server.control.chat_requests()
    assert first.had_auth and not second.had_auth
    assert "authorization" not in first.headers
    assert FAKE_API_KEY not in repr(first)
    assert first.body is not None and first.body["messages"][0]["content"] == "recorded text"
    assert first.user_text() == "recorded text"
    assert first.method == "POST" and first.path == "/v1/chat/completions"
    assert first.received_at <= second.received_at


def test_a_server_in_another_process_serves_and_counts() -> None:
    settings = ServerSettings(latency_s=0.01, fault_rates={"500": 0.5}, seed=5)
    with ServerProcess(settings) as server:
        statuses = [HTTP.post(server.base_url + CHAT, json=chat_body()).status_code for _ in range(20)]
        counters = server.counters()
    assert counters.get("500", 0) == statuses.count(500)
    assert counters.get("ok", 0) == statuses.count(200)
    assert 0 < statuses.count(500) < 20


def test_started_by_hand_in_the_background_it_keeps_serving_until_sigterm(tmp_path: Any) -> None:
    # a user starts it with `python -m medrewardbench.testing.openai_server --port N &`: its standard
    # input is closed or /dev/null, and that must not stop it (it used to exit at once)
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "medrewardbench.testing.openai_server", "--answer-mode", "free-text"]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        ready = process.stdout.readline()
        assert ready.startswith("READY "), ready
        port = int(ready.split()[1])
        assert f"http://127.0.0.1:{port}/v1" in process.stderr.readline()  # it says where it listens, how to stop it
        time.sleep(0.5)  # well past the moment an end of input would have stopped it
        assert process.poll() is None
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "What is shown?"}]},
            headers={"Authorization": f"Bearer {FAKE_API_KEY}"},
            timeout=10,
        )
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

"""The OpenAI-compatible server over a tiny Qwen2-VL, on a real socket, through the openai client."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.images import png_bytes
from PIL import Image

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.models.generation import GenerationSettings, VLMGenerator

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from medrewardbench.serve import BackgroundServer, create_app  # noqa: E402

MODEL_NAME = "tiny-qwen2-vl"


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_message(text: str, url: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}],
    }


@pytest.fixture(scope="module")
def generator(tiny_qwen2_vl: Path) -> VLMGenerator:
    return VLMGenerator.load(str(tiny_qwen2_vl))


@pytest.fixture(scope="module")
def server(generator: VLMGenerator) -> Iterator[BackgroundServer]:
    app = create_app(generator, model_name=MODEL_NAME, defaults=GenerationSettings(max_new_tokens=16))
    with BackgroundServer(app) as running:
        yield running


@pytest.fixture
def client(server: BackgroundServer) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=60)


def test_chat_completion_with_a_data_url_image(client: Any, generator: VLMGenerator) -> None:
    png = png_bytes((200, 30, 30), (64, 48), pattern="square")
    completion = client.chat.completions.create(
        model=MODEL_NAME,
        messages=[
            {"role": "system", "content": "You are a radiologist."},
            image_message("Is the lung normal?", data_url(png)),
        ],
        max_tokens=7,
    )
    assert completion.model == MODEL_NAME
    content = completion.choices[0].message.content
    assert isinstance(content, str) and content
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage.completion_tokens <= 7
    assert completion.usage.prompt_tokens > 20  # text plus image tokens
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    # the server's answer is exactly what the in-process generator gives for the same input
    image = Image.open(io.BytesIO(png)).convert("RGB")
    local = generator.generate(
        [
            [
                {"role": "system", "content": [{"type": "text", "text": "You are a radiologist."}]},
                {
                    "role": "user",
                    "content": [{"type": "image", "image": image}, {"type": "text", "text": "Is the lung normal?"}],
                },
            ]
        ],
        GenerationSettings(max_new_tokens=7),
    )[0]
    assert content == local.text
    assert completion.usage.prompt_tokens == local.prompt_tokens


def test_constrained_extension_returns_verdict_json(client: Any) -> None:
    completion = client.chat.completions.create(
        model=MODEL_NAME,
        messages=[
            image_message("Which answer is better?", data_url(png_bytes((10, 200, 10), (64, 48), pattern="square")))
        ],
        max_tokens=120,
        extra_body={"constrained": True},
    )
    verdicts = json.loads(completion.choices[0].message.content)
    assert set(verdicts) == set(DIMENSIONS)
    assert set(verdicts.values()) <= {"A", "B"}


def test_seeded_sampling_is_reproducible_and_n_is_honoured(client: Any) -> None:
    request: dict[str, Any] = {
        "model": MODEL_NAME,
        "messages": [image_message("Describe.", data_url(png_bytes((0, 0, 255), (64, 48), pattern="square")))],
        "max_tokens": 8,
        "temperature": 1.0,
        "top_p": 0.9,
        "seed": 11,
    }
    first = client.chat.completions.create(**request)
    second = client.chat.completions.create(**request)
    assert first.choices[0].message.content == second.choices[0].message.content
    several = client.chat.completions.create(**request, n=2)
    assert [choice.index for choice in several.choices] == [0, 1]


def test_models_endpoint_lists_the_model(client: Any) -> None:
    assert [model.id for model in client.models.list().data] == [MODEL_NAME]


def test_remote_image_urls_are_refused_with_a_clear_400(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL_NAME, messages=[image_message("hi", "https://example.org/x.png")], max_tokens=4
        )
    assert caught.value.status_code == 400
    assert "data URL" in str(caught.value) and "network" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (b"{not json", None, "not valid JSON"),
        (json.dumps({"model": "m"}).encode(), "messages", "messages must be a non-empty list"),
        (
            json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}).encode(),
            "max_tokens",
            "must be an integer",
        ),
        (
            json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(),
            "messages[0]",
            "unsupported role",
        ),
        (
            json.dumps({"messages": [image_message("x", "data:image/png;base64,@@@notbase64")]}).encode(),
            "messages[0].content[0]",
            "not valid base64",
        ),
        (
            json.dumps({"messages": [image_message("x", data_url(b"definitely not a png"))]}).encode(),
            "messages[0].content[0]",
            "cannot be decoded",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "x"}], "stream": True}).encode(),
            "stream",
            "streaming is not supported",
        ),
        (
            json.dumps(
                {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}
            ).encode(),
            "response_format",
            "hf:MODEL#constrained",
        ),
    ],
)
def test_malformed_requests_get_a_4xx_json_error(
    server: BackgroundServer, body: bytes, param: str | None, message: str
) -> None:
    response = httpx.post(
        server.base_url + "/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error["message"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_concurrent_requests_are_served_one_at_a_time(
    client: Any, generator: VLMGenerator, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[str] = []
    errors: list[BaseException] = []
    active = 0
    most_active = 0
    guard = threading.Lock()
    real_generate = generator.model.generate

    def counting_generate(*args: Any, **kwargs: Any) -> Any:
        nonlocal active, most_active
        with guard:
            active += 1
            most_active = max(most_active, active)
        try:
            time.sleep(0.05)  # widen the window in which an overlap would show
            return real_generate(*args, **kwargs)
        finally:
            with guard:
                active -= 1

    monkeypatch.setattr(generator.model, "generate", counting_generate)

    def ask() -> None:
        try:
            completion = client.chat.completions.create(
                model=MODEL_NAME,
                messages=[image_message("Same question.", data_url(png_bytes((9, 9, 9), (64, 48), pattern="square")))],
                max_tokens=6,
            )
            answers.append(completion.choices[0].message.content)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert len(answers) == 4 and len(set(answers)) == 1
    assert most_active == 1


def test_run_server_loads_the_spec_and_serves(tiny_llava: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import uvicorn

    from medrewardbench.models.options import JudgeOptions
    from medrewardbench.serve import run_server

    # run_server blocks in uvicorn.run; run the same app under a uvicorn.Server this test can stop
    servers: list[Any] = []

    def stoppable_run(app: Any, host: str, port: int, **kwargs: Any) -> None:
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, **kwargs))
        servers.append(server)
        server.run()

    monkeypatch.setattr(uvicorn, "run", stoppable_run)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = "hf:" + str(tiny_llava) + "#constrained"
    thread = threading.Thread(
        target=run_server, args=(spec, "127.0.0.1", port, JudgeOptions(max_tokens=120)), daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not (servers and servers[0].started):
            assert thread.is_alive(), "run_server exited"
            assert time.monotonic() < deadline, "run_server did not start"
            time.sleep(0.02)
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == str(tiny_llava)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        completion = client.chat.completions.create(
            model="any",
            messages=[image_message("Which is better?", data_url(png_bytes((1, 2, 3), (64, 48), pattern="square")))],
        )
        # "#constrained" made constrained decoding the default
        assert set(json.loads(completion.choices[0].message.content)) == set(DIMENSIONS)
    finally:
        if servers:
            servers[0].should_exit = True
        thread.join(timeout=15)
    assert not thread.is_alive()


@pytest.mark.parametrize("structured", [False, True])
def test_the_api_judge_gets_parsed_verdicts_from_a_constrained_server(
    generator: VLMGenerator, structured: bool
) -> None:
    # with --structured the server refuses the JSON schema (it cannot honour it), and the judge
    # falls back to plain requests, which the constrained server answers with the verdict JSON
    import asyncio

    from medrewardbench.cases import Case, ImageRef
    from medrewardbench.dimensions import Order
    from medrewardbench.judges.base import JudgeRequest
    from medrewardbench.judges.registry import build_judge
    from medrewardbench.models.options import ApiSettings, JudgeOptions

    case = Case(
        case_id="c1",
        image=ImageRef.from_bytes(png_bytes((120, 20, 200), (64, 48), pattern="square"), name="c1.png"),
        question="Is there an effusion?",
        response_1="Yes, a small left pleural effusion.",
        response_2="No effusion.",
    )
    app = create_app(generator, model_name=MODEL_NAME, constrained=True)
    with BackgroundServer(app) as served:
        judge = build_judge(
            f"api:{MODEL_NAME}",
            JudgeOptions(max_tokens=120, api=ApiSettings(base_url=served.base_url, structured=structured)),
        )

        async def run() -> list[Any]:
            try:
                return await judge.judge_batch([JudgeRequest(case, Order.ORIGINAL), JudgeRequest(case, Order.SWAPPED)])
            finally:
                await judge.aclose()

        results = asyncio.run(run())
        assert judge.metadata()["structured_fallback"] is structured  # type: ignore[attr-defined]
    for result in results:
        assert result.failure is None, result.failure
        assert set(result.verdicts) == set(DIMENSIONS)
        assert result.prompt_tokens is not None and result.prompt_tokens > 20


def test_logprobs_are_returned_as_openai_does_and_cover_the_content(client: Any) -> None:
    prefix = '{"accuracy": "'
    messages = [{"role": "user", "content": "Which answer is better?"}]
    plain = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=16)
    assert plain.choices[0].logprobs is None
    answer = client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,
        max_tokens=40,
        logprobs=True,
        top_logprobs=4,
        extra_body={"constrained": True, "force_prefix": prefix},
    )
    choice = answer.choices[0]
    content = choice.logprobs.content
    assert "".join(item.token for item in content) == choice.message.content
    assert content[0].token == prefix and content[0].logprob == 0.0  # forced, not chosen
    for item in content[1:]:
        assert item.logprob <= 0.0 and len(item.top_logprobs) == 4
        assert [alt.logprob for alt in item.top_logprobs] == sorted(
            (alt.logprob for alt in item.top_logprobs), reverse=True
        )
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=4, top_logprobs=2)
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        client.chat.completions.create(
            model=MODEL_NAME, messages=messages, max_tokens=4, logprobs=True, top_logprobs=21
        )


def test_the_api_judge_reads_verdict_probabilities_from_the_served_model(generator: VLMGenerator) -> None:
    import asyncio

    from medrewardbench.cases import Case, ImageRef
    from medrewardbench.dimensions import Order
    from medrewardbench.judges.base import JudgeRequest
    from medrewardbench.judges.registry import build_judge
    from medrewardbench.models.options import ApiSettings, JudgeOptions

    case = Case(
        case_id="c1",
        image=ImageRef.from_bytes(png_bytes((120, 20, 200), (64, 48), pattern="square"), name="c1.png"),
        question="Is there an effusion?",
        response_1="Yes, a small left pleural effusion.",
        response_2="No effusion.",
    )
    app = create_app(generator, model_name=MODEL_NAME, constrained=True)
    with BackgroundServer(app) as served:
        judge = build_judge(
            f"api:{MODEL_NAME}",
            JudgeOptions(max_tokens=120, api=ApiSettings(base_url=served.base_url, logprobs=20)),
        )

        async def run() -> list[Any]:
            try:
                return await judge.judge_batch([JudgeRequest(case, Order.ORIGINAL), JudgeRequest(case, Order.SWAPPED)])
            finally:
                await judge.aclose()

        results = asyncio.run(run())
    for result in results:
        assert result.failure is None, result.failure
        assert set(result.preferences) == set(DIMENSIONS)
        for dim, p in result.preferences.items():  # the verdict is the likelier letter
            assert (p >= 0.5) if result.verdicts[dim] == "A" else (p <= 0.5)

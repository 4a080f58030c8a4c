"""The API judge against a real local OpenAI-compatible server: round trips, retries, faults,
structured output, secrets and concurrency."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest
from helpers.api import (
    API_KEY_ENV,
    FAKE_API_KEY,
    api_options,
    judge_all,
    longer_answer_responder,
    verdict_json,
)
from helpers.cases import make_case
from helpers.images import png_bytes
from PIL import Image

from medrewardbench.cases import ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.api import ApiJudge, RetryPolicy, parse_retry_after, public_url
from medrewardbench.judges.base import JudgeRequest
from medrewardbench.judges.registry import build_judge
from medrewardbench.models.options import ApiSettings
from medrewardbench.prompts import load_template, verdict_json_schema
from medrewardbench.testing.openai_server import OpenAIServer

BACKENDS = ["httpx"]
try:
    import aiohttp  # noqa: F401
except ImportError:
    pass
else:
    BACKENDS.append("aiohttp")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each HTTP backend the judge can use here (aiohttp only when installed)."""
    yield str(request.param)


def make_judge(server: OpenAIServer, **changes: Any) -> ApiJudge:
    judge = build_judge("api:test-model", api_options(server, **changes))
    assert isinstance(judge, ApiJudge)
    return judge


# ------------------------------------------------------------------------------------------ round trip
def test_the_registry_builds_an_api_judge(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server, concurrency=5)
    assert judge.spec == "api:test-model"
    assert judge.model == "test-model"
    assert judge.batch_size == 1
    assert judge.concurrency == 5
    assert make_judge(openai_server).concurrency == 8


@pytest.mark.parametrize("order,expected", [(Order.ORIGINAL, "B"), (Order.SWAPPED, "A")])
def test_a_verdict_round_trips_in_both_orders(
    openai_server: OpenAIServer, backend: str, order: Order, expected: str
) -> None:
    openai_server.control.set_responder(longer_answer_responder)
    case = make_case()  # response_2 is the longer answer
    judge = make_judge(openai_server, http_backend=backend)
    [result] = judge_all(judge, [JudgeRequest(case, order)])

    assert result.failure is None, result.failure
    assert dict(result.verdicts) == {d: expected for d in DIMENSIONS}
    assert result.raw_output == verdict_json(expected, "the longer answer")
    assert result.extra["reason"] == "the longer answer"
    assert result.latency_s is not None and result.latency_s > 0

    [sent] = openai_server.control.chat_requests()
    user_text = sent.user_text()
    shown_first = case.response_2 if order is Order.SWAPPED else case.response_1
    shown_second = case.response_1 if order is Order.SWAPPED else case.response_2
    assert f"[Answer A]\n{shown_first}\n[End of Answer A]" in user_text
    assert f"[Answer B]\n{shown_second}\n[End of Answer B]" in user_text
    assert case.question in user_text
    assert sent.body is not None and sent.body["model"] == "test-model"
    assert sent.body["messages"][0]["role"] == "system"

    [url] = sent.image_urls()
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    decoded = Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :])))
    assert decoded.format == "PNG" and decoded.size == (8, 8)  # make_case's image


def test_a_case_without_an_image_sends_no_image_part(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server)
    [result] = judge_all(judge, [make_case(image=ImageRef.empty())])
    assert result.failure is None
    [sent] = openai_server.control.chat_requests()
    assert sent.image_urls() == []


def test_an_unreadable_image_fails_that_request_only(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server)
    broken = make_case(case_id="broken", image=ImageRef.from_bytes(b"this is not an image", "broken.png"))
    results = judge_all(judge, [broken, make_case(case_id="fine")])
    assert results[0].failure is not None and "could not prepare the request" in results[0].failure
    assert results[1].failure is None
    assert len(openai_server.control.chat_requests()) == 1


def encoded(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def sent_image(server: OpenAIServer) -> tuple[str, bytes]:
    """The MIME type and the bytes of the one image the server received."""
    [sent] = server.control.chat_requests()
    [url] = sent.image_urls()
    header, _, payload = url.partition(",")
    return header.removeprefix("data:").removesuffix(";base64"), base64.b64decode(payload)


@pytest.mark.parametrize(
    ("fmt", "mime", "mode"),
    [
        ("JPEG", "image/jpeg", "RGB"),
        ("PNG", "image/png", "RGB"),
        ("PNG", "image/png", "L"),
        ("WEBP", "image/webp", "RGB"),
    ],
)
def test_an_8_bit_png_jpeg_or_webp_goes_out_as_its_own_bytes(
    openai_server: OpenAIServer, fmt: str, mime: str, mode: str
) -> None:
    original = encoded(Image.radial_gradient("L").convert(mode).resize((40, 30)), fmt)
    judge = make_judge(openai_server)
    [result] = judge_all(judge, [make_case(image=ImageRef.from_bytes(original, f"scan.{fmt.lower()}"))])
    assert result.failure is None
    assert sent_image(openai_server) == (mime, original)


@pytest.mark.parametrize(
    ("image", "fmt", "why"),
    [
        (Image.new("RGBA", (20, 10), (10, 200, 30, 128)), "PNG", "alpha channel"),
        (Image.new("P", (20, 10), 3), "PNG", "palette"),
        (Image.new("I;16", (20, 10), 4000), "PNG", "16-bit"),
        (Image.new("CMYK", (20, 10), (0, 50, 90, 10)), "JPEG", "CMYK"),
        (Image.new("RGB", (20, 10), (40, 90, 160)), "BMP", "format APIs do not all read"),
    ],
)
def test_other_images_are_decoded_and_sent_as_rgb_png(
    openai_server: OpenAIServer, image: Image.Image, fmt: str, why: str
) -> None:
    original = encoded(image, fmt)
    judge = make_judge(openai_server)
    [result] = judge_all(judge, [make_case(image=ImageRef.from_bytes(original, f"scan.{fmt.lower()}"))])
    assert result.failure is None, why
    mime, payload = sent_image(openai_server)
    assert mime == "image/png" and payload != original, why
    decoded = Image.open(io.BytesIO(payload))
    assert (decoded.format, decoded.mode, decoded.size) == ("PNG", "RGB", (20, 10)), why


def test_an_exif_rotated_jpeg_is_sent_upright(openai_server: OpenAIServer) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    original = encoded(Image.new("RGB", (40, 20), (90, 90, 90)), "JPEG", exif=exif)
    judge = make_judge(openai_server)
    judge_all(judge, [make_case(image=ImageRef.from_bytes(original, "rotated.jpg"))])
    mime, payload = sent_image(openai_server)
    assert mime == "image/png" and Image.open(io.BytesIO(payload)).size == (20, 40)


def test_image_passthrough_can_be_switched_off(openai_server: OpenAIServer) -> None:
    original = encoded(Image.new("RGB", (20, 10), (40, 90, 160)), "JPEG")
    assert ApiSettings.from_mapping({"image_passthrough": "false"}).image_passthrough is False
    judge = make_judge(openai_server, image_passthrough=False)
    judge_all(judge, [make_case(image=ImageRef.from_bytes(original, "scan.jpg"))])
    mime, payload = sent_image(openai_server)
    assert mime == "image/png" and Image.open(io.BytesIO(payload)).mode == "RGB"
    assert judge.metadata()["image_passthrough"] is False
    with pytest.raises(JudgeSpecError, match="image_passthrough must be true or false, not 'maybe'"):
        ApiSettings.from_mapping({"image_passthrough": "maybe"})


def test_a_large_file_goes_out_as_is_through_a_worker_thread(
    openai_server: OpenAIServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import medrewardbench.models.api.images as api_images

    path = tmp_path / "scan.png"
    path.write_bytes(png_bytes(size=(64, 64)))
    monkeypatch.setattr(api_images, "INLINE_IMAGE_BYTES", 10)  # every file counts as large
    judge = make_judge(openai_server)
    judge_all(judge, [make_case(image=ImageRef.from_path(path))])
    assert sent_image(openai_server) == ("image/png", path.read_bytes())
    assert judge.chat.images.misses == 1


def test_the_image_is_encoded_once_per_content(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server, concurrency=8)
    # images with an alpha channel are decoded and re-encoded: the expensive path that is shared
    same = encoded(Image.new("RGBA", (24, 16), (1, 2, 3, 200)), "PNG")
    cases = [make_case(case_id=f"c{i}", image=ImageRef.from_bytes(same)) for i in range(12)]
    cases.append(make_case(case_id="other", image=ImageRef.from_bytes(encoded(Image.new("RGBA", (8, 8)), "PNG"))))
    results = judge_all(judge, cases)
    assert all(r.failure is None for r in results)
    assert judge.chat.images.misses == 2
    assert judge.chat.images.hits == 11
    urls = {r.image_urls()[0] for r in openai_server.control.chat_requests()}
    assert len(urls) == 2


def test_both_orders_of_a_case_share_one_encoding(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server)
    case = make_case()
    results = judge_all(judge, [JudgeRequest(case, Order.ORIGINAL), JudgeRequest(case, Order.SWAPPED)])
    assert all(r.failure is None for r in results)
    assert (judge.chat.images.misses, judge.chat.images.hits) == (1, 1)


def test_sampling_settings_reach_the_server_and_the_config(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server, temperature=0.3, top_p=0.9, max_tokens=256, seed=17)
    judge_all(judge, [make_case()])
    [sent] = openai_server.control.chat_requests()
    assert sent.body is not None
    assert (sent.body["temperature"], sent.body["top_p"], sent.body["max_tokens"], sent.body["seed"]) == (
        0.3,
        0.9,
        256,
        17,
    )
    assert "response_format" not in sent.body
    config = judge.config()
    assert (config["temperature"], config["top_p"], config["max_tokens"], config["seed"]) == (0.3, 0.9, 256, 17)
    template = load_template("pairwise")
    assert config["template"] == "pairwise" and config["template_sha256"] == template.sha256
    assert config["model"] == "test-model" and config["spec"] == "api:test-model"
    assert config["structured"] is False
    assert judge.fingerprint() != make_judge(openai_server, temperature=0.4).fingerprint()


def test_unset_sampling_settings_are_not_sent(openai_server: OpenAIServer) -> None:
    judge_all(make_judge(openai_server), [make_case()])
    [sent] = openai_server.control.chat_requests()
    assert sent.body is not None
    assert not {"temperature", "top_p", "max_tokens"} & set(sent.body)
    assert sent.body["seed"] == 0


def test_token_usage_is_recorded(openai_server: OpenAIServer) -> None:
    openai_server.control.script(verdict_json("A", "one two three"))
    [result] = judge_all(make_judge(openai_server), [make_case()])
    [sent] = openai_server.control.chat_requests()
    words = sum(len(text.split()) for text in sent.texts())
    assert result.prompt_tokens == words + 85  # the test server counts words plus 85 per image
    assert result.completion_tokens == len(verdict_json("A", "one two three").split())


def test_config_base_url_has_no_query_and_credentials_are_refused(openai_server: OpenAIServer) -> None:
    url = openai_server.base_url + "?api-key=secretvalue#frag"
    judge = make_judge(openai_server, base_url=url)
    assert judge.config()["base_url"] == openai_server.base_url
    assert "secretvalue" not in json.dumps(judge.config())
    assert public_url("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
    with_credentials = openai_server.base_url.replace("http://", "http://user:pa55word@")
    with pytest.raises(JudgeSpecError, match="--api-key-env") as caught:
        make_judge(openai_server, base_url=with_credentials)
    assert "pa55word" not in str(caught.value)


# ------------------------------------------------------------------------------------------ retries
def test_429_waits_for_retry_after(openai_server: OpenAIServer, backend: str) -> None:
    control = openai_server.control
    control.set_retry_after(0.6)
    control.script_faults("429")
    judge = make_judge(openai_server, http_backend=backend, backoff_base_s=0.001)
    started = time.perf_counter()
    [result] = judge_all(judge, [make_case()])
    elapsed = time.perf_counter() - started
    assert result.failure is None
    assert result.extra["attempts"] == 2 and result.extra["retries"] == 1
    first, second = control.chat_requests()
    assert second.received_at - first.received_at >= 0.6 and elapsed >= 0.6  # honoured
    # and not much longer: one retry only (above), its wait Retry-After plus at most 10 %, checked without a clock
    # in test_retry_policy_uses_full_jitter_and_honours_retry_after (an upper bound on elapsed time here would
    # fail on a busy machine)


def test_retry_after_longer_than_the_cap_is_capped(openai_server: OpenAIServer) -> None:
    openai_server.control.set_retry_after(30)
    openai_server.control.script_faults("429")
    judge = make_judge(openai_server, retry_after_max_s=0.2)
    started = time.perf_counter()
    [result] = judge_all(judge, [make_case()])
    assert result.failure is None
    assert time.perf_counter() - started < 2.0


def test_500_then_success(openai_server: OpenAIServer, backend: str) -> None:
    openai_server.control.script_faults("500")
    [result] = judge_all(make_judge(openai_server, http_backend=backend), [make_case()])
    assert result.failure is None
    assert set(result.verdicts) == set(DIMENSIONS)
    assert result.extra["attempts"] == 2
    assert result.extra["errors"] == ["HTTP 500"]
    assert len(openai_server.control.chat_requests()) == 2


def test_a_permanent_500_fails_after_max_retries(openai_server: OpenAIServer) -> None:
    openai_server.control.set_faults(rate_500=1.0)
    [result] = judge_all(make_judge(openai_server, max_retries=2), [make_case()])
    assert result.failure == "HTTP 500 after 2 retries"
    assert result.verdicts == {}
    assert result.extra["attempts"] == 3
    assert len(openai_server.control.chat_requests()) == 3


def test_max_retries_zero_means_one_attempt(openai_server: OpenAIServer) -> None:
    openai_server.control.set_faults(rate_500=1.0)
    [result] = judge_all(make_judge(openai_server, max_retries=0), [make_case()])
    assert result.failure == "HTTP 500 after 0 retries"
    assert len(openai_server.control.chat_requests()) == 1


def test_timeouts_fail_after_retries(openai_server: OpenAIServer, backend: str) -> None:
    control = openai_server.control
    control.set_timeout_sleep(10.0)
    control.script_faults("timeout", "timeout")
    judge = make_judge(openai_server, http_backend=backend, timeout_s=0.3, max_retries=1)
    started = time.perf_counter()
    [result] = judge_all(judge, [make_case()])
    assert result.failure == "timeout after 1 retries"
    assert 0.6 <= time.perf_counter() - started < 3.0
    assert len(control.chat_requests()) == 2


def test_a_dropped_connection_is_retried(openai_server: OpenAIServer, backend: str) -> None:
    openai_server.control.script_faults("drop")
    [result] = judge_all(make_judge(openai_server, http_backend=backend), [make_case()])
    assert result.failure is None
    assert result.extra["attempts"] == 2
    assert openai_server.control.counters["drop"] == 1


def test_permanently_dropped_connections_fail_with_a_reason(openai_server: OpenAIServer, backend: str) -> None:
    openai_server.control.set_faults(rate_drop=1.0)
    [result] = judge_all(make_judge(openai_server, max_retries=1, http_backend=backend), [make_case()])
    assert result.failure == "connection error after 1 retries"


@pytest.mark.parametrize(
    "fault,reason",
    [("malformed_json", "malformed response: JSONDecodeError"), ("missing_choices", "malformed response: no choices")],
)
def test_a_malformed_body_fails_without_retry(
    openai_server: OpenAIServer, backend: str, fault: str, reason: str
) -> None:
    openai_server.control.script_faults(fault)
    [result] = judge_all(make_judge(openai_server, http_backend=backend), [make_case()])
    assert result.failure is not None and result.failure.startswith(reason)
    assert len(openai_server.control.chat_requests()) == 1


def test_a_400_is_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.control.script_faults("400")
    [result] = judge_all(make_judge(openai_server), [make_case()])
    assert result.failure == "HTTP 400: Invalid request (injected)."
    assert len(openai_server.control.chat_requests()) == 1


def test_an_unparseable_answer_is_a_parse_failure(openai_server: OpenAIServer) -> None:
    openai_server.control.script("I cannot decide.")
    [result] = judge_all(make_judge(openai_server), [make_case()])
    assert result.failure is not None
    assert result.raw_output == "I cannot decide."
    assert result.extra["attempts"] == 1


# ------------------------------------------------------------------------------------------ structured
def test_structured_output_sends_the_verdict_schema(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server, structured=True)
    [result] = judge_all(judge, [make_case()])
    assert result.failure is None and result.extra["structured"] is True
    [sent] = openai_server.control.chat_requests()
    assert sent.response_format is not None
    assert sent.response_format["type"] == "json_schema"
    assert sent.response_format["json_schema"]["schema"] == verdict_json_schema()
    assert judge.config()["structured"] is True
    assert judge.metadata()["structured_fallback"] is False


def test_structured_output_falls_back_when_the_server_refuses_it(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.control.set_reject_response_format(True)
    judge = make_judge(openai_server, structured=True, max_retries=0)
    fingerprint = judge.fingerprint()
    with caplog.at_level(logging.WARNING, logger="medrewardbench.models.api"):
        first = judge_all(judge, [make_case(case_id="one")])[0]
        second = judge_all(judge, [make_case(case_id="two")])[0]
    assert first.failure is None and second.failure is None
    assert first.extra["structured"] is False and first.extra["structured_fallback"] is True
    assert second.extra["structured"] is False and "structured_fallback" not in second.extra
    sent = openai_server.control.chat_requests()
    assert [r.response_format is not None for r in sent] == [True, False, False]
    metadata = judge.metadata()
    assert metadata["structured_fallback"] is True
    assert "response_format" in metadata["structured_fallback_reason"]
    assert judge.fingerprint() == fingerprint
    assert sum("structured output" in r.getMessage() for r in caplog.records) == 1


def test_a_400_unrelated_to_structured_output_does_not_fall_back(openai_server: OpenAIServer) -> None:
    openai_server.control.script_faults("400")
    judge = make_judge(openai_server, structured=True)
    [result] = judge_all(judge, [make_case()])
    assert result.failure is not None and result.failure.startswith("HTTP 400")
    assert judge.metadata()["structured_fallback"] is False


# ------------------------------------------------------------------------------------------ secrets
def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("MRB_UNSET_KEY", raising=False)
    with pytest.raises(JudgeSpecError, match="OPENAI_API_KEY"):
        build_judge("api:gpt-4o")
    with pytest.raises(JudgeSpecError, match="MRB_UNSET_KEY"):
        ApiJudge("gpt-4o", api_options_without_server(api_key_env="MRB_UNSET_KEY"))
    with pytest.raises(JudgeSpecError, match="model name"):
        build_judge("api:")


def api_options_without_server(**changes: Any) -> Any:
    from medrewardbench.models.options import ApiSettings, JudgeOptions

    return JudgeOptions(api=ApiSettings(**changes))


def test_a_local_server_without_a_key_gets_a_placeholder(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = make_judge(openai_server, api_key_env=None)
    assert judge.metadata()["placeholder_api_key"] is True
    [result] = judge_all(judge, [make_case()])
    assert result.failure is None
    assert openai_server.control.chat_requests()[0].had_auth


def test_the_base_url_can_come_from_the_environment(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    judge = make_judge(openai_server, base_url=None)
    assert judge.config()["base_url"] == openai_server.base_url
    assert judge_all(judge, [make_case()])[0].failure is None


def test_the_api_key_never_leaks(openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    control = openai_server.control
    control.set_timeout_sleep(5.0)
    control.script_faults("500", "429", "drop", None, "400", "timeout", "malformed_json", "missing_choices")
    control.set_retry_after(0.01)
    judge = make_judge(openai_server, timeout_s=0.3, max_retries=1, concurrency=1, structured=True)
    with caplog.at_level(logging.DEBUG):
        results = judge_all(judge, [make_case(case_id=f"c{i}") for i in range(6)])
    assert control.chat_requests()[0].had_auth  # the key was sent ...
    everything = json.dumps(
        {
            "config": judge.config(),
            "metadata": judge.metadata(),
            "fingerprint": judge.fingerprint(),
            "repr": repr(judge),
            "results": [
                {
                    "failure": r.failure,
                    "raw": r.raw_output,
                    "extra": r.extra,
                    "dimension_failures": dict(r.dimension_failures),
                }
                for r in results
            ],
            "requests": [repr(r) for r in control.requests],
        }
    )
    assert sum(r.failure is not None for r in results) >= 3
    assert FAKE_API_KEY not in everything  # ... and is nowhere else
    assert FAKE_API_KEY not in caplog.text
    assert API_KEY_ENV in json.dumps(judge.metadata())  # the variable's name is fine to record


def test_the_scrubber_removes_keys_from_any_text(openai_server: OpenAIServer) -> None:
    judge = make_judge(openai_server)
    text = f"error: key {FAKE_API_KEY} rejected; header Authorization: Bearer abc.def-123; other sk-live123456789"
    scrubbed = judge.chat.scrub(text)
    assert FAKE_API_KEY not in scrubbed and "abc.def-123" not in scrubbed and "sk-live123456789" not in scrubbed
    assert "***" in scrubbed


# ------------------------------------------------------------------------------------------ concurrency
def test_requests_overlap(openai_server: OpenAIServer, backend: str) -> None:
    latency = 2.0
    openai_server.control.set_latency(latency)
    judge = make_judge(openai_server, concurrency=16, http_backend=backend)
    results = judge_all(judge, [make_case(case_id=f"c{i}") for i in range(16)])
    assert all(r.failure is None for r in results)
    arrivals = sorted(r.received_at for r in openai_server.control.chat_requests())
    # every request arrived before the first could be answered: all 16 were in flight at once
    # (one after the other, the last would arrive 30 s after the first); no bound on the total time
    assert len(arrivals) == 16 and arrivals[-1] - arrivals[0] < latency


def test_concurrency_bounds_requests_in_flight(openai_server: OpenAIServer) -> None:
    openai_server.control.set_latency(0.2)
    judge = make_judge(openai_server, concurrency=4)
    started = time.perf_counter()
    results = judge_all(judge, [make_case(case_id=f"c{i}") for i in range(12)])
    elapsed = time.perf_counter() - started
    assert all(r.failure is None for r in results)
    assert elapsed >= 3 * 0.2 * 0.95  # three waves of four
    arrivals = sorted(r.received_at for r in openai_server.control.chat_requests())
    # no more than four requests arrive within one latency period
    assert all(arrivals[i + 4] - arrivals[i] >= 0.15 for i in range(len(arrivals) - 4))


def test_mixed_faults_over_200_requests_all_end_judged_or_failed(openai_server: OpenAIServer) -> None:
    control = openai_server.control
    control.set_faults(seed=7, rate_429=0.1, rate_500=0.1, rate_timeout=0.1)
    control.set_retry_after(0.01)
    control.set_timeout_sleep(5.0)
    control.set_latency(0.0, 0.02, seed=7)
    judge = make_judge(openai_server, concurrency=32, timeout_s=1.0, max_retries=2)
    cases = [make_case(case_id=f"c{i}") for i in range(100)]
    requests = [JudgeRequest(c, o) for c in cases for o in (Order.ORIGINAL, Order.SWAPPED)]
    results = judge_all(judge, requests)

    assert len(results) == 200
    judged = [r for r in results if r.failure is None]
    failed = [r for r in results if r.failure is not None]
    assert len(judged) + len(failed) == 200
    assert all(set(r.verdicts) == set(DIMENSIONS) for r in judged)
    assert all(re.fullmatch(r"(HTTP 429|HTTP 500|timeout) after 2 retries", r.failure or "") for r in failed)
    assert all(r.verdicts == {} for r in failed)
    # a request fails only after three faults in a row: rare at 30%
    assert len(failed) < 20 and len(judged) > 180
    counters = control.counters
    attempts = sum(int(r.extra["attempts"]) for r in results)
    assert attempts == len(control.chat_requests())
    # every attempt reached the server and was counted once, whatever the client made of it
    assert counters["ok"] + counters.get("429", 0) + counters.get("500", 0) + counters.get("timeout", 0) == attempts
    # an answer the server sent can still arrive after the client's timeout (a loaded machine):
    # then the server counts "ok" and the client retries, so "ok" may exceed the judged count only by
    # the client-side timeouts of answered attempts
    client_timeouts = sum(str(e).startswith("timeout") for r in results for e in r.extra.get("errors", []))
    client_timeouts += sum((r.failure or "").startswith("timeout") for r in failed)
    assert len(judged) <= counters["ok"] <= len(judged) + client_timeouts


# ------------------------------------------------------------------------------------------ units
def test_retry_policy_uses_full_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_retries=5, backoff_base_s=0.5, backoff_max_s=4.0, retry_after_max_s=10.0)
    delays = [policy.delay(3, None) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in delays) and max(delays) > 2.0  # ceiling min(4, 0.5 * 8)
    assert all(0.0 <= policy.delay(0, None) <= 0.5 for _ in range(50))
    assert all(2.0 <= policy.delay(0, 2.0) <= 2.2 for _ in range(50))
    assert 10.0 <= policy.delay(0, 999.0) <= 11.0
    assert policy.delay(1000, None) <= 4.0


def test_parse_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    later = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert parse_retry_after({"retry-after": later}, now=now) == 7.0
    earlier = format_datetime(now - timedelta(seconds=7), usegmt=True)
    assert parse_retry_after({"retry-after": earlier}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_an_unknown_http_backend_is_refused(openai_server: OpenAIServer) -> None:
    with pytest.raises(JudgeSpecError, match="http_backend"):
        make_judge(openai_server, http_backend="curl")

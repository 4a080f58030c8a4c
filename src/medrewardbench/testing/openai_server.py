"""A real, local OpenAI-compatible HTTP server for tests and benchmarks.

The server speaks enough of the Chat Completions API for the API judge: ``POST
/v1/chat/completions`` and ``GET /v1/models``, and of the Batch API for ``sweep --batch-api``:
``/v1/files`` and ``/v1/batches`` (see :mod:`medrewardbench.testing.openai_batches`; batches are
answered with the same logic as live requests, answer mode included, and ``control.batches`` sets
their delay and failures). It runs FastAPI under uvicorn on ``127.0.0.1`` in a background thread
(the package's one :class:`~medrewardbench.utils.background_server.BackgroundServer`, which the model
server of :mod:`medrewardbench.serve` uses too), so a test talks to it over real sockets through the
official ``openai`` client. Its behaviour is set at run time through a thread-safe
:class:`ServerControl`:

* **outputs**: a queue of scripted answers, then a responder ``callable(request_json) -> text``
  (to answer per request), then a default answer (a valid verdict JSON naming ``"A"`` everywhere),
  or, in the ``free_text`` answer mode (``set_answer_mode``, ``--answer-mode free-text``), a
  free-text answer to a question (:func:`free_text_answer`), for the free-text generators of
  ``medrewardbench build``;
* **latency**: fixed, or drawn uniformly from a range (``asyncio.sleep``: the loop never blocks);
* **faults**: scripted for the next requests (``script_faults("500", "500")``) or drawn at random
  with given rates from a seeded generator. Kinds (:data:`FAULT_KINDS`):

  - ``"429"``: rate limited, with a ``Retry-After`` header (seconds or an HTTP-date);
  - ``"500"``: internal server error; ``"400"``: a non-retryable bad request;
  - ``"timeout"``: the server sleeps ``timeout_sleep_s`` (past the client's timeout) before it
    answers, and stops sleeping as soon as the client hangs up;
  - ``"malformed_json"``: a 200 whose body is not valid JSON;
  - ``"missing_choices"``: a 200 whose JSON body has no ``choices``;
  - ``"drop"``: the connection is aborted before any response byte is written. This reaches into
    uvicorn's protocol object (the ``send`` callable is a bound method of the request cycle, which
    holds the transport). Where that is not possible (another server), the drop is downgraded to a
    500 with ``Connection: close`` and a warning is logged;

* **structured output**: ``response_format`` (``json_schema``, ``json_object``, ``text``) is accepted,
  or rejected with a 400 naming the parameter (``reject_response_format``) to exercise fallbacks;
* **log-probabilities**: a request with ``logprobs: true`` gets ``choices[0].logprobs`` with its
  ``top_logprobs`` alternatives per token, derived from the answer
  (:mod:`medrewardbench.testing.scripted_logprobs`): every verdict letter has the request's letter
  probability (``set_letter_probability``, by default a function of the prompt);
* **recording**: every request is kept as a :class:`RecordedRequest` (headers without
  ``Authorization``, whose presence is kept as ``had_auth`` only);
* **a leaky proxy** (``set_echo_authorization``): the ``Authorization`` header, key and all, is
  repeated in every completion and injected error message, to prove the key is scrubbed.

Usage counts are approximations: whitespace-separated words of the text parts plus
:data:`IMAGE_TOKENS` per image for the prompt, words of the answer for the completion.

Example::

    with OpenAIServer() as server:
        server.control.set_latency(0.1)
        server.control.script_faults("429")
        client = openai.OpenAI(base_url=server.base_url, api_key="x")

Why one module of this size: a test double shipped with the package: the server, its fault injection
and its process wrapper are one tool for tests, benchmarks and users (see the test-server guide).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import logging
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import require
from medrewardbench.models.logprobs import MAX_TOP_LOGPROBS, openai_logprobs
from medrewardbench.testing.openai_batches import BatchState, add_batch_routes
from medrewardbench.testing.scripted_logprobs import letter_probability, scripted_logprobs
from medrewardbench.utils.background_server import BackgroundServer, http_implementation

logger = logging.getLogger(__name__)

FAULT_KINDS: tuple[str, ...] = (
    "429",
    "500",
    "400",
    "timeout",
    "malformed_json",
    "missing_choices",
    "drop",
)
"""Every fault the server can inject."""

IMAGE_TOKENS = 85
"""Prompt tokens counted per image part."""

DEFAULT_OUTPUT = json.dumps({**{d: "A" for d in DIMENSIONS}, "reason": "Answer A is better."})
"""The answer given when neither the queue nor a responder supplies one."""

STATS_PATH = "/_stats"
"""Not part of the OpenAI API: the outcome counters, for a server running in another process."""

Responder = Callable[[dict[str, Any]], str]
_SERVER_SEND_KEY = "medrewardbench.server_send"

ANSWER_MODES: tuple[str, ...] = ("verdict", "free_text")
"""What the server answers when neither the queue nor a responder supplies an answer."""

_FINDINGS = (
    "opacity",
    "nodule",
    "effusion",
    "mass",
    "lesion",
    "fracture line",
    "consolidation",
    "calcification",
    "haemorrhage",
    "cyst",
)
_QUALITIES = ("small", "ill-defined", "well-circumscribed", "faint", "prominent", "irregular", "subtle", "large")
_PLACES = (
    "in the upper zone",
    "near the midline",
    "in the periphery",
    "at the base",
    "along the margin",
    "in the centre",
)
_NEXT_STEPS = (
    "A follow-up study is advisable.",
    "Correlation with the clinical history is recommended.",
    "Comparison with prior imaging would help.",
    "No further imaging is needed.",
    "A specialist review is suggested.",
)


def free_text_answer(body: dict[str, Any]) -> str:
    """A deterministic free-text answer, as a small model might give: a function of the model and the prompt.

    The answer starts with ``Yes.`` or ``No.`` and goes on for one to four sentences about a finding;
    both are drawn from a hash of the model name and the request's user text, so one model always
    gives the same answer to one question, and different models usually differ.

    Args:
        body: the chat completion request.

    Returns:
        The answer text.
    """
    import hashlib

    user = "\n".join(text for role, text in _iter_text_parts(body) if role == "user")
    seed = hashlib.sha256(f"{body.get('model')}\n{user}".encode()).digest()
    pick = random.Random(seed)
    finding = pick.choice(_FINDINGS)
    sentences = [
        "Yes." if pick.random() < 0.5 else "No.",
        f"There is a {pick.choice(_QUALITIES)} {finding} {pick.choice(_PLACES)}.",
    ]
    for _ in range(pick.randrange(3)):
        sentences.append(pick.choice((f"The {finding} appears {pick.choice(_QUALITIES)}.", pick.choice(_NEXT_STEPS))))
    return " ".join(sentences)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method, path: the HTTP method and path.
        headers: lower-cased request headers, ``authorization`` left out.
        had_auth: whether an ``Authorization`` header was present (its value is never kept).
        body: the parsed JSON body, or None (GET, or a body that was not JSON).
        fault: the fault injected into the answer, or None.
        received_at: ``time.monotonic()`` when the request arrived.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    had_auth: bool
    body: dict[str, Any] | None
    fault: str | None
    received_at: float

    def texts(self) -> list[str]:
        """Every text part of every message, in order."""
        return [text for _, text in _iter_text_parts(self.body)]

    def user_text(self) -> str:
        """The text parts of the user messages, joined by newlines."""
        return "\n".join(text for role, text in _iter_text_parts(self.body) if role == "user")

    def image_urls(self) -> list[str]:
        """The URLs of every ``image_url`` part (data URLs for inline images)."""
        return list(_iter_image_urls(self.body))

    @property
    def response_format(self) -> dict[str, Any] | None:
        """The ``response_format`` the client sent, if any."""
        if self.body is None:
            return None
        value = self.body.get("response_format")
        return value if isinstance(value, dict) else None


@dataclass
class _FaultRates:
    rates: dict[str, float] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(0))


class ServerControl:
    """Thread-safe knobs of an :class:`OpenAIServer`, changeable while it serves.

    Args:
        max_records: how many recent requests to keep (older ones are forgotten).
    """

    def __init__(self, *, max_records: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._max_records = max_records
        self._records: collections.deque[RecordedRequest] = collections.deque(maxlen=max_records)
        self._counters: collections.Counter[str] = collections.Counter()
        self._ids = itertools.count(1)
        self.batches = BatchState()
        """The files and batches of the Batch API routes, and their knobs."""
        self._reset_locked()

    def _reset_locked(self) -> None:
        self._outputs: collections.deque[str] = collections.deque()
        self._responder: Responder | None = None
        self._default_output = DEFAULT_OUTPUT
        self._latency = (0.0, 0.0)
        self._latency_rng = random.Random(0)
        self._scripted_faults: collections.deque[str | None] = collections.deque()
        self._faults = _FaultRates()
        self._retry_after: str | None = "1"
        self._timeout_sleep_s = 30.0
        self._reject_response_format = False
        self._answer_mode = "verdict"
        self._echo_authorization = False
        self._models: tuple[str, ...] = ("test-model",)
        self._letter_probability: float | None = None
        self._records.clear()
        self._counters.clear()

    def reset(self) -> None:
        """Back to the defaults: no latency, no faults, default output, nothing recorded, no batch."""
        with self._lock:
            self._reset_locked()
        self.batches.reset()

    # outputs -----------------------------------------------------------------------------
    def script(self, *outputs: str) -> None:
        """Queue answers; each request takes the next one before the responder is asked."""
        with self._lock:
            self._outputs.extend(outputs)

    def set_responder(self, responder: Responder | None) -> None:
        """Answer each request with ``responder(request_json)`` when the queue is empty."""
        with self._lock:
            self._responder = responder

    def set_default_output(self, text: str) -> None:
        """The answer used when the queue is empty and no responder is set."""
        with self._lock:
            self._default_output = text

    def set_letter_probability(self, probability: float | None) -> None:
        """The probability given to every verdict letter in log-probabilities (None: per prompt).

        Raises:
            ValueError: a probability outside (0, 1].
        """
        if probability is not None and not 0.0 < probability <= 1.0:
            raise ValueError(f"the letter probability must be in (0, 1], got {probability}")
        with self._lock:
            self._letter_probability = probability

    def letter_probability_for(self, body: dict[str, Any]) -> float:
        """The letter probability a request gets: the one set, else one per prompt (see scripted_logprobs)."""
        with self._lock:
            fixed = self._letter_probability
        return fixed if fixed is not None else letter_probability(_joined_text(body))

    def set_answer_mode(self, mode: str) -> None:
        """``"verdict"`` (the default answer) or ``"free_text"`` (:func:`free_text_answer` per request)."""
        if mode not in ANSWER_MODES:
            raise ValueError(f"unknown answer mode {mode!r}; known: {', '.join(ANSWER_MODES)}")
        with self._lock:
            self._answer_mode = mode

    def set_models(self, *models: str) -> None:
        """The model ids ``/v1/models`` lists."""
        with self._lock:
            self._models = tuple(models)

    # latency -----------------------------------------------------------------------------
    def set_latency(self, seconds: float, max_seconds: float | None = None, *, seed: int = 0) -> None:
        """Delay every answer by ``seconds``, or by a uniform draw in ``[seconds, max_seconds]``."""
        upper = seconds if max_seconds is None else max_seconds
        if seconds < 0 or upper < seconds:
            raise ValueError(f"invalid latency range [{seconds}, {upper}]")
        with self._lock:
            self._latency = (seconds, upper)
            self._latency_rng = random.Random(seed)

    # faults ------------------------------------------------------------------------------
    def set_faults(
        self,
        *,
        seed: int = 0,
        rate_429: float = 0.0,
        rate_500: float = 0.0,
        rate_400: float = 0.0,
        rate_timeout: float = 0.0,
        rate_malformed_json: float = 0.0,
        rate_missing_choices: float = 0.0,
        rate_drop: float = 0.0,
    ) -> None:
        """Inject faults at random with these probabilities (drawn from a generator seeded ``seed``)."""
        rates = {
            "429": rate_429,
            "500": rate_500,
            "400": rate_400,
            "timeout": rate_timeout,
            "malformed_json": rate_malformed_json,
            "missing_choices": rate_missing_choices,
            "drop": rate_drop,
        }
        if any(r < 0 for r in rates.values()) or sum(rates.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault rates must be >= 0 and sum to at most 1: {rates}")
        with self._lock:
            self._faults = _FaultRates({k: v for k, v in rates.items() if v > 0}, random.Random(seed))

    def script_faults(self, *kinds: str | None) -> None:
        """Force these faults on the next requests, in order (None = answer normally)."""
        for kind in kinds:
            if kind is not None and kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
        with self._lock:
            self._scripted_faults.extend(kinds)

    def set_retry_after(self, value: str | float | None) -> None:
        """The ``Retry-After`` header of 429 answers (seconds or an HTTP-date); None omits it."""
        with self._lock:
            self._retry_after = None if value is None else str(value)

    def set_timeout_sleep(self, seconds: float) -> None:
        """How long a ``timeout`` fault keeps the client waiting (less if the client hangs up)."""
        with self._lock:
            self._timeout_sleep_s = seconds

    def set_reject_response_format(self, reject: bool = True) -> None:
        """Answer any request carrying ``response_format`` with a 400 naming that parameter."""
        with self._lock:
            self._reject_response_format = reject

    def set_echo_authorization(self, echo: bool = True) -> None:
        """Behave like a leaky proxy (or stop, with ``echo=False``).

        A leaky proxy repeats the request's ``Authorization`` header (the API key) at the end of every
        completion and inside every injected error message.
        """
        with self._lock:
            self._echo_authorization = echo

    def _echoes_authorization(self) -> bool:
        with self._lock:
            return self._echo_authorization

    # observation -------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests received so far (oldest first)."""
        with self._lock:
            return list(self._records)

    def chat_requests(self) -> list[RecordedRequest]:
        """The chat completion requests received so far."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def clear_requests(self) -> None:
        """Forget the recorded requests and counters."""
        with self._lock:
            self._records.clear()
            self._counters.clear()

    @property
    def counters(self) -> dict[str, int]:
        """How many answers of each outcome were given (``"ok"`` or a fault kind, ...)."""
        with self._lock:
            return dict(self._counters)

    # used by the server ----------------------------------------------------------------
    def _rejects_response_format(self) -> bool:
        with self._lock:
            return self._reject_response_format

    def _draw(self) -> tuple[str | None, float, float, str | None, bool]:
        """The fault and latency for one request, plus the current timeout, Retry-After, reject flag."""
        with self._lock:
            if self._scripted_faults:
                fault = self._scripted_faults.popleft()
            else:
                fault = None
                if self._faults.rates:
                    u = self._faults.rng.random()
                    cumulative = 0.0
                    for kind, rate in self._faults.rates.items():
                        cumulative += rate
                        if u < cumulative:
                            fault = kind
                            break
            low, high = self._latency
            latency = low if high == low else self._latency_rng.uniform(low, high)
            return fault, latency, self._timeout_sleep_s, self._retry_after, self._reject_response_format

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self._records.append(record)

    def _count(self, outcome: str) -> None:
        with self._lock:
            self._counters[outcome] += 1

    def _next_output(self, body: dict[str, Any]) -> str:
        with self._lock:
            if self._outputs:
                return self._outputs.popleft()
            responder = self._responder
            default = self._default_output
            if responder is None and self._answer_mode == "free_text":
                responder = free_text_answer
        return responder(body) if responder is not None else default

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _model_ids(self) -> tuple[str, ...]:
        with self._lock:
            return self._models


def _iter_message_parts(body: dict[str, Any] | None) -> Iterable[tuple[str, Any]]:
    if not body:
        return
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        content = message.get("content")
        if isinstance(content, str):
            yield role, {"type": "text", "text": content}
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    yield role, part


def _iter_text_parts(body: dict[str, Any] | None) -> Iterable[tuple[str, str]]:
    for role, part in _iter_message_parts(body):
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            yield role, part["text"]


def _joined_text(body: dict[str, Any] | None) -> str:
    """Every text part of every message, joined by newlines (what the default letter probability reads)."""
    return "\n".join(text for _, text in _iter_text_parts(body))


def _iter_image_urls(body: dict[str, Any] | None) -> Iterable[str]:
    for _, part in _iter_message_parts(body):
        if part.get("type") == "image_url":
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            if isinstance(url, str):
                yield url


def _prompt_tokens(body: dict[str, Any]) -> int:
    words = sum(len(text.split()) for _, text in _iter_text_parts(body))
    images = sum(1 for _ in _iter_image_urls(body))
    return words + IMAGE_TOKENS * images


def _error_body(message: str, kind: str, *, param: str | None = None, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": code}}).encode()


def _abort_connection(send: Any) -> bool:
    """Abort the TCP connection behind uvicorn's ``send``; False when it cannot be reached."""
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None or not hasattr(transport, "abort"):
        return False
    transport.abort()
    return True


async def _wait_for_disconnect(receive: Callable[[], Any], seconds: float) -> bool:
    """Wait up to ``seconds`` for the client to hang up; True when it did."""
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            message = await asyncio.wait_for(receive(), timeout=remaining)
        except asyncio.TimeoutError:
            return False
        if message.get("type") == "http.disconnect":
            return True


def _refusal(control: ServerControl, body: dict[str, Any] | None, reject_format: bool) -> tuple[int, bytes] | None:
    """The 400 answer to a request the server refuses (invalid body or response_format), or None."""
    problem = _validate(body)
    if problem is not None:
        control._count("bad_request")
        return 400, _error_body(problem, "invalid_request_error")
    assert body is not None
    if "response_format" in body:
        if reject_format:
            control._count("rejected_response_format")
            return 400, _error_body(
                "response_format of type 'json_schema' is not supported by this model",
                "invalid_request_error",
                param="response_format",
                code="unsupported_parameter",
            )
        format_problem = _validate_response_format(body["response_format"])
        if format_problem is not None:
            control._count("bad_request")
            return 400, _error_body(format_problem, "invalid_request_error", param="response_format")
    return None


def _completion(
    control: ServerControl, body: dict[str, Any], text: str, completion_id: int, *, with_choices: bool = True
) -> dict[str, Any]:
    """A chat completion answering ``text``, with usage; counted as ``ok`` (or ``missing_choices``)."""
    usage = {
        "prompt_tokens": _prompt_tokens(body),
        "completion_tokens": len(text.split()),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    payload: dict[str, Any] = {
        "id": f"chatcmpl-{completion_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model")),
        "system_fingerprint": "medrewardbench-test",
        "usage": usage,
    }
    if not with_choices:
        control._count("missing_choices")
        return payload
    control._count("ok")
    payload["choices"] = [
        {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        tokens = scripted_logprobs(text, control.letter_probability_for(body), top)
        payload["choices"][0]["logprobs"] = openai_logprobs(tokens, top)
    return payload


def _batch_answer(control: ServerControl, body: Any) -> tuple[int, dict[str, Any]]:
    """One Batch API request answered with the live route's logic (no latency, no HTTP faults)."""
    parsed = body if isinstance(body, dict) else None
    refused = _refusal(control, parsed, control._rejects_response_format())
    if refused is not None:
        return refused[0], json.loads(refused[1])
    assert parsed is not None
    try:
        text = control._next_output(parsed)
    except Exception as exc:  # a test's responder failed: that request fails, the batch goes on
        logger.exception("the responder raised")
        control._count("responder_error")
        return 500, json.loads(_error_body(f"responder failed: {exc!r}", "server_error"))
    return 200, _completion(control, parsed, text, control._next_id())


def create_app(control: ServerControl) -> Any:
    """The ASGI application: FastAPI routes wrapped so that a fault can abort the connection.

    Args:
        control: the knobs the routes read on every request.

    Returns:
        An ASGI callable.
    """
    fastapi = require("fastapi", "serve", "the test OpenAI server")
    from starlette.requests import Request
    from starlette.responses import Response

    app = fastapi.FastAPI(openapi_url=None, docs_url=None, redoc_url=None)  # type: ignore[attr-defined]

    def json_response(payload: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(content=payload, status_code=status, media_type="application/json", headers=headers)

    async def list_models(request: Request) -> Response:
        control._record(_record_of(request, None, None))
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "medrewardbench"} for m in control._model_ids()]
        return json_response(json.dumps({"object": "list", "data": data}).encode())

    async def chat_completions(request: Request) -> Response:
        raw = await request.body()
        fault, latency, timeout_sleep_s, retry_after, reject_format = control._draw()
        try:
            parsed = json.loads(raw)
            body: dict[str, Any] | None = parsed if isinstance(parsed, dict) else None
        except ValueError:
            body = None
        control._record(_record_of(request, body, fault))
        echo = ""
        if control._echoes_authorization():
            echo = f" [echo] Authorization: {request.headers.get('authorization', '')}"
        if latency > 0:
            await asyncio.sleep(latency)

        if fault == "drop":
            if _abort_connection(request.scope.get(_SERVER_SEND_KEY)):
                control._count("drop")
                # let the loop deliver connection_lost, so that uvicorn treats the cycle as gone
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                return Response(status_code=500)
            logger.warning("cannot abort the connection here; answering the drop fault with a 500")
            control._count("drop")
            return json_response(_error_body("connection dropped", "server_error"), 500, {"Connection": "close"})
        if fault == "timeout":
            control._count("timeout")
            if await _wait_for_disconnect(request.receive, timeout_sleep_s):
                return Response(status_code=504)
        elif fault == "429":
            control._count("429")
            headers = {"Retry-After": retry_after} if retry_after is not None else None
            return json_response(
                _error_body("Rate limit reached; retry later.", "rate_limit_error", code="rate_limit_exceeded"),
                429,
                headers,
            )
        elif fault == "500":
            control._count("500")
            return json_response(_error_body("The server had an error." + echo, "server_error"), 500)
        elif fault == "400":
            control._count("400")
            return json_response(
                _error_body("Invalid request (injected)." + echo, "invalid_request_error", code="invalid_request"),
                400,
            )

        refused = _refusal(control, body, reject_format)
        if refused is not None:
            return json_response(refused[1], refused[0])
        assert body is not None

        completion_id = control._next_id()
        if fault == "malformed_json":
            control._count("malformed_json")
            return json_response(b'{"id": "chatcmpl-%d", "choices": [{"message": ' % completion_id)
        try:
            text = control._next_output(body)
        except Exception as exc:  # a test's responder failed: tell the client, keep serving
            logger.exception("the responder raised")
            control._count("responder_error")
            return json_response(_error_body(f"responder failed: {exc!r}", "server_error"), 500)
        payload = _completion(control, body, text + echo, completion_id, with_choices=fault != "missing_choices")
        return json_response(json.dumps(payload).encode())

    async def stats(request: Request) -> Response:
        payload = {"counters": control.counters, "requests": len(control.requests)}
        return json_response(json.dumps(payload).encode())

    # plain Starlette routes: the handlers take the request as it is, with no parameter parsing
    app.add_route(STATS_PATH, stats, methods=["GET"])
    app.add_route("/v1/models", list_models, methods=["GET"])
    app.add_route("/v1/chat/completions", chat_completions, methods=["POST"])
    add_batch_routes(
        app,
        control.batches,
        answer=lambda body: _batch_answer(control, body),
        record=lambda request, body: control._record(_record_of(request, body, None)),
    )

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope[_SERVER_SEND_KEY] = send
            if scope["method"] == "POST" and scope["path"] == "/v1/chat/completions":
                # the hot route skips the framework's middleware and router: the server shares the
                # benchmark machine with the client it measures, so its CPU per request matters
                response = await chat_completions(Request(scope, receive))
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    return asgi


def _record_of(request: Any, body: dict[str, Any] | None, fault: str | None) -> RecordedRequest:
    headers = {k.lower(): v for k, v in request.headers.items()}
    had_auth = bool(headers.pop("authorization", ""))
    return RecordedRequest(
        method=request.method,
        path=request.url.path,
        headers=headers,
        had_auth=had_auth,
        body=body,
        fault=fault,
        received_at=time.monotonic(),
    )


def _validate(body: dict[str, Any] | None) -> str | None:
    if body is None:
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "'model' is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    if body.get("stream"):
        return "streaming is not supported by the test server"
    top = body.get("top_logprobs")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS:
            return f"'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}"
        if not body.get("logprobs"):
            return "'top_logprobs' needs 'logprobs' set to true"
    return None


def _validate_response_format(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "'response_format' must be an object"
    kind = value.get("type")
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"unknown response_format type {kind!r}"
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return "'response_format.json_schema.name' is required"
    if not isinstance(spec.get("schema"), dict):
        return "'response_format.json_schema.schema' must be an object"
    return None


class OpenAIServer:
    """A local OpenAI-compatible server in a background thread; a context manager.

    Args:
        control: the knobs; a fresh :class:`ServerControl` when None.
        host: the address to bind (loopback by default; keep it on the loopback).
        port: 0 picks a free port.
        http: uvicorn's HTTP implementation: ``"auto"`` (httptools when installed, else h11),
            ``"h11"`` or ``"httptools"``.
        startup_timeout_s: how long :meth:`start` waits for the server to accept connections.
        graceful_shutdown_s: how long :meth:`stop` lets in-flight requests finish.
    """

    def __init__(
        self,
        control: ServerControl | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        http: str = "auto",
        startup_timeout_s: float = 15.0,
        graceful_shutdown_s: float = 1.0,
    ) -> None:
        self.control = control or ServerControl()
        self.host = host
        self._requested_port = port
        self.http = http_implementation(http)
        self._startup_timeout_s = startup_timeout_s
        self._graceful_shutdown_s = graceful_shutdown_s
        self._background: BackgroundServer | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self.port is None:
            raise RuntimeError("the server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return f"{self.url}/v1"

    def start(self) -> OpenAIServer:
        """Start serving and wait until the port accepts connections.

        Raises:
            MissingExtraError: FastAPI or uvicorn is not installed.
            RuntimeError: the server did not come up within ``startup_timeout_s``.
        """
        if self._background is not None:
            return self
        background = BackgroundServer(
            create_app(self.control),
            self.host,
            self._requested_port,
            self._startup_timeout_s,
            http=self.http,
            graceful_shutdown_s=self._graceful_shutdown_s,
            label="the test OpenAI server",
            thread_name="openai-test-server",
        )
        self._background = background.start()
        self.port = background.port
        return self

    def stop(self) -> None:
        """Stop serving and join the thread; safe to call twice."""
        background, self._background = self._background, None
        if background is not None:
            background.stop()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass(frozen=True)
class ServerSettings:
    """A picklable, command-line-expressible subset of :class:`ServerControl` (no responder, no queue).

    Used to configure a server in another process (:class:`ServerProcess`), where a test's callables
    cannot reach. ``fault_rates`` maps a fault kind to its probability.
    """

    latency_s: float = 0.0
    latency_max_s: float | None = None
    seed: int = 0
    fault_rates: Mapping[str, float] = field(default_factory=dict)
    retry_after: str | None = "1"
    timeout_sleep_s: float = 30.0
    reject_response_format: bool = False
    default_output: str | None = None
    answer_mode: str = "verdict"

    def apply(self, control: ServerControl) -> None:
        """Set these values on a control object."""
        control.set_latency(self.latency_s, self.latency_max_s, seed=self.seed)
        control.set_faults(seed=self.seed, **{f"rate_{k}": v for k, v in self.fault_rates.items()})
        control.set_retry_after(self.retry_after)
        control.set_timeout_sleep(self.timeout_sleep_s)
        control.set_reject_response_format(self.reject_response_format)
        if self.default_output is not None:
            control.set_default_output(self.default_output)
        control.set_answer_mode(self.answer_mode)

    def to_args(self) -> list[str]:
        """The command-line arguments of :func:`main` that reproduce these settings."""
        args = ["--latency", str(self.latency_s), "--seed", str(self.seed)]
        if self.latency_max_s is not None:
            args += ["--latency-max", str(self.latency_max_s)]
        for kind, rate in self.fault_rates.items():
            args += [f"--rate-{kind.replace('_', '-')}", str(rate)]
        args += ["--retry-after", "none" if self.retry_after is None else self.retry_after]
        args += ["--timeout-sleep", str(self.timeout_sleep_s)]
        if self.reject_response_format:
            args.append("--reject-response-format")
        if self.default_output is not None:
            args += ["--default-output", self.default_output]
        if self.answer_mode != "verdict":
            args += ["--answer-mode", self.answer_mode.replace("_", "-")]
        return args


class ServerProcess:
    """The same server in a child process, so that it does not share the client's interpreter lock.

    Benchmarks use it to measure the client alone. Runtime control is limited to what
    :class:`ServerSettings` expresses at start; :meth:`counters` reads the outcome counters over HTTP.

    Args:
        settings: latency, fault rates and the rest.
        http: uvicorn's HTTP implementation (see :class:`OpenAIServer`).
        startup_timeout_s: how long to wait for the child to report its port.
    """

    def __init__(
        self, settings: ServerSettings | None = None, *, http: str = "auto", startup_timeout_s: float = 30.0
    ) -> None:
        self.settings = settings or ServerSettings()
        self.http = http
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        if self.port is None:
            raise RuntimeError("the server process is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ServerProcess:
        """Spawn the child and wait for its ``READY PORT`` line.

        Raises:
            RuntimeError: the child exited or stayed silent past ``startup_timeout_s``.
        """
        command = [sys.executable, "-m", __name__, "--http", self.http, "--stop-on-stdin-eof", *self.settings.to_args()]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], self._startup_timeout_s)
        line = self._process.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"the test server process did not start (said {line.strip()!r})")
        self.port = int(line.split()[1])
        return self

    def counters(self) -> dict[str, int]:
        """The child's outcome counters (see :attr:`ServerControl.counters`)."""
        with urllib.request.urlopen(self.base_url.removesuffix("/v1") + STATS_PATH, timeout=10) as answer:
            payload = json.loads(answer.read())
        return {str(k): int(v) for k, v in payload["counters"].items()}

    def stop(self) -> None:
        """Ask the child to stop (closing its stdin), then terminate it if it lingers."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m medrewardbench.testing.openai_server",
        description="Serve a local OpenAI-compatible test server (for `eval --judge api:…` and `build responses` "
        "offline) until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on the READY line)")
    parser.add_argument(
        "--stop-on-stdin-eof",
        action="store_true",
        help="also stop when standard input closes (how a parent process that owns the server stops it)",
    )
    parser.add_argument("--http", default="auto")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--latency-max", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    for kind in FAULT_KINDS:
        parser.add_argument(f"--rate-{kind.replace('_', '-')}", type=float, default=0.0, dest=f"rate_{kind}")
    parser.add_argument("--retry-after", default="1", help="seconds, an HTTP-date, or 'none'")
    parser.add_argument("--timeout-sleep", type=float, default=30.0)
    parser.add_argument("--reject-response-format", action="store_true")
    parser.add_argument("--default-output", default=None)
    parser.add_argument(
        "--answer-mode",
        default="verdict",
        choices=[mode.replace("_", "-") for mode in ANSWER_MODES],
        help="verdict: a verdict JSON; free-text: an answer to the question (for build's generators)",
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=1000,
        help="recent requests kept in memory (a child process's records are never read back; "
        "benchmarks send tens of thousands of requests with images)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground; writes ``READY PORT`` on stdout once it accepts connections.

    It runs until Ctrl-C or SIGTERM, also in the background (``… &``, ``nohup``) where standard input
    is closed or ``/dev/null``; with ``--stop-on-stdin-eof`` (what :class:`ServerProcess` passes) it
    also stops when its standard input closes.
    """
    args = _parser().parse_args(argv)
    settings = ServerSettings(
        latency_s=args.latency,
        latency_max_s=args.latency_max,
        seed=args.seed,
        fault_rates={k: getattr(args, f"rate_{k}") for k in FAULT_KINDS if getattr(args, f"rate_{k}") > 0},
        retry_after=None if args.retry_after.lower() == "none" else args.retry_after,
        timeout_sleep_s=args.timeout_sleep,
        reject_response_format=args.reject_response_format,
        default_output=args.default_output,
        answer_mode=args.answer_mode.replace("-", "_"),
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())

    def wait_for_stdin_eof() -> None:
        while sys.stdin.readline():
            pass
        done.set()

    control = ServerControl(max_records=args.max_records)
    with OpenAIServer(port=args.port, http=args.http, control=control) as server:
        settings.apply(server.control)
        sys.stdout.write(f"READY {server.port}\n")
        sys.stdout.flush()
        if args.stop_on_stdin_eof:
            threading.Thread(target=wait_for_stdin_eof, daemon=True).start()
        else:
            sys.stderr.write(
                f"OpenAI-compatible test server on http://127.0.0.1:{server.port}/v1 "
                f"(answers: {settings.answer_mode.replace('_', '-')}); Ctrl-C or SIGTERM stops it\n"
            )
            sys.stderr.flush()
        done.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

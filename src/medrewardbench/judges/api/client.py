"""The API judge: one Chat Completions request per comparison, retried and failed visibly.

See :mod:`medrewardbench.judges.api` for the behaviour; :mod:`~medrewardbench.judges.api.retry` for
the waits, :mod:`~medrewardbench.judges.api.images` for the image data URLs.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from medrewardbench.cases import ImageRef
from medrewardbench.errors import JudgeSpecError, MissingExtraError
from medrewardbench.judges.api.images import DataUrlCache, inline_data_url
from medrewardbench.judges.api.retry import RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.options import HTTP_BACKENDS, check_api_settings
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.prompts import PromptTemplate, load_template, verdict_json_schema
from medrewardbench.secrets import register_secret, scrub

logger = logging.getLogger(__name__)

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_API_KEY = "EMPTY"
"""Sent to a server given by base URL when no key is set (local servers usually accept anything)."""
DEFAULT_CONCURRENCY = 8
STRUCTURED_SCHEMA_NAME = "medrewardbench_verdict"
_MAX_REASON_CHARS = 300


def public_url(url: str | None) -> str | None:
    """A URL without user info, query or fragment (what may be recorded)."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@dataclass
class _LoopResources:
    """The client and the limits, which belong to one event loop.

    ``slots`` bounds HTTP attempts in flight (``concurrency``); ``admission`` bounds requests being
    prepared, sent or waiting to retry (twice that), so that a huge ``judge_batch`` does not hold
    every encoded image in memory at once.
    """

    loop: asyncio.AbstractEventLoop
    client: Any
    slots: asyncio.Semaphore
    admission: asyncio.Semaphore
    response_type: type


@dataclass
class _CallOutcome:
    """The end of one request's attempts: a completion's text or a failure reason."""

    text: str | None = None
    failure: str | None = None
    attempts: int = 0
    retries: int = 0
    structured: bool = False
    structured_fallback: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    errors: list[str] = field(default_factory=list)


class ApiJudge(Judge):
    """A multimodal LLM judge behind an OpenAI-compatible server.

    Args:
        model: the model name sent in each request.
        options: the shared judge options and ``options.api``
            (:class:`~medrewardbench.judges.options.ApiSettings`).

    Raises:
        JudgeSpecError: no model name, or no key where one is needed.
        MissingExtraError: ``openai`` is missing.
    """

    kind = "api"
    batch_size = 1
    needs_images = True

    def __init__(self, model: str, options: JudgeOptions | None = None) -> None:
        options = options or JudgeOptions()
        if not model.strip():
            raise JudgeSpecError("an API judge needs a model name: api:MODEL (for example api:gpt-4o)")
        try:
            self._openai: Any = importlib.import_module("openai")
        except ImportError as exc:
            raise MissingExtraError("openai", "api", "the API judge (api:MODEL)") from exc
        self.model = model
        self.spec = f"api:{model}"
        self.options = options
        self.concurrency = options.concurrency or DEFAULT_CONCURRENCY
        settings = options.api
        self.settings = settings
        self.base_url = settings.base_url or os.environ.get(BASE_URL_ENV) or None
        check_api_settings(
            self.base_url,
            settings.timeout_s,
            settings.max_retries,
            base_url_source="--base-url" if settings.base_url else BASE_URL_ENV,
        )
        self.template: PromptTemplate = load_template(options.template)
        self.api_key_env = settings.api_key_env or DEFAULT_API_KEY_ENV
        key = os.environ.get(self.api_key_env, "").strip()
        self.uses_placeholder_key = False
        if not key:
            if self.base_url is None:
                raise JudgeSpecError(
                    f"{self.spec} needs an API key: set the environment variable {self.api_key_env} "
                    "(or name another one with --api-key-env), or give --base-url for a local server "
                    "that needs none"
                )
            key = PLACEHOLDER_API_KEY
            self.uses_placeholder_key = True
            logger.info(
                "%s: %s is not set; sending a placeholder key to %s",
                self.spec,
                self.api_key_env,
                public_url(self.base_url),
            )
        self._api_key = key
        self._secrets = (key,) if key != PLACEHOLDER_API_KEY else ()
        # whatever stores or reports text in this process (the store, log handlers) removes it too
        register_secret(None if self.uses_placeholder_key else key)
        self.retry_policy = RetryPolicy(
            max_retries=settings.max_retries,
            backoff_base_s=float(settings.backoff_base_s),
            backoff_max_s=float(settings.backoff_max_s),
            retry_after_max_s=float(settings.retry_after_max_s),
        )
        self.http_backend = _choose_http_backend(settings.http_backend)
        self._images = DataUrlCache(settings.image_cache_size, passthrough=settings.image_passthrough)
        self._loop_resources: _LoopResources | None = None
        self._structured_active = settings.structured
        self._structured_fallback_reason: str | None = None
        self._rng = random.Random()

    # ---------------------------------------------------------------------------- protocol
    def config(self) -> dict[str, Any]:
        """Everything that can change the outputs; no credentials, no query strings."""
        return {
            "spec": self.spec,
            "kind": self.kind,
            "model": self.model,
            "base_url": public_url(self.base_url),
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "structured": self.settings.structured,
            "temperature": self.options.temperature,
            "top_p": self.options.top_p,
            "max_tokens": self.options.max_tokens,
            "seed": self.options.seed,
        }

    def metadata(self) -> dict[str, Any]:
        """Run facts that do not change outputs, including whether structured output fell back."""
        return {
            "structured_requested": self.settings.structured,
            "structured_fallback": self._structured_fallback_reason is not None,
            "structured_fallback_reason": self._structured_fallback_reason,
            "api_key_env": self.api_key_env,
            "placeholder_api_key": self.uses_placeholder_key,
            "timeout_s": self.settings.timeout_s,
            "max_retries": self.retry_policy.max_retries,
            "backoff_base_s": self.retry_policy.backoff_base_s,
            "backoff_max_s": self.retry_policy.backoff_max_s,
            "concurrency": self.concurrency,
            "http_backend": self.http_backend,
            "image_passthrough": self._images.passthrough,
        }

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Judge every request concurrently (at most ``concurrency`` HTTP calls in flight)."""
        if len(requests) == 1:
            return [await self._admitted(requests[0])]
        return list(await asyncio.gather(*(self._admitted(r) for r in requests)))

    async def _admitted(self, request: JudgeRequest) -> JudgeResult:
        async with self._resources().admission:
            return await self._judge_one(request)

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop."""
        resources = self._loop_resources
        self._loop_resources = None
        if resources is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if resources.loop is running:
            await resources.client.close()

    # ---------------------------------------------------------------------------- internals
    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _reason(self, text: str) -> str:
        text = self._scrub(" ".join(text.split()))
        return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 3] + "..."

    def _resources(self) -> _LoopResources:
        """The client and semaphore of the running loop, made on first use in that loop."""
        loop = asyncio.get_running_loop()
        resources = self._loop_resources
        if resources is None or resources.loop is not loop:
            client, response_type = self._make_client()
            resources = _LoopResources(
                loop,
                client,
                asyncio.Semaphore(self.concurrency),
                asyncio.Semaphore(2 * self.concurrency),
                response_type,
            )
            self._loop_resources = resources
        return resources

    def _make_client(self) -> tuple[Any, type]:
        """A fresh ``AsyncOpenAI`` with a pool sized for ``concurrency``, and its HTTP response type."""
        openai = self._openai
        http = _http_module(openai)
        connections = self.concurrency + 16
        limits = http.Limits(max_connections=connections, max_keepalive_connections=connections)
        client_class = openai.DefaultAsyncHttpxClient
        if self.http_backend == "aiohttp":
            client_class = openai.DefaultAioHttpClient
        http_client = client_class(limits=limits, timeout=self.settings.timeout_s)
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.settings.timeout_s,
            http_client=http_client,
        )
        return client, http.Response

    async def _data_url(self, image: ImageRef) -> str:
        url = self._images.lookup(image)
        if url is None:
            url = inline_data_url(image) if self._images.passthrough else None
            if url is not None:
                self._images.count_miss()
            else:
                # hashing, decoding and PNG encoding are CPU work: keep them off the event loop
                url = await asyncio.to_thread(self._images.get, image)
            self._images.remember(image, url)
        return url

    async def _messages(self, request: JudgeRequest) -> tuple[list[dict[str, Any]], str]:
        case = request.case
        image = case.image if case.image.kind != "none" else None
        data_url = await self._data_url(image) if image is not None else None
        rendered = self.template.render_messages(case.question, request.response_a, request.response_b, image)
        user_text = next(p["text"] for p in rendered[-1]["content"] if p["type"] == "text")
        messages: list[dict[str, Any]] = []
        for message in rendered:
            parts: list[dict[str, Any]] = []
            for part in message["content"]:
                if part["type"] == "image":
                    parts.append({"type": "image_url", "image_url": {"url": data_url}})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            if message["role"] == "system":
                # plain string content is what every OpenAI-compatible server accepts for system turns
                messages.append({"role": "system", "content": "\n".join(p["text"] for p in parts)})
            else:
                messages.append({"role": message["role"], "content": parts})
        return messages, user_text

    def _request_body(self, messages: list[dict[str, Any]], structured: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "seed": self.options.seed}
        if self.options.temperature is not None:
            body["temperature"] = self.options.temperature
        if self.options.top_p is not None:
            body["top_p"] = self.options.top_p
        if self.options.max_tokens is not None:
            body["max_tokens"] = self.options.max_tokens
        if structured:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": STRUCTURED_SCHEMA_NAME, "schema": verdict_json_schema(), "strict": True},
            }
        return body

    def _fall_back_from_structured(self, status: int, message: str) -> None:
        if self._structured_fallback_reason is None:
            self._structured_fallback_reason = f"HTTP {status}: {self._reason(message)}"
            logger.warning(
                "%s: the server refused structured output (%s); sending requests without "
                "response_format for the rest of the run",
                self.spec,
                self._structured_fallback_reason,
            )
        self._structured_active = False

    async def _judge_one(self, request: JudgeRequest) -> JudgeResult:
        started = time.perf_counter()
        try:
            messages, _user_text = await self._messages(request)
        except Exception as exc:  # an unreadable image fails this request only
            return JudgeResult.failed(
                self._reason(f"could not prepare the request: {type(exc).__name__}: {exc}"),
                latency_s=time.perf_counter() - started,
            )
        outcome = await self._call(messages)
        return self._result(request, outcome, time.perf_counter() - started)

    def _result(self, request: JudgeRequest, outcome: _CallOutcome, latency: float) -> JudgeResult:
        """A request's result from the end of its attempts: the failure, or the parsed answer."""
        from medrewardbench.parsing import parse_verdicts

        extra: dict[str, Any] = {
            "attempts": outcome.attempts,
            "retries": outcome.retries,
            "structured": outcome.structured,
        }
        if outcome.structured_fallback:
            extra["structured_fallback"] = True
        if outcome.errors:
            extra["errors"] = outcome.errors
        if outcome.failure is not None:
            return JudgeResult.failed(
                outcome.failure,
                raw_output=outcome.text,
                latency_s=latency,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                extra=extra,
            )
        extra["finish_reason"] = outcome.finish_reason
        parsed = parse_verdicts(
            outcome.text,
            quoted=[request.response_a, request.response_b, request.case.question, *self.template.static_chunks()],
        )
        extra["parse_method"] = parsed.method
        if parsed.reason:
            extra["reason"] = parsed.reason
        return JudgeResult.from_parse(
            parsed,
            outcome.text,
            latency_s=latency,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            extra=extra,
        )

    # ------------------------------------------------------------- answers that came another way
    async def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The Chat Completions body this judge would send for a request (for a Batch API file).

        Args:
            request: the case and order.

        Returns:
            The JSON body, image inline, exactly as a live request carries it.

        Raises:
            Exception: the image cannot be read (a live request would fail with the same reason).
        """
        messages, _user_text = await self._messages(request)
        return self._request_body(messages, self._structured_active)

    def result_from_response(
        self, request: JudgeRequest, status_code: int, body: Any, *, extra: dict[str, Any] | None = None
    ) -> JudgeResult:
        """Read an answer the server gave outside a live call (a Batch API output line) as a live one.

        The same reading of the completion, the same parser and the same failure reasons as
        :meth:`judge_batch`: an error status is a failure ``HTTP <status>: <message>``, a completion
        without choices or content fails as it would live, and usage is kept.

        Args:
            request: the request the answer belongs to.
            status_code: the HTTP status the server gave the request.
            body: the decoded response body.
            extra: more facts to store with the result (for example the batch id).

        Returns:
            The result, with ``latency_s`` unset (a batch has no per-request latency).
        """
        outcome = _CallOutcome(attempts=1, structured=self._structured_active)
        if status_code != 200:
            inner = body.get("error", body) if isinstance(body, dict) else body
            message = inner.get("message") if isinstance(inner, dict) else None
            outcome.failure = self._reason(f"HTTP {status_code}: {message or inner}")
        else:
            outcome = self._read_completion(body, outcome)
        result = self._result(request, outcome, 0.0)
        return replace(result, latency_s=None, extra={**result.extra, **(extra or {})})

    async def _call(self, messages: list[dict[str, Any]]) -> _CallOutcome:
        """Send one request with retries; never raises except on cancellation."""
        openai = self._openai
        resources = self._resources()
        policy = self.retry_policy
        outcome = _CallOutcome(structured=self._structured_active)
        while True:
            outcome.attempts += 1
            retry_after: float | None = None
            try:
                async with resources.slots:
                    # the client's generic POST: same auth, errors and timeouts as
                    # chat.completions.create, without its per-request transform of the parameters
                    # and model construction, which cost more CPU than the rest of the request
                    response = await resources.client.post(
                        "/chat/completions",
                        body=self._request_body(messages, outcome.structured),
                        cast_to=resources.response_type,
                        options={"timeout": self.settings.timeout_s},
                    )
                    payload = response.json()
            except openai.APIStatusError as exc:
                status = int(exc.status_code)
                message = _error_message(exc)
                if outcome.structured and status in (400, 422) and _about_response_format(message):
                    self._fall_back_from_structured(status, message)
                    outcome.structured = False
                    outcome.structured_fallback = True
                    continue
                if status in RETRYABLE_STATUS or status >= 500:
                    problem = f"HTTP {status}"
                    retry_after = parse_retry_after(exc.response.headers)
                else:
                    outcome.failure = self._reason(f"HTTP {status}: {message}")
                    return outcome
            except openai.APITimeoutError as exc:
                # the aiohttp backend reports a dropped connection as a connect timeout
                problem = "timeout" if _root_is_timeout(exc) else "connection error"
            except openai.APIConnectionError as exc:
                problem = "connection error"
                cause = exc.__cause__
                if cause is not None:
                    outcome.errors.append(self._reason(f"{type(cause).__name__}: {cause}"))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # invalid JSON, a body cut short: the answer is unusable
                outcome.failure = self._reason(f"malformed response: {type(exc).__name__}: {exc}")
                return outcome
            else:
                return self._read_completion(payload, outcome)
            if outcome.retries >= policy.max_retries:
                outcome.failure = f"{problem} after {outcome.retries} retries"
                return outcome
            delay = policy.delay(outcome.retries, retry_after, self._rng)
            outcome.retries += 1
            outcome.errors.append(problem)
            logger.debug(
                "%s: %s; retry %d of %d in %.3f s",
                self.spec,
                problem,
                outcome.retries,
                policy.max_retries,
                delay,
            )
            await asyncio.sleep(delay)

    def _read_completion(self, payload: Any, outcome: _CallOutcome) -> _CallOutcome:
        if not isinstance(payload, dict):
            outcome.failure = self._reason(f"malformed response: expected a JSON object, got {payload!r:.80}")
            return outcome
        usage = payload.get("usage")
        if isinstance(usage, dict):
            outcome.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            outcome.completion_tokens = _int_or_none(usage.get("completion_tokens"))
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            outcome.failure = "malformed response: no choices"
            return outcome
        choice = choices[0]
        raw_message = choice.get("message")
        message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        reason = choice.get("finish_reason")
        outcome.finish_reason = reason if isinstance(reason, str) else None
        content = message.get("content")
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(
                part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
            )
        if not isinstance(content, str):
            refusal = message.get("refusal")
            outcome.failure = self._reason(f"refused: {refusal}") if refusal else "empty response"
            return outcome
        outcome.text = content
        return outcome


def _http_module(openai: Any) -> Any:
    """The HTTP library the installed ``openai`` is built on (``httpx2`` or ``httpx``)."""
    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        if cls.__name__ == "AsyncClient" and not cls.__module__.startswith("openai"):
            return importlib.import_module(cls.__module__.partition(".")[0])
    return importlib.import_module("httpx")


def _choose_http_backend(choice: str) -> str:
    """``"aiohttp"`` or ``"httpx"``; ``"auto"`` takes aiohttp when installed (it costs less CPU per request)."""
    if choice not in HTTP_BACKENDS:
        raise JudgeSpecError(f"unknown http_backend {choice!r}; expected auto, aiohttp or httpx")
    if choice == "httpx":
        return "httpx"
    if importlib.util.find_spec("aiohttp") is not None:
        return "aiohttp"
    if choice == "aiohttp":
        raise MissingExtraError("aiohttp", "api", "the aiohttp HTTP backend of the API judge")
    return "httpx"


def _root_is_timeout(exc: BaseException) -> bool:
    """False when a client "timeout" was caused by the server hanging up (aiohttp reports it so)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError) or "disconnected" in type(current).__name__.lower():
            return False
        current = current.__cause__ or current.__context__
    return True


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            param = inner.get("param")
            return f"{inner['message']}" + (f" (param: {param})" if param else "")
    return str(getattr(exc, "message", "") or exc)


def _about_response_format(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("response_format", "json_schema", "structured output", "guided"))


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None

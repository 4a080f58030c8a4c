"""One OpenAI-compatible Chat Completions endpoint: the request machinery every ``api:`` model shares.

:class:`ChatClient` holds what the API judge (:class:`~medrewardbench.judges.api.client.ApiJudge`)
and the free-text generators of ``medrewardbench build`` both need, so that neither copies it:

* the settings (:class:`~medrewardbench.models.options.ApiSettings`: endpoint, key variable,
  timeout, retries, backoff, HTTP backend, image cache), checked when the client is made;
* the key: read from its environment variable (a placeholder for a local server given by URL),
  registered with :func:`medrewardbench.utils.secrets.register_secret` and scrubbed from every reason;
* concurrency: at most ``concurrency`` HTTP attempts in flight, and twice that many requests being
  prepared, sent or waiting to retry (:meth:`ChatClient.admission`), per event loop;
* images: ``image`` message parts holding an :class:`~medrewardbench.cases.ImageRef` become data
  URLs, sent as they are where possible and cached by content (:mod:`~medrewardbench.models.api.images`);
* retries (:mod:`~medrewardbench.models.api.retry`): HTTP 429, 408, 409 and 5xx, timeouts and
  connection errors, with ``Retry-After`` or full-jitter backoff; other 4xx and malformed answers
  fail at once;
* structured output: a request may carry a ``response_format``; a server that answers 400/422
  about it gets the request again without it, and the client stops sending it for the rest of the
  run (:attr:`ChatClient.structured_fallback_reason`).

A call never raises except on cancellation: it ends in a :class:`CallOutcome` holding the
completion's text or a failure reason. Answers that come another way (a Batch API output file) are
read into the same :class:`CallOutcome` by the same code (:meth:`ChatClient.read_response`), from
request lines whose bodies the same code built (:meth:`ChatClient.batch_request`).

Why one module of this size: the request machinery of every API model (HTTP back ends, retries,
structured-output fallback, usage) is one state machine per request; its parts share the client's
state.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from medrewardbench.cases import ImageRef
from medrewardbench.errors import JudgeSpecError, MissingExtraError
from medrewardbench.models.api.images import DataUrlCache, inline_data_url
from medrewardbench.models.api.retry import RETRYABLE_STATUS, Attempt, RetryPolicy, parse_retry_after, root_is_timeout
from medrewardbench.models.logprobs import TokenLogprob, read_openai_logprobs
from medrewardbench.models.options import HTTP_BACKENDS, JudgeOptions, check_api_settings
from medrewardbench.utils.secrets import register_secret, scrub

logger = logging.getLogger(__name__)

__all__ = [
    "BASE_URL_ENV",
    "CHAT_COMPLETIONS_URL",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONCURRENCY",
    "PLACEHOLDER_API_KEY",
    "CallOutcome",
    "ChatClient",
    "public_url",
]

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_API_KEY = "EMPTY"
"""Sent to a server given by base URL when no key is set (local servers usually accept anything)."""
DEFAULT_CONCURRENCY = 8
CHAT_COMPLETIONS_URL = "/v1/chat/completions"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go without --base-url or $OPENAI_BASE_URL (the ``openai`` client's default)."""
"""The endpoint a Batch API request line names (live calls post to ``/chat/completions`` under the base URL)."""
MAX_REASON_CHARS = 300


def public_url(url: str | None) -> str | None:
    """A URL without user info, query or fragment (what may be recorded).

    Args:
        url: any URL, or None.

    Returns:
        The URL reduced to scheme, host, port and path, or None.
    """
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
    prepared, sent or waiting to retry (twice that), so that a huge batch does not hold every
    encoded image in memory at once.
    """

    loop: asyncio.AbstractEventLoop
    client: Any
    slots: asyncio.Semaphore
    admission: asyncio.Semaphore
    response_type: type


@dataclass
class CallOutcome:
    """The end of one request's attempts: a completion's text or a failure reason.

    Attributes:
        text: the completion's text (also kept with some failures, for the record).
        failure: why the request failed, or None.
        attempts: HTTP attempts made.
        retries: retries among them.
        structured: whether the last attempt carried ``response_format``.
        structured_fallback: whether this request was sent again without ``response_format``.
        finish_reason: the server's finish reason.
        prompt_tokens, completion_tokens: usage, when the server reported it, summed over every
            attempt that came back with a completion (each was billed).
        errors: what each retried attempt met.
        logprobs: the completion's tokens with their log-probabilities, when asked for and given.
    """

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
    logprobs: tuple[TokenLogprob, ...] | None = None

    def extra(self) -> dict[str, Any]:
        """The attempts, retries and structured-output facts worth storing with a result."""
        extra: dict[str, Any] = {"attempts": self.attempts, "retries": self.retries, "structured": self.structured}
        if self.structured_fallback:
            extra["structured_fallback"] = True
        if self.errors:
            extra["errors"] = list(self.errors)
        return extra


class ChatClient:
    """A model behind an OpenAI-compatible Chat Completions server, with the package's request rules.

    Args:
        model: the model name sent in each request.
        options: the shared options (``concurrency``, ``seed``, sampling) and ``options.api``.
        spec: how messages and logs name the user of this client (``api:gpt-4o``).
        purpose: what needs the ``openai`` package, for the missing-extra message.

    Raises:
        JudgeSpecError: a bad base URL, timeout or retry count, an unknown HTTP backend, or no key
            where one is needed.
        MissingExtraError: ``openai`` (or the aiohttp backend asked for) is not installed.
    """

    def __init__(self, model: str, options: JudgeOptions, *, spec: str, purpose: str) -> None:
        if importlib.util.find_spec("openai") is None:
            raise MissingExtraError("openai", "api", purpose)
        self._openai: Any = None  # imported for the httpx backend only: the aiohttp one posts directly
        self.model = model
        self.spec = spec
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
        self.api_key_env = settings.api_key_env or DEFAULT_API_KEY_ENV
        key = os.environ.get(self.api_key_env, "").strip()
        self.uses_placeholder_key = False
        if not key:
            if self.base_url is None:
                raise JudgeSpecError(
                    f"{spec} needs an API key: set the environment variable {self.api_key_env} "
                    "(or name another one with --api-key-env), or give --base-url for a local server "
                    "that needs none"
                )
            key = PLACEHOLDER_API_KEY
            self.uses_placeholder_key = True
            logger.info(
                "%s: %s is not set; sending a placeholder key to %s", spec, self.api_key_env, public_url(self.base_url)
            )
        self._api_key = key
        self._direct: tuple[str | None, str, dict[str, str]] | None = None
        self._secrets = (key,) if key != PLACEHOLDER_API_KEY else ()
        # whatever stores or reports text in this process (the store, log handlers) removes it too
        register_secret(None if self.uses_placeholder_key else key)
        self.retry_policy = RetryPolicy(
            max_retries=settings.max_retries,
            backoff_base_s=float(settings.backoff_base_s),
            backoff_max_s=float(settings.backoff_max_s),
            retry_after_max_s=float(settings.retry_after_max_s),
        )
        self.http_backend = choose_http_backend(settings.http_backend)
        if self.http_backend == "httpx":
            try:
                self._openai = importlib.import_module("openai")
            except ImportError as exc:
                raise MissingExtraError("openai", "api", purpose) from exc
        self.images = DataUrlCache(settings.image_cache_size, passthrough=settings.image_passthrough)
        self._loop_resources: _LoopResources | None = None
        self.structured_active = True
        self.structured_fallback_reason: str | None = None
        self._rng = random.Random()

    # ------------------------------------------------------------------------------- records
    def metadata(self) -> dict[str, Any]:
        """Facts about how requests are sent (none of them changes what comes back)."""
        return {
            "api_key_env": self.api_key_env,
            "placeholder_api_key": self.uses_placeholder_key,
            "timeout_s": self.settings.timeout_s,
            "max_retries": self.retry_policy.max_retries,
            "backoff_base_s": self.retry_policy.backoff_base_s,
            "backoff_max_s": self.retry_policy.backoff_max_s,
            "concurrency": self.concurrency,
            "http_backend": self.http_backend,
            "image_passthrough": self.images.passthrough,
        }

    def scrub(self, text: str) -> str:
        """A text without this client's key (and anything shaped like a credential)."""
        return scrub(text, self._secrets)

    def reason(self, text: str) -> str:
        """A failure reason: one line, scrubbed, at most :data:`MAX_REASON_CHARS` characters."""
        text = self.scrub(" ".join(text.split()))
        return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."

    # ------------------------------------------------------------------------------ resources
    def resources(self) -> _LoopResources:
        """The client and semaphores of the running loop, made on first use in that loop."""
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

    def use_base_url(self, base_url: str) -> None:
        """Send requests to another endpoint from now on (a server started after this client was made).

        The next request makes a new HTTP client for it; the key, limits and settings stay.

        Args:
            base_url: the endpoint's OpenAI-style base URL (``http://HOST:PORT/v1``).

        Raises:
            JudgeSpecError: the URL is not an http(s) URL.
        """
        check_api_settings(base_url, self.settings.timeout_s, self.settings.max_retries, base_url_source="base_url")
        self.base_url = base_url
        self._loop_resources = None

    def admission(self) -> asyncio.Semaphore:
        """The bound on requests in preparation or in flight in the running loop (``async with``)."""
        return self.resources().admission

    def _make_client(self) -> tuple[Any, type]:
        """A fresh HTTP client with a pool sized for ``concurrency``, and its HTTP response type.

        The aiohttp backend is a plain ``aiohttp.ClientSession`` (:mod:`~medrewardbench.models.api.direct`
        posts with it as the ``openai`` client would, at a fraction of its CPU per request); the
        httpx backend is an ``AsyncOpenAI``.
        """
        if self.http_backend == "aiohttp":
            from medrewardbench.models.api.direct import make_session

            return make_session(self.concurrency + 16, self.base_url or DEFAULT_BASE_URL), dict
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

    # ------------------------------------------------------------------------------- messages
    async def data_url(self, image: ImageRef) -> str:
        """The ``data:`` URL of an image (cached by content; decoding happens off the event loop).

        Args:
            image: the image reference.

        Returns:
            The data URL.

        Raises:
            ImageError: the image cannot be read or decoded.
        """
        url = self.images.lookup(image)
        if url is None:
            url = inline_data_url(image) if self.images.passthrough else None
            if url is not None:
                self.images.count_miss()
            else:
                # hashing, decoding and PNG encoding are CPU work: keep them off the event loop
                url = await asyncio.to_thread(self.images.get, image)
            self.images.remember(image, url)
        return url

    async def api_messages(self, rendered: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Rendered template messages as Chat Completions messages.

        Args:
            rendered: ``[{"role": ..., "content": [{"type": "text", "text": ...} | {"type": "image",
                "image": ImageRef}]}]`` as :mod:`medrewardbench.prompts` renders them.

        Returns:
            The messages with image parts as ``image_url`` data URLs and system turns as plain text.

        Raises:
            ImageError: an image cannot be read or decoded.
        """
        messages: list[dict[str, Any]] = []
        for message in rendered:
            parts: list[dict[str, Any]] = []
            for part in message["content"]:
                if part["type"] == "image":
                    url = await self.data_url(part["image"])
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            if message["role"] == "system":
                # plain string content is what every OpenAI-compatible server accepts for system turns
                messages.append({"role": "system", "content": "\n".join(p["text"] for p in parts)})
            else:
                messages.append({"role": message["role"], "content": parts})
        return messages

    def request_body(
        self, messages: list[dict[str, Any]], response_format: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The JSON body of one request.

        Args:
            messages: Chat Completions messages.
            response_format: a ``response_format`` to send, or None.

        Returns:
            Model, messages, seed, the sampling settings that are set, the response format, and
            ``logprobs``/``top_logprobs`` when asked for.
        """
        body: dict[str, Any] = {"model": self.model, "messages": messages, "seed": self.options.seed}
        if self.options.temperature is not None:
            body["temperature"] = self.options.temperature
        if self.options.top_p is not None:
            body["top_p"] = self.options.top_p
        if self.options.max_tokens is not None:
            body["max_tokens"] = self.options.max_tokens
        if response_format is not None:
            body["response_format"] = dict(response_format)
        if self.settings.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = self.settings.logprobs
        return body

    def batch_request(
        self, custom_id: str, messages: list[dict[str, Any]], response_format: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One line of a Batch API request file: the body a live call would send now.

        Args:
            custom_id: the id that names the request in the batch's output.
            messages: Chat Completions messages (:meth:`api_messages`).
            response_format: a ``response_format`` to ask for; left out once the server has refused
                one (:attr:`structured_fallback_reason`), as a live call would leave it out.

        Returns:
            ``{"custom_id", "method": "POST", "url": CHAT_COMPLETIONS_URL, "body"}``.
        """
        structured = response_format if self.structured_active else None
        return {
            "custom_id": custom_id,
            "method": "POST",
            "url": CHAT_COMPLETIONS_URL,
            "body": self.request_body(messages, structured),
        }

    # ---------------------------------------------------------------------------------- calls
    def _fall_back_from_structured(self, status: int, message: str) -> None:
        if self.structured_fallback_reason is None:
            self.structured_fallback_reason = f"HTTP {status}: {self.reason(message)}"
            logger.warning(
                "%s: the server refused structured output (%s); sending requests without "
                "response_format for the rest of the run",
                self.spec,
                self.structured_fallback_reason,
            )
        self.structured_active = False

    async def call(
        self, messages: list[dict[str, Any]], response_format: Mapping[str, Any] | None = None
    ) -> CallOutcome:
        """Send one request with retries; never raises except on cancellation.

        Args:
            messages: Chat Completions messages (:meth:`api_messages`).
            response_format: a ``response_format`` to ask for, until the server refuses one.

        Returns:
            The completion's text, or a failure reason, with attempts, retries and usage.
        """
        resources = self.resources()
        policy = self.retry_policy
        outcome = CallOutcome(structured=response_format is not None and self.structured_active)
        while True:
            outcome.attempts += 1
            async with resources.slots:
                body = self.request_body(messages, response_format if outcome.structured else None)
                attempt = await self._attempt(resources, body)
            if attempt.status is not None:
                status, message = attempt.status, attempt.message
                if outcome.structured and status in (400, 422) and _about_response_format(message):
                    self._fall_back_from_structured(status, message)
                    outcome.structured = False
                    outcome.structured_fallback = True
                    continue
                if not (status in RETRYABLE_STATUS or status >= 500):
                    outcome.failure = self.reason(f"HTTP {status}: {message}")
                    return outcome
                problem = f"HTTP {status}"
            elif attempt.problem is not None:
                problem = attempt.problem
                if attempt.cause is not None:
                    outcome.errors.append(self.reason(attempt.cause))
            elif attempt.malformed is not None:
                outcome.failure = self.reason(f"malformed response: {attempt.malformed}")
                return outcome
            else:
                return self.read_completion(attempt.payload, outcome)
            if outcome.retries >= policy.max_retries:
                outcome.failure = f"{problem} after {outcome.retries} retries"
                return outcome
            delay = policy.delay(outcome.retries, attempt.retry_after, self._rng)
            outcome.retries += 1
            outcome.errors.append(problem)
            logger.debug(
                "%s: %s; retry %d of %d in %.3f s", self.spec, problem, outcome.retries, policy.max_retries, delay
            )
            await asyncio.sleep(delay)

    async def _attempt(self, resources: _LoopResources, body: dict[str, Any]) -> Attempt:
        """One HTTP attempt; both backends read its end alike (never raises except on cancellation)."""
        if self.http_backend == "aiohttp":
            from medrewardbench.models.api.direct import post, request_headers

            if self._direct is None or self._direct[0] != self.base_url:  # made once per endpoint
                url = (self.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
                self._direct = (self.base_url, url, request_headers(self._api_key))
            _, url, headers = self._direct
            return await post(resources.client, url, headers, body, self.settings.timeout_s)
        openai = self._openai
        try:
            # the client's generic POST: same auth, errors and timeouts as chat.completions.create,
            # without its per-request transform of the parameters and model construction
            response = await resources.client.post(
                "/chat/completions",
                body=body,
                cast_to=resources.response_type,
                options={"timeout": self.settings.timeout_s},
            )
            payload = response.json()
        except openai.APIStatusError as exc:
            retry_after = parse_retry_after(exc.response.headers)
            return Attempt(status=int(exc.status_code), message=_error_message(exc), retry_after=retry_after)
        except openai.APITimeoutError as exc:
            # the aiohttp transport reports a dropped connection as a connect timeout
            return Attempt(problem="timeout" if root_is_timeout(exc) else "connection error")
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            return Attempt(
                problem="connection error", cause=None if cause is None else f"{type(cause).__name__}: {cause}"
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # invalid JSON, a body cut short: the answer is unusable
            return Attempt(malformed=f"{type(exc).__name__}: {exc}")
        return Attempt(payload=payload)

    def read_response(self, status_code: int, body: Any, *, structured: bool = False) -> CallOutcome:
        """Read an answer that came outside a live call (a Batch API output line) as a live one.

        An error status fails as a live call's non-retried error does (``HTTP <status>: <message>``);
        a 200 answer is read by :meth:`read_completion`, as a live answer is.

        Args:
            status_code: the HTTP status the server gave the request.
            body: the decoded response body.
            structured: whether the request carried ``response_format``.

        Returns:
            The outcome of one attempt.
        """
        outcome = CallOutcome(attempts=1, structured=structured)
        if status_code == 200:
            return self.read_completion(body, outcome)
        inner = body.get("error", body) if isinstance(body, dict) else body
        message = inner.get("message") if isinstance(inner, dict) else None
        outcome.failure = self.reason(f"HTTP {status_code}: {message or inner}")
        return outcome

    def read_completion(self, payload: Any, outcome: CallOutcome) -> CallOutcome:
        """Read a Chat Completions answer into ``outcome``: text, finish reason and usage, or why not.

        Args:
            payload: the parsed JSON answer.
            outcome: the outcome to fill in.

        Returns:
            ``outcome``.
        """
        if not isinstance(payload, dict):
            outcome.failure = self.reason(f"malformed response: expected a JSON object, got {payload!r:.80}")
            return outcome
        usage = payload.get("usage")
        if isinstance(usage, dict):
            # added to what earlier attempts of the same request used: every completion was billed
            outcome.prompt_tokens = _added(outcome.prompt_tokens, _int_or_none(usage.get("prompt_tokens")))
            outcome.completion_tokens = _added(outcome.completion_tokens, _int_or_none(usage.get("completion_tokens")))
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
            outcome.failure = self.reason(f"refused: {refusal}") if refusal else "empty response"
            return outcome
        outcome.text = content
        outcome.logprobs = read_openai_logprobs(choice.get("logprobs"))
        return outcome


def _http_module(openai: Any) -> Any:
    """The HTTP library the installed ``openai`` is built on (``httpx2`` or ``httpx``)."""
    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        if cls.__name__ == "AsyncClient" and not cls.__module__.startswith("openai"):
            return importlib.import_module(cls.__module__.partition(".")[0])
    return importlib.import_module("httpx")


def choose_http_backend(choice: str) -> str:
    """``"aiohttp"`` or ``"httpx"``; ``"auto"`` takes aiohttp when installed (it costs less CPU per request).

    Args:
        choice: ``auto``, ``aiohttp`` or ``httpx``.

    Returns:
        The backend to use.

    Raises:
        JudgeSpecError: an unknown choice.
        MissingExtraError: ``aiohttp`` was asked for and is not installed.
    """
    if choice not in HTTP_BACKENDS:
        raise JudgeSpecError(f"unknown http_backend {choice!r}; expected auto, aiohttp or httpx")
    if choice == "httpx":
        return "httpx"
    if importlib.util.find_spec("aiohttp") is not None:
        return "aiohttp"
    if choice == "aiohttp":
        raise MissingExtraError("aiohttp", "api", "the aiohttp HTTP backend of the API judge")
    return "httpx"


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


def _added(before: int | None, now: int | None) -> int | None:
    """Token counts of two attempts together (None only when neither reported any)."""
    return now if before is None else before + (now or 0)


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None

"""The API judge: one Chat Completions request per comparison, retried and failed visibly.

See :mod:`medrewardbench.judges.api` for the behaviour. The model is reached through
:mod:`medrewardbench.models.api` (the :class:`~medrewardbench.models.api.chat.ChatClient`: settings,
key, concurrency, images, retries, structured-output fallback; and the one-request path of
:mod:`~medrewardbench.models.api.exchange`), which the free-text generators of
``medrewardbench build`` share; this module adds the pairwise prompt and the verdict parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.models.api.chat import (
    BASE_URL_ENV,
    DEFAULT_API_KEY_ENV,
    DEFAULT_CONCURRENCY,
    PLACEHOLDER_API_KEY,
    CallOutcome,
    ChatClient,
    public_url,
)
from medrewardbench.models.api.exchange import api_config, each_admitted, exchange
from medrewardbench.models.logprobs import verdict_preferences
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import PromptTemplate, load_template, verdict_json_schema

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONCURRENCY",
    "PLACEHOLDER_API_KEY",
    "STRUCTURED_SCHEMA_NAME",
    "ApiJudge",
    "public_url",
]

STRUCTURED_SCHEMA_NAME = "medrewardbench_verdict"


class ApiJudge(Judge):
    """A multimodal LLM judge behind an OpenAI-compatible server.

    Args:
        model: the model name sent in each request.
        options: the shared judge options and ``options.api``
            (:class:`~medrewardbench.models.options.ApiSettings`).

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
        self.model = model
        self.spec = f"api:{model}"
        self.options = options
        self.chat = ChatClient(model, options, spec=self.spec, purpose="the API judge (api:MODEL)")
        self.concurrency = self.chat.concurrency
        self.settings = options.api
        self.template: PromptTemplate = load_template(options.template)
        # the same string objects for every request, so that the parser's cached index of them hits
        self._static_chunks = self.template.static_chunks()

    # where requests go: the Batch API path of the sweep reads these
    @property
    def base_url(self) -> str | None:
        """The server's base URL (None: the OpenAI default)."""
        return self.chat.base_url

    @property
    def api_key_env(self) -> str:
        """The environment variable the API key is read from."""
        return self.chat.api_key_env

    # ---------------------------------------------------------------------------- protocol
    def config(self) -> dict[str, Any]:
        """Everything that can change the outputs; no credentials, no query strings."""
        return api_config(
            self.chat,
            self.options,
            spec=self.spec,
            kind=self.kind,
            template=self.template,
            structured=self.settings.structured,
            # only when asked for: configurations stored before the setting existed keep their hash
            **({"logprobs": self.settings.logprobs} if self.settings.logprobs else {}),
        )

    def metadata(self) -> dict[str, Any]:
        """Run facts that do not change outputs, including whether structured output fell back."""
        return {
            "structured_requested": self.settings.structured,
            "structured_fallback": self.chat.structured_fallback_reason is not None,
            "structured_fallback_reason": self.chat.structured_fallback_reason,
            **self.chat.metadata(),
        }

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Judge every request concurrently (at most ``concurrency`` HTTP calls in flight)."""
        return await each_admitted(self.chat, requests, self._judge_one)

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop."""
        await self.chat.aclose()

    # ---------------------------------------------------------------------------- internals
    def _rendered(self, request: JudgeRequest) -> list[dict[str, Any]]:
        case = request.case
        image = case.image if case.image.kind != "none" else None
        return self.template.render_messages(case.question, request.response_a, request.response_b, image)

    @staticmethod
    def _verdict_format() -> dict[str, Any]:
        """The verdict JSON schema as a ``response_format``."""
        return {
            "type": "json_schema",
            "json_schema": {"name": STRUCTURED_SCHEMA_NAME, "schema": verdict_json_schema(), "strict": True},
        }

    def _response_format(self) -> dict[str, Any] | None:
        """The ``response_format`` a request would carry now.

        None without structured output, or after the server refused it.
        """
        return self._verdict_format() if self.settings.structured and self.chat.structured_active else None

    async def _judge_one(self, request: JudgeRequest) -> JudgeResult:
        response_format = self._verdict_format() if self.settings.structured else None
        done = await exchange(self.chat, lambda: self._rendered(request), response_format)
        if done.outcome is None:
            return JudgeResult.failed(done.failure or "could not prepare the request", latency_s=done.latency_s)
        return self._result(request, done.outcome, done.latency_s)

    def _result(
        self,
        request: JudgeRequest,
        outcome: CallOutcome,
        latency: float | None,
        extra: dict[str, Any] | None = None,
    ) -> JudgeResult:
        """A request's result from the end of its attempts: the failure, or the parsed answer."""
        from medrewardbench.parsing import parse_verdicts

        facts = {**outcome.extra(), **(extra or {})}
        if outcome.failure is not None:
            return JudgeResult.failed(
                outcome.failure,
                raw_output=outcome.text,
                latency_s=latency,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                extra=facts,
            )
        facts["finish_reason"] = outcome.finish_reason
        parsed = parse_verdicts(
            outcome.text,
            quoted=[request.response_a, request.response_b, request.case.question, *self._static_chunks],
            positions=bool(self.settings.logprobs),
        )
        facts["parse_method"] = parsed.method
        if parsed.reason:
            facts["reason"] = parsed.reason
        preferences: dict[str, float] = {}
        if self.settings.logprobs:
            facts["logprobs_given"] = outcome.logprobs is not None
            if outcome.logprobs and outcome.text is not None:
                preferences = verdict_preferences(outcome.text, outcome.logprobs, parsed.positions)
        return JudgeResult.from_parse(
            parsed,
            outcome.text,
            latency_s=latency,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            extra=facts,
            preferences=preferences,
        )

    # ------------------------------------------------------------- answers that come another way
    async def batch_request(self, custom_id: str, request: JudgeRequest) -> dict[str, Any]:
        """One line of a Batch API request file: the body this judge would send live for a request.

        Args:
            custom_id: the id that names the request in the batch's output.
            request: the case and order.

        Returns:
            ``{"custom_id", "method", "url", "body"}`` (:meth:`ChatClient.batch_request`), the body
            built by the same code as a live request's, image inline.

        Raises:
            Exception: the image cannot be read (a live request would fail with the same reason).
        """
        messages = await self.chat.api_messages(self._rendered(request))
        return self.chat.batch_request(custom_id, messages, self._response_format())

    def result_from_response(
        self, request: JudgeRequest, status_code: int, body: Any, *, extra: dict[str, Any] | None = None
    ) -> JudgeResult:
        """Read an answer the server gave outside a live call (a Batch API output line) as a live one.

        The answer is read by :meth:`ChatClient.read_response` and parsed as :meth:`judge_batch`
        parses a live one: an error status is a failure ``HTTP <status>: <message>``, a completion
        without choices or content fails as it would live, and usage is kept.

        Args:
            request: the request the answer belongs to.
            status_code: the HTTP status the server gave the request.
            body: the decoded response body.
            extra: more facts to store with the result (for example the batch id).

        Returns:
            The result, with ``latency_s`` unset (a batch has no per-request latency).
        """
        outcome = self.chat.read_response(status_code, body, structured=self._response_format() is not None)
        return self._result(request, outcome, None, extra)

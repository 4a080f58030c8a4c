"""Free-text generators: models that answer a question about an image (``api:MODEL`` and ``hf:PATH`` specs).

The difficulty filter, the response pool and the grader all ask a model for free text. A
generator is a prompt and a model: it is built from the same spec strings as judges, with the same
shared options (:class:`~medrewardbench.models.options.JudgeOptions`: seed, concurrency, batch
size, sampling, the ``api`` and ``local`` sections), on the same model layer
(:mod:`medrewardbench.models`) as the judges:

* ``api:MODEL`` talks to an OpenAI-compatible server through
  :class:`~medrewardbench.models.api.chat.ChatClient` and the one-request path of
  :mod:`~medrewardbench.models.api.exchange` (retries, concurrency, images as data URLs, key
  scrubbing, settings); one request per answer.
* ``hf:PATH`` runs a local transformers vision-language model through
  :class:`~medrewardbench.models.local.LocalModel`, in left-padded batches (``batch_size``,
  default 4), a failing conversation retried alone.

A generator never raises for one request: a failure becomes a result with a reason. Its
:meth:`TextGenerator.config` holds everything that can change an answer (spec, model, template and
its SHA-256, sampling, seed) and its SHA-256 is the generator's fingerprint, under which answers are
stored (:mod:`medrewardbench.curation.store`).

**The answer prompt** (``--template``, default the shipped ``answer``: ``templates/answer.txt``) has
the placeholders ``{{question}}`` (required) and ``{{answer_format}}``, which is filled with
:data:`ANSWER_FORMATS` for the question's answer type: closed questions are asked to begin with the
answer itself, so that a closed answer can be scored by normalised match.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.errors import JudgeSpecError
from medrewardbench.models.backend import Backend
from medrewardbench.models.local import LocalModel
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import TextTemplate, load_text_template

__all__ = [
    "ANSWER_FORMATS",
    "ANSWER_PLACEHOLDERS",
    "ANSWER_TEMPLATES",
    "GENERATOR_KINDS",
    "ApiTextGenerator",
    "GenerationRequest",
    "GenerationResult",
    "HFTextGenerator",
    "TextGenerator",
    "build_generator",
    "load_answer_template",
]

ANSWER_TEMPLATES: tuple[str, ...] = ("answer",)
"""Shipped answer templates."""
ANSWER_PLACEHOLDERS: tuple[str, ...] = ("question", "answer_format")
"""Placeholders an answer template may hold; ``{{question}}`` is required."""
ANSWER_FORMATS: dict[str, str] = {
    "closed": (
        "This question has a short answer (yes or no, one of the options, or a value with its unit). "
        "Begin your reply with that answer, then explain it in one or two sentences."
    ),
    "open": "Answer as you would to a colleague: the relevant findings, their interpretation and, where useful, "
    "what to do next.",
}
"""What ``{{answer_format}}`` becomes, per answer type."""
GENERATOR_KINDS: tuple[str, ...] = ("api", "hf")
DEFAULT_HF_BATCH_SIZE = 4


def load_answer_template(name_or_path: str = "answer") -> TextTemplate:
    """The answer prompt: a shipped name (``answer``) or a template file.

    Args:
        name_or_path: ``answer`` or a file with ``{{question}}`` (and optionally ``{{answer_format}}``).

    Returns:
        The template.

    Raises:
        TemplateError: a missing file, or a placeholder missing or unknown.
    """
    return load_text_template(
        name_or_path, builtins=ANSWER_TEMPLATES, required=("question",), known=ANSWER_PLACEHOLDERS
    )


@dataclass(frozen=True)
class GenerationRequest:
    """One thing to ask a generator.

    Attributes:
        key: what the answer is stored under (a question's content hash, a grading key).
        values: the template's placeholder values.
        image: the image to show, or None.
        quoted: passages the model is shown that its output may copy (used by graders' parsers).
    """

    key: str
    values: Mapping[str, str]
    image: ImageRef | None = None
    quoted: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationResult:
    """What a generator produced for one request: text, or a failure reason, with usage."""

    text: str | None
    failure: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str, **kwargs: Any) -> GenerationResult:
        """A failed result (``text`` may still be given in ``kwargs`` for the record)."""
        return cls(text=kwargs.pop("text", None), failure=reason, **kwargs)


class TextGenerator(Backend):
    """A model that answers in free text; built by :func:`build_generator`.

    Subclasses set ``spec``, ``kind``, ``template``, ``batch_size`` and ``concurrency``, and
    implement :meth:`generate_batch` and :meth:`config`; the fingerprint, metadata and life cycle
    are those of every model back end (:class:`~medrewardbench.models.backend.Backend`).
    """

    kind: str = "generator"
    template: TextTemplate

    @abc.abstractmethod
    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Answer a batch; exactly one result per request, in order; never raises for one request."""

    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """Everything that can change an answer (spec, model, template hash, sampling, seed)."""


class ApiTextGenerator(TextGenerator):
    """A model behind an OpenAI-compatible server, through the API judge's request machinery.

    Args:
        model: the model name the server knows.
        options: shared options; ``options.api`` holds the endpoint, key variable and retries.
        template: the prompt.

    Raises:
        JudgeSpecError: no model name, bad API settings, or no key where one is needed.
        MissingExtraError: ``openai`` is not installed.
    """

    kind = "api"
    batch_size = 1

    def __init__(self, model: str, options: JudgeOptions, template: TextTemplate) -> None:
        from medrewardbench.models.api.chat import ChatClient

        if not model.strip():
            raise JudgeSpecError("an API generator needs a model name: api:MODEL (for example api:gpt-4o-mini)")
        self.model = model
        self.spec = f"api:{model}"
        self.options = options
        self.template = template
        self.chat = ChatClient(model, options, spec=self.spec, purpose="API generators (api:MODEL)")
        self.concurrency = self.chat.concurrency

    def config(self) -> dict[str, Any]:
        """Model, public endpoint, template and sampling settings: everything that can change an answer."""
        from medrewardbench.models.api.exchange import api_config

        return api_config(self.chat, self.options, spec=self.spec, kind=self.kind, template=self.template)

    def metadata(self) -> dict[str, Any]:
        """The chat client's facts (endpoint, HTTP backend, retries); they do not change answers."""
        return self.chat.metadata()

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Answer each request through the chat client, as many at once as its admission allows."""
        from medrewardbench.models.api.exchange import each_admitted

        return await each_admitted(self.chat, requests, self._one)

    async def _one(self, request: GenerationRequest) -> GenerationResult:
        from medrewardbench.models.api.exchange import exchange

        image = request.image if request.image is not None and request.image.kind != "none" else None
        done = await exchange(self.chat, lambda: self.template.render_messages(request.values, image))
        latency, outcome = done.latency_s, done.outcome
        if outcome is None:
            return GenerationResult.failed(done.failure or "could not prepare the request", latency_s=latency)
        extra = outcome.extra()
        if outcome.failure is not None:
            return GenerationResult.failed(
                outcome.failure,
                text=outcome.text,
                latency_s=latency,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                extra=extra,
            )
        text = outcome.text or ""
        if not text.strip():
            return GenerationResult.failed("empty answer", text=text, latency_s=latency, extra=extra)
        return GenerationResult(
            text=text,
            latency_s=latency,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            finish_reason=outcome.finish_reason,
            extra=extra,
        )

    async def aclose(self) -> None:
        """Close the chat client."""
        await self.chat.aclose()


class HFTextGenerator(TextGenerator):
    """A local transformers vision-language model, through :class:`~medrewardbench.models.local.LocalModel`.

    Args:
        spec: the spec as given (``hf:PATH``).
        model: the loaded model and its decoding settings (greedy unless a temperature is set).
        template: the prompt.
        batch_size: conversations per ``generate`` call.
    """

    kind = "hf"
    concurrency = 1

    def __init__(self, spec: str, model: LocalModel, template: TextTemplate, batch_size: int) -> None:
        self.spec = spec
        self.model = model
        self.template = template
        self.batch_size = max(1, batch_size)

    def config(self) -> dict[str, Any]:
        """Model, revision, adapter, template and decoding settings: everything that can change an answer."""
        return self.model.config(self.spec, self.kind, self.template)

    def metadata(self) -> dict[str, Any]:
        """Device, parameter count, model class and batch size."""
        return {**self.model.metadata(), "batch_size": self.batch_size}

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Load the images and generate the whole batch in one call; a bad image fails its request only."""
        results: list[GenerationResult | None] = [None] * len(requests)
        pending: list[int] = []
        conversations: list[list[dict[str, Any]]] = []
        images = self.model.load_images([r.image for r in requests])
        for index, (request, image) in enumerate(zip(requests, images, strict=True)):
            if isinstance(image, str):
                results[index] = GenerationResult.failed(image)
                continue
            pending.append(index)
            conversations.append(self.template.render_messages(request.values, image))
        if conversations:
            outcomes = await self.model.generate(conversations)
            for index, (generation, failure, latency) in zip(pending, outcomes, strict=True):
                if generation is None:
                    results[index] = GenerationResult.failed(failure or "generation failed", latency_s=latency)
                elif not generation.text.strip():
                    results[index] = GenerationResult.failed(
                        "empty answer", text=generation.text, latency_s=latency, finish_reason=generation.finish_reason
                    )
                else:
                    results[index] = GenerationResult(
                        text=generation.text,
                        latency_s=latency,
                        prompt_tokens=generation.prompt_tokens,
                        completion_tokens=generation.completion_tokens,
                        finish_reason=generation.finish_reason,
                    )
        return [r if r is not None else GenerationResult.failed("not generated") for r in results]

    async def aclose(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model.release()


def _hf_generator(name: str, options: JudgeOptions, template: TextTemplate) -> HFTextGenerator:
    if not name:
        raise JudgeSpecError("an hf: generator needs a model, e.g. hf:Qwen/Qwen2-VL-2B-Instruct or hf:/path/to/model")
    model = LocalModel.load(name, options)
    return HFTextGenerator(f"hf:{name}", model, template, options.batch_size or DEFAULT_HF_BATCH_SIZE)


def build_generator(spec: str, options: JudgeOptions, template: TextTemplate) -> TextGenerator:
    """Build the free-text generator a spec names.

    Args:
        spec: ``api:MODEL`` or ``hf:MODEL_OR_PATH``.
        options: shared settings (see the module docstring).
        template: the prompt it answers.

    Returns:
        A ready generator (an ``hf:`` model is loaded).

    Raises:
        JudgeSpecError: no kind, an unknown kind, or a bad setting.
        MissingExtraError: the backend's extra is not installed.
        ModelLoadError: an ``hf:`` model cannot be loaded.
    """
    kind, sep, name = spec.partition(":")
    if not sep or kind not in GENERATOR_KINDS:
        raise JudgeSpecError(
            f"generator spec {spec!r}: expected KIND:NAME with KIND one of {', '.join(GENERATOR_KINDS)} "
            "(api:MODEL for an OpenAI-compatible server, hf:PATH for a local transformers model)"
        )
    if kind == "api":
        return ApiTextGenerator(name, options, template)
    return _hf_generator(name, options, template)

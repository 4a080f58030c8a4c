"""Free-text generators: models that answer a question about an image (``api:MODEL`` and ``hf:PATH`` specs).

The difficulty filter, the response pool and the grader all ask a model for free text. A
generator is built from the same spec strings as judges, with the same shared options
(:class:`~medrewardbench.judges.options.JudgeOptions`: seed, concurrency, batch size, sampling,
the ``api`` and ``local`` sections), and through the same machinery:

* ``api:MODEL`` talks to an OpenAI-compatible server through
  :class:`~medrewardbench.judges.api.chat.ChatClient`, the API judge's request machinery (retries,
  concurrency, images as data URLs, key scrubbing, settings); one request per answer.
* ``hf:PATH`` runs a local transformers vision-language model through
  :class:`~medrewardbench.models.generation.VLMGenerator`, in left-padded batches
  (``batch_size``, default 4), a failing conversation retried alone.

A generator never raises for one request: a failure becomes a result with a reason. Its
:meth:`TextGenerator.config` holds everything that can change an answer (spec, model, template and
its SHA-256, sampling, seed) and its SHA-256 is the generator's fingerprint, under which answers are
stored (:mod:`medrewardbench.build.store`).

**The answer prompt** (``--template``, default the shipped ``answer``: ``templates/answer.txt``) has
the placeholders ``{{question}}`` (required) and ``{{answer_format}}``, which is filled with
:data:`ANSWER_FORMATS` for the question's answer type: closed questions are asked to begin with the
answer itself, so that a closed answer can be scored by normalised match.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.base import config_hash
from medrewardbench.judges.options import JudgeOptions
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


class TextGenerator(abc.ABC):
    """A model that answers in free text; built by :func:`build_generator`.

    Subclasses set ``spec``, ``kind``, ``template``, ``batch_size`` and ``concurrency``, and
    implement :meth:`generate_batch` and :meth:`config`.
    """

    spec: str
    kind: str = "generator"
    template: TextTemplate
    batch_size: int = 1
    concurrency: int = 1

    @abc.abstractmethod
    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Answer a batch; exactly one result per request, in order; never raises for one request."""

    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """Everything that can change an answer (spec, model, template hash, sampling, seed)."""

    def metadata(self) -> dict[str, Any]:
        """Facts worth recording that do not change answers."""
        return {}

    def fingerprint(self) -> str:
        """SHA-256 over :meth:`config`: the identity of this generator's answers."""
        return config_hash(self.config())

    async def aclose(self) -> None:
        """Release clients or models."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


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
        from medrewardbench.judges.api.chat import ChatClient

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
        from medrewardbench.judges.api.chat import public_url

        return {
            "spec": self.spec,
            "kind": self.kind,
            "model": self.model,
            "base_url": public_url(self.chat.base_url),
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "temperature": self.options.temperature,
            "top_p": self.options.top_p,
            "max_tokens": self.options.max_tokens,
            "seed": self.options.seed,
        }

    def metadata(self) -> dict[str, Any]:
        """The chat client's facts (endpoint, HTTP backend, retries); they do not change answers."""
        return self.chat.metadata()

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Answer each request through the chat client, as many at once as its admission allows."""
        if len(requests) == 1:
            return [await self._admitted(requests[0])]
        return list(await asyncio.gather(*(self._admitted(r) for r in requests)))

    async def _admitted(self, request: GenerationRequest) -> GenerationResult:
        async with self.chat.admission():
            return await self._one(request)

    async def _one(self, request: GenerationRequest) -> GenerationResult:
        started = time.perf_counter()
        image = request.image if request.image is not None and request.image.kind != "none" else None
        try:
            messages = await self.chat.api_messages(self.template.render_messages(request.values, image))
        except Exception as exc:  # an unreadable image fails this request only
            return GenerationResult.failed(
                self.chat.reason(f"could not prepare the request: {type(exc).__name__}: {exc}"),
                latency_s=time.perf_counter() - started,
            )
        outcome = await self.chat.call(messages)
        latency = time.perf_counter() - started
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
    """A local transformers vision-language model, through :class:`~medrewardbench.models.generation.VLMGenerator`.

    Args:
        spec: the spec as given (``hf:PATH``).
        generator: the loaded model.
        template: the prompt.
        settings: decoding settings (greedy unless a temperature is set).
        batch_size: conversations per ``generate`` call.
    """

    kind = "hf"
    concurrency = 1

    def __init__(self, spec: str, generator: Any, template: TextTemplate, settings: Any, batch_size: int) -> None:
        self.spec = spec
        self.generator = generator
        self.template = template
        self.settings = settings
        self.batch_size = max(1, batch_size)

    def config(self) -> dict[str, Any]:
        """Model, revision, adapter, template and decoding settings: everything that can change an answer."""
        from medrewardbench.models.identity import adapter_sha256, resolve_model_name

        adapter = self.generator.adapter
        return {
            "spec": self.spec,
            "kind": self.kind,
            "model": resolve_model_name(self.generator.name),
            "model_revision": getattr(self.generator.model.config, "_commit_hash", None),
            "adapter": resolve_model_name(adapter) if adapter else None,
            "adapter_sha256": adapter_sha256(adapter) if adapter else None,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "chat_template_sha256": self.generator.chat_template_sha256(),
            "dtype": self.generator.dtype,
            "sampling": self.settings.as_dict(),
        }

    def metadata(self) -> dict[str, Any]:
        """Device, parameter count, model class and batch size."""
        return {
            "device": self.generator.device,
            "parameter_count": self.generator.parameter_count(),
            "model_class": type(self.generator.model).__name__,
            "batch_size": self.batch_size,
        }

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Load the images and generate the whole batch in one call; a bad image fails its request only."""
        from medrewardbench.images import load_image

        results: list[GenerationResult | None] = [None] * len(requests)
        pending: list[int] = []
        conversations: list[list[dict[str, Any]]] = []
        for index, request in enumerate(requests):
            image: Any = None
            if request.image is not None and request.image.kind != "none":
                try:
                    image = load_image(request.image)
                except Exception as exc:  # one bad image must not sink the batch
                    results[index] = GenerationResult.failed(
                        f"image could not be loaded ({request.image.describe()}): {exc}"
                    )
                    continue
            pending.append(index)
            conversations.append(self.template.render_messages(request.values, image))
        if conversations:
            outcomes = await asyncio.to_thread(self.generator.generate_isolated, conversations, self.settings)
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
        self.generator.model = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def _hf_generator(name: str, options: JudgeOptions, template: TextTemplate) -> HFTextGenerator:
    from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, GenerationSettings, VLMGenerator

    if not name:
        raise JudgeSpecError("an hf: generator needs a model, e.g. hf:Qwen/Qwen2-VL-2B-Instruct or hf:/path/to/model")
    temperature = float(options.temperature or 0.0)
    if temperature < 0:
        raise JudgeSpecError(f"temperature must be >= 0, got {temperature}")
    settings = GenerationSettings(
        max_new_tokens=int(options.max_tokens or DEFAULT_MAX_NEW_TOKENS),
        temperature=temperature,
        top_p=options.top_p if options.top_p is not None else (1.0 if temperature > 0 else None),
        seed=options.seed,
    )
    local = options.local
    generator = VLMGenerator.load(name, device=local.device, dtype=local.dtype, adapter=local.adapter)
    return HFTextGenerator(f"hf:{name}", generator, template, settings, options.batch_size or DEFAULT_HF_BATCH_SIZE)


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

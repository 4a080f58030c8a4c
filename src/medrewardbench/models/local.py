"""A local transformers model with its decoding settings: what ``hf:`` judges and ``hf:`` generators share.

:class:`LocalModel` pairs a loaded :class:`~medrewardbench.models.generation.VLMGenerator` with
its :class:`~medrewardbench.models.generation.GenerationSettings`, read from the shared options
(:meth:`LocalModel.load`): greedy decoding unless a temperature is set, ``max_tokens`` (default
512) new tokens, ``top_p`` 1.0 when sampling without one, seeded with ``seed``. It describes itself
for fingerprints (:meth:`LocalModel.config`: model, revision, adapter and its digest, chat template,
dtype, sampling, around the prompt's name and digest), loads each request's image
(:meth:`LocalModel.load_images`), generates a batch off the event loop with a failing
conversation retried alone (:meth:`LocalModel.generate`), and frees its memory
(:meth:`LocalModel.release`). The judge (:mod:`medrewardbench.judges.hf`) adds the pairwise
prompt and the verdict parser; the generator (:mod:`medrewardbench.curation.generators`) adds the
answer prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from medrewardbench.cases import ImageRef
from medrewardbench.errors import JudgeSpecError
from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, Generation, GenerationSettings, VLMGenerator
from medrewardbench.models.identity import adapter_sha256, resolve_model_name
from medrewardbench.models.options import JudgeOptions

__all__ = ["LocalModel", "Outcome", "settings_from_options"]

Outcome = tuple[Generation | None, str | None, float]
"""``(generation, failure_reason, latency_s)`` for one conversation."""


class _Prompt(Protocol):
    """A prompt template as far as fingerprints go: its name and the SHA-256 of its text."""

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...


def settings_from_options(options: JudgeOptions) -> GenerationSettings:
    """The decoding settings the shared options ask for.

    Args:
        options: ``temperature``, ``top_p``, ``max_tokens`` and ``seed`` are read.

    Returns:
        Greedy settings unless a temperature above 0 is set.

    Raises:
        JudgeSpecError: a negative temperature.
    """
    temperature = float(options.temperature or 0.0)
    if temperature < 0:
        raise JudgeSpecError(f"temperature must be >= 0, got {temperature}")
    return GenerationSettings(
        max_new_tokens=int(options.max_tokens or DEFAULT_MAX_NEW_TOKENS),
        temperature=temperature,
        top_p=options.top_p if options.top_p is not None else (1.0 if temperature > 0 else None),
        seed=options.seed,
    )


class LocalModel:
    """A loaded vision-language model and how it decodes.

    Args:
        generator: the loaded model.
        settings: decoding settings.
    """

    def __init__(self, generator: VLMGenerator, settings: GenerationSettings) -> None:
        self.generator = generator
        self.settings = settings

    @classmethod
    def load(cls, name: str, options: JudgeOptions) -> LocalModel:
        """Load a Hub id or a model directory with the shared options' ``local`` section and sampling.

        Raises:
            JudgeSpecError: a negative temperature.
            MissingExtraError: torch/transformers (or peft for an adapter) not installed.
            ModelLoadError: the model cannot be loaded or is not an image-text-to-text model.
        """
        settings = settings_from_options(options)
        local = options.local
        return cls(VLMGenerator.load(name, device=local.device, dtype=local.dtype, adapter=local.adapter), settings)

    def config(self, spec: str, kind: str, template: _Prompt) -> dict[str, Any]:
        """Spec, model, revision, adapter, template and decoding settings: what can change an output.

        The keys keep the order stored configurations have always had.
        """
        generator = self.generator
        adapter = generator.adapter
        return {
            "spec": spec,
            "kind": kind,
            "model": resolve_model_name(generator.name),
            "model_revision": getattr(generator.model.config, "_commit_hash", None),
            "adapter": resolve_model_name(adapter) if adapter else None,
            "adapter_sha256": adapter_sha256(adapter) if adapter else None,
            "template": template.name,
            "template_sha256": template.sha256,
            "chat_template_sha256": generator.chat_template_sha256(),
            "dtype": generator.dtype,
            "sampling": self.settings.as_dict(),
        }

    def metadata(self) -> dict[str, Any]:
        """Device, parameter count and model class: run facts that do not change outputs."""
        return {
            "device": self.generator.device,
            "parameter_count": self.generator.parameter_count(),
            "model_class": type(self.generator.model).__name__,
        }

    @staticmethod
    def load_images(images: Sequence[ImageRef | None]) -> list[Any | str]:
        """Each request's decoded image (None without one), or why it could not be loaded.

        Returns:
            Per image: a PIL image, None, or a failure reason (a :class:`str`) for that request only.
        """
        from medrewardbench.images import load_image

        loaded: list[Any | str] = []
        for ref in images:
            if ref is None or ref.kind == "none":
                loaded.append(None)
                continue
            try:
                loaded.append(load_image(ref))
            except Exception as exc:  # one bad image must not sink the batch
                loaded.append(f"image could not be loaded ({ref.describe()}): {exc}")
        return loaded

    async def generate(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        *,
        prefix: str = "",
        constrained: bool = False,
        letter_logprobs: bool = False,
    ) -> list[Outcome]:
        """Generate every conversation in one batch, in a worker thread; a failing one is retried alone.

        Args:
            conversations: the chat messages of each conversation.
            prefix: text every answer is forced to start with.
            constrained: restrict the answers to the verdict JSON skeleton.
            letter_logprobs: record each token's log-probability and, where it reads as a verdict
                letter, every letter token's (``Generation.tokens``; what ``hf:`` judges read).

        Returns:
            ``(generation, failure_reason, latency_s)`` per conversation, in order.
        """
        return await asyncio.to_thread(
            self.generator.generate_isolated,
            conversations,
            self.settings,
            prefix=prefix,
            constrained=constrained,
            top_logprobs=0 if letter_logprobs else None,
            letter_alternatives=letter_logprobs,
        )

    def release(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.generator.model = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

"""Generation with a local transformers vision-language model: chat conversations with PIL images in, text out.

:class:`VLMGenerator` wraps a model loaded with :func:`~medrewardbench.models.loading.load_vlm`: it
applies the model's own chat template, generates in left-padded batches, and reports token counts
and why each answer stopped. It knows nothing of verdicts unless asked for constrained decoding
(:mod:`medrewardbench.models.constraints`), so it serves as a plain free-text generator as well. It is
shared by the ``hf:`` judges (:mod:`medrewardbench.judges.hf`), the OpenAI-compatible server
(:mod:`medrewardbench.serve`) and training.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medrewardbench.errors import require
from medrewardbench.models.constraints import VerdictConstraint
from medrewardbench.models.loading import load_vlm
from medrewardbench.models.logprobs import TokenLogprob
from medrewardbench.models.token_logprobs import LogprobRecorder, letter_tokens, token_logprobs

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_NEW_TOKENS", "Generation", "GenerationSettings", "VLMGenerator"]

DEFAULT_MAX_NEW_TOKENS = 512


@dataclass(frozen=True)
class GenerationSettings:
    """How to decode: greedy when ``temperature`` is 0, else nucleus sampling seeded by ``seed``."""

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    top_p: float | None = None
    seed: int = 0

    @property
    def sampling(self) -> bool:
        """Whether decoding samples (a temperature above zero) rather than being greedy."""
        return self.temperature > 0

    def as_dict(self) -> dict[str, Any]:
        """The settings that can change an output (for fingerprints)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p if self.sampling else None,
            "seed": self.seed,
            "do_sample": self.sampling,
        }


@dataclass(frozen=True)
class Generation:
    """One generated answer.

    Attributes:
        text: the decoded completion, preceded by the forced prefix when one was used.
        prompt_tokens: tokens the model read, image tokens included, padding excluded.
        completion_tokens: tokens generated, the end-of-sequence token included.
        finish_reason: ``"stop"`` (end of sequence) or ``"length"`` (``max_new_tokens`` reached).
        tokens: the generated tokens with their log-probabilities, when asked for (``top_logprobs``
            in :meth:`VLMGenerator.generate`); their texts, joined, are ``text`` after the prefix.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    tokens: tuple[TokenLogprob, ...] | None = None


def _split_images(messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Replace PIL image parts by ``{"type": "image"}`` placeholders and collect the images in order."""
    rendered: list[dict[str, Any]] = []
    images: list[Any] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) or content is None:
            rendered.append({"role": message["role"], "content": content or ""})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if part.get("type") == "image":
                image = part.get("image")
                if image is None:
                    raise ValueError("an image part carries no image")
                images.append(image)
                parts.append({"type": "image"})
            elif part.get("type") == "text":
                parts.append({"type": "text", "text": part.get("text", "")})
            else:
                raise ValueError(f"unsupported message part type {part.get('type')!r}")
        rendered.append({"role": message["role"], "content": parts})
    return rendered, images


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    value = getattr(model.generation_config, "eos_token_id", None)
    if value is None:
        value = tokenizer.eos_token_id
    if value is None:
        return []
    return [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


class VLMGenerator:
    """A loaded vision-language model that turns chat conversations with PIL images into text.

    Thread-safe: calls are serialised by a lock, since a model must not run two ``generate``
    calls at once. Shared by :class:`HFJudge` and :mod:`medrewardbench.serve`.

    Args:
        model: the loaded transformers model.
        processor: its processor (with a ``tokenizer``).
        name: the model name or path it was loaded from.
        adapter: the LoRA adapter loaded onto it, if any.
    """

    def __init__(self, model: Any, processor: Any, *, name: str, adapter: str | None = None) -> None:
        self.model = model
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.name = name
        self.adapter = adapter
        self.eos_token_ids = _eos_ids(model, self.tokenizer)
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else (self.eos_token_ids or [0])[0]
        self._lock = threading.Lock()
        self._constraints: dict[str, VerdictConstraint] = {}
        self._letter_tokens: tuple[tuple[int, ...], tuple[str, ...]] | None = None

    @classmethod
    def load(
        cls, name_or_path: str, *, device: str = "auto", dtype: str = "auto", adapter: str | None = None
    ) -> VLMGenerator:
        """Load a model with :func:`~medrewardbench.models.loading.load_vlm`."""
        model, processor = load_vlm(name_or_path, device=device, dtype=dtype, adapter=adapter)
        return cls(model, processor, name=name_or_path, adapter=adapter)

    @property
    def device(self) -> str:
        """The device of the model's parameters, e.g. ``"cuda:0"``."""
        return str(next(self.model.parameters()).device)

    @property
    def dtype(self) -> str:
        """The dtype of the model's parameters, e.g. ``"bfloat16"``."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def parameter_count(self) -> int:
        """How many parameters the model has."""
        return int(sum(p.numel() for p in self.model.parameters()))

    def chat_template_sha256(self) -> str | None:
        """A SHA-256 of the processor's chat template, or None when it has none."""
        template = getattr(self.processor, "chat_template", None)
        if not isinstance(template, str):
            return None
        return hashlib.sha256(template.encode("utf-8")).hexdigest()

    def constraint(self, prefix: str = "") -> VerdictConstraint:
        """The (cached) verdict constraint for a given forced prefix.

        Raises:
            ValueError: when the prefix is not the start of the verdict skeleton.
        """
        if prefix not in self._constraints:
            self._constraints[prefix] = VerdictConstraint(self.tokenizer, self.eos_token_ids, prefix=prefix)
        return self._constraints[prefix]

    def letter_tokens(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The ids and texts of every token that reads as a verdict letter (computed once)."""
        if self._letter_tokens is None:
            self._letter_tokens = letter_tokens(self.tokenizer)
        return self._letter_tokens

    def render_prompt(self, messages: Sequence[Mapping[str, Any]], prefix: str = "") -> tuple[str, list[Any]]:
        """The prompt text (chat template + generation prompt + prefix) and the images it holds."""
        rendered, images = _split_images(messages)
        text = self.processor.apply_chat_template(rendered, tokenize=False, add_generation_prompt=True)
        return text + prefix, images

    def generate(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        settings: GenerationSettings = GenerationSettings(),
        *,
        prefix: str = "",
        constrained: bool = False,
        top_logprobs: int | None = None,
        letter_alternatives: bool = False,
    ) -> list[Generation]:
        """Generate one answer per conversation, in one left-padded batch.

        Args:
            conversations: chat messages; an image part is ``{"type": "image", "image": PIL.Image}``.
            settings: decoding settings.
            prefix: text the answer is forced to start with (included in ``Generation.text``).
            constrained: restrict the answer to the verdict JSON skeleton.
            top_logprobs: None for no log-probabilities; else every generated token's
                log-probability and its ``top_logprobs`` most likely alternatives
                (``Generation.tokens``), from the model's logits before constrained decoding and
                sampling warp them (so at temperature 1).
            letter_alternatives: with ``top_logprobs``, also list every token that reads as a verdict
                letter at the steps whose token reads as one (what ``hf:`` judges read).

        Returns:
            One :class:`Generation` per conversation, in order.

        Raises:
            RuntimeError: when images were given but the processor produced no ``pixel_values``.
            Exception: whatever the processor or the model raises (callers isolate failures).
        """
        torch: Any = require("torch", "hf", "local transformers models (hf: judges)")
        transformers: Any = require("transformers", "hf", "local transformers models (hf: judges)")
        if not conversations:
            return []
        texts: list[str] = []
        images: list[Any] = []
        for messages in conversations:
            text, conversation_images = self.render_prompt(messages, prefix)
            texts.append(text)
            images.extend(conversation_images)
        inputs = self.processor(text=texts, images=images or None, padding=True, return_tensors="pt")
        if images and "pixel_values" not in inputs and "pixel_values_videos" not in inputs:
            raise RuntimeError(f"the processor of {self.name} returned no pixel_values for {len(images)} image(s)")
        model_dtype = next(self.model.parameters()).dtype
        device = next(self.model.parameters()).device
        batch = {
            key: (
                value.to(device=device, dtype=model_dtype)
                if key.startswith("pixel_values") and value.is_floating_point()
                else value.to(device)
            )
            for key, value in inputs.items()
        }
        prompt_length = int(batch["input_ids"].shape[1])
        generation_config = copy.deepcopy(self.model.generation_config)
        generation_config.max_new_tokens = settings.max_new_tokens
        generation_config.do_sample = settings.sampling
        generation_config.temperature = settings.temperature if settings.sampling else None
        generation_config.top_p = settings.top_p if settings.sampling else None
        generation_config.top_k = None
        generation_config.pad_token_id = self.pad_token_id
        if self.eos_token_ids:
            generation_config.eos_token_id = self.eos_token_ids
        processors = transformers.LogitsProcessorList()
        recorder = None
        if top_logprobs is not None:
            recorder = LogprobRecorder(top_logprobs, self.letter_tokens()[0] if letter_alternatives else None)
            processors.append(recorder)  # first: it sees the logits before the constraint masks them
        if constrained:
            constraint = copy.copy(self.constraint(prefix))
            constraint.prompt_length = prompt_length
            processors.append(constraint)
        with self._lock, torch.inference_mode():
            if settings.sampling:
                torch.manual_seed(settings.seed)
            output = self.model.generate(**batch, generation_config=generation_config, logits_processor=processors)
        sequences = output.sequences if hasattr(output, "sequences") else output
        if recorder is not None:
            recorder.finish(sequences, prompt_length)
        new_tokens = sequences[:, prompt_length:].tolist()
        attention = batch["attention_mask"].sum(dim=1).tolist()
        results: list[Generation] = []
        for row, tokens in enumerate(new_tokens):
            stop = next((i for i, t in enumerate(tokens) if t in self.eos_token_ids), None)
            kept = tokens if stop is None else tokens[: stop + 1]
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            tokens = None
            if recorder is not None:
                letter_texts = dict(zip(*self.letter_tokens(), strict=True)) if letter_alternatives else None
                tokens = token_logprobs(self.tokenizer, kept, recorder.row(row, len(kept)), letter_texts)
            results.append(
                Generation(
                    text=prefix + text,
                    prompt_tokens=int(attention[row]),
                    completion_tokens=len(kept),
                    finish_reason="length" if stop is None else "stop",
                    tokens=tokens,
                )
            )
        return results

    def generate_isolated(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        settings: GenerationSettings = GenerationSettings(),
        *,
        prefix: str = "",
        constrained: bool = False,
        top_logprobs: int | None = None,
        letter_alternatives: bool = False,
    ) -> list[tuple[Generation | None, str | None, float]]:
        """Like :meth:`generate`, but a failing conversation does not sink the others.

        The batch is tried once; when it raises, each conversation is retried alone.

        Returns:
            ``(generation, failure_reason, latency_s)`` per conversation, in order.
        """
        start = time.perf_counter()
        try:
            generations = self.generate(
                conversations,
                settings,
                prefix=prefix,
                constrained=constrained,
                top_logprobs=top_logprobs,
                letter_alternatives=letter_alternatives,
            )
        except Exception as exc:  # isolate the culprit below
            if len(conversations) == 1:
                return [(None, f"generation failed: {type(exc).__name__}: {exc}", time.perf_counter() - start)]
            logger.warning("batch of %d failed (%s); retrying one by one", len(conversations), exc)
        else:
            share = (time.perf_counter() - start) / len(conversations)
            return [(g, None, share) for g in generations]
        outcomes: list[tuple[Generation | None, str | None, float]] = []
        for conversation in conversations:
            outcomes.extend(
                self.generate_isolated(
                    [conversation],
                    settings,
                    prefix=prefix,
                    constrained=constrained,
                    top_logprobs=top_logprobs,
                    letter_alternatives=letter_alternatives,
                )
            )
        return outcomes

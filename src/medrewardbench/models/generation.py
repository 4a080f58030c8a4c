"""Local transformers vision-language models as judges: the ``hf:`` spec kind.

``hf:MODEL_OR_PATH`` loads a Hub id (from the local cache when offline) or a model directory with
:func:`~medrewardbench.models.loading.load_vlm`, renders each comparison with the prompt template,
places the image with the model's own chat template, and generates in left-padded batches.

Settings read from :class:`~medrewardbench.judges.registry.JudgeOptions`:

* ``batch_size`` (default 4), ``max_tokens`` (default 512);
* ``temperature``: greedy decoding when unset or 0; sampling with ``top_p`` otherwise, seeded with
  ``seed`` before every batch so a rerun with the same batches reproduces the same outputs (a
  sampled output depends on the batch it was drawn in; greedy outputs do not);
* ``device``, ``dtype`` (``auto`` = CUDA + bfloat16 when available, else CPU + float32), ``adapter``
  (a PEFT LoRA directory);
* ``force_prefix``: text appended after the generation prompt, so the model continues from it
  (``'{"accuracy": "'`` steers a model into the JSON answer). The stored raw output starts with it.
* constrained decoding, switched on by ``extra={"constrained": True}`` or the spec suffix
  ``#constrained`` (``hf:Qwen/Qwen2-VL-2B-Instruct#constrained``): a logits processor lets the model
  write only the verdict skeleton ``{"accuracy": "A", ..., "overall": "B"}`` and choose ``A`` or
  ``B`` in each slot. The choice is still the model's (the higher-scoring letter), so this measures
  its preferences while ruling out format failures. Even a random-weight model then yields
  parseable verdicts.

The generation code (:class:`VLMGenerator`) is shared with the OpenAI-compatible server in
:mod:`medrewardbench.serve`.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import JudgeSpecError, require
from medrewardbench.images import load_image
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.models.loading import load_vlm
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

logger = logging.getLogger(__name__)

__all__ = [
    "CONSTRAINED_SUFFIX",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_NEW_TOKENS",
    "Generation",
    "GenerationSettings",
    "HFJudge",
    "VLMGenerator",
    "VerdictConstraint",
    "build",
    "verdict_skeleton",
]

CONSTRAINED_SUFFIX = "#constrained"
DEFAULT_BATCH_SIZE = 4
DEFAULT_MAX_NEW_TOKENS = 512
_SLOT = "\x00"


@dataclass(frozen=True)
class GenerationSettings:
    """How to decode: greedy when ``temperature`` is 0, else nucleus sampling seeded by ``seed``."""

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    top_p: float | None = None
    seed: int = 0

    @property
    def sampling(self) -> bool:
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
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


def verdict_skeleton(dimensions: Sequence[str] = DIMENSIONS, slot: str = "A") -> str:
    """The verdict JSON that constrained decoding produces, with ``slot`` in every value."""
    return "{" + ", ".join(f'"{d}": "{slot}"' for d in dimensions) + "}"


class VerdictConstraint:
    """Lets a model write only ``{"dim": "A|B", ...}``: a logits processor for ``generate``.

    The allowed next tokens are those whose text continues the skeleton, where each value slot
    accepts ``A`` or ``B``. Token texts are measured in context (after an anchor token), so
    SentencePiece tokens with a leading-space marker are handled as well as byte-level BPE ones.
    Once the skeleton is complete only end-of-sequence tokens remain allowed.
    """

    def __init__(
        self,
        tokenizer: Any,
        eos_token_ids: Sequence[int],
        *,
        prefix: str = "",
        dimensions: Sequence[str] = DIMENSIONS,
        choices: Sequence[str] = ("A", "B"),
    ) -> None:
        if not eos_token_ids:
            raise ValueError("constrained decoding needs an end-of-sequence token id")
        if any(len(choice) != 1 for choice in choices):
            raise ValueError("constrained decoding supports single-character choices only")
        self.tokenizer = tokenizer
        self.pattern = verdict_skeleton(dimensions, _SLOT)
        self.choices = tuple(choices)
        self.prefix = prefix
        self.eos_token_ids = list(dict.fromkeys(int(t) for t in eos_token_ids))
        if self.consumed(prefix) is None:
            raise ValueError(
                f"force_prefix {prefix!r} is not the start of the verdict skeleton "
                f"{verdict_skeleton(dimensions, 'A')!r}, so constrained decoding cannot continue it"
            )
        self._surfaces, self._max_len = self._token_surfaces(tokenizer)
        self.prompt_length = 0

    @staticmethod
    def _token_surfaces(tokenizer: Any) -> tuple[dict[str, list[int]], int]:
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        vocab_size = len(tokenizer)
        anchor_ids = tokenizer.encode("a", add_special_tokens=False)[:1]
        anchor_text = tokenizer.decode(anchor_ids) if anchor_ids else ""
        token_ids = [i for i in range(vocab_size) if i not in special]
        decoded = tokenizer.batch_decode([[*anchor_ids, i] for i in token_ids])
        surfaces: dict[str, list[int]] = {}
        for token_id, text in zip(token_ids, decoded, strict=True):
            surface = text[len(anchor_text) :] if text.startswith(anchor_text) else text
            if surface and "\ufffd" not in surface:
                surfaces.setdefault(surface, []).append(token_id)
        max_len = min(48, max((len(s) for s in surfaces), default=1))
        return surfaces, max_len

    def consumed(self, text: str) -> int | None:
        """How much of the skeleton ``text`` covers, or None when it departs from the skeleton."""
        if len(text) > len(self.pattern):
            return None
        for char, expected in zip(text, self.pattern, strict=False):
            if expected == _SLOT:
                if char not in self.choices:
                    return None
            elif char != expected:
                return None
        return len(text)

    def allowed_token_ids(self, generated_text: str) -> list[int]:
        """Token ids that may follow ``prefix + generated_text``."""
        position = self.consumed(self.prefix + generated_text)
        if position is None or position == len(self.pattern):
            return self.eos_token_ids
        rest = self.pattern[position : position + self._max_len]
        allowed: list[int] = []
        candidates = [""]
        for expected in rest:
            options = self.choices if expected == _SLOT else (expected,)
            candidates = [c + o for c in candidates for o in options]
            for candidate in candidates:
                allowed.extend(self._surfaces.get(candidate, ()))
        return allowed or self.eos_token_ids

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch: Any = require("torch", "hf", "constrained decoding")
        mask = torch.full_like(scores, float("-inf"))
        for row in range(input_ids.shape[0]):
            generated = input_ids[row, self.prompt_length :].tolist()
            if any(token in self.eos_token_ids for token in generated):
                allowed = self.eos_token_ids
            else:
                allowed = self.allowed_token_ids(self.tokenizer.decode(generated))
            allowed = [t for t in allowed if t < scores.shape[-1]]
            mask[row, allowed] = 0.0
        return scores + mask


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

    @classmethod
    def load(
        cls, name_or_path: str, *, device: str = "auto", dtype: str = "auto", adapter: str | None = None
    ) -> VLMGenerator:
        """Load a model with :func:`~medrewardbench.models.loading.load_vlm`."""
        model, processor = load_vlm(name_or_path, device=device, dtype=dtype, adapter=adapter)
        return cls(model, processor, name=name_or_path, adapter=adapter)

    @property
    def device(self) -> str:
        return str(next(self.model.parameters()).device)

    @property
    def dtype(self) -> str:
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    def chat_template_sha256(self) -> str | None:
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
    ) -> list[Generation]:
        """Generate one answer per conversation, in one left-padded batch.

        Args:
            conversations: chat messages; an image part is ``{"type": "image", "image": PIL.Image}``.
            settings: decoding settings.
            prefix: text the answer is forced to start with (included in ``Generation.text``).
            constrained: restrict the answer to the verdict JSON skeleton.

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
        if constrained:
            constraint = copy.copy(self.constraint(prefix))
            constraint.prompt_length = prompt_length
            processors.append(constraint)
        with self._lock, torch.inference_mode():
            if settings.sampling:
                torch.manual_seed(settings.seed)
            output = self.model.generate(**batch, generation_config=generation_config, logits_processor=processors)
        sequences = output.sequences if hasattr(output, "sequences") else output
        new_tokens = sequences[:, prompt_length:].tolist()
        attention = batch["attention_mask"].sum(dim=1).tolist()
        results: list[Generation] = []
        for row, tokens in enumerate(new_tokens):
            stop = next((i for i, t in enumerate(tokens) if t in self.eos_token_ids), None)
            kept = tokens if stop is None else tokens[: stop + 1]
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            results.append(
                Generation(
                    text=prefix + text,
                    prompt_tokens=int(attention[row]),
                    completion_tokens=len(kept),
                    finish_reason="length" if stop is None else "stop",
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
    ) -> list[tuple[Generation | None, str | None, float]]:
        """Like :meth:`generate`, but a failing conversation does not sink the others.

        The batch is tried once; when it raises, each conversation is retried alone.

        Returns:
            ``(generation, failure_reason, latency_s)`` per conversation, in order.
        """
        start = time.perf_counter()
        try:
            generations = self.generate(conversations, settings, prefix=prefix, constrained=constrained)
        except Exception as exc:  # isolate the culprit below
            if len(conversations) == 1:
                return [(None, f"generation failed: {type(exc).__name__}: {exc}", time.perf_counter() - start)]
            logger.warning("batch of %d failed (%s); retrying one by one", len(conversations), exc)
        else:
            share = (time.perf_counter() - start) / len(conversations)
            return [(g, None, share) for g in generations]
        outcomes: list[tuple[Generation | None, str | None, float]] = []
        for conversation in conversations:
            outcomes.extend(self.generate_isolated([conversation], settings, prefix=prefix, constrained=constrained))
        return outcomes


def _file_digest(directory: str) -> str | None:
    """SHA-256 over a local adapter's config and weights, or None for a Hub id."""
    root = Path(directory)
    if not root.is_dir():
        return None
    digest = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
        path = root / name
        if path.is_file():
            digest.update(name.encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def _resolved_name(name_or_path: str) -> str:
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else name_or_path


class HFJudge(Judge):
    """A generative judge backed by a local transformers vision-language model."""

    kind = "hf"
    needs_images = True

    def __init__(
        self,
        spec: str,
        generator: VLMGenerator,
        template: PromptTemplate,
        settings: GenerationSettings,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        force_prefix: str | None = None,
        constrained: bool = False,
    ) -> None:
        self.spec = spec
        self.generator = generator
        self.template = template
        self.settings = settings
        self.batch_size = max(1, batch_size)
        self.concurrency = 1
        self.force_prefix = force_prefix or ""
        self.constrained = constrained
        if constrained:
            try:
                generator.constraint(self.force_prefix)
            except ValueError as exc:
                raise JudgeSpecError(str(exc)) from exc

    def config(self) -> dict[str, Any]:
        adapter = self.generator.adapter
        return {
            "spec": self.spec,
            "kind": "hf",
            "model": _resolved_name(self.generator.name),
            "model_revision": getattr(self.generator.model.config, "_commit_hash", None),
            "adapter": _resolved_name(adapter) if adapter else None,
            "adapter_sha256": _file_digest(adapter) if adapter else None,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "chat_template_sha256": self.generator.chat_template_sha256(),
            "dtype": self.generator.dtype,
            "sampling": self.settings.as_dict(),
            "force_prefix": self.force_prefix or None,
            "constrained": self.constrained,
        }

    def metadata(self) -> dict[str, Any]:
        return {
            "device": self.generator.device,
            "parameter_count": self.generator.parameter_count(),
            "model_class": type(self.generator.model).__name__,
            "processor_class": type(self.generator.processor).__name__,
            "batch_size": self.batch_size,
        }

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        results: list[JudgeResult | None] = [None] * len(requests)
        pending: list[int] = []
        conversations: list[list[dict[str, Any]]] = []
        quotes: list[list[str]] = []
        for index, request in enumerate(requests):
            case = request.case
            image: Any = None
            if case.image.kind != "none":
                try:
                    image = load_image(case.image)
                except Exception as exc:  # one bad image must not sink the batch
                    results[index] = JudgeResult.failed(f"image could not be loaded ({case.image.describe()}): {exc}")
                    continue
            messages = self.template.render_messages(case.question, request.response_a, request.response_b, image)
            pending.append(index)
            conversations.append(messages)
            quotes.append([request.response_a, request.response_b, case.question, *self.template.static_chunks()])
        if conversations:
            outcomes = await asyncio.to_thread(
                self.generator.generate_isolated,
                conversations,
                self.settings,
                prefix=self.force_prefix,
                constrained=self.constrained,
            )
            for index, quoted, (generation, failure, latency) in zip(pending, quotes, outcomes, strict=True):
                if generation is None:
                    results[index] = JudgeResult.failed(failure or "generation failed", latency_s=latency)
                    continue
                parsed = parse_verdicts(generation.text, quoted=quoted)
                results[index] = JudgeResult.from_parse(
                    parsed,
                    generation.text,
                    latency_s=latency,
                    prompt_tokens=generation.prompt_tokens,
                    completion_tokens=generation.completion_tokens,
                    extra={"finish_reason": generation.finish_reason},
                )
        return [r if r is not None else JudgeResult.failed("not judged") for r in results]

    async def aclose(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.generator.model = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def _settings_from_options(options: JudgeOptions) -> GenerationSettings:
    temperature = float(options.temperature or 0.0)
    if temperature < 0:
        raise JudgeSpecError(f"temperature must be >= 0, got {temperature}")
    return GenerationSettings(
        max_new_tokens=int(options.max_tokens or DEFAULT_MAX_NEW_TOKENS),
        temperature=temperature,
        top_p=options.top_p if options.top_p is not None else (1.0 if temperature > 0 else None),
        seed=options.seed,
    )


def build(name: str, options: JudgeOptions) -> HFJudge:
    """Build the judge for ``hf:NAME``.

    Args:
        name: a Hub id or a local model directory, optionally followed by ``#constrained``.
        options: shared judge options (see the module docstring for the ones read here).

    Returns:
        An :class:`HFJudge` with its model loaded.

    Raises:
        JudgeSpecError: empty name or a force_prefix that constrained decoding cannot continue.
        MissingExtraError: torch/transformers (or peft for an adapter) not installed.
        ModelLoadError: the model cannot be loaded or is not an image-text-to-text model.
    """
    constrained = bool(options.extra.get("constrained", False))
    model_name = name
    if model_name.endswith(CONSTRAINED_SUFFIX):
        model_name = model_name[: -len(CONSTRAINED_SUFFIX)]
        constrained = True
    if not model_name:
        raise JudgeSpecError("the hf: judge needs a model, e.g. hf:Qwen/Qwen2-VL-2B-Instruct or hf:/path/to/model")
    template = load_template(options.template)
    settings = _settings_from_options(options)
    generator = VLMGenerator.load(model_name, device=options.device, dtype=options.dtype, adapter=options.adapter)
    return HFJudge(
        f"hf:{name}",
        generator,
        template,
        settings,
        batch_size=options.batch_size or DEFAULT_BATCH_SIZE,
        force_prefix=options.force_prefix,
        constrained=constrained,
    )

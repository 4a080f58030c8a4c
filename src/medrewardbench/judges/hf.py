"""Local transformers vision-language models as judges: the ``hf:`` spec kind.

``hf:MODEL_OR_PATH`` loads a Hub id (from the local cache when offline) or a model directory with
:func:`~medrewardbench.models.loading.load_vlm`, renders each comparison with the prompt template,
places the image with the model's own chat template, and generates in left-padded batches.

Settings read from :class:`~medrewardbench.judges.registry.JudgeOptions`:

* ``batch_size`` (default 4), ``max_tokens`` (default 512);
* ``temperature``: greedy decoding when unset or 0; sampling with ``top_p`` otherwise, seeded with
  ``seed`` before every batch so a rerun with the same batches reproduces the same outputs (a
  sampled output depends on the batch it was drawn in; greedy outputs do not);
* in ``options.local`` (:class:`~medrewardbench.judges.options.LocalSettings`): ``device``, ``dtype``
  (``auto`` = CUDA + bfloat16 when available, else CPU + float32), ``adapter`` (a PEFT LoRA directory);
* ``local.force_prefix``: text appended after the generation prompt, so the model continues from it
  (``'{"accuracy": "'`` steers a model into the JSON answer). The stored raw output starts with it.
* constrained decoding, switched on by ``local.constrained`` or the spec suffix
  ``#constrained`` (``hf:Qwen/Qwen2-VL-2B-Instruct#constrained``): a logits processor lets the model
  write only the verdict skeleton ``{"accuracy": "A", ..., "overall": "B"}`` and choose ``A`` or
  ``B`` in each slot. The choice is still the model's (the higher-scoring letter), so this measures
  its preferences while ruling out format failures. Even a random-weight model then yields
  parseable verdicts.

The model code (:class:`~medrewardbench.models.generation.VLMGenerator`, the
:class:`~medrewardbench.models.constraints.VerdictConstraint`) lives in :mod:`medrewardbench.models`,
shared with the OpenAI-compatible server in :mod:`medrewardbench.serve`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from medrewardbench.errors import JudgeSpecError
from medrewardbench.images import load_image
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.models.constraints import CONSTRAINED_SUFFIX
from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, GenerationSettings, VLMGenerator
from medrewardbench.models.identity import adapter_sha256, resolve_model_name
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

__all__ = ["DEFAULT_BATCH_SIZE", "HFJudge", "build"]

DEFAULT_BATCH_SIZE = 4


class HFJudge(Judge):
    """A generative judge backed by a local transformers vision-language model.

    Args:
        spec: the spec as given (``hf:PATH``).
        generator: the loaded model.
        template: the prompt.
        settings: decoding settings.
        batch_size: requests per ``generate`` call.
        force_prefix: text appended after the generation prompt, for the model to continue.
        constrained: allow only the verdict skeleton (see the module docstring).
    """

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
        """Model, revision, adapter, templates and decoding settings: everything that can change an output."""
        adapter = self.generator.adapter
        return {
            "spec": self.spec,
            "kind": "hf",
            "model": resolve_model_name(self.generator.name),
            "model_revision": getattr(self.generator.model.config, "_commit_hash", None),
            "adapter": resolve_model_name(adapter) if adapter else None,
            "adapter_sha256": adapter_sha256(adapter) if adapter else None,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "chat_template_sha256": self.generator.chat_template_sha256(),
            "dtype": self.generator.dtype,
            "sampling": self.settings.as_dict(),
            "force_prefix": self.force_prefix or None,
            "constrained": self.constrained,
        }

    def metadata(self) -> dict[str, Any]:
        """Device, parameter count, model and processor classes, batch size."""
        return {
            "device": self.generator.device,
            "parameter_count": self.generator.parameter_count(),
            "model_class": type(self.generator.model).__name__,
            "processor_class": type(self.generator.processor).__name__,
            "batch_size": self.batch_size,
        }

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Load the images and generate the whole batch in one call; a bad image fails its request only."""
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
    local = options.local
    constrained = local.constrained
    model_name = name
    if model_name.endswith(CONSTRAINED_SUFFIX):
        model_name = model_name[: -len(CONSTRAINED_SUFFIX)]
        constrained = True
    if not model_name:
        raise JudgeSpecError("the hf: judge needs a model, e.g. hf:Qwen/Qwen2-VL-2B-Instruct or hf:/path/to/model")
    template = load_template(options.template)
    settings = _settings_from_options(options)
    generator = VLMGenerator.load(model_name, device=local.device, dtype=local.dtype, adapter=local.adapter)
    return HFJudge(
        f"hf:{name}",
        generator,
        template,
        settings,
        batch_size=options.batch_size or DEFAULT_BATCH_SIZE,
        force_prefix=local.force_prefix,
        constrained=constrained,
    )

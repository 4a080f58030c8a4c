"""Local transformers vision-language models as judges: the ``hf:`` spec kind.

``hf:MODEL_OR_PATH`` loads a Hub id (from the local cache when offline) or a model directory with
:func:`~medrewardbench.models.loading.load_vlm`, renders each comparison with the prompt template,
places the image with the model's own chat template, and generates in left-padded batches.

Settings read from :class:`~medrewardbench.models.options.JudgeOptions`:

* ``batch_size`` (default 4), ``max_tokens`` (default 512);
* ``temperature``: greedy decoding when unset or 0; sampling with ``top_p`` otherwise, seeded with
  ``seed`` before every batch so a rerun with the same batches reproduces the same outputs (a
  sampled output depends on the batch it was drawn in; greedy outputs do not);
* in ``options.local`` (:class:`~medrewardbench.models.options.LocalSettings`): ``device``, ``dtype``
  (``auto`` = CUDA + bfloat16 when available, else CPU + float32), ``adapter`` (a PEFT LoRA directory);
* ``local.force_prefix``: text appended after the generation prompt, so the model continues from it
  (``'{"accuracy": "'`` steers a model into the JSON answer). The stored raw output starts with it.
* constrained decoding, switched on by ``local.constrained`` or the spec suffix
  ``#constrained`` (``hf:Qwen/Qwen2-VL-2B-Instruct#constrained``): a logits processor lets the model
  write only the verdict skeleton ``{"accuracy": "A", ..., "overall": "B"}`` and choose ``A`` or
  ``B`` in each slot. The choice is still the model's (the higher-scoring letter), so this measures
  its preferences while ruling out format failures. Even a random-weight model then yields
  parseable verdicts.
* confidences: every verdict carries ``P(A)``, the probability mass of the tokens that read ``A``
  against those that read ``B`` at the token that holds the verdict's letter, from the model's
  logits before constrained decoding or sampling change them
  (:mod:`medrewardbench.models.token_logprobs`); always on, it does not change the fingerprint.

A judge here is a prompt, a model and a parser: the model (:class:`~medrewardbench.models.local.LocalModel`,
over :class:`~medrewardbench.models.generation.VLMGenerator` and the
:class:`~medrewardbench.models.constraints.VerdictConstraint`) lives in :mod:`medrewardbench.models`,
shared with the ``hf:`` generators of ``medrewardbench build`` and the OpenAI-compatible server in
:mod:`medrewardbench.serve`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.models.constraints import CONSTRAINED_SUFFIX
from medrewardbench.models.local import LocalModel
from medrewardbench.models.logprobs import verdict_preferences
from medrewardbench.models.options import JudgeOptions
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

__all__ = ["DEFAULT_BATCH_SIZE", "HFJudge", "build"]

DEFAULT_BATCH_SIZE = 4


class HFJudge(Judge):
    """A generative judge backed by a local transformers vision-language model.

    Args:
        spec: the spec as given (``hf:PATH``).
        model: the loaded model and its decoding settings.
        template: the prompt.
        batch_size: requests per ``generate`` call.
        force_prefix: text appended after the generation prompt, for the model to continue.
        constrained: allow only the verdict skeleton (see the module docstring).
    """

    kind = "hf"
    needs_images = True

    def __init__(
        self,
        spec: str,
        model: LocalModel,
        template: PromptTemplate,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        force_prefix: str | None = None,
        constrained: bool = False,
    ) -> None:
        self.spec = spec
        self.model = model
        self.template = template
        self.batch_size = max(1, batch_size)
        self.concurrency = 1
        self.force_prefix = force_prefix or ""
        self.constrained = constrained
        if constrained:
            try:
                model.generator.constraint(self.force_prefix)
            except ValueError as exc:
                raise JudgeSpecError(str(exc)) from exc

    def config(self) -> dict[str, Any]:
        """Model, revision, adapter, templates and decoding settings: everything that can change an output."""
        return {
            **self.model.config(self.spec, "hf", self.template),
            "force_prefix": self.force_prefix or None,
            "constrained": self.constrained,
        }

    def metadata(self) -> dict[str, Any]:
        """Device, parameter count, model and processor classes, batch size."""
        return {
            **self.model.metadata(),
            "processor_class": type(self.model.generator.processor).__name__,
            "batch_size": self.batch_size,
        }

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Load the images and generate the whole batch in one call; a bad image fails its request only."""
        results: list[JudgeResult | None] = [None] * len(requests)
        pending: list[int] = []
        conversations: list[list[dict[str, Any]]] = []
        quotes: list[list[str]] = []
        images = self.model.load_images([r.case.image for r in requests])
        for index, (request, image) in enumerate(zip(requests, images, strict=True)):
            if isinstance(image, str):
                results[index] = JudgeResult.failed(image)
                continue
            case = request.case
            messages = self.template.render_messages(case.question, request.response_a, request.response_b, image)
            pending.append(index)
            conversations.append(messages)
            quotes.append([request.response_a, request.response_b, case.question, *self.template.static_chunks()])
        if conversations:
            outcomes = await self.model.generate(
                conversations, prefix=self.force_prefix, constrained=self.constrained, letter_logprobs=True
            )
            for index, quoted, (generation, failure, latency) in zip(pending, quotes, outcomes, strict=True):
                if generation is None:
                    results[index] = JudgeResult.failed(failure or "generation failed", latency_s=latency)
                    continue
                parsed = parse_verdicts(generation.text, quoted=quoted)
                preferences = verdict_preferences(
                    generation.text, generation.tokens or (), parsed.positions, start=len(self.force_prefix)
                )
                results[index] = JudgeResult.from_parse(
                    parsed,
                    generation.text,
                    latency_s=latency,
                    prompt_tokens=generation.prompt_tokens,
                    completion_tokens=generation.completion_tokens,
                    extra={"finish_reason": generation.finish_reason},
                    preferences=preferences,
                )
        return [r if r is not None else JudgeResult.failed("not judged") for r in results]

    async def aclose(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model.release()


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
    return HFJudge(
        f"hf:{name}",
        LocalModel.load(model_name, options),
        template,
        batch_size=options.batch_size or DEFAULT_BATCH_SIZE,
        force_prefix=local.force_prefix,
        constrained=constrained,
    )

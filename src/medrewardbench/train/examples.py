"""Training examples built from labelled cases: SFT targets, DPO pairs and reward-model pairs.

**Judges (SFT and DPO).** The prompt of an example is exactly what an ``hf:`` judge is shown at
evaluation: the same template (:func:`medrewardbench.prompts.load_template`), rendered with the
same responses in the same presentation order, with the image first in the user turn. The target
is the verdict JSON object the ``pairwise`` template asks for, in its key order::

    {"accuracy": "A", "relevance": "B", "comprehensiveness": "A", "creativity": "A",
     "responsiveness": "A", "overall": "A", "reason": "..."}

The letters are the experts' winners mapped to the presentation order of the example (``"A"`` is
the response shown first), so the swapped copy of a case has every letter exchanged. The experts
gave no free-text reason; the ``reason`` restates the per-dimension preference in one sentence so
that the object has every key the template asks for without inventing clinical content.

DPO pairs the correct verdict (chosen) with the verdict whose every letter is flipped (rejected).

**Reward models.** A reward model scores each (image, question, answer) on its own, so the
presentation order plays no role: each case gives one pair ``(response_1, response_2)`` with a
target per head, +1 when response_1 is the experts' choice, -1 when response_2 is, 0 without a
label. The Bradley-Terry loss is applied per head and labelled dimension.

Images are not decoded here: examples carry :class:`~medrewardbench.cases.ImageRef` values and
the row builders load them (once per case) when the trainer needs pixels.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order, Position, to_position
from medrewardbench.images import load_image
from medrewardbench.prompts import PromptTemplate

logger = logging.getLogger(__name__)

__all__ = [
    "ImageCache",
    "JudgeExample",
    "RewardPair",
    "dpo_rows",
    "flip_letters",
    "judge_examples",
    "reward_pairs",
    "sft_rows",
    "verdict_json",
    "verdict_letters",
]

_IMAGE_SLOT = object()


@dataclass(frozen=True)
class JudgeExample:
    """One case in one presentation order, with its prompt and its correct and flipped verdicts.

    Attributes:
        case_id: the case.
        order: the presentation order of the responses in the prompt.
        prompt: chat messages as the judge sees them, with ``{"type": "image"}`` placeholders.
        image: the case's image (``kind == "none"`` when it has none).
        chosen: the correct verdict JSON (the SFT target and the DPO chosen answer).
        rejected: the flipped verdict JSON (the DPO rejected answer).
    """

    case_id: str
    order: Order
    prompt: tuple[dict[str, Any], ...]
    image: ImageRef
    chosen: str
    rejected: str

    @property
    def has_image(self) -> bool:
        """Whether the example has an image."""
        return self.image.kind != "none"


@dataclass(frozen=True)
class RewardPair:
    """The two responses of a case with one Bradley-Terry target per reward head.

    Attributes:
        case_id: the case.
        question: the question.
        response_1: the first response in source order.
        response_2: the second response in source order.
        image: the case's image.
        targets: per head, +1 (response_1 better), -1 (response_2 better) or 0 (no label).
    """

    case_id: str
    question: str
    response_1: str
    response_2: str
    image: ImageRef
    targets: tuple[int, ...]


def verdict_letters(labels: Mapping[str, int], order: Order) -> dict[str, Position]:
    """The experts' winners as presentation-order letters, in dimension order.

    Args:
        labels: dimension -> 1 or 2 (source order); must hold every dimension.
        order: the presentation order of the example.

    Returns:
        dimension -> ``"A"`` or ``"B"``.

    Raises:
        KeyError: a dimension has no label.
    """
    return {dim: to_position(labels[dim], order) for dim in DIMENSIONS}  # type: ignore[arg-type]


def flip_letters(letters: Mapping[str, Position]) -> dict[str, Position]:
    """Every verdict exchanged: the rejected answer of a DPO pair."""
    return {dim: ("B" if letter == "A" else "A") for dim, letter in letters.items()}


def _reason(letters: Mapping[str, Position]) -> str:
    a = [dim for dim in DIMENSIONS if letters.get(dim) == "A"]
    b = [dim for dim in DIMENSIONS if letters.get(dim) == "B"]
    if not b:
        return "Answer A is better on every criterion."
    if not a:
        return "Answer B is better on every criterion."
    return f"Answer A is better on {', '.join(a)}; answer B is better on {', '.join(b)}."


def verdict_json(letters: Mapping[str, Position]) -> str:
    """The verdict object the ``pairwise`` template asks for, keys in the template's order.

    Args:
        letters: dimension -> ``"A"`` or ``"B"`` for every dimension.

    Returns:
        One line of JSON: the six dimensions, then ``"reason"``.
    """
    payload: dict[str, str] = {dim: letters[dim] for dim in DIMENSIONS}
    payload["reason"] = _reason(letters)
    return json.dumps(payload, ensure_ascii=False)


def _fully_labelled(case: Case) -> bool:
    return all(case.labels.get(dim) in (1, 2) for dim in DIMENSIONS)


def _prompt_messages(template: PromptTemplate, case: Case, order: Order) -> tuple[dict[str, Any], ...]:
    first, second = (
        (case.response_1, case.response_2) if order is Order.ORIGINAL else (case.response_2, case.response_1)
    )
    image = _IMAGE_SLOT if case.image.kind != "none" else None
    messages = template.render_messages(case.question, first, second, image)
    out = []
    for message in messages:
        parts = [{"type": "image"} if part.get("type") == "image" else dict(part) for part in message["content"]]
        out.append({"role": message["role"], "content": parts})
    return tuple(out)


def judge_examples(
    cases: Iterable[Case], orders: Sequence[Order], template: PromptTemplate
) -> tuple[list[JudgeExample], list[str]]:
    """SFT/DPO examples: each fully labelled case in each requested order.

    Args:
        cases: labelled cases.
        orders: presentation orders (both = order augmentation).
        template: the evaluation template.

    Returns:
        ``(examples, skipped_case_ids)``: cases without a label on every dimension are skipped,
        because a verdict object needs all six.
    """
    examples: list[JudgeExample] = []
    skipped: list[str] = []
    for case in cases:
        if not _fully_labelled(case):
            skipped.append(case.case_id)
            continue
        for order in orders:
            letters = verdict_letters(case.labels, order)
            examples.append(
                JudgeExample(
                    case_id=case.case_id,
                    order=order,
                    prompt=_prompt_messages(template, case, order),
                    image=case.image,
                    chosen=verdict_json(letters),
                    rejected=verdict_json(flip_letters(letters)),
                )
            )
    if skipped:
        logger.warning("%d case(s) lack a label on some dimension and were left out: %s", len(skipped), skipped[:5])
    return examples, skipped


def _bt_target(label: int | None) -> int:
    return 1 if label == 1 else -1 if label == 2 else 0


def reward_pairs(cases: Iterable[Case], heads: Sequence[str]) -> list[RewardPair]:
    """Reward-model pairs: one per case with at least one label among the heads' dimensions.

    Args:
        cases: labelled cases.
        heads: the dimension of each reward head.

    Returns:
        The pairs, in case order.
    """
    pairs = []
    for case in cases:
        targets = tuple(_bt_target(case.labels.get(head)) for head in heads)
        if any(targets):
            pairs.append(RewardPair(case.case_id, case.question, case.response_1, case.response_2, case.image, targets))
    return pairs


class ImageCache:
    """Decodes each image once (training touches each case's image in every epoch and order)."""

    def __init__(self) -> None:
        self._images: dict[tuple[str, str], Any] = {}

    def get(self, ref: ImageRef) -> Any:
        """The decoded RGB image of a reference (None for ``kind == "none"``)."""
        if ref.kind == "none":
            return None
        key = (ref.kind, ref.location if ref.kind != "bytes" else ref.content_hash())
        if key not in self._images:
            self._images[key] = load_image(ref)
        return self._images[key]


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def sft_rows(examples: Sequence[JudgeExample], images: ImageCache | None = None) -> list[dict[str, Any]]:
    """Rows for TRL's SFTTrainer: conversational prompt-completion with an ``images`` column.

    The loss falls on the completion only (TRL's ``completion_only_loss`` for this format).
    """
    cache = images or ImageCache()
    rows = []
    for example in examples:
        image = cache.get(example.image)
        rows.append(
            {
                "prompt": [dict(m) for m in example.prompt],
                "completion": _assistant(example.chosen),
                "images": [image] if image is not None else [],
            }
        )
    return rows


def dpo_rows(examples: Sequence[JudgeExample], images: ImageCache | None = None) -> list[dict[str, Any]]:
    """Rows for TRL's DPOTrainer: prompt, chosen and rejected assistant turns, and images."""
    cache = images or ImageCache()
    rows = []
    for example in examples:
        image = cache.get(example.image)
        rows.append(
            {
                "prompt": [dict(m) for m in example.prompt],
                "chosen": _assistant(example.chosen),
                "rejected": _assistant(example.rejected),
                "images": [image] if image is not None else [],
            }
        )
    return rows

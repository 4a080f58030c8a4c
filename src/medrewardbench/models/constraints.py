"""Constrained decoding: a logits processor that lets a model write only the verdict JSON skeleton.

Switched on by ``constrained=True`` in :meth:`~medrewardbench.models.generation.VLMGenerator.generate`
(the ``hf:`` judges and the server do so for the spec suffix :data:`CONSTRAINED_SUFFIX`): the model
may write only ``{"accuracy": "A", ..., "overall": "B"}`` and chooses ``A`` or ``B`` in each slot.
The choice is still the model's (the higher-scoring letter), so this measures its preferences while
ruling out format failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import require

__all__ = ["CONSTRAINED_SUFFIX", "VerdictConstraint", "verdict_skeleton"]

CONSTRAINED_SUFFIX = "#constrained"
"""A model spec ending in this (``hf:NAME#constrained``) decodes only the verdict skeleton."""
_SLOT = "\x00"


def verdict_skeleton(dimensions: Sequence[str] = DIMENSIONS, slot: str = "A") -> str:
    """The verdict JSON that constrained decoding produces, with ``slot`` in every value."""
    return "{" + ", ".join(f'"{d}": "{slot}"' for d in dimensions) + "}"


class VerdictConstraint:
    """Lets a model write only ``{"dim": "A|B", ...}``: a logits processor for ``generate``.

    The allowed next tokens are those whose text continues the skeleton, where each value slot
    accepts ``A`` or ``B``. Token texts are measured in context (after an anchor token), so
    SentencePiece tokens with a leading-space marker are handled as well as byte-level BPE ones.
    Once the skeleton is complete only end-of-sequence tokens remain allowed.

    Args:
        tokenizer: the model's tokenizer.
        eos_token_ids: the end-of-sequence token ids (at least one).
        prefix: text already forced after the prompt; it must be a start of the skeleton.
        dimensions: the keys of the skeleton, in order.
        choices: the single-character values each slot accepts.
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
        """Mask the scores of every token that would leave the verdict skeleton.

        Args:
            input_ids: the token ids so far, ``(batch, length)``.
            scores: the next-token scores, ``(batch, vocabulary)``.

        Returns:
            The scores with ``-inf`` on every token not allowed next (only end of sequence once it ended).
        """
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

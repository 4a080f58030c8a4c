"""Log-probabilities of a local model's generated tokens, recorded while it generates.

:class:`LogprobRecorder` is a logits processor that :meth:`VLMGenerator.generate
<medrewardbench.models.generation.VLMGenerator.generate>` puts first when log-probabilities are asked
for: at every step it takes the log-softmax of the model's logits (before constrained decoding masks
them and before sampling warps them) and keeps only what is needed: the chosen token's value, the
``top_k`` most likely alternatives, and, when asked, the values of every token that reads as a verdict
letter (:func:`letter_tokens`). One step's full distribution is held at a time, never the whole
generation's. :func:`token_logprobs` turns one row of the recording into
:class:`~medrewardbench.models.logprobs.TokenLogprob` records whose texts, joined, are the decoded answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from medrewardbench.errors import require
from medrewardbench.models.logprobs import TokenLogprob, letter_of

__all__ = ["CONTEXT_TOKENS", "LogprobRecorder", "Step", "letter_tokens", "token_logprobs"]

CONTEXT_TOKENS = 6
"""Tokens decoded before a token to find its text in context (spaces and multi-byte characters)."""

Step = tuple[float, list[int], list[float], list[tuple[int, float]] | None]
"""One generated token of one row: its log-probability, the top ids and values, ``(id, value)`` of
the letter tokens (None when they were not recorded)."""

_MARKERS = {"Ġ": " ", "▁": " ", "Ċ": "\n"}  # the space and newline markers of byte-level BPE and SentencePiece


def letter_tokens(tokenizer: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Every token that reads as a verdict letter, with its text after another token.

    Args:
        tokenizer: a transformers tokenizer.

    Returns:
        ``(ids, texts)``: the tokens whose text is ``A`` or ``B`` (any case) with quotes, spaces or
        markup around it, special tokens left out.
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    candidates = []
    for raw, token_id in tokenizer.get_vocab().items():
        shown = "".join(_MARKERS.get(char, char) for char in raw)
        if token_id not in special and letter_of(shown) is not None:
            candidates.append(int(token_id))
    candidates.sort()
    if not candidates:
        return (), ()
    anchor = tokenizer.encode("a", add_special_tokens=False)[:1]
    anchor_text = tokenizer.decode(anchor) if anchor else ""
    decoded = tokenizer.batch_decode([[*anchor, token_id] for token_id in candidates])
    ids: list[int] = []
    texts: list[str] = []
    for token_id, text in zip(candidates, decoded, strict=True):
        surface = text[len(anchor_text) :] if text.startswith(anchor_text) else text
        if letter_of(surface) is not None:
            ids.append(token_id)
            texts.append(surface)
    return tuple(ids), tuple(texts)


class LogprobRecorder:
    """A logits processor that records log-probabilities and changes nothing.

    Args:
        top_k: alternatives to keep per step (0: none).
        letter_ids: token ids whose values to keep at every step, or None.
    """

    def __init__(self, top_k: int, letter_ids: Sequence[int] | None = None) -> None:
        self.top_k = max(0, int(top_k))
        self.letter_ids = list(letter_ids) if letter_ids else None
        self._letter_index: Any = None
        self._last: Any = None
        self._chosen: list[Any] = []
        self._top: list[tuple[Any, Any]] = []
        self._letters: list[Any] = []
        self._steps = 0
        self._rows: tuple[list[list[float]], list[Any], list[Any], list[Any]] | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Record this step; return ``scores`` unchanged."""
        torch: Any = require("torch", "hf", "log-probabilities of local models")
        logprobs = torch.log_softmax(scores.float(), dim=-1)
        if self._last is not None:  # the token chosen at the previous step is the last one now
            self._chosen.append(self._last.gather(1, input_ids[:, -1:].to(self._last.device)).squeeze(1))
        self._last = logprobs
        self._steps += 1
        if self.top_k:
            values, ids = torch.topk(logprobs, min(self.top_k, logprobs.shape[-1]), dim=-1)
            self._top.append((values, ids))
        if self.letter_ids is not None:
            if self._letter_index is None:
                kept = [i for i in self.letter_ids if i < logprobs.shape[-1]]
                self.letter_ids = kept
                self._letter_index = torch.tensor(kept, dtype=torch.long, device=logprobs.device)
            self._letters.append(logprobs.index_select(1, self._letter_index))
        return scores

    def finish(self, sequences: Any, prompt_length: int) -> None:
        """Record the last step's chosen token and move everything to Python lists.

        Args:
            sequences: the generated sequences, prompt included, ``(batch, length)``.
            prompt_length: the (padded) prompt's length.
        """
        if self._last is not None and len(self._chosen) < self._steps:
            last = sequences[:, prompt_length + self._steps - 1 : prompt_length + self._steps]
            self._chosen.append(self._last.gather(1, last.to(self._last.device)).squeeze(1))
        self._last = None
        torch: Any = require("torch", "hf", "log-probabilities of local models")
        chosen = torch.stack(self._chosen, dim=1).tolist() if self._chosen else []
        top_values = [values.tolist() for values, _ in self._top]
        top_ids = [ids.tolist() for _, ids in self._top]
        letters = [values.tolist() for values in self._letters]
        self._rows = (chosen, top_values, top_ids, letters)

    def row(self, row: int, n_tokens: int) -> list[Step]:
        """The first ``n_tokens`` steps of one row (after :meth:`finish`)."""
        assert self._rows is not None, "finish() first"
        chosen, top_values, top_ids, letters = self._rows
        steps: list[Step] = []
        for step in range(min(n_tokens, len(chosen[row]) if chosen else 0)):
            steps.append(
                (
                    float(chosen[row][step]),
                    top_ids[step][row] if self.top_k else [],
                    top_values[step][row] if self.top_k else [],
                    list(zip(self.letter_ids, letters[step][row], strict=True))
                    if self.letter_ids is not None
                    else None,
                )
            )
        return steps


def _in_context(tokenizer: Any, context: Sequence[int], context_text: str, token_id: int) -> str:
    text = tokenizer.decode([*context, token_id], skip_special_tokens=True)
    if text.startswith(context_text):
        return str(text[len(context_text) :])
    return str(tokenizer.decode([token_id], skip_special_tokens=True))


def token_logprobs(
    tokenizer: Any,
    token_ids: Sequence[int],
    steps: Sequence[Step],
    letter_texts: Mapping[int, str] | None = None,
) -> tuple[TokenLogprob, ...]:
    """The generated tokens of one answer as :class:`TokenLogprob` records.

    Args:
        tokenizer: the model's tokenizer.
        token_ids: the answer's tokens (as kept: up to and including end of sequence).
        steps: the recorder's steps of this row (:meth:`LogprobRecorder.row`).
        letter_texts: id -> text of the letter tokens (:func:`letter_tokens`) whose values the
            steps hold, or None.

    Returns:
        One record per token: its text in context, its log-probability, and the alternatives (the
        most likely first, then, where the token reads as a letter, every letter token).
    """
    records: list[TokenLogprob] = []
    for index, (token_id, step) in enumerate(zip(token_ids, steps, strict=False)):
        logprob, top_ids, top_values, letter_values = step
        context = list(token_ids[max(0, index - CONTEXT_TOKENS) : index])
        context_text = tokenizer.decode(context, skip_special_tokens=True) if context else ""
        piece = _in_context(tokenizer, context, context_text, int(token_id))
        alternatives = [
            (piece if alt == token_id else _in_context(tokenizer, context, context_text, alt), float(value))
            for alt, value in zip(top_ids, top_values, strict=True)
        ]
        if letter_texts is not None and letter_values is not None and letter_of(piece) is not None:
            listed = set(top_ids)
            alternatives.extend(
                (letter_texts[letter_id], float(value))
                for letter_id, value in letter_values
                if letter_id not in listed and letter_id in letter_texts
            )
        records.append(TokenLogprob(piece, logprob, tuple(alternatives)))
    return tuple(records)

"""Token log-probabilities: one representation for every back end, and a verdict's probability from them.

A back end that can say how likely each token it wrote was gives a sequence of
:class:`TokenLogprob` (the chosen token, its log-probability, the alternatives it was weighed
against). OpenAI-compatible servers send them as ``choices[0].logprobs.content`` when a request asks
for ``logprobs`` (:func:`read_openai_logprobs`; :func:`openai_logprobs` writes that layout, for the
package's own servers); a local transformers model computes them from its logits
(:meth:`~medrewardbench.models.generation.VLMGenerator.generate`).

:func:`verdict_preferences` reads, for each dimension, the token that holds the verdict's letter
(its offset in the output comes from the parser, :attr:`medrewardbench.parsing.ParseResult.positions`;
the token must be the letter with at most quotes, spaces or markup around it: ``A``, ``" B``) and
returns ``P(A) = p(A) / (p(A) + p(B))``: the probability of that token as written with ``A`` against
the same token with ``B`` (``"A`` against ``"B``), the two choices a greedy decoder weighs at that
step, so the probability always agrees with the verdict it was written beside. A counterpart that is
not among the listed alternatives counts as probability 0 (a server lists its ``top_logprobs`` most
likely tokens; a local model lists every letter token). Nothing is returned for a dimension whose
letter cannot be found in the tokens: no probability is invented.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_TOP_LOGPROBS",
    "TokenLogprob",
    "letter_of",
    "letter_preference",
    "openai_logprobs",
    "read_openai_logprobs",
    "verdict_preferences",
]

MAX_TOP_LOGPROBS = 20
"""The most alternatives per token an OpenAI-compatible request may ask for (``top_logprobs``)."""

_AROUND_LETTER = " \t\r\n\"'`*_[](){}:,.;"
_SWAP = {"A": "B", "B": "A", "a": "b", "b": "a"}


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the alternatives it was weighed against.

    Attributes:
        token: the token's text.
        logprob: its natural log-probability.
        top: ``(text, logprob)`` of the alternatives listed at this step (the most likely first for
            a server; a local model adds every token that reads as a verdict letter).
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def letter_of(token: str) -> str | None:
    """The verdict letter a token reads as (``A`` or ``B``, any case, quotes and markup around it), or None."""
    core = token.strip(_AROUND_LETTER).upper()
    return core if core in ("A", "B") else None


def letter_preference(token: TokenLogprob, offset: int) -> float | None:
    """P(A) at one step: the chosen token against its counterpart with the other letter.

    Args:
        token: the step whose token holds a verdict letter.
        offset: where the letter stands in ``token.token``.

    Returns:
        ``p(A) / (p(A) + p(B))`` where ``p(A)`` and ``p(B)`` are the probabilities of the token as
        written with ``A`` and with ``B`` at ``offset`` (``"A`` against ``"B``, ``a`` against
        ``b``); a counterpart that is not listed counts 0. None when ``offset`` holds no letter.
    """
    text = token.token
    if not 0 <= offset < len(text) or text[offset] not in _SWAP:
        return None
    counterpart = text[:offset] + _SWAP[text[offset]] + text[offset + 1 :]
    other = sum(math.exp(logprob) for alt, logprob in token.top if alt == counterpart and math.isfinite(logprob))
    chosen = math.exp(token.logprob) if math.isfinite(token.logprob) else 0.0
    if chosen + other <= 0.0:
        return None
    p_written = chosen / (chosen + other)
    return p_written if text[offset] in "Aa" else 1.0 - p_written


def verdict_preferences(
    text: str, tokens: Sequence[TokenLogprob], positions: Mapping[str, int], *, start: int = 0
) -> dict[str, float]:
    """Per dimension, the probability that ``A`` is better, read at the verdict's letter.

    Args:
        text: the whole output the parser read.
        tokens: the generated tokens; their texts, joined, are ``text[start:]``.
        positions: dimension -> offset of its verdict's letter in ``text``.
        start: where the tokens begin in ``text`` (the length of a forced prefix).

    Returns:
        dimension -> P(A), for the dimensions whose letter lies in a token that reads as a letter,
        is the letter written at that offset, and has a letter among its listed alternatives.
    """
    if not tokens:
        return {}
    starts: list[int] = []
    offset = start
    for token in tokens:
        starts.append(offset)
        offset += len(token.token)
    out: dict[str, float] = {}
    for dim, position in positions.items():
        index = bisect.bisect_right(starts, position) - 1
        if index < 0 or position >= starts[index] + len(tokens[index].token):
            continue
        token = tokens[index]
        within = position - starts[index]
        if position >= len(text) or token.token[within] != text[position] or letter_of(token.token) is None:
            continue  # the tokens do not line up with the text here, or the token holds more than a letter
        p = letter_preference(token, within)
        if p is not None:
            out[dim] = p
    return out


def read_openai_logprobs(value: Any) -> tuple[TokenLogprob, ...] | None:
    """Read ``choices[0].logprobs`` of a Chat Completions response.

    Args:
        value: the ``logprobs`` member (a mapping with ``content``: a list of ``{"token", "logprob",
            "top_logprobs": [{"token", "logprob"}, ...]}``), or anything else.

    Returns:
        The tokens, or None when the member is absent or not of that shape.
    """
    if not isinstance(value, Mapping):
        return None
    content = value.get("content")
    if not isinstance(content, list):
        return None
    tokens: list[TokenLogprob] = []
    for item in content:
        if not isinstance(item, Mapping) or not isinstance(item.get("token"), str):
            return None
        logprob = item.get("logprob")
        if not isinstance(logprob, (int, float)):
            return None
        top: list[tuple[str, float]] = []
        for alternative in item.get("top_logprobs") or ():
            if isinstance(alternative, Mapping) and isinstance(alternative.get("token"), str):
                alt_logprob = alternative.get("logprob")
                if isinstance(alt_logprob, (int, float)):
                    top.append((alternative["token"], float(alt_logprob)))
        tokens.append(TokenLogprob(item["token"], float(logprob), tuple(top)))
    return tuple(tokens)


def openai_logprobs(tokens: Sequence[TokenLogprob], top_logprobs: int) -> dict[str, Any]:
    """The ``logprobs`` member of a Chat Completions choice, as OpenAI writes it.

    Args:
        tokens: the generated tokens (each ``top`` most likely first).
        top_logprobs: how many alternatives to list per token (0 to :data:`MAX_TOP_LOGPROBS`).

    Returns:
        ``{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...], "refusal": None}``.
    """

    def entry(text: str, logprob: float) -> dict[str, Any]:
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    return {
        "content": [
            {**entry(t.token, t.logprob), "top_logprobs": [entry(s, lp) for s, lp in t.top[:top_logprobs]]}
            for t in tokens
        ],
        "refusal": None,
    }

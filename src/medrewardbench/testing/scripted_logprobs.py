"""Log-probabilities for the test server's scripted answers: known numbers to check a client against.

The test server (:mod:`medrewardbench.testing.openai_server`) has no model, so when a request asks
for ``logprobs`` it derives them from the answer it sends: the text is cut into tokens (a word or a
punctuation mark with the spaces before it), every token that reads as a verdict letter gets the
*letter probability* (:func:`letter_probability`, or a fixed value a test sets) with the other
letter, written the same way, as its first alternative at one minus that; every other token gets
probability 0.95. Filler alternatives follow, far less likely, up to the ``top_logprobs`` asked for.
A client that reads the letters' probabilities must therefore find exactly the letter probability.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from medrewardbench.models.logprobs import TokenLogprob, letter_of

__all__ = ["OTHER_TOKEN_PROBABILITY", "letter_probability", "scripted_logprobs"]

OTHER_TOKEN_PROBABILITY = 0.95
"""The probability of every token that is not a verdict letter."""

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
_FILLERS = ("the", " and", ".", ",", " of", " is", " a", "\n", " to", " in", " it", " that", " for", " on", " as")
_FILLER_LOGPROB = -12.0


def letter_probability(prompt: str) -> float:
    """The default letter probability of a request: in [0.55, 0.99), a function of its prompt text.

    Args:
        prompt: the request's text parts, joined.

    Returns:
        The probability the server gives each verdict letter it writes for this prompt.
    """
    digest = hashlib.sha256(prompt.encode("utf-8")).digest()
    return 0.55 + 0.44 * int.from_bytes(digest[:4], "big") / 2**32


def _swapped_letter(token: str) -> str:
    for letter, other in (("A", "B"), ("B", "A"), ("a", "b"), ("b", "a")):
        if letter in token:
            return token.replace(letter, other)
    return token


def scripted_logprobs(text: str, probability: float, top_logprobs: int) -> tuple[TokenLogprob, ...]:
    """The tokens of ``text`` with the log-probabilities described in the module docstring.

    Args:
        text: the answer.
        probability: the letter probability, in (0, 1].
        top_logprobs: alternatives to list per token (0 to 20).

    Returns:
        One :class:`TokenLogprob` per token; the tokens' texts, joined, are ``text``.
    """
    tokens: list[TokenLogprob] = []
    for piece in _TOKEN.findall(text):
        if letter_of(piece) is not None and piece.strip() in ("A", "B", "a", "b"):
            chosen = math.log(probability)
            alternatives: list[tuple[str, float]] = [(piece, chosen)]
            if probability < 1.0:
                alternatives.append((_swapped_letter(piece), math.log1p(-probability)))
        else:
            chosen = math.log(OTHER_TOKEN_PROBABILITY)
            alternatives = [(piece, chosen)]
        alternatives.extend((filler, _FILLER_LOGPROB - i) for i, filler in enumerate(_fillers(piece)))
        alternatives.sort(key=lambda pair: -pair[1])
        tokens.append(TokenLogprob(piece, chosen, tuple(alternatives[:top_logprobs])))
    return tuple(tokens)


def _fillers(piece: str) -> Sequence[str]:
    return [filler for filler in _FILLERS if filler != piece]

"""A verdict's probability from token log-probabilities, on fixed inputs."""

from __future__ import annotations

import math

import pytest

from medrewardbench.models.logprobs import (
    TokenLogprob,
    letter_of,
    letter_preference,
    openai_logprobs,
    read_openai_logprobs,
    verdict_preferences,
)
from medrewardbench.parsing import parse_verdicts
from medrewardbench.testing.scripted_logprobs import OTHER_TOKEN_PROBABILITY, letter_probability, scripted_logprobs


def _tok(token: str, p: float, *alternatives: tuple[str, float]) -> TokenLogprob:
    return TokenLogprob(token, math.log(p), tuple((t, math.log(q)) for t, q in alternatives))


def test_letters_are_read_through_quotes_spaces_and_markup_only() -> None:
    assert [letter_of(t) for t in ("A", ' "B', "a", '"A"}', "**B**", "AB", "Answer", " ", "")] == [
        "A", "B", "A", "A", "B", None, None, None, None,
    ]  # fmt: skip


def test_the_preference_weighs_the_token_against_its_counterpart_with_the_other_letter() -> None:
    step = _tok(' "A', 0.6, (' "A', 0.6), (' "B', 0.2), ("B", 0.1), ("the", 0.05))
    assert letter_preference(step, 2) == pytest.approx(0.6 / 0.8)  # "B" without the quote is another token
    assert letter_preference(_tok("b", 0.7, ("a", 0.1), ("A", 0.2)), 0) == pytest.approx(0.1 / 0.8)
    assert letter_preference(_tok("B", 0.9), 0) == 0.0  # the counterpart not listed: it counts 0
    assert letter_preference(_tok("the", 0.9, ("and", 0.05)), 0) is None
    assert letter_preference(_tok("A", 0.9), 3) is None


def test_verdict_preferences_read_each_dimension_at_its_letter() -> None:
    text = '{"accuracy": "B", "overall": "A"}'
    pieces = ['{"', "accuracy", '":', ' "', "B", '",', ' "', "overall", '":', ' "', "A", '"}']
    assert "".join(pieces) == text
    probabilities = {"B": 0.8, "A": 0.65}
    tokens = [
        _tok(p, probabilities[p], (p, probabilities[p]), ("A" if p == "B" else "B", 1 - probabilities[p]))
        if p in probabilities
        else _tok(p, 0.99)
        for p in pieces
    ]
    parsed = parse_verdicts(text)
    prefs = verdict_preferences(text, tokens, parsed.positions)
    assert prefs == pytest.approx({"accuracy": 0.2, "overall": 0.65})


def test_a_forced_prefix_shifts_the_tokens_and_misaligned_tokens_give_nothing() -> None:
    text = '{"overall": "A"}'
    prefix = '{"overall": "'
    tokens = [_tok("A", 0.7, ("B", 0.3)), _tok('"}', 0.99)]
    positions = parse_verdicts(text).positions
    assert verdict_preferences(text, tokens, positions, start=len(prefix)) == pytest.approx({"overall": 0.7})
    assert verdict_preferences(text, tokens, positions, start=len(prefix) - 1) == {}  # off by one: not a letter
    assert verdict_preferences(text, [], positions) == {}


def test_the_openai_layout_round_trips_and_malformed_members_are_none() -> None:
    tokens = (_tok("A", 0.7, ("A", 0.7), ("B", 0.3)), _tok("!", 0.9, ("!", 0.9)))
    written = openai_logprobs(tokens, 1)
    assert written["content"][0]["top_logprobs"] == [{"token": "A", "logprob": math.log(0.7), "bytes": [65]}]
    read = read_openai_logprobs(written)
    assert read is not None and [t.token for t in read] == ["A", "!"] and read[0].top == (("A", math.log(0.7)),)
    assert read_openai_logprobs(None) is None
    assert read_openai_logprobs({"content": [{"token": "A"}]}) is None
    assert read_openai_logprobs({"content": "A"}) is None


def test_the_scripted_log_probabilities_cover_the_text_and_give_the_letter_probability() -> None:
    text = 'Reasoning first.\n{"accuracy": "A", "overall": "B", "reason": "B is vaguer"}'
    tokens = scripted_logprobs(text, 0.8, 5)
    assert "".join(t.token for t in tokens) == text
    assert all(len(t.top) <= 5 for t in tokens)
    assert verdict_preferences(text, tokens, parse_verdicts(text).positions) == pytest.approx(
        {"accuracy": 0.8, "overall": 0.2}
    )
    assert tokens[0].logprob == pytest.approx(math.log(OTHER_TOKEN_PROBABILITY))
    assert 0.55 <= letter_probability("a prompt") < 0.99
    assert letter_probability("a prompt") == letter_probability("a prompt") != letter_probability("another")

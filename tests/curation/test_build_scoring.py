"""Closed answers scored by normalised match: yes/no and synonyms, option letters, numbers with units."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medrewardbench.curation.scoring import (
    closed_kind,
    first_sentence,
    infer_answer_type,
    normalize,
    read_number,
    read_option,
    score_closed,
)

YES = ["yes", "Yes.", "YES!", "yeah", "Yep", "True", "correct", "**Yes**", "Answer: yes"]
NO = ["no", "No.", "nope", "False", "Incorrect", "There is no effusion", "It is not present", "absent", "None seen"]


@pytest.mark.parametrize("answer", YES)
def test_yes_synonyms_match_a_yes_reference_and_not_a_no_reference(answer: str) -> None:
    assert score_closed(answer, "yes").correct
    assert score_closed(answer, "Present").correct  # a reference synonym
    assert not score_closed(answer, "no").correct


@pytest.mark.parametrize("answer", NO)
def test_no_synonyms_match_a_no_reference(answer: str) -> None:
    assert score_closed(answer, "no").correct
    assert not score_closed(answer, "yes").correct


def test_polarity_is_read_from_the_first_sentence_only() -> None:
    # the second sentence's "no" must not turn a "yes" answer around
    assert score_closed("Yes, a small pneumothorax. No effusion.", "yes").correct
    assert not score_closed("It is hard to say. Yes.", "yes").correct  # no answer in the first sentence
    assert score_closed("", "yes") == score_closed("", "yes") and not score_closed("", "yes").correct


@pytest.mark.parametrize(
    ("answer", "reference", "correct"),
    [
        ("B", "B", True),
        ("(b) pneumonia", "option B", True),
        ("Option B", "B. Pneumonia", True),
        ("B. Pneumonia, because the opacity is lobar.", "(b)", True),
        ("[c]", "C", True),
        ("b)", "B", True),
        ("The answer is (B).", "b", True),
        ("The correct option is C.", "B", False),
        ("A large mass is seen in the liver.", "A", False),  # an article, not a choice
        ("Pneumonia.", "B. Pneumonia", True),  # no letter, but the option's text
        ("Atelectasis.", "B. Pneumonia", False),
    ],
)
def test_option_letters_in_their_usual_spellings(answer: str, reference: str, correct: bool) -> None:
    score = score_closed(answer, reference)
    assert score.kind == "option" and score.correct is correct


@pytest.mark.parametrize(
    ("answer", "reference", "correct"),
    [
        ("5 mm", "0.5 cm", True),
        ("It measures 0.5 cm.", "5 mm", True),
        ("5 mm", "5 cm", False),
        ("about 1,000 ml of fluid", "1 l", True),
        ("12 months", "1 year", True),
        ("Five.", "5", True),
        ("5", "5 mm", True),  # a bare number is compared as it is
        ("5 kg", "5 mm", False),  # kinds differ
        ("45%", "45 percent", True),
        ("0,5 cm", "5 mm", True),  # decimal comma
        ("No nodule is seen.", "5 mm", False),
    ],
)
def test_numbers_with_units_are_converted_where_simple(answer: str, reference: str, correct: bool) -> None:
    score = score_closed(answer, reference)
    assert score.kind == "number" and score.correct is correct


def test_short_text_references_need_the_phrase_without_a_negation_before_it() -> None:
    assert score_closed("This is a CT scan.", "CT").correct
    assert not score_closed("It is not CT, it is MRI.", "CT").correct
    assert score_closed("Left lung.", "left lung").correct
    assert closed_kind("left lung") == "text"


def test_every_score_says_what_it_read() -> None:
    assert score_closed("No, not at all", "yes").read == "no"
    assert score_closed("(c)", "b").read == "c"
    assert score_closed("It is 0.5 cm", "5 mm").read == "0.5 cm"


def test_answer_type_is_inferred_from_the_reference() -> None:
    assert [infer_answer_type(r) for r in ("yes", "B", "3.5 cm", "Pneumonia of the right lower lobe", None, " ")] == [
        "closed",
        "closed",
        "closed",
        "open",
        "open",
        "open",
    ]


def test_sentences_end_at_punctuation_followed_by_a_space_not_inside_numbers() -> None:
    assert first_sentence("\n\n  It is 0.5 cm. Next.") == "it is 0.5 cm"
    assert first_sentence("B. Pneumonia") == "b"
    assert read_number("It is 0.5 cm. Next 7 mm.") == (0.5, "cm")
    assert read_option("answer: (D)") == "d"


# ------------------------------------------------------------------------------------ properties

_FILLER = st.lists(st.sampled_from(["the", "lesion", "appears", "small", "there", "is", "a", "mass"]), max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    word=st.sampled_from(["yes", "yeah", "yep", "yup", "affirmative", "present", "positive"]),
    casing=st.sampled_from([str.lower, str.upper, str.title]),
    punctuation=st.sampled_from(["", ".", ",", "!", ";"]),
    filler=_FILLER,
)
def test_any_yes_word_with_any_neutral_tail_matches_yes_and_never_no(
    word: str, casing: object, punctuation: str, filler: list[str]
) -> None:
    answer = casing(word) + punctuation + " " + " ".join(filler)  # type: ignore[operator]
    assert score_closed(answer, "yes").correct
    assert not score_closed(answer, "no").correct


@settings(max_examples=200, deadline=None)
@given(
    letter=st.sampled_from("abcdefghij"),
    other=st.sampled_from("abcdefghij"),
    answer_form=st.sampled_from(["{L}", "({l})", "[{L}]", "{l})", "Option {L}", "{L}. text", "The answer is {L}."]),
    reference_form=st.sampled_from(["{L}", "({l})", "option {l}", "{L}. Pneumonia", "choice {L}", "{L})"]),
)
def test_an_option_letter_matches_itself_in_any_spelling_and_no_other_letter(
    letter: str, other: str, answer_form: str, reference_form: str
) -> None:
    reference = reference_form.format(L=letter.upper(), l=letter)
    assert score_closed(answer_form.format(L=letter.upper(), l=letter), reference).correct
    if other != letter:
        assert not score_closed(answer_form.format(L=other.upper(), l=other), reference).correct


@settings(max_examples=200, deadline=None)
@given(tenths=st.integers(min_value=1, max_value=100_000), words=_FILLER)
def test_millimetres_equal_the_same_length_in_centimetres_and_metres(tenths: int, words: list[str]) -> None:
    millimetres = tenths / 10
    answer = f"{' '.join(words)} {millimetres:g} mm".strip()
    assert score_closed(answer, f"{millimetres / 10!r} cm").correct
    assert score_closed(answer, f"{millimetres / 1000!r} m").correct
    assert score_closed(answer, f"{millimetres:g} mm").correct
    assert not score_closed(answer, f"{millimetres + 1:g} mm").correct


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_normalisation_is_idempotent_and_scoring_never_raises(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)
    for reference in ("yes", "B", "5 mm", "left lung"):
        score = score_closed(text, reference)
        assert isinstance(score.correct, bool)

"""Scoring a free-text answer to a closed question against its reference answer, by normalised match.

The difficulty filter asks small models every question and counts how many got it right. For a
closed question this is decided here, without a model; an open question needs a grader
(:mod:`medrewardbench.curation.grading`).

**Normalisation** (both texts): Unicode NFKC, lower case, curly quotes made straight, markdown
emphasis (``**``, ``__``, backticks) removed, a leading ``answer:`` / ``final answer:`` dropped,
whitespace collapsed. The **first sentence** of an answer is its first non-empty line up to the
first ``.``, ``!``, ``?`` or ``;`` that ends the text or is followed by a space (so ``0.5 cm`` and
``B. Pneumonia`` stay whole).

**What the reference is** (:func:`closed_kind`), tried in this order:

1. ``yesno``: the reference is one of *yes, y, true, correct, present, positive, affirmative* or
   *no, n, false, incorrect, absent, negative, none, not present*.
2. ``option``: an option letter A-J, written ``B``, ``(b)``, ``[B]``, ``B)``, ``option B``,
   ``choice B``, ``answer B``, or ``B. text`` / ``B: text`` / ``B) text`` (the text is the option's).
3. ``number``: a number (digits, a decimal point or comma, or a word from *zero* to *twelve*),
   optionally followed by a unit of :data:`UNITS`.
4. ``text``: anything else that is short (a few words such as ``left lung`` or ``CT``).

**When an answer is correct** (:func:`score_closed`):

* ``yesno``: the answer's polarity equals the reference's. The polarity is the first word of the
  answer when that is *true, false, correct* or *incorrect*; otherwise the first of the words
  *yes, yeah, yep, yup, present, positive, affirmative* (yes) or *no, nope, not, none, absent,
  negative* (no) in the first sentence. An answer without any of them is wrong (it did not answer).
* ``option``: the answer's option letter equals the reference's. The letter is read at the start
  of the answer (``B``, ``(b)``, ``[b]``, ``b)``, ``B.``, ``B:``, ``option B``, ``choice B``,
  ``answer: B``; a letter followed by a plain word, as in ``A large mass``, is not a choice), or
  from ``the answer is B`` / ``the correct option is (b)`` anywhere in the first sentence. An
  answer without a letter is correct when the reference gave the option's text and the first
  sentence contains it as a phrase (see ``text``).
* ``number``: the first number in the answer's first sentence, with its unit, equals the
  reference's. When both have units of the same kind, values are compared after conversion
  (``5 mm`` == ``0.5 cm``; lengths, volumes, masses, durations, ages in months and years, and
  percentages); units of different kinds never match; when either side has no unit, the bare
  values are compared. Values are equal within a relative tolerance of 1e-9.
* ``text``: the normalised reference occurs in the answer's first sentence as a whole phrase
  (word boundaries on both sides), and neither ``not`` nor ``no`` is among the two words before it.

Every score carries the rule used and what was read from the answer, which the filter stores with
its decision.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "CLOSED_KINDS",
    "UNITS",
    "ClosedScore",
    "closed_kind",
    "first_sentence",
    "infer_answer_type",
    "normalize",
    "read_number",
    "read_option",
    "read_polarity",
    "score_closed",
]

CLOSED_KINDS: tuple[str, ...] = ("yesno", "option", "number", "text")

_REFERENCE_YES = frozenset(("yes", "y", "true", "correct", "present", "positive", "affirmative"))
_REFERENCE_NO = frozenset(("no", "n", "false", "incorrect", "absent", "negative", "none", "not present"))
_LEADING_POLARITY = {"true": True, "correct": True, "false": False, "incorrect": False}
_YES_WORDS = frozenset(("yes", "yeah", "yep", "yup", "present", "positive", "affirmative"))
_NO_WORDS = frozenset(("no", "nope", "not", "none", "absent", "negative"))

UNITS: dict[str, tuple[str, float]] = {
    # length, in metres
    "nm": ("length", 1e-9),
    "um": ("length", 1e-6),
    "µm": ("length", 1e-6),
    "μm": ("length", 1e-6),
    "micron": ("length", 1e-6),
    "microns": ("length", 1e-6),
    "mm": ("length", 1e-3),
    "millimeter": ("length", 1e-3),
    "millimeters": ("length", 1e-3),
    "millimetre": ("length", 1e-3),
    "millimetres": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "centimeter": ("length", 1e-2),
    "centimeters": ("length", 1e-2),
    "centimetre": ("length", 1e-2),
    "centimetres": ("length", 1e-2),
    "m": ("length", 1.0),
    "meter": ("length", 1.0),
    "meters": ("length", 1.0),
    "metre": ("length", 1.0),
    "metres": ("length", 1.0),
    # volume, in litres
    "ml": ("volume", 1e-3),
    "cc": ("volume", 1e-3),
    "dl": ("volume", 1e-1),
    "l": ("volume", 1.0),
    "liter": ("volume", 1.0),
    "liters": ("volume", 1.0),
    "litre": ("volume", 1.0),
    "litres": ("volume", 1.0),
    # mass, in grams
    "mcg": ("mass", 1e-6),
    "µg": ("mass", 1e-6),
    "μg": ("mass", 1e-6),
    "ug": ("mass", 1e-6),
    "mg": ("mass", 1e-3),
    "g": ("mass", 1.0),
    "gram": ("mass", 1.0),
    "grams": ("mass", 1.0),
    "kg": ("mass", 1e3),
    # durations, in seconds
    "s": ("time", 1.0),
    "sec": ("time", 1.0),
    "second": ("time", 1.0),
    "seconds": ("time", 1.0),
    "min": ("time", 60.0),
    "mins": ("time", 60.0),
    "minute": ("time", 60.0),
    "minutes": ("time", 60.0),
    "h": ("time", 3600.0),
    "hr": ("time", 3600.0),
    "hrs": ("time", 3600.0),
    "hour": ("time", 3600.0),
    "hours": ("time", 3600.0),
    "day": ("time", 86400.0),
    "days": ("time", 86400.0),
    "week": ("time", 604800.0),
    "weeks": ("time", 604800.0),
    # ages, in months
    "month": ("age", 1.0),
    "months": ("age", 1.0),
    "year": ("age", 12.0),
    "years": ("age", 12.0),
    # shares
    "%": ("share", 1.0),
    "percent": ("share", 1.0),
    # units without conversions
    "bpm": ("rate", 1.0),
    "mmhg": ("pressure", 1.0),
    "hu": ("density", 1.0),
}
"""Unit -> (kind, factor to the kind's base unit). Units of one kind convert into each other."""

_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_UNIT_PATTERN = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_NUMBER = re.compile(
    r"(?<![\w.])(?P<value>[-+]?\d+(?:[.,]\d+)*|" + "|".join(_NUMBER_WORDS) + r")"
    r"(?:\s*(?P<unit>" + _UNIT_PATTERN + r")(?![\w]))?",
)
_OPTION_REFERENCE = re.compile(
    r"^(?:(?:option|choice|answer)\s*)?[\(\[]?(?P<letter>[a-j])[\)\]]?(?:\s*[.:)]\s*(?P<text>.*))?$"
)
_OPTION_START = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+)?(?:option|choice|answer)\s*(?:is\s*)?[:\-]?\s*)?"
    r"(?:[\(\[](?P<wrapped>[a-j])[\)\]]|(?P<bare>[a-j])(?=\s*[.:)]|\s*$))"
)
_OPTION_ANYWHERE = re.compile(
    r"\b(?:answer|option|choice)\s+(?:is\s+)?(?:option\s+|choice\s+)?[\(\[]?(?P<letter>[a-j])[\)\]]?(?![\w])"
)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)")
_PREFIX = re.compile(r"^(?:final\s+answer|answer)\s*[:\-]\s*")
_WORD = re.compile(r"[a-z0-9µμ%]+")


@dataclass(frozen=True)
class ClosedScore:
    """The verdict on one closed answer.

    Attributes:
        correct: whether the answer matches the reference.
        kind: the reference's kind (``yesno``, ``option``, ``number``, ``text``).
        read: what was read from the answer (``"yes"``, ``"b"``, ``"5 mm"``), or None when nothing was.
    """

    correct: bool
    kind: str
    read: str | None


def normalize(text: str) -> str:
    """NFKC, lower case, straight quotes, no markdown emphasis, no ``answer:`` prefix, single spaces.

    Args:
        text: any text.

    Returns:
        The normalised text (idempotent: normalising it again changes nothing).
    """
    value = unicodedata.normalize("NFKC", text).lower()
    value = value.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    value = re.sub(r"\*\*|__|`", "", value)
    value = " ".join(value.split())
    previous = None
    while previous != value:
        previous = value
        value = _PREFIX.sub("", value).strip()
    return value


def first_sentence(text: str) -> str:
    """The first non-empty line of a text, up to the first sentence end (see the module docstring).

    Args:
        text: an answer.

    Returns:
        The normalised first sentence (empty for an empty text).
    """
    for line in text.splitlines():
        line = normalize(line)
        if line:
            end = _SENTENCE_END.search(line)
            return line[: end.start()] if end else line
    return ""


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _phrase(text: str) -> str:
    return " ".join(_words(text))


def read_polarity(answer: str) -> bool | None:
    """Whether an answer says yes or no (see the module docstring).

    Args:
        answer: the answer.

    Returns:
        True (yes), False (no), or None (neither).
    """
    sentence = first_sentence(answer)
    words = _words(sentence)
    if not words:
        return None
    if words[0] in _LEADING_POLARITY:
        return _LEADING_POLARITY[words[0]]
    for word in words:
        if word in _YES_WORDS:
            return True
        if word in _NO_WORDS:
            return False
    return None


def _reference_polarity(reference: str) -> bool | None:
    phrase = _phrase(normalize(reference))
    if phrase in _REFERENCE_YES:
        return True
    if phrase in _REFERENCE_NO:
        return False
    return None


def _reference_option(reference: str) -> tuple[str, str] | None:
    text = normalize(reference).rstrip(".")
    match = _OPTION_REFERENCE.match(text)
    if match is None:
        return None
    option_text = _phrase(match.group("text") or "")
    # "a" alone is an option letter; "a mass" is not (no punctuation after the letter)
    return match.group("letter"), option_text


def read_option(answer: str) -> str | None:
    """The option letter an answer chooses (see the module docstring).

    Args:
        answer: the answer.

    Returns:
        The letter in lower case, or None.
    """
    start = normalize(answer)
    match = _OPTION_START.match(start)
    if match is not None:
        return match.group("wrapped") or match.group("bare")
    anywhere = _OPTION_ANYWHERE.search(first_sentence(answer))
    return anywhere.group("letter") if anywhere else None


def _number_value(raw: str) -> float | None:
    if raw in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[raw])
    text = raw
    if "," in text:
        parts = text.split(",")
        # 1,000 and 12,500,000 are thousands; 0,5 is a decimal comma
        if all(len(part) == 3 and part.isdigit() for part in parts[1:]) and "." not in text:
            text = "".join(parts)
        elif len(parts) == 2:
            text = ".".join(parts)
        else:
            return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_number(text: str) -> tuple[float, str | None] | None:
    """The first number of a text's first sentence and its unit (normalised), or None.

    Args:
        text: an answer or a reference.

    Returns:
        ``(value, unit or None)``.
    """
    for match in _NUMBER.finditer(first_sentence(text)):
        value = _number_value(match.group("value"))
        if value is not None:
            return value, match.group("unit")
    return None


def _same_number(answer: tuple[float, str | None], reference: tuple[float, str | None]) -> bool:
    (a_value, a_unit), (r_value, r_unit) = answer, reference
    if a_unit is not None and r_unit is not None:
        a_kind, a_factor = UNITS[a_unit]
        r_kind, r_factor = UNITS[r_unit]
        if a_kind != r_kind:
            return False
        a_value, r_value = a_value * a_factor, r_value * r_factor
    return math.isclose(a_value, r_value, rel_tol=1e-9, abs_tol=1e-12)


def _contains_phrase(sentence: str, phrase: str) -> bool:
    if not phrase:
        return False
    words = _words(sentence)
    target = phrase.split()
    for start in range(len(words) - len(target) + 1):
        if words[start : start + len(target)] == target:
            before = words[max(0, start - 2) : start]
            if "not" not in before and "no" not in before:
                return True
    return False


def closed_kind(reference: str) -> str:
    """What kind of closed reference a text is: ``yesno``, ``option``, ``number`` or ``text``.

    Args:
        reference: the reference answer.

    Returns:
        The kind (see the module docstring for the order of the tests).
    """
    if _reference_polarity(reference) is not None:
        return "yesno"
    if _reference_option(reference) is not None:
        return "option"
    number = read_number(reference)
    if number is not None and _phrase(_NUMBER.sub(" ", first_sentence(reference))) == "":
        return "number"
    return "text"


def infer_answer_type(reference: str | None) -> str:
    """The answer type of a question that does not state one.

    Args:
        reference: the reference answer, or None.

    Returns:
        ``"closed"`` when the reference is yes/no, an option letter or a number (with or without
        a unit); ``"open"`` otherwise, and when there is no reference.
    """
    if reference is None or not reference.strip():
        return "open"
    return "closed" if closed_kind(reference) in ("yesno", "option", "number") else "open"


def score_closed(answer: str, reference: str) -> ClosedScore:
    """Whether a free-text answer matches a closed reference answer (rules in the module docstring).

    Args:
        answer: the model's answer.
        reference: the reference answer.

    Returns:
        The verdict, the reference's kind and what was read from the answer.
    """
    kind = closed_kind(reference)
    if kind == "yesno":
        expected = _reference_polarity(reference)
        said = read_polarity(answer)
        return ClosedScore(
            said is not None and said == expected, kind, None if said is None else "yes" if said else "no"
        )
    if kind == "option":
        option = _reference_option(reference)
        assert option is not None
        letter, option_text = option
        chosen = read_option(answer)
        if chosen is not None:
            return ClosedScore(chosen == letter, kind, chosen)
        if option_text and _contains_phrase(first_sentence(answer), option_text):
            return ClosedScore(True, kind, option_text)
        return ClosedScore(False, kind, None)
    if kind == "number":
        expected_number = read_number(reference)
        assert expected_number is not None
        found = read_number(answer)
        if found is None:
            return ClosedScore(False, kind, None)
        shown = f"{found[0]:g}" + (f" {found[1]}" if found[1] else "")
        return ClosedScore(_same_number(found, expected_number), kind, shown)
    phrase = _phrase(normalize(reference))
    sentence = first_sentence(answer)
    if _phrase(sentence) == phrase or _contains_phrase(sentence, phrase):
        return ClosedScore(True, kind, phrase)
    return ClosedScore(False, kind, sentence[:80] or None)

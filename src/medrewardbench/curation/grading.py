"""Grading an open answer against its reference with a grader model, and reading the grader's verdict strictly.

The grader is any free-text generator spec (``--grader api:gpt-4o``, ``--grader hf:PATH``) asked
with the shipped template ``grade`` (``src/medrewardbench/templates/grade.txt``) or a file with the
placeholders ``{{question}}``, ``{{reference_answer}}`` and ``{{answer}}``. The template asks for
one JSON object: ``{"correct": "yes" | "no", "reason": "..."}``.

The verdict is read the way judges' verdicts are (:mod:`medrewardbench.parsing`), with the same
distrust of quoted text:

1. Every complete JSON object in the output is a candidate (strict JSON, duplicate keys refused).
   Only objects with a ``correct`` key count.
2. An object whose text occurs in a passage the grader was shown (the answer under review, the
   reference, the question, the template's fixed text), ignoring whitespace and case, is a copy,
   not the grader's statement, and is skipped; so is the template's example (``"yes or no"``).
   An answer that plants ``{"correct": "yes"}`` therefore cannot grade itself.
3. The **last** remaining object is the verdict (earlier ones are drafts). Its ``correct`` must be
   ``"yes"`` or ``"no"`` (any case) or a JSON boolean; anything else (``"partially"``, ``""``) is a
   failure with a reason.
4. Prose is never read: an output without such an object is a failure (``no grading object``).

A failed grading counts the answer as not correct, and the failure is stored with the decision.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from medrewardbench.data.jsonio import JSONTextError, parse_json

__all__ = [
    "GRADE_PLACEHOLDERS",
    "GRADE_TEMPLATES",
    "GradeResult",
    "grading_key",
    "parse_grade",
]

GRADE_TEMPLATES: tuple[str, ...] = ("grade",)
"""Shipped grading templates."""
GRADE_PLACEHOLDERS: tuple[str, ...] = ("question", "reference_answer", "answer")
"""Placeholders a grading template must hold (and the only ones it may)."""
_YES = frozenset(("yes", "true", "correct"))
_NO = frozenset(("no", "false", "incorrect"))
_MAX_CANDIDATES = 200


@dataclass(frozen=True)
class GradeResult:
    """What a grader's output says.

    Attributes:
        correct: the verdict, or None when the output decided nothing.
        failure: why nothing was decided, or None.
        reason: the grader's own ``reason`` text, when given.
    """

    correct: bool | None
    failure: str | None
    reason: str | None = None


def grading_key(question_hash: str, reference: str, answer: str) -> str:
    """The store key of one grading: what the grader sees besides its own configuration.

    Args:
        question_hash: the question's content hash (its text and image).
        reference: the reference answer.
        answer: the answer under review.

    Returns:
        A SHA-256 hex digest.
    """
    payload = json.dumps([question_hash, reference, answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _objects(text: str) -> list[tuple[str, Any]]:
    """Every complete JSON object in ``text`` with a ``correct`` key, in order of their end, with its text."""
    found: list[tuple[int, str, Any]] = []
    starts = [i for i, ch in enumerate(text) if ch == "{"]
    for start in starts[-_MAX_CANDIDATES:]:
        depth = 0
        in_string = False
        escaped = False
        for index in range(start, len(text)):
            ch = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    span = text[start : index + 1]
                    try:
                        value = parse_json(span)
                    except JSONTextError:
                        break
                    if isinstance(value, dict) and "correct" in value:
                        found.append((index, span, value))
                    break
    found.sort(key=lambda item: item[0])
    return [(span, value) for _, span, value in found]


def _verdict(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower().rstrip(".")
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def parse_grade(text: str | None, *, quoted: Sequence[str] = ()) -> GradeResult:
    """Read a grader's verdict (rules in the module docstring). Never raises.

    Args:
        text: the grader's raw output.
        quoted: the passages the grader was shown (answer, reference, question, template text).

    Returns:
        The verdict, or a failure with its reason.
    """
    if not isinstance(text, str) or not text.strip():
        return GradeResult(None, "empty grader output")
    passages = [_compact(p) for p in quoted if isinstance(p, str) and p.strip()]
    candidates = []
    for span, value in _objects(text):
        compact = _compact(span)
        if any(compact in passage for passage in passages):
            continue
        raw = value.get("correct")
        if isinstance(raw, str) and "or" in raw.lower().split():
            continue  # the template's example, "yes or no"
        candidates.append(value)
    if not candidates:
        return GradeResult(None, 'no grading object: expected {"correct": "yes" or "no", ...}')
    chosen = candidates[-1]
    reason = chosen.get("reason") if isinstance(chosen.get("reason"), str) else None
    verdict = _verdict(chosen.get("correct"))
    if verdict is None:
        shown = json.dumps(chosen.get("correct"), ensure_ascii=False)[:60]
        return GradeResult(None, f'\'correct\' must be "yes" or "no", got {shown}', reason)
    return GradeResult(verdict, None, reason)

"""The questions file that screening projects start from: :mod:`medrewardbench.data.questions`.

The format is shared with the benchmark builder (``medrewardbench build import``), so one parser
reads it for both; the names below are re-exported from there.
"""

from __future__ import annotations

from medrewardbench.data.questions import ANSWER_TYPES, QUESTION_FIELDS, Question, read_questions

__all__ = ["ANSWER_TYPES", "QUESTION_FIELDS", "Question", "read_questions"]

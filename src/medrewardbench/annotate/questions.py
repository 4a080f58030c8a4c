"""The questions file that screening projects start from.

One question per row, in JSONL (or a JSON list). Fields:

``id`` (string, required, unique), ``image`` (as in the canonical format: a path relative to the
file, ``{"path"}``, ``{"bytes"}``, ``{"builtin"}`` or null), ``question`` (required),
``reference_answer`` (optional), ``answer_type`` (``"closed"`` or ``"open"``, optional),
``organ_system``, ``department``, ``modality``, ``source_dataset`` (optional strings) and
``metadata`` (an object). Any other field is an error, as in the canonical format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.data.canonical import ProblemSink, image_ref_from_value
from medrewardbench.errors import DataError, DataProblem

QUESTION_FIELDS: frozenset[str] = frozenset(
    (
        "id",
        "image",
        "question",
        "reference_answer",
        "answer_type",
        "organ_system",
        "department",
        "modality",
        "source_dataset",
        "metadata",
    )
)
ANSWER_TYPES: tuple[str, ...] = ("closed", "open")
_OPTIONAL_TEXT = ("reference_answer", "organ_system", "department", "modality", "source_dataset")


@dataclass(frozen=True)
class Question:
    """One question to screen."""

    question_id: str
    image: ImageRef
    question: str
    reference_answer: str | None = None
    answer_type: str | None = None
    organ_system: str = "unknown"
    department: str | None = None
    modality: str | None = None
    source_dataset: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The question's fields (image excluded) as a JSON-ready dict."""
        return {
            "question": self.question,
            "reference_answer": self.reference_answer,
            "answer_type": self.answer_type,
            "organ_system": self.organ_system,
            "department": self.department,
            "modality": self.modality,
            "source_dataset": self.source_dataset,
            "metadata": dict(self.metadata),
        }


def _rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            sink.add(f"invalid JSON file: {exc}")
            return
        rows = document.get("questions") if isinstance(document, dict) else document
        if not isinstance(rows, list):
            sink.add("a JSON questions file must hold a list of questions or an object with a 'questions' list")
            return
        yield from enumerate(rows, start=1)
        return
    with path.open("rb") as handle:
        for row, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                sink.add(f"not UTF-8 text: {exc}", row)
                continue
            if not line.strip():
                continue
            try:
                yield row, json.loads(line)
            except json.JSONDecodeError as exc:
                sink.add(f"invalid JSON: {exc}", row)


def _question(record: object, row: int, base_dir: Path, sink: ProblemSink) -> Question | None:
    if not isinstance(record, Mapping):
        sink.add(f"row must be an object, got {type(record).__name__}", row)
        return None
    before = len(sink.problems)
    raw_id = record.get("id")
    qid = raw_id if isinstance(raw_id, str) and raw_id.strip() else None
    if qid is None:
        sink.add("missing id (a non-empty string)", row, "id")
    for key in record:
        if key not in QUESTION_FIELDS:
            sink.add(f"unknown field; known fields: {', '.join(sorted(QUESTION_FIELDS))}", row, str(key), qid)
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        sink.add("missing required field (a non-empty string)", row, "question", qid)
    texts: dict[str, str | None] = {}
    for key in _OPTIONAL_TEXT:
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            sink.add(f"must be a string, got {type(value).__name__}", row, key, qid)
        texts[key] = (value.strip() or None) if isinstance(value, str) else None
    answer_type = record.get("answer_type")
    if answer_type is not None and answer_type not in ANSWER_TYPES:
        sink.add(f"must be 'closed', 'open' or null, got {answer_type!r}", row, "answer_type", qid)
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        sink.add(f"must be an object, got {type(metadata).__name__}", row, "metadata", qid)
    image = image_ref_from_value(record.get("image"), base_dir, sink, row, qid)
    if len(sink.problems) > before or qid is None or image is None or not isinstance(question, str):
        return None
    return Question(
        question_id=qid,
        image=image,
        question=question,
        reference_answer=texts["reference_answer"],
        answer_type=answer_type if isinstance(answer_type, str) else None,
        organ_system=texts["organ_system"] or "unknown",
        department=texts["department"],
        modality=texts["modality"],
        source_dataset=texts["source_dataset"],
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
    )


def read_questions(path: str | Path) -> list[Question]:
    """Read a questions file, reporting every problem at once.

    Args:
        path: a ``.jsonl`` (or ``.json``) file.

    Returns:
        The questions in file order.

    Raises:
        DataError: the file is missing or has any problem (each names file, row and field).
    """
    source = Path(path)
    problems: list[DataProblem] = []
    sink = ProblemSink(str(source), problems)
    if not source.is_file():
        raise DataError([DataProblem(str(source), "no such file")])
    found: list[Question] = []
    first: dict[str, int] = {}
    for row, record in _rows(source, sink):
        question = _question(record, row, source.parent, sink)
        if question is None:
            continue
        if question.question_id in first:
            sink.add(
                f"duplicate id {question.question_id!r} (first at row {first[question.question_id]})",
                row,
                "id",
                question.question_id,
            )
            continue
        first[question.question_id] = row
        found.append(question)
    if not found and not problems:
        sink.add("the file holds no questions")
    if problems:
        raise DataError(problems)
    return found

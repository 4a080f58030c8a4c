"""The "questions" format: image-question pairs before any answer exists.

The annotation app's screening projects (``annotate init --questions``) and the benchmark builder
(``medrewardbench build import``) read the same format, through this module. One question per row,
in JSONL, JSON (a list, or ``{"questions": [...]}``) or parquet:

==================== ========= ===============================================================
field                required  meaning
==================== ========= ===============================================================
``id``               yes       unique id (printable text, at most 512 characters)
``image``            no        as in the canonical format: a path relative to the file,
                               ``{"path"}``, ``{"bytes"}`` (base64 in JSON, binary in parquet;
                               a Hugging Face Image struct works), ``{"builtin"}``, or null
``question``         yes       the question about the image (non-empty)
``reference_answer`` no        the experts' answer, used to score small models' answers
``answer_type``      no        ``"closed"`` (yes/no, a choice, a number) or ``"open"``
``organ_system``     no        default ``"unknown"``
``department``,      no        strings
``modality``,
``source_dataset``
``metadata``         no        an object (a JSON string in parquet)
==================== ========= ===============================================================

Any other field is an error, as in the canonical format (put extra information under
``metadata``). Image paths must resolve inside the file's directory unless the
:class:`~medrewardbench.data.image_policy.ImagePolicy` allows more. Readers report every problem
at once, each naming the file, the 1-based row and the field; JSONL and parquet files are read row
by row (:func:`iter_question_rows`), so a file of any length is read in bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.data.canonical import (
    ProblemSink,
    case_id_problem,
    image_ref_from_value,
    json_document_rows,
    json_lines,
    parquet_rows,
)
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.jsonio import MAX_JSON_DEPTH, JSONTextError, brief, parse_json, too_deep
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.images.files import FileRefused, check_regular_file

__all__ = [
    "ANSWER_TYPES",
    "QUESTION_FIELDS",
    "QUESTION_SUFFIXES",
    "Question",
    "iter_question_rows",
    "question_from_record",
    "question_record",
    "read_questions",
]

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
QUESTION_SUFFIXES: tuple[str, ...] = (".jsonl", ".json", ".parquet")
"""File suffixes read as questions (and as rows to map, by ``build import``)."""
OPTIONAL_TEXT_FIELDS: tuple[str, ...] = ("reference_answer", "organ_system", "department", "modality", "source_dataset")


@dataclass(frozen=True)
class Question:
    """One image-question pair.

    Attributes:
        question_id: the row's ``id``.
        image: the image reference (not decoded).
        question: the question text.
        reference_answer: the experts' answer, when known.
        answer_type: ``"closed"``, ``"open"`` or None (unknown).
        organ_system, department, modality, source_dataset: grouping fields.
        metadata: anything else.
    """

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
        """The question's fields (id and image excluded) as a JSON-ready dict."""
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


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _metadata(value: object, sink: ProblemSink, row: int, qid: str | None) -> dict[str, Any] | None:
    if _missing(value):
        return {}
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JSONTextError as exc:
            sink.add(f"not a JSON object: {exc}", row, "metadata", qid)
            return None
    if not isinstance(value, Mapping):
        sink.add(f"must be an object, got {type(value).__name__}", row, "metadata", qid)
        return None
    if too_deep(value, MAX_JSON_DEPTH - 1):
        sink.add(f"nested more than {MAX_JSON_DEPTH} levels deep", row, "metadata", qid)
        return None
    return dict(value)


def question_from_record(
    record: object,
    row: int,
    base_dir: Path,
    sink: ProblemSink,
    policy: ImagePolicy | None = None,
) -> Question | None:
    """Build one question from one row of the questions format, reporting every problem in it.

    Args:
        record: the row (should be a mapping).
        row: its 1-based row number.
        base_dir: the directory that relative image paths are relative to.
        sink: where problems go.
        policy: which image paths are allowed; None allows paths inside ``base_dir`` only.

    Returns:
        The question, or None when the row has any problem.
    """
    if not isinstance(record, Mapping):
        sink.add(f"row must be an object, got {type(record).__name__}", row)
        return None
    before = len(sink.problems)
    raw_id = record.get("id")
    qid: str | None = None
    if _missing(raw_id) or (isinstance(raw_id, str) and not raw_id.strip()):
        sink.add("missing id (a non-empty string)", row, "id")
    elif not isinstance(raw_id, str):
        sink.add(f"id must be a string, got {type(raw_id).__name__} {brief(raw_id)}", row, "id")
    elif case_id_problem(raw_id) is not None:
        sink.add(str(case_id_problem(raw_id)), row, "id")
    else:
        qid = raw_id
    for key in record:
        if key not in QUESTION_FIELDS:
            sink.add(
                "unknown field; put extra information under 'metadata' "
                f"(known fields: {', '.join(sorted(QUESTION_FIELDS))})",
                row,
                str(key),
                qid,
            )
    question = record.get("question")
    if not _missing(question) and not isinstance(question, str):
        sink.add(f"must be a string, got {type(question).__name__} {brief(question)}", row, "question", qid)
    elif not isinstance(question, str) or not question.strip():
        sink.add("missing required field (a non-empty string)", row, "question", qid)
    texts: dict[str, str | None] = {}
    for key in OPTIONAL_TEXT_FIELDS:
        value = record.get(key)
        if _missing(value):
            texts[key] = None
        elif not isinstance(value, str):
            sink.add(f"must be a string, got {type(value).__name__} {brief(value)}", row, key, qid)
            texts[key] = None
        else:
            texts[key] = value.strip() or None
    answer_type = record.get("answer_type")
    if _missing(answer_type):
        answer_type = None
    elif answer_type not in ANSWER_TYPES:
        sink.add(f"must be 'closed', 'open' or null, got {brief(answer_type)}", row, "answer_type", qid)
    metadata = _metadata(record.get("metadata"), sink, row, qid)
    image = image_ref_from_value(record.get("image"), base_dir, sink, row, qid, policy=policy)
    if len(sink.problems) > before or qid is None or image is None or metadata is None:
        return None
    assert isinstance(question, str)
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
        metadata=metadata,
    )


def iter_question_rows(
    path: str | Path, sink: ProblemSink, json_key: str = "questions"
) -> Iterator[tuple[int, object]]:
    """The numbered rows of a JSONL, JSON or parquet file, reporting unreadable ones to ``sink``.

    JSONL and parquet files are read row by row (parquet in batches of 256 rows); a JSON file is
    one document and is read whole.

    Args:
        path: the file.
        sink: where problems go (a bad line, an unreadable file).
        json_key: the list to read in a JSON object (``{"questions": [...]}``).

    Yields:
        (1-based row number, parsed row).
    """
    file = Path(path)
    try:
        check_regular_file(file)
    except FileRefused as exc:
        sink.add(str(exc))
        return
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        yield from json_lines(file, sink)
    elif suffix == ".json":
        yield from json_document_rows(
            file, sink, json_key, f"a JSON file must hold a list of rows or an object with a {json_key!r} list"
        )
    elif suffix == ".parquet":
        yield from parquet_rows(file, sink)
    else:
        sink.add(f"unsupported file type {file.suffix or '(none)'!r}; use one of {', '.join(QUESTION_SUFFIXES)}")


def read_questions(path: str | Path, policy: ImagePolicy | None = None) -> list[Question]:
    """Read a whole questions file, reporting every problem at once.

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file.
        policy: which image paths are allowed; None allows paths inside the file's directory only.

    Returns:
        The questions in file order.

    Raises:
        DataError: the file is missing or has any problem (each names file, row and field).
    """
    source = Path(path)
    problems: list[DataProblem] = []
    sink = ProblemSink(str(source), problems)
    if not source.exists():
        raise DataError([DataProblem(str(source), "no such file")])
    found: list[Question] = []
    first: dict[str, int] = {}
    for row, record in iter_question_rows(source, sink):
        question = question_from_record(record, row, source.parent, sink, policy)
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


def question_record(question: Question, image: Any) -> dict[str, Any]:
    """One question as a row of the questions format.

    Args:
        question: the question.
        image: the row's ``image`` value, already in the format's form (a path, an object, None).

    Returns:
        The row; empty optional fields are left out.
    """
    record: dict[str, Any] = {"id": question.question_id, "image": image, "question": question.question}
    for key in ("reference_answer", "answer_type", "organ_system", "department", "modality", "source_dataset"):
        value = getattr(question, key)
        if value is not None:
            record[key] = value
    if question.metadata:
        record["metadata"] = dict(question.metadata)
    return record

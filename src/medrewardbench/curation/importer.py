"""``build import``: questions from JSONL, JSON, parquet files or any ``hf:`` data set, through a column mapping.

**Sources.** A ``.jsonl``, ``.json`` or ``.parquet`` file; a directory (every such file below it,
in path order; hidden files and ``dataset.json`` left out); or ``hf:OWNER/NAME[@REVISION]``, a
Hugging Face data set fetched with ``huggingface_hub`` into the normal cache (``HF_HOME``;
``HF_HUB_OFFLINE=1`` reads the cache only) whose parquet, JSONL and JSON files are read.
``include`` (``--include 'data/test-*'``) keeps the files whose path inside the source matches.
JSONL and parquet files are read row by row, so a source of any size is imported in bounded
memory; a JSON file is one document and is read whole.

**Column mapping.** Without ``--map`` the rows must be in the questions format
(:mod:`medrewardbench.data.questions`); a column that is not one of its fields is an error. With
``--map FIELD=COLUMN,...`` each field of the format is read from the named column (``answer`` is
short for ``reference_answer``, ``type`` for ``answer_type``, ``organ`` for ``organ_system``,
``dataset`` for ``source_dataset``); a field that is not mapped is read from a column of its own
name when there is one; every other column goes under ``metadata`` when its value is a string,
a number or a boolean (other values, such as a second image, are left out and counted). Numbers in
text fields become text (a reference answer ``5``); ``answer_type`` is read in any case (``CLOSED``).
``--set FIELD=VALUE`` gives every row the same value for ``organ_system``, ``department``,
``modality``, ``source_dataset`` or ``answer_type``. With ``--map`` and without an ``id`` column, a
row's id is its row number (``FILE/ROW`` when the source has several files). ``source_dataset`` defaults to the source's
name, and a missing ``answer_type`` is inferred from the reference answer
(:func:`~medrewardbench.curation.scoring.infer_answer_type`).

**Images** follow the canonical format's rules (a path relative to the file, ``{"path"}``,
``{"bytes"}`` (a Hugging Face ``Image`` struct), ``{"builtin"}``, or null); paths must resolve inside
the source's directory unless ``allow_external_images`` or ``image_roots`` allow more
(:class:`~medrewardbench.data.image_policy.ImagePolicy`). Each image is read once and its bytes are
kept in the project store (deduplicated by content), so the project no longer needs the source
files; builtin images stay references.

**Validation.** Every row is checked as the case loaders check rows, and every problem is reported
at once, each naming the file, the row and the field; when there is any, nothing is imported
(the import is one transaction). Ids are unique within a source (a repeat is an error). Several
sources pool into one project: each question records its source; an id already used by another
source becomes ``SOURCE/ID``. Importing a source again (same name) skips the questions it already
has and refuses a question whose content changed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.curation.scoring import infer_answer_type
from medrewardbench.curation.store import BuildError, BuildStore, StoredQuestion
from medrewardbench.data.canonical import DATASET_CARD_FILENAME, ProblemSink, case_id_problem
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.questions import (
    ANSWER_TYPES,
    QUESTION_FIELDS,
    QUESTION_SUFFIXES,
    Question,
    iter_question_rows,
    question_from_record,
)
from medrewardbench.errors import DataError, DataProblem

log = logging.getLogger(__name__)

__all__ = [
    "FIELD_ALIASES",
    "SETTABLE_FIELDS",
    "ColumnMapping",
    "ImportSummary",
    "import_questions",
    "question_content_hash",
    "resolve_source",
]

FIELD_ALIASES: dict[str, str] = {
    "answer": "reference_answer",
    "reference": "reference_answer",
    "type": "answer_type",
    "organ": "organ_system",
    "dataset": "source_dataset",
}
"""Short names accepted on the left of ``--map`` and ``--set``."""
SETTABLE_FIELDS: tuple[str, ...] = ("organ_system", "department", "modality", "source_dataset", "answer_type")
"""Fields ``--set`` may give."""
_TEXT_FIELDS = ("question", "reference_answer", "organ_system", "department", "modality", "source_dataset", "id")
_CHUNK = 256


def _field_name(name: str, flag: str) -> str:
    key = name.strip()
    key = FIELD_ALIASES.get(key, key)
    if key not in QUESTION_FIELDS:
        known = ", ".join(sorted({*QUESTION_FIELDS, *FIELD_ALIASES}))
        raise BuildError(f"{flag} {name}=...: {name!r} is not a field of the questions format; known: {known}")
    return key


def _pairs(values: Sequence[str], flag: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            key, sep, item = part.partition("=")
            if not sep or not key.strip() or not item.strip():
                raise BuildError(f"{flag} expects FIELD=VALUE pairs separated by commas, got {part!r}")
            out.append((key.strip(), item.strip()))
    return out


@dataclass(frozen=True)
class ColumnMapping:
    """How a source's columns become the questions format (``--map`` and ``--set``).

    Attributes:
        columns: field -> source column.
        constants: field -> value given to every row.
    """

    columns: Mapping[str, str] = field(default_factory=dict)
    constants: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, maps: Sequence[str] = (), sets: Sequence[str] = ()) -> ColumnMapping:
        """Read ``--map`` and ``--set`` values (repeatable, comma-separated ``FIELD=VALUE``).

        Args:
            maps: the ``--map`` values (``FIELD=COLUMN``).
            sets: the ``--set`` values (``FIELD=VALUE``).

        Returns:
            The mapping.

        Raises:
            BuildError: a malformed pair, an unknown field, a field given twice, a field both
                mapped and set, ``--set`` of a field it may not give, or an invalid answer type.
        """
        columns: dict[str, str] = {}
        for key, column in _pairs(maps, "--map"):
            name = _field_name(key, "--map")
            if name in columns:
                raise BuildError(f"--map names {name!r} twice")
            columns[name] = column
        constants: dict[str, str] = {}
        for key, value in _pairs(sets, "--set"):
            name = _field_name(key, "--set")
            if name not in SETTABLE_FIELDS:
                raise BuildError(f"--set {key}=...: only {', '.join(SETTABLE_FIELDS)} can be set for every row")
            if name in columns:
                raise BuildError(f"{name!r} is both mapped (--map) and set (--set); choose one")
            if name in constants:
                raise BuildError(f"--set names {name!r} twice")
            if name == "answer_type" and value.lower() not in ANSWER_TYPES:
                raise BuildError(f"--set answer_type={value}: must be closed or open")
            constants[name] = value.lower() if name == "answer_type" else value
        return cls(columns, constants)

    def apply(self, record: object, default_id: str, dropped: set[str]) -> object:
        """One source row as a row of the questions format (invalid values are left for validation).

        Args:
            record: the source row.
            default_id: the id to use when the row has none.
            dropped: collects the names of unmapped columns whose values could not go to metadata.

        Returns:
            The row to validate (a non-mapping row is returned as it is, to be reported).
        """
        if not isinstance(record, Mapping):
            return record
        if not self.columns:
            row = dict(record)  # the questions format as it is: an id is required
            row.update(self.constants)
            return row
        used = set(self.columns.values())
        out: dict[str, Any] = {}
        for name in QUESTION_FIELDS:
            if name in self.columns:
                column = self.columns[name]
                out[name] = record[column] if column in record else _MissingColumn(column)
            elif name in record and name not in used:
                out[name] = record[name]
                used.add(name)
        for name in _TEXT_FIELDS:
            value = out.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not _missing(value):
                out[name] = str(value) if not isinstance(value, float) or not value.is_integer() else str(int(value))
        if isinstance(out.get("answer_type"), str):
            out["answer_type"] = out["answer_type"].strip().lower()
        if _missing(out.get("id")):
            out["id"] = default_id
        extra: dict[str, Any] = {}
        for column, value in record.items():
            if column in used:
                continue
            if value is None or isinstance(value, (str, int, float, bool)):
                extra[str(column)] = None if _missing(value) else value
            else:
                dropped.add(str(column))
        metadata = out.get("metadata")
        if extra:
            out["metadata"] = {**extra, **metadata} if isinstance(metadata, Mapping) else extra
        out.update(self.constants)
        return out


class _MissingColumn(str):
    """A mapped column absent from a row: the importer reports it by name."""

    __slots__ = ()


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@dataclass
class ImportSummary:
    """What an import did."""

    source: str
    location: str
    files: list[str]
    rows: int = 0
    imported: int = 0
    already: int = 0
    renamed: int = 0
    dropped_columns: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class ResolvedSource:
    """A source's files, how messages name them, and the directories its image paths may point into."""

    location: str
    name: str
    files: tuple[tuple[Path, str], ...]
    """(file, display name) in reading order."""
    image_roots: tuple[Path, ...]


def _data_files(root: Path, include: Sequence[str]) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in path.relative_to(root).parts) or path.name == DATASET_CARD_FILENAME:
            continue
        if path.suffix.lower() not in QUESTION_SUFFIXES or path.is_dir():
            continue
        if include and not any(fnmatch.fnmatch(relative, pattern) for pattern in include):
            continue
        found.append(path)
    return found


def resolve_source(source: str, include: Sequence[str] = ()) -> ResolvedSource:
    """Find a source's files (fetching an ``hf:`` data set into the Hub cache when allowed).

    Args:
        source: a file, a directory or ``hf:OWNER/NAME[@REVISION]``.
        include: patterns (fnmatch, on paths inside the source) of the files to read.

    Returns:
        The files and where they are.

    Raises:
        DataError: a missing path, an unsupported file, no data files, or a data set that is not
            cached and cannot be downloaded (the message says how to fetch it).
    """
    from medrewardbench.data import hub

    if source.startswith(hub.HF_PREFIX):
        repo_id, revision = hub.parse_hf_source(source)
        if source[len(hub.HF_PREFIX) :].strip() == "":
            raise DataError([DataProblem(source, "give the data set to import: hf:OWNER/NAME[@REVISION]")])
        patterns = [f"*{suffix}" for suffix in QUESTION_SUFFIXES] if not include else list(include)
        root = hub.dataset_snapshot(repo_id, revision, patterns, "its parquet or JSONL files")
        shown = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
        files = _data_files(root, include)
        if not files:
            raise DataError([DataProblem(shown, f"the snapshot at {root} has no parquet, JSONL or JSON files")])
        roots = [root]
        if root.parent.name == "snapshots":
            # files in the Hub cache are links into the repository's blobs/ folder, two levels up
            roots.append(root.parent.parent)
        listed = tuple((f, f"{shown}/{f.relative_to(root).as_posix()}") for f in files)
        return ResolvedSource(shown, repo_id.split("/")[-1], listed, tuple(roots))
    path = Path(source).expanduser()
    if path.is_dir():
        files = _data_files(path, include)
        if not files:
            raise DataError([DataProblem(source, f"no {', '.join(QUESTION_SUFFIXES)} files in this directory")])
        return ResolvedSource(source, path.resolve().name, tuple((f, str(f)) for f in files), (path,))
    if not os.path.lexists(path):
        raise DataError([DataProblem(source, "no such file or directory")])
    if path.suffix.lower() not in QUESTION_SUFFIXES:
        raise DataError(
            [
                DataProblem(
                    source, f"unsupported file type {path.suffix or '(none)'!r}; use {', '.join(QUESTION_SUFFIXES)}"
                )
            ]
        )
    return ResolvedSource(source, path.stem, ((path, str(path)),), (path.parent,))


def question_content_hash(question: str, answer_type: str, image_hash: str) -> str:
    """The hash a question's answers are stored under: what a model sees (text, answer type, image bytes).

    Args:
        question: the question text.
        answer_type: ``closed`` or ``open`` (it changes the prompt).
        image_hash: the SHA-256 of the image bytes (of the builtin image's file), empty for no image.

    Returns:
        A SHA-256 hex digest.
    """
    payload = json.dumps([question, answer_type, image_hash], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _check_source_name(name: str) -> str:
    value = name.strip()
    problem = case_id_problem(value) if value else "is empty"
    if problem is None and ("/" in value or len(value) > 100):
        problem = "must not contain '/' and must be at most 100 characters"
    if problem is not None:
        raise BuildError(f"--source-name {name!r}: {problem}")
    return value


def _rows(
    resolved: ResolvedSource, problems: list[DataProblem]
) -> Iterator[tuple[ProblemSink, Path, int, object, str]]:
    several = len(resolved.files) > 1
    for path, display in resolved.files:
        sink = ProblemSink(display, problems)
        stem = Path(display).with_suffix("").name
        for row, record in iter_question_rows(path, sink):
            yield sink, path, row, record, f"{stem}/{row}" if several else str(row)


def _image_payload(question: Question, sink: ProblemSink, row: int) -> tuple[str, str | None, str | None, bytes | None]:
    """(kind, ref, name, bytes to keep) of a question's image; ``kind`` is ``error`` after a problem."""
    image = question.image
    if image.kind == "none":
        return "none", None, None, None
    if image.kind == "builtin":
        try:
            image.content_hash()
        except Exception as exc:
            sink.add(f"builtin image cannot be read: {exc}", row, "image", question.question_id)
            return "error", None, None, None
        return "builtin", image.location, image.location, None
    try:
        data = image.raw_bytes()
    except Exception as exc:
        sink.add(f"image cannot be read: {exc}", row, "image", question.question_id)
        return "error", None, None, None
    name = os.path.basename(image.location) if image.kind == "path" else image.location
    return "bytes", hashlib.sha256(data).hexdigest(), name or None, data


def import_questions(
    store: BuildStore,
    source: str,
    mapping: ColumnMapping | None = None,
    *,
    source_name: str | None = None,
    include: Sequence[str] = (),
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> ImportSummary:
    """Import a source's questions into a project (rules in the module docstring).

    Args:
        store: the project's store (the caller holds the project's lock).
        source: a file, a directory or ``hf:OWNER/NAME[@REVISION]``.
        mapping: the column mapping; None reads the questions format as it is.
        source_name: the name questions record as their source (default: the file's stem, the
            directory's name or the data set's name).
        include: patterns of the files to read inside a directory or data set.
        allow_external_images: accept image paths outside the source's directory.
        image_roots: further directories image paths may point into.

    Returns:
        What was imported.

    Raises:
        DataError: any problem in the source (every one, each naming file, row and field); nothing
            was imported.
        BuildError: a bad source name.
    """
    mapping = mapping or ColumnMapping()
    resolved = resolve_source(source, include)
    name = _check_source_name(source_name or resolved.name)
    policy = ImagePolicy.create(allow_external_images, image_roots).with_roots(*resolved.image_roots)
    summary = ImportSummary(name, resolved.location, [display for _, display in resolved.files])
    problems: list[DataProblem] = []
    checked_columns = False
    chunk: list[tuple[ProblemSink, int, Question]] = []
    with store.transaction():
        # questions of this source with a larger seq were added by this import: a repeat of one is a duplicate
        first_seq = store.last_question_seq()
        for sink, path, row, record, default_id in _rows(resolved, problems):
            summary.rows += 1
            if not mapping.columns and not checked_columns and isinstance(record, Mapping):
                checked_columns = True
                unknown = sorted(str(k) for k in record if k not in QUESTION_FIELDS)
                if unknown:
                    sink.add(
                        f"columns {', '.join(unknown)} are not fields of the questions format: map the fields "
                        "with --map FIELD=COLUMN,... (the other columns then go under metadata)",
                        row,
                    )
                    break
            shaped = mapping.apply(record, default_id, summary.dropped_columns)
            if isinstance(shaped, dict):
                for key, value in list(shaped.items()):
                    if isinstance(value, _MissingColumn):
                        sink.add(f"the source has no column {str(value)!r} (mapped to {key})", row, key)
                        shaped[key] = None
            question = question_from_record(shaped, row, path.parent, sink, policy)
            if question is None:
                continue
            chunk.append((sink, row, question))
            if len(chunk) >= _CHUNK:
                _import_chunk(store, name, chunk, summary, first_seq)
                chunk = []
        if chunk:
            _import_chunk(store, name, chunk, summary, first_seq)
        if not problems and summary.rows == 0:
            problems.append(DataProblem(resolved.location, "the source holds no questions"))
        if problems:
            raise DataError(problems)  # the transaction rolls back: nothing is imported
        total = store.count_questions(source=name)
        store.record_source(name, resolved.location, mapping.columns, mapping.constants, total)
    if summary.dropped_columns:
        log.info(
            "%s: columns left out (not text, numbers or booleans): %s", name, ", ".join(sorted(summary.dropped_columns))
        )
    return summary


def _import_chunk(
    store: BuildStore,
    source: str,
    chunk: Sequence[tuple[ProblemSink, int, Question]],
    summary: ImportSummary,
    first_seq: int,
) -> None:
    existing = store.source_questions(source, [q.question_id for _, _, q in chunk])
    prepared: list[tuple[ProblemSink, int, Question, StoredQuestion, bytes | None]] = []
    in_chunk: dict[str, tuple[str, int]] = {}
    for sink, row, question in chunk:
        earlier = in_chunk.get(question.question_id)
        if earlier is None and question.question_id in existing and existing[question.question_id][2] > first_seq:
            earlier = ("this source", 0)
        if earlier is not None:
            where = f"first in {earlier[0]}, row {earlier[1]}" if earlier[1] else "it appears earlier in this source"
            sink.add(f"duplicate id {question.question_id!r} ({where})", row, "id", question.question_id)
            continue
        in_chunk[question.question_id] = (sink.file, row)
        kind, ref, image_name, data = _image_payload(question, sink, row)
        if kind == "error":
            continue
        answer_type = question.answer_type or infer_answer_type(question.reference_answer)
        image_hash = ref if kind == "bytes" else (question.image.content_hash() if kind == "builtin" else "")
        content_hash = question_content_hash(question.question, answer_type, image_hash or "")
        if question.question_id in existing:
            qid, stored_hash, _seq = existing[question.question_id]
            if stored_hash != content_hash:
                sink.add(
                    f"question {question.question_id!r} changed since it was imported from {source!r} (as {qid!r}); "
                    "import it under another --source-name",
                    row,
                    "id",
                    question.question_id,
                )
            else:
                summary.already += 1
            continue
        stored = StoredQuestion(
            seq=0,
            qid=question.question_id,
            source=source,
            source_id=question.question_id,
            content_hash=content_hash,
            image_kind=kind,
            image_ref=ref,
            image_name=image_name,
            question=question.question,
            reference_answer=question.reference_answer,
            answer_type=answer_type,
            organ_system=question.organ_system,
            department=question.department,
            modality=question.modality,
            source_dataset=question.source_dataset or source,
            metadata=dict(question.metadata),
        )
        prepared.append((sink, row, question, stored, data))
    taken = store.question_ids_taken([p[3].qid for p in prepared] + [f"{source}/{p[3].qid}" for p in prepared])
    for sink, row, question, stored, data in prepared:
        qid = stored.qid
        if qid in taken:
            qid = f"{source}/{stored.qid}"
            if qid in taken:
                sink.add(f"id {stored.qid!r} is taken, and so is {qid!r}", row, "id", question.question_id)
                continue
            summary.renamed += 1
        if data is not None and stored.image_ref is not None:
            store.insert_image(stored.image_ref, stored.image_name or "", data)
        final = dataclasses.replace(stored, qid=qid)
        store.insert_question(final)
        taken[qid] = (source, stored.source_id, stored.content_hash)
        summary.imported += 1

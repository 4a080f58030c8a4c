"""The build store's tables, their named migrations, and the typed rows read from them.

:mod:`medrewardbench.curation.store` opens the file and owns every query; this module says what the
file holds. ``StoreTables`` is the base of the store's parts (the connection, the path, the one
write transaction of :func:`medrewardbench.utils.sqlitedb.transaction`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.utils.secrets import scrub, scrub_value
from medrewardbench.utils.sqlitedb import transaction

__all__ = [
    "CHUNK",
    "MIGRATIONS",
    "QUESTION_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "GroupCounts",
    "StoreTables",
    "StoredDecision",
    "StoredGeneration",
    "StoredGrading",
    "StoredPair",
    "StoredQuestion",
    "json_text",
    "placeholders",
    "scrubbed_json",
    "scrubbed_text",
]

SCHEMA_VERSION = 1
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "label_details",
        (
            # what an annotator said beside their labels: comment, "cannot judge" and its reason
            # (a JSON object; NULL when they said nothing more)
            "ALTER TABLE labels ADD COLUMN details_json TEXT",
            # an adjudicator's decision on a dimension the annotators left without a strict majority
            """CREATE TABLE adjudications (
                pair_id TEXT NOT NULL,
                dimension TEXT NOT NULL,
                label INTEGER NOT NULL,
                actor TEXT NOT NULL,
                note TEXT,
                at TEXT,
                source TEXT NOT NULL,
                imported_at REAL NOT NULL,
                PRIMARY KEY (pair_id, dimension)
            )""",
        ),
    ),
)
"""Named schema changes of the build store, appended in order (see :mod:`medrewardbench.utils.sqlitedb`)."""
CHUNK = 256
"""Questions (or pairs) read from the store at a time."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    name TEXT PRIMARY KEY,
    location TEXT NOT NULL,
    mapping_json TEXT NOT NULL,
    constants_json TEXT NOT NULL,
    questions INTEGER NOT NULL,
    imported_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS images (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS questions (
    seq INTEGER PRIMARY KEY,
    qid TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    source_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    image_kind TEXT NOT NULL,
    image_ref TEXT,
    image_name TEXT,
    question TEXT NOT NULL,
    reference_answer TEXT,
    answer_type TEXT NOT NULL,
    organ_system TEXT NOT NULL,
    department TEXT,
    modality TEXT,
    source_dataset TEXT,
    metadata_json TEXT NOT NULL,
    UNIQUE (source, source_id)
);
CREATE INDEX IF NOT EXISTS questions_by_hash ON questions(content_hash);
CREATE TABLE IF NOT EXISTS generators (
    fingerprint TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    config_json TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    registered_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS generations (
    generator_fp TEXT NOT NULL,
    question_hash TEXT NOT NULL,
    text TEXT,
    failure TEXT,
    finish_reason TEXT,
    latency_s REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    extra_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (generator_fp, question_hash)
);
CREATE TABLE IF NOT EXISTS gradings (
    grader_fp TEXT NOT NULL,
    grading_key TEXT NOT NULL,
    correct INTEGER,
    raw_output TEXT,
    failure TEXT,
    latency_s REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    extra_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (grader_fp, grading_key)
);
CREATE TABLE IF NOT EXISTS filter_runs (
    filter_fp TEXT PRIMARY KEY,
    config_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS decisions (
    qid TEXT PRIMARY KEY,
    filter_fp TEXT NOT NULL,
    kept INTEGER NOT NULL,
    scored INTEGER NOT NULL,
    correct INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    reason TEXT NOT NULL,
    evidence_json TEXT NOT NULL,
    decided_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pool (
    generator_fp TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pairs (
    pair_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    qid TEXT NOT NULL,
    generator_1 TEXT NOT NULL,
    generator_2 TEXT NOT NULL,
    text_1 TEXT NOT NULL,
    text_2 TEXT NOT NULL,
    metadata_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS labels (
    pair_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    labels_json TEXT NOT NULL,
    order_shown TEXT,
    seconds REAL,
    source TEXT NOT NULL,
    imported_at REAL NOT NULL,
    PRIMARY KEY (pair_id, annotator)
);
"""

QUESTION_COLUMNS = (
    "seq, qid, source, source_id, content_hash, image_kind, image_ref, image_name, question, reference_answer, "
    "answer_type, organ_system, department, modality, source_dataset, metadata_json"
)


@dataclass(frozen=True)
class StoredQuestion:
    """One question of the project.

    Attributes:
        seq: import order (1, 2, ...).
        qid: the project id (unique across sources).
        source: the source it was imported from.
        source_id: its id in that source.
        content_hash: hash of what a model sees: the question text, the answer type, the image bytes.
        image_kind: ``none``, ``bytes`` (in the ``images`` table) or ``builtin``.
        image_ref: the image's SHA-256 (``bytes``) or builtin name.
        image_name: the image's original file name, when known.
        question, reference_answer, answer_type, organ_system, department, modality,
        source_dataset, metadata: the question's fields.
    """

    seq: int
    qid: str
    source: str
    source_id: str
    content_hash: str
    image_kind: str
    image_ref: str | None
    image_name: str | None
    question: str
    reference_answer: str | None
    answer_type: str
    organ_system: str
    department: str | None
    modality: str | None
    source_dataset: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True)
class StoredGeneration:
    """One stored free-text answer (or the failure to get one)."""

    generator_fp: str
    question_hash: str
    text: str | None
    failure: str | None
    finish_reason: str | None = None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extra: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StoredGrading:
    """One stored verdict of the grader on an open answer (``correct`` is None when it failed)."""

    grader_fp: str
    grading_key: str
    correct: bool | None
    raw_output: str | None
    failure: str | None
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    extra: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StoredPair:
    """One sampled pair, responses in source order."""

    pair_id: str
    seq: int
    qid: str
    generator_1: str
    generator_2: str
    text_1: str
    text_2: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class GroupCounts:
    """The questions of one (source, organ system), counted by what the difficulty filter decided."""

    source: str
    organ_system: str
    questions: int
    with_reference: int
    decided: int
    kept: int
    dropped: int
    kept_unscored: int


@dataclass(frozen=True)
class StoredDecision:
    """The difficulty filter's decision about one question, with the question's source and organ system."""

    qid: str
    source: str
    organ_system: str
    kept: bool
    correct: int
    failed: int
    reason: str
    evidence: list[Any]


def json_text(value: Any) -> str:
    """Canonical JSON text (sorted keys, UTF-8 kept), as every JSON column is written."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


_PLAIN_TYPES = (bool, int, float, type(None))


def scrubbed_json(value: Any) -> str:
    """JSON text of a value with every credential-shaped string in it scrubbed."""
    if (
        type(value) is dict
        and all(type(k) is str and type(v) in _PLAIN_TYPES for k, v in value.items())
        and all(scrub(k) == k for k in value)
    ):
        # a flat record of numbers and flags (an answer's attempts and retries): only its keys are
        # text, and they hold nothing to scrub, so the round trip below would give the same text
        return json_text(value)
    return json_text(scrub_value(json.loads(json_text(value))))


def scrubbed_text(value: str | None) -> str | None:
    """A model's or server's text with its secrets removed (None stays None)."""
    return None if value is None else scrub(value)


def placeholders(count: int) -> str:
    """``?,?,...`` for an ``IN (...)`` of ``count`` values."""
    return ",".join("?" * count)


class StoreTables:
    """What every part of the build store shares: the file, its connection and the write transaction."""

    path: Path
    _db: sqlite3.Connection

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (committed at the end of the block, rolled back on any exception)."""
        with transaction(self._db) as db:
            yield db

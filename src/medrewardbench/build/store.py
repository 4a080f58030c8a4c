"""The build project's store: one SQLite file holding questions, images, answers, decisions, pairs and labels.

Opened like the results store (:mod:`medrewardbench.sqlitedb`: WAL, busy timeout, a base layout
and named migrations). Tables:

* ``sources``: each imported source (name, location, column mapping, constants, count);
* ``images``: image bytes, once per content (SHA-256), so the project does not depend on the
  source files after import;
* ``questions``: one row per question, in import order (``seq``), with its project id, its
  source and id there, and a content hash over what a model sees (question text, answer type,
  image bytes);
* ``generators`` and ``generations``: every free-text answer, keyed by (generator fingerprint,
  question content hash), like judgments: a rerun reuses it, a changed question or generator
  configuration gets a new one; failures are rows with a reason;
* ``gradings``: the grader's verdict on an open answer, keyed by (grader fingerprint, hash of
  question, reference and answer);
* ``filter_runs`` and ``decisions``: the difficulty filter's decision per question, with the
  answers and verdicts that caused it;
* ``pool``: the generators whose answers make up the response pool;
* ``pairs``: the sampled pairs (texts copied, so that an export never depends on regeneration);
* ``labels``: per-annotator labels of pairs, in source order, with each annotator's comment and
  "cannot judge" reason (migration ``label_details``);
* ``adjudications``: an adjudicator's decision per (pair, dimension), with who, why and when.

Every text a model or a server produced passes through :func:`medrewardbench.secrets.scrub`
before it is written; what a doctor or an adjudicator wrote is stored as it is. Readers ask for
questions in chunks (keyset pagination on ``seq``), so no command holds every question in memory.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from medrewardbench.cases import Adjudication, Annotation, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Winner
from medrewardbench.errors import MedRewardBenchError, StoreError
from medrewardbench.secrets import scrub, scrub_value
from medrewardbench.sqlitedb import applied_migrations, open_database, transaction

__all__ = [
    "CHUNK",
    "STORE_FILENAME",
    "BuildError",
    "BuildStore",
    "GroupCounts",
    "StoredDecision",
    "StoredGeneration",
    "StoredGrading",
    "StoredPair",
    "StoredQuestion",
]

STORE_FILENAME = "build.sqlite"
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
"""Named schema changes of the build store, appended in order (see :mod:`medrewardbench.sqlitedb`)."""
CHUNK = 256
"""Questions (or pairs) read from the store at a time."""

_SCHEMA = """
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

_QUESTION_COLUMNS = (
    "seq, qid, source, source_id, content_hash, image_kind, image_ref, image_name, question, reference_answer, "
    "answer_type, organ_system, department, modality, source_dataset, metadata_json"
)


class BuildError(MedRewardBenchError):
    """A build command cannot do what it was asked (the message says why and what to do)."""


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


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _scrubbed_json(value: Any) -> str:
    return _json(scrub_value(json.loads(_json(value))))


def _details_json(annotation: Annotation) -> str | None:
    details: dict[str, Any] = {}
    if annotation.comment:
        details["comment"] = annotation.comment
    if annotation.cannot_judge:
        details["cannot_judge"] = True
        if annotation.cannot_judge_reason:
            details["cannot_judge_reason"] = annotation.cannot_judge_reason
    return _json(details) if details else None


def _text(value: str | None) -> str | None:
    return None if value is None else scrub(value)


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


class BuildStore:
    """The build project's SQLite store. Use as a context manager or call :meth:`close`.

    Args:
        path: the store file (``PROJECT/build.sqlite``).

    Raises:
        StoreError: the file cannot be opened or is not a build store of this version.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = open_database(self.path, _SCHEMA, SCHEMA_VERSION, MIGRATIONS, what="build project store")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> BuildStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def applied_migrations(self) -> list[str]:
        """The schema changes this store has, in the order they were applied."""
        return applied_migrations(self._db)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (committed at the end of the block, rolled back on any exception)."""
        with transaction(self._db) as db:
            yield db

    # ------------------------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> Any:
        """A JSON value stored under ``key`` in ``meta`` (None when absent)."""
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (f"build:{key}",)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any, *, commit: bool = True) -> None:
        """Store a JSON value under ``key`` (``None`` deletes it); ``commit=False`` joins the caller's transaction."""
        if not commit:
            self._write_meta(key, value)
            return
        with self.transaction():
            self._write_meta(key, value)

    def _write_meta(self, key: str, value: Any) -> None:
        if value is None:
            self._db.execute("DELETE FROM meta WHERE key=?", (f"build:{key}",))
        else:
            self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"build:{key}", _json(value)))

    # --------------------------------------------------------------------------------- sources
    def source_names(self) -> list[str]:
        """The names of the imported sources, in import order."""
        return [r[0] for r in self._db.execute("SELECT name FROM sources ORDER BY imported_at, name")]

    def sources(self) -> list[dict[str, Any]]:
        """Every imported source: name, location, mapping, constants, questions."""
        rows = self._db.execute(
            "SELECT name, location, mapping_json, constants_json, questions FROM sources ORDER BY imported_at, name"
        ).fetchall()
        return [
            {
                "name": r[0],
                "location": r[1],
                "mapping": json.loads(r[2]),
                "constants": json.loads(r[3]),
                "questions": r[4],
            }
            for r in rows
        ]

    def record_source(
        self, name: str, location: str, mapping: Mapping[str, str], constants: Mapping[str, str], count: int
    ) -> None:
        """Record (or update) an imported source, inside the caller's transaction."""
        self._db.execute(
            """INSERT INTO sources(name, location, mapping_json, constants_json, questions, imported_at)
               VALUES (?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET location=excluded.location,
               mapping_json=excluded.mapping_json, constants_json=excluded.constants_json,
               questions=excluded.questions, imported_at=excluded.imported_at""",
            (name, location, _json(dict(mapping)), _json(dict(constants)), count, time.time()),
        )

    # ------------------------------------------------------------------------------- questions
    def question_ids_taken(self, qids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """The (source, source_id, content_hash) of each of ``qids`` the project has, by qid."""
        out: dict[str, tuple[str, str, str]] = {}
        for start in range(0, len(qids), 500):
            part = list(qids[start : start + 500])
            rows = self._db.execute(
                f"SELECT qid, source, source_id, content_hash FROM questions WHERE qid IN ({_placeholders(len(part))})",
                part,
            )
            out.update({r[0]: (r[1], r[2], r[3]) for r in rows})
        return out

    def source_questions(self, source: str, source_ids: Sequence[str]) -> dict[str, tuple[str, str, int]]:
        """source_id -> (qid, content_hash, seq) for those of ``source_ids`` already imported from ``source``."""
        out: dict[str, tuple[str, str, int]] = {}
        for start in range(0, len(source_ids), 500):
            part = list(source_ids[start : start + 500])
            rows = self._db.execute(
                f"SELECT source_id, qid, content_hash, seq FROM questions WHERE source=? "
                f"AND source_id IN ({_placeholders(len(part))})",
                [source, *part],
            )
            out.update({r[0]: (r[1], r[2], int(r[3])) for r in rows})
        return out

    def insert_image(self, sha256: str, name: str, data: bytes) -> None:
        """Keep an image's bytes once (inside the caller's transaction)."""
        self._db.execute("INSERT OR IGNORE INTO images(sha256, name, data) VALUES (?,?,?)", (sha256, name, data))

    def insert_question(self, question: StoredQuestion) -> None:
        """Add one question (inside the caller's transaction); ``seq`` is assigned by the store."""
        self._db.execute(
            f"INSERT INTO questions({_QUESTION_COLUMNS}) VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                question.qid,
                question.source,
                question.source_id,
                question.content_hash,
                question.image_kind,
                question.image_ref,
                question.image_name,
                question.question,
                question.reference_answer,
                question.answer_type,
                question.organ_system,
                question.department,
                question.modality,
                question.source_dataset,
                _json(question.metadata),
            ),
        )

    def count_questions(self, *, kept_only: bool = False, source: str | None = None) -> int:
        """How many questions the project has (or how many the active filter kept, or one source gave)."""
        if kept_only:
            row = self._db.execute(
                "SELECT COUNT(*) FROM questions q JOIN decisions d ON d.qid = q.qid WHERE d.kept = 1"
            ).fetchone()
        elif source is not None:
            row = self._db.execute("SELECT COUNT(*) FROM questions WHERE source=?", (source,)).fetchone()
        else:
            row = self._db.execute("SELECT COUNT(*) FROM questions").fetchone()
        return int(row[0])

    def last_question_seq(self) -> int:
        """The import position of the newest question (0 in an empty project)."""
        return int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM questions").fetchone()[0])

    def count_open_with_reference(self) -> int:
        """How many open questions have a reference answer (the ones a grader scores)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM questions WHERE reference_answer IS NOT NULL AND answer_type = 'open'"
        ).fetchone()
        return int(row[0])

    def group_counts(self) -> list[GroupCounts]:
        """Per (source, organ system), in that order: questions, with a reference, decided, kept, dropped."""
        rows = self._db.execute(
            """SELECT q.source, q.organ_system, COUNT(*),
                      SUM(q.reference_answer IS NOT NULL),
                      SUM(d.qid IS NOT NULL),
                      COALESCE(SUM(d.kept = 1), 0),
                      COALESCE(SUM(d.kept = 0), 0),
                      COALESCE(SUM(d.kept = 1 AND d.scored = 0), 0)
               FROM questions q LEFT JOIN decisions d ON d.qid = q.qid
               GROUP BY q.source, q.organ_system ORDER BY q.source, q.organ_system"""
        )
        return [
            GroupCounts(
                source=r[0],
                organ_system=r[1],
                questions=int(r[2]),
                with_reference=int(r[3] or 0),
                decided=int(r[4] or 0),
                kept=int(r[5]),
                dropped=int(r[6]),
                kept_unscored=int(r[7]),
            )
            for r in rows
        ]

    def iter_questions(
        self, *, kept_only: bool = False, with_reference: bool = False, chunk: int = CHUNK
    ) -> Iterator[list[StoredQuestion]]:
        """Questions in import order, one chunk at a time (each chunk is read whole, then yielded).

        Args:
            kept_only: only the questions the difficulty filter kept.
            with_reference: only questions with a reference answer.
            chunk: questions per chunk.

        Yields:
            Lists of at most ``chunk`` questions.
        """
        where = ["q.seq > ?"]
        join = ""
        if kept_only:
            join = " JOIN decisions d ON d.qid = q.qid"
            where.append("d.kept = 1")
        if with_reference:
            where.append("q.reference_answer IS NOT NULL")
        columns = ", ".join(f"q.{c.strip()}" for c in _QUESTION_COLUMNS.split(","))
        query = f"SELECT {columns} FROM questions q{join} WHERE {' AND '.join(where)} ORDER BY q.seq LIMIT ?"
        last = 0
        while True:
            rows = self._db.execute(query, (last, chunk)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [_question_from_row(r) for r in rows]

    def question(self, qid: str) -> StoredQuestion:
        """One question by project id.

        Raises:
            BuildError: no such question.
        """
        row = self._db.execute(f"SELECT {_QUESTION_COLUMNS} FROM questions WHERE qid=?", (qid,)).fetchone()
        if row is None:
            raise BuildError(f"{self.path}: no question {qid!r}")
        return _question_from_row(row)

    def questions_by_id(self, qids: Sequence[str]) -> dict[str, StoredQuestion]:
        """The questions with these project ids (absent ids are left out)."""
        out: dict[str, StoredQuestion] = {}
        for start in range(0, len(qids), 500):
            part = list(qids[start : start + 500])
            rows = self._db.execute(
                f"SELECT {_QUESTION_COLUMNS} FROM questions WHERE qid IN ({_placeholders(len(part))})", part
            )
            out.update({r[1]: _question_from_row(r) for r in rows})
        return out

    def images(self, questions: Iterable[StoredQuestion]) -> dict[str, ImageRef]:
        """The image of each question (by qid), read from the store in one query per call.

        Args:
            questions: a chunk of questions.

        Returns:
            qid -> image reference (bytes held in memory for ``bytes`` images).
        """
        wanted = list(questions)
        shas = sorted({q.image_ref for q in wanted if q.image_kind == "bytes" and q.image_ref})
        blobs: dict[str, tuple[str, bytes]] = {}
        for start in range(0, len(shas), 200):
            part = shas[start : start + 200]
            rows = self._db.execute(
                f"SELECT sha256, name, data FROM images WHERE sha256 IN ({_placeholders(len(part))})", part
            )
            blobs.update({r[0]: (r[1], bytes(r[2])) for r in rows})
        out: dict[str, ImageRef] = {}
        for q in wanted:
            if q.image_kind == "builtin" and q.image_ref:
                out[q.qid] = ImageRef.builtin(q.image_ref)
            elif q.image_kind == "bytes" and q.image_ref in blobs:
                name, data = blobs[q.image_ref]
                out[q.qid] = ImageRef.from_bytes(data, name)
            elif q.image_kind == "bytes":
                raise StoreError(f"{self.path}: the image of question {q.qid!r} is missing from the store")
            else:
                out[q.qid] = ImageRef.empty()
        return out

    # ------------------------------------------------------------------------------ generators
    def register_generator(self, fingerprint: str, spec: str, config: Mapping[str, Any], metadata: Any) -> None:
        """Record a generator configuration (its metadata is updated on every use)."""
        with self.transaction() as db:
            db.execute(
                """INSERT INTO generators(fingerprint, spec, config_json, metadata_json, registered_at)
                   VALUES (?,?,?,?,?) ON CONFLICT(fingerprint) DO UPDATE SET metadata_json=excluded.metadata_json""",
                (fingerprint, spec, _scrubbed_json(dict(config)), _scrubbed_json(metadata), time.time()),
            )

    def generator_specs(self) -> dict[str, str]:
        """The spec of every generator registered, by fingerprint."""
        return {r[0]: r[1] for r in self._db.execute("SELECT fingerprint, spec FROM generators")}

    def generator_config(self, fingerprint: str) -> dict[str, Any]:
        """The configuration a generator was registered with.

        Args:
            fingerprint: the generator's fingerprint.

        Returns:
            Its configuration, or an empty dict for an unknown generator.
        """
        row = self._db.execute("SELECT config_json FROM generators WHERE fingerprint=?", (fingerprint,)).fetchone()
        return {} if row is None else dict(json.loads(row[0]))

    def generations(self, generator_fp: str, hashes: Iterable[str]) -> dict[str, StoredGeneration]:
        """The stored answers of one generator for these question hashes."""
        wanted = sorted(set(hashes))
        out: dict[str, StoredGeneration] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self._db.execute(
                f"""SELECT question_hash, text, failure, finish_reason, latency_s, prompt_tokens, completion_tokens,
                       extra_json FROM generations
                    WHERE generator_fp=? AND question_hash IN ({_placeholders(len(part))})""",
                [generator_fp, *part],
            )
            for r in rows:
                out[r[0]] = StoredGeneration(
                    generator_fp, r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]) if r[7] else {}
                )
        return out

    def write_generations(self, rows: Iterable[StoredGeneration]) -> int:
        """Insert (or replace) answers and commit at once; texts are scrubbed. Returns how many."""
        now = time.time()
        values = [
            (
                g.generator_fp,
                g.question_hash,
                _text(g.text),
                _text(g.failure),
                g.finish_reason,
                g.latency_s,
                g.prompt_tokens,
                g.completion_tokens,
                _scrubbed_json(dict(g.extra or {})),
                now,
            )
            for g in rows
        ]
        with self.transaction() as db:
            db.executemany(
                """INSERT OR REPLACE INTO generations(generator_fp, question_hash, text, failure, finish_reason,
                       latency_s, prompt_tokens, completion_tokens, extra_json, created_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?)""",
                values,
            )
        return len(values)

    def delete_generations(self, generator_fp: str) -> int:
        """Forget every answer of one generator configuration (``--fresh``)."""
        with self.transaction() as db:
            cursor = db.execute("DELETE FROM generations WHERE generator_fp=?", (generator_fp,))
        return cursor.rowcount

    def generation_counts(self, generator_fp: str, *, kept_only: bool, with_reference: bool) -> tuple[int, int]:
        """(answers stored, failures among them) of a generator over the questions a step covers."""
        join = " JOIN decisions d ON d.qid = q.qid AND d.kept = 1" if kept_only else ""
        where = " WHERE q.reference_answer IS NOT NULL" if with_reference else ""
        row = self._db.execute(
            f"""SELECT COUNT(*), COALESCE(SUM(g.failure IS NOT NULL), 0) FROM generations g
                JOIN (SELECT DISTINCT q.content_hash AS h FROM questions q{join}{where}) covered
                  ON covered.h = g.question_hash
                WHERE g.generator_fp = ?""",
            (generator_fp,),
        ).fetchone()
        return int(row[0]), int(row[1])

    def distinct_hashes(self, *, kept_only: bool, with_reference: bool) -> int:
        """How many different question contents a step covers (each is answered once per generator)."""
        join = " JOIN decisions d ON d.qid = q.qid AND d.kept = 1" if kept_only else ""
        where = " WHERE q.reference_answer IS NOT NULL" if with_reference else ""
        row = self._db.execute(f"SELECT COUNT(DISTINCT q.content_hash) FROM questions q{join}{where}").fetchone()
        return int(row[0])

    def failure_reasons(self, generator_fp: str, limit: int = 3) -> list[tuple[str, int]]:
        """The most common failure reasons of a generator, with counts."""
        rows = self._db.execute(
            """SELECT failure, COUNT(*) AS n FROM generations WHERE generator_fp=? AND failure IS NOT NULL
               GROUP BY failure ORDER BY n DESC, failure LIMIT ?""",
            (generator_fp, limit),
        ).fetchall()
        return [(r[0], int(r[1])) for r in rows]

    # -------------------------------------------------------------------------------- gradings
    def gradings(self, grader_fp: str, keys: Iterable[str]) -> dict[str, StoredGrading]:
        """The stored gradings of one grader for these grading keys."""
        wanted = sorted(set(keys))
        out: dict[str, StoredGrading] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows = self._db.execute(
                f"""SELECT grading_key, correct, raw_output, failure, latency_s, prompt_tokens, completion_tokens,
                       extra_json FROM gradings WHERE grader_fp=? AND grading_key IN ({_placeholders(len(part))})""",
                [grader_fp, *part],
            )
            for r in rows:
                correct = None if r[1] is None else bool(r[1])
                out[r[0]] = StoredGrading(grader_fp, r[0], correct, r[2], r[3], r[4], r[5], r[6], json.loads(r[7]))
        return out

    def write_gradings(self, rows: Iterable[StoredGrading]) -> int:
        """Insert (or replace) gradings and commit at once; texts are scrubbed. Returns how many."""
        now = time.time()
        values = [
            (
                g.grader_fp,
                g.grading_key,
                None if g.correct is None else int(g.correct),
                _text(g.raw_output),
                _text(g.failure),
                g.latency_s,
                g.prompt_tokens,
                g.completion_tokens,
                _scrubbed_json(dict(g.extra or {})),
                now,
            )
            for g in rows
        ]
        with self.transaction() as db:
            db.executemany(
                """INSERT OR REPLACE INTO gradings(grader_fp, grading_key, correct, raw_output, failure, latency_s,
                       prompt_tokens, completion_tokens, extra_json, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)""",
                values,
            )
        return len(values)

    def delete_gradings(self, grader_fp: str) -> int:
        """Delete every grading made by one grader and commit.

        Args:
            grader_fp: the grader's fingerprint.

        Returns:
            How many gradings were deleted.
        """
        with self.transaction() as db:
            cursor = db.execute("DELETE FROM gradings WHERE grader_fp=?", (grader_fp,))
        return cursor.rowcount

    def grading_failure_reasons(self, grader_fp: str, limit: int = 3) -> list[tuple[str, int]]:
        """The most common failure reasons of a grader, with counts."""
        rows = self._db.execute(
            """SELECT failure, COUNT(*) AS n FROM gradings WHERE grader_fp=? AND failure IS NOT NULL
               GROUP BY failure ORDER BY n DESC, failure LIMIT ?""",
            (grader_fp, limit),
        ).fetchall()
        return [(str(r[0]), int(r[1])) for r in rows]

    # ------------------------------------------------------------------------------- decisions
    def record_filter_run(self, filter_fp: str, config: Mapping[str, Any]) -> None:
        """Record a filter configuration and make it the active one."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO filter_runs(filter_fp, config_json, created_at) VALUES (?,?,?)",
                (filter_fp, _json(dict(config)), time.time()),
            )
            self.set_meta("active_filter", filter_fp, commit=False)

    def active_filter(self) -> tuple[str, dict[str, Any]] | None:
        """(fingerprint, configuration) of the filter whose decisions are in force, or None."""
        fp = self.get_meta("active_filter")
        if fp is None:
            return None
        row = self._db.execute("SELECT config_json FROM filter_runs WHERE filter_fp=?", (fp,)).fetchone()
        return (fp, json.loads(row[0])) if row is not None else None

    def write_decisions(self, rows: Iterable[tuple[str, str, bool, bool, int, int, str, Any]]) -> None:
        """Replace the decisions of some questions and commit.

        Each row is (qid, filter_fp, kept, scored, correct, failed, reason, evidence).
        """
        now = time.time()
        with self.transaction() as db:
            db.executemany(
                """INSERT OR REPLACE INTO decisions(qid, filter_fp, kept, scored, correct, failed, reason,
                       evidence_json, decided_at) VALUES (?,?,?,?,?,?,?,?,?)""",
                [
                    (qid, fp, int(kept), int(scored), correct, failed, reason, _scrubbed_json(evidence), now)
                    for qid, fp, kept, scored, correct, failed, reason, evidence in rows
                ],
            )

    def decision(self, qid: str) -> dict[str, Any] | None:
        """The decision about one question: kept, scored, correct, failed, reason, evidence."""
        row = self._db.execute(
            "SELECT kept, scored, correct, failed, reason, evidence_json, filter_fp FROM decisions WHERE qid=?", (qid,)
        ).fetchone()
        if row is None:
            return None
        return {
            "kept": bool(row[0]),
            "scored": bool(row[1]),
            "correct": row[2],
            "failed": row[3],
            "reason": row[4],
            "evidence": json.loads(row[5]),
            "filter": row[6],
        }

    def has_decisions(self) -> bool:
        """Whether the difficulty filter has decided on any question yet."""
        return self._db.execute("SELECT 1 FROM decisions LIMIT 1").fetchone() is not None

    def count_decisions(self) -> int:
        """How many questions the difficulty filter has decided on."""
        return int(self._db.execute("SELECT COUNT(*) FROM decisions").fetchone()[0])

    def iter_decisions(self, *, chunk: int = CHUNK) -> Iterator[list[StoredDecision]]:
        """Every decision in question-id order, one chunk at a time."""
        last = ""
        while True:
            rows = self._db.execute(
                """SELECT d.qid, q.source, q.organ_system, d.kept, d.correct, d.failed, d.reason, d.evidence_json
                   FROM decisions d JOIN questions q ON q.qid = d.qid WHERE d.qid > ? ORDER BY d.qid LIMIT ?""",
                (last, chunk),
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield [
                StoredDecision(r[0], r[1], r[2], bool(r[3]), int(r[4]), int(r[5]), r[6], json.loads(r[7])) for r in rows
            ]

    # ------------------------------------------------------------------------------------ pool
    def add_to_pool(self, generator_fp: str, spec: str) -> None:
        """Make a generator part of the response pool (idempotent; the first position stays)."""
        with self.transaction() as db:
            position = db.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM pool").fetchone()[0]
            db.execute(
                "INSERT OR IGNORE INTO pool(generator_fp, spec, position) VALUES (?,?,?)",
                (generator_fp, spec, position),
            )

    def pool(self) -> list[tuple[str, str]]:
        """(fingerprint, spec) of the pool's generators, in the order they joined."""
        return [(r[0], r[1]) for r in self._db.execute("SELECT generator_fp, spec FROM pool ORDER BY position")]

    # ----------------------------------------------------------------------------------- pairs
    def clear_pairs(self) -> None:
        """Forget the sampled pairs (inside the caller's transaction)."""
        self._db.execute("DELETE FROM pairs")

    def insert_pairs(self, pairs: Iterable[StoredPair]) -> None:
        """Add sampled pairs (inside the caller's transaction)."""
        self._db.executemany(
            """INSERT INTO pairs(pair_id, seq, qid, generator_1, generator_2, text_1, text_2, metadata_json)
               VALUES (?,?,?,?,?,?,?,?)""",
            [
                (p.pair_id, p.seq, p.qid, p.generator_1, p.generator_2, p.text_1, p.text_2, _json(p.metadata))
                for p in pairs
            ],
        )

    def count_pairs(self) -> int:
        """How many pairs are sampled."""
        return int(self._db.execute("SELECT COUNT(*) FROM pairs").fetchone()[0])

    def iter_pairs(self, *, organ: str | None = None, chunk: int = CHUNK) -> Iterator[list[StoredPair]]:
        """Pairs in sampling order, one chunk at a time (optionally of one organ system only)."""
        last = -1
        extra = " AND qid IN (SELECT qid FROM questions WHERE organ_system = ?)" if organ is not None else ""
        while True:
            params: tuple[Any, ...] = (last, organ, chunk) if organ is not None else (last, chunk)
            rows = self._db.execute(
                f"""SELECT pair_id, seq, qid, generator_1, generator_2, text_1, text_2, metadata_json FROM pairs
                    WHERE seq > ?{extra} ORDER BY seq LIMIT ?""",
                params,
            ).fetchall()
            if not rows:
                return
            last = rows[-1][1]
            yield [StoredPair(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7])) for r in rows]

    def pair_texts(self, pair_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """pair_id -> (response_1, response_2) for those of ``pair_ids`` that exist."""
        out: dict[str, tuple[str, str]] = {}
        for start in range(0, len(pair_ids), 500):
            part = list(pair_ids[start : start + 500])
            rows = self._db.execute(
                f"SELECT pair_id, text_1, text_2 FROM pairs WHERE pair_id IN ({_placeholders(len(part))})", part
            )
            out.update({r[0]: (r[1], r[2]) for r in rows})
        return out

    def pair_organs(self) -> list[str]:
        """The organ systems of the pairs' questions, sorted."""
        rows = self._db.execute(
            "SELECT DISTINCT q.organ_system FROM pairs p JOIN questions q ON q.qid = p.qid ORDER BY q.organ_system"
        )
        return [r[0] for r in rows]

    def pair_generator_counts(self) -> dict[str, int]:
        """How many pair responses each pool generator gave: spec -> count, in spec order."""
        rows = self._db.execute(
            """SELECT spec, COUNT(*)
               FROM (SELECT generator_1 AS fp FROM pairs UNION ALL SELECT generator_2 FROM pairs) p
               JOIN pool ON pool.generator_fp = p.fp GROUP BY spec ORDER BY spec"""
        )
        return {str(r[0]): int(r[1]) for r in rows}

    # ---------------------------------------------------------------------------------- labels
    def upsert_labels(self, rows: Iterable[tuple[str, Annotation, str]]) -> int:
        """Add or replace per-annotator labels (inside the caller's transaction).

        Each row is (pair_id, the annotation in source order, source file). A doctor's comment and
        reason are stored as they were written (never scrubbed or cut).
        """
        now = time.time()
        values = [
            (
                pair_id,
                a.annotator,
                _json({dim: int(v) for dim, v in a.labels.items()}),
                a.order_shown,
                a.seconds,
                source,
                now,
                _details_json(a),
            )
            for pair_id, a, source in rows
        ]
        self._db.executemany(
            """INSERT OR REPLACE INTO labels(pair_id, annotator, labels_json, order_shown, seconds, source, imported_at,
                                             details_json)
               VALUES (?,?,?,?,?,?,?,?)""",
            values,
        )
        return len(values)

    def replace_adjudications(self, pair_id: str, adjudications: Sequence[Adjudication], source: str) -> int:
        """Make these the pair's adjudications (inside the caller's transaction); none removes the pair's.

        Args:
            pair_id: the pair.
            adjudications: its adjudications, as a canonical row states them.
            source: the file they came from.

        Returns:
            How many were stored.
        """
        now = time.time()
        self._db.execute("DELETE FROM adjudications WHERE pair_id=?", (pair_id,))
        self._db.executemany(
            """INSERT INTO adjudications(pair_id, dimension, label, actor, note, at, source, imported_at)
               VALUES (?,?,?,?,?,?,?,?)""",
            [(pair_id, a.dimension, int(a.label), a.by, a.note, a.at, source, now) for a in adjudications],
        )
        return len(adjudications)

    def start_label_file(self) -> None:
        """Forget which (pair, annotator) keys the current labels file gave (a temporary table, not memory)."""
        self._db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS label_file_keys (pair_id TEXT, annotator TEXT, row INTEGER, "
            "PRIMARY KEY (pair_id, annotator))"
        )
        self._db.execute("DELETE FROM label_file_keys")

    def label_file_rows(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The rows at which the current labels file already gave these (pair, annotator) keys."""
        out: dict[tuple[str, str], int] = {}
        for pair_id, annotator in keys:
            row = self._db.execute(
                "SELECT row FROM label_file_keys WHERE pair_id=? AND annotator=?", (pair_id, annotator)
            ).fetchone()
            if row is not None:
                out[(pair_id, annotator)] = int(row[0])
        return out

    def remember_label_file_rows(self, rows: Iterable[tuple[str, str, int]]) -> None:
        """Note (pair, annotator, row) keys of the current labels file."""
        self._db.executemany("INSERT OR IGNORE INTO label_file_keys(pair_id, annotator, row) VALUES (?,?,?)", rows)

    def label_file_pairs(self) -> int:
        """How many different pairs the current labels file labelled."""
        return int(self._db.execute("SELECT COUNT(DISTINCT pair_id) FROM label_file_keys").fetchone()[0])

    def labels_for(self, pair_ids: Sequence[str]) -> dict[str, list[Annotation]]:
        """pair_id -> its annotations (labels in source order, with comments and reasons), annotators in name order."""
        out: dict[str, list[Annotation]] = {}
        for start in range(0, len(pair_ids), 500):
            part = list(pair_ids[start : start + 500])
            rows = self._db.execute(
                f"""SELECT pair_id, annotator, labels_json, order_shown, seconds, details_json FROM labels
                    WHERE pair_id IN ({_placeholders(len(part))}) ORDER BY pair_id, annotator""",
                part,
            )
            for r in rows:
                details = json.loads(r[5]) if r[5] else {}
                labels = {dim: cast(Winner, int(v)) for dim, v in json.loads(r[2]).items()}
                out.setdefault(r[0], []).append(
                    Annotation(
                        annotator=r[1],
                        labels={dim: labels[dim] for dim in DIMENSIONS if dim in labels},
                        order_shown=r[3],
                        seconds=r[4],
                        comment=details.get("comment"),
                        cannot_judge=bool(details.get("cannot_judge", False)),
                        cannot_judge_reason=details.get("cannot_judge_reason"),
                    )
                )
        return out

    def adjudications_for(self, pair_ids: Sequence[str]) -> dict[str, list[Adjudication]]:
        """pair_id -> its adjudications, in dimension order."""
        out: dict[str, list[Adjudication]] = {}
        rank = {dim: i for i, dim in enumerate(DIMENSIONS)}
        for start in range(0, len(pair_ids), 500):
            part = list(pair_ids[start : start + 500])
            rows = self._db.execute(
                f"""SELECT pair_id, dimension, label, actor, note, at FROM adjudications
                    WHERE pair_id IN ({_placeholders(len(part))})""",
                part,
            )
            for r in rows:
                out.setdefault(r[0], []).append(
                    Adjudication(dimension=r[1], label=cast(Winner, int(r[2])), by=r[3], note=r[4], at=r[5])
                )
        for found in out.values():
            found.sort(key=lambda a: rank.get(a.dimension, len(rank)))
        return out

    def count_adjudications(self) -> int:
        """How many adjudications are stored (across all pairs)."""
        return int(self._db.execute("SELECT COUNT(*) FROM adjudications").fetchone()[0])

    def count_labels(self) -> int:
        """How many per-annotator labels are stored (across all pairs)."""
        return int(self._db.execute("SELECT COUNT(*) FROM labels").fetchone()[0])

    def orphan_labels(self) -> int:
        """Labels whose pair is no longer among the sampled pairs."""
        row = self._db.execute("SELECT COUNT(*) FROM labels WHERE pair_id NOT IN (SELECT pair_id FROM pairs)")
        return int(row.fetchone()[0])

    def annotators(self) -> list[str]:
        """The names of everyone who labelled a pair, sorted."""
        return [str(r[0]) for r in self._db.execute("SELECT DISTINCT annotator FROM labels ORDER BY annotator")]


def _question_from_row(r: Sequence[Any]) -> StoredQuestion:
    return StoredQuestion(
        seq=r[0],
        qid=r[1],
        source=r[2],
        source_id=r[3],
        content_hash=r[4],
        image_kind=r[5],
        image_ref=r[6],
        image_name=r[7],
        question=r[8],
        reference_answer=r[9],
        answer_type=r[10],
        organ_system=r[11],
        department=r[12],
        modality=r[13],
        source_dataset=r[14],
        metadata=json.loads(r[15]),
    )

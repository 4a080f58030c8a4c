"""The build project's store: one SQLite file holding questions, images, answers, decisions, pairs and labels.

Opened like the results store (:mod:`medrewardbench.utils.sqlitedb`: WAL, busy timeout, a base layout
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

Every text a model or a server produced passes through :func:`medrewardbench.utils.secrets.scrub`
before it is written; what a doctor or an adjudicator wrote is stored as it is. Readers ask for
questions in chunks (keyset pagination on ``seq``), so no command holds every question in memory.

The store is one class assembled by concern: :mod:`~medrewardbench.curation.store_schema` says what the
file holds (tables, migrations, typed rows), :mod:`~medrewardbench.curation.store_answers` owns the
answers and gradings, :mod:`~medrewardbench.curation.store_labels` the pairs, labels and adjudications;
this module opens the file and owns the sources, questions, decisions and the pool. Every query
lives in one of them: callers use named methods, never SQL.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.curation.store_answers import AnswerTables
from medrewardbench.curation.store_labels import PairTables
from medrewardbench.curation.store_schema import (
    CHUNK,
    MIGRATIONS,
    QUESTION_COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    GroupCounts,
    StoredDecision,
    StoredGeneration,
    StoredGrading,
    StoredPair,
    StoredQuestion,
    json_text,
    placeholders,
    scrubbed_json,
)
from medrewardbench.errors import MedRewardBenchError, StoreError
from medrewardbench.utils.sqlitedb import BUSY_TIMEOUT_S, applied_migrations, open_database

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


class BuildError(MedRewardBenchError):
    """A build command cannot do what it was asked (the message says why and what to do)."""


class BuildStore(AnswerTables, PairTables):
    """The build project's SQLite store. Use as a context manager or call :meth:`close`.

    Args:
        path: the store file (``PROJECT/build.sqlite``).

    Raises:
        StoreError: the file cannot be opened or is not a build store of this version.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = open_database(self.path, SCHEMA, SCHEMA_VERSION, MIGRATIONS, what="build project store")

    def reader(self) -> BuildStore:
        """A second, read-only handle on the same file, for reading in another thread while this one writes.

        Open it in the thread that reads (a connection belongs to the thread that made it) and close
        it there. It reads what this handle has committed (the file is in WAL mode, so reading
        never waits for a write), and it cannot write.

        Returns:
            The handle (a context manager, like this one).

        Raises:
            StoreError: the file cannot be opened.
        """
        other = object.__new__(BuildStore)
        other.path = self.path
        try:
            other._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the build project store for reading: {exc}") from exc
        return other

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
            self._db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"build:{key}", json_text(value))
            )

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
            (name, location, json_text(dict(mapping)), json_text(dict(constants)), count, time.time()),
        )

    # ------------------------------------------------------------------------------- questions
    def question_ids_taken(self, qids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """The (source, source_id, content_hash) of each of ``qids`` the project has, by qid."""
        out: dict[str, tuple[str, str, str]] = {}
        for start in range(0, len(qids), 500):
            part = list(qids[start : start + 500])
            rows = self._db.execute(
                f"SELECT qid, source, source_id, content_hash FROM questions WHERE qid IN ({placeholders(len(part))})",
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
                f"AND source_id IN ({placeholders(len(part))})",
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
            f"INSERT INTO questions({QUESTION_COLUMNS}) VALUES (NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                json_text(question.metadata),
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
        columns = ", ".join(f"q.{c.strip()}" for c in QUESTION_COLUMNS.split(","))
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
        row = self._db.execute(f"SELECT {QUESTION_COLUMNS} FROM questions WHERE qid=?", (qid,)).fetchone()
        if row is None:
            raise BuildError(f"{self.path}: no question {qid!r}")
        return _question_from_row(row)

    def questions_by_id(self, qids: Sequence[str]) -> dict[str, StoredQuestion]:
        """The questions with these project ids (absent ids are left out)."""
        out: dict[str, StoredQuestion] = {}
        for start in range(0, len(qids), 500):
            part = list(qids[start : start + 500])
            rows = self._db.execute(
                f"SELECT {QUESTION_COLUMNS} FROM questions WHERE qid IN ({placeholders(len(part))})", part
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
                f"SELECT sha256, name, data FROM images WHERE sha256 IN ({placeholders(len(part))})", part
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

    # ------------------------------------------------------------------------------- decisions
    def record_filter_run(self, filter_fp: str, config: Mapping[str, Any]) -> None:
        """Record a filter configuration and make it the active one."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO filter_runs(filter_fp, config_json, created_at) VALUES (?,?,?)",
                (filter_fp, json_text(dict(config)), time.time()),
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
                    (qid, fp, int(kept), int(scored), correct, failed, reason, scrubbed_json(evidence), now)
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

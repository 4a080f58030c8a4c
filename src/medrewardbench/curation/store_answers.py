"""The build store's answers: generator configurations, their answers, and the grader's verdicts on them.

A part of :class:`medrewardbench.curation.store.BuildStore` (which adds it to the questions, the
filter's decisions and the pool); every text a model or a server produced is scrubbed before it is
written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from medrewardbench.curation.store_schema import (
    StoredGeneration,
    StoredGrading,
    StoreTables,
    placeholders,
    scrubbed_json,
    scrubbed_text,
)

__all__ = ["AnswerTables"]


class AnswerTables(StoreTables):
    """The ``generators``, ``generations`` and ``gradings`` tables."""

    # ------------------------------------------------------------------------------ generators
    def register_generator(self, fingerprint: str, spec: str, config: Mapping[str, Any], metadata: Any) -> None:
        """Record a generator configuration (its metadata is updated on every use)."""
        with self.transaction() as db:
            db.execute(
                """INSERT INTO generators(fingerprint, spec, config_json, metadata_json, registered_at)
                   VALUES (?,?,?,?,?) ON CONFLICT(fingerprint) DO UPDATE SET metadata_json=excluded.metadata_json""",
                (
                    fingerprint,
                    spec,
                    scrubbed_json(dict(config)),
                    scrubbed_json(metadata),
                    time.time(),
                ),
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
                    WHERE generator_fp=? AND question_hash IN ({placeholders(len(part))})""",
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
                scrubbed_text(g.text),
                scrubbed_text(g.failure),
                g.finish_reason,
                g.latency_s,
                g.prompt_tokens,
                g.completion_tokens,
                scrubbed_json(dict(g.extra or {})),
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
                       extra_json FROM gradings WHERE grader_fp=? AND grading_key IN ({placeholders(len(part))})""",
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
                scrubbed_text(g.raw_output),
                scrubbed_text(g.failure),
                g.latency_s,
                g.prompt_tokens,
                g.completion_tokens,
                scrubbed_json(dict(g.extra or {})),
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

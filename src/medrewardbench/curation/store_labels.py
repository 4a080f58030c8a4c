"""The build store's pairs and what doctors said about them: labels, comments, adjudications.

A part of :class:`medrewardbench.curation.store.BuildStore`. What a doctor or an adjudicator wrote is
stored as it is (never scrubbed or cut).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from medrewardbench.cases import Adjudication, Annotation
from medrewardbench.curation.store_schema import CHUNK, StoredPair, StoreTables, json_text, placeholders
from medrewardbench.dimensions import DIMENSIONS, Winner

__all__ = ["PairTables"]


def _details_json(annotation: Annotation) -> str | None:
    details: dict[str, Any] = {}
    if annotation.comment:
        details["comment"] = annotation.comment
    if annotation.cannot_judge:
        details["cannot_judge"] = True
        if annotation.cannot_judge_reason:
            details["cannot_judge_reason"] = annotation.cannot_judge_reason
    if annotation.harm:
        details["harm"] = {str(response): severity for response, severity in sorted(annotation.harm.items())}
    return json_text(details) if details else None


class PairTables(StoreTables):
    """The ``pairs``, ``labels`` and ``adjudications`` tables (and the labels file being read)."""

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
                (
                    p.pair_id,
                    p.seq,
                    p.qid,
                    p.generator_1,
                    p.generator_2,
                    p.text_1,
                    p.text_2,
                    json_text(p.metadata),
                )
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
                f"SELECT pair_id, text_1, text_2 FROM pairs WHERE pair_id IN ({placeholders(len(part))})", part
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
                json_text({dim: int(v) for dim, v in a.labels.items()}),
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
                    WHERE pair_id IN ({placeholders(len(part))}) ORDER BY pair_id, annotator""",
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
                        harm={int(response): str(v) for response, v in (details.get("harm") or {}).items()},
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
                    WHERE pair_id IN ({placeholders(len(part))})""",
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

"""The results store: one SQLite file (WAL mode) holding runs, the cases they cover and judgments.

Judgments are keyed by (judge fingerprint, case id, order) and carry the hash of the case content
they were made on, so a judgment is reused by any later run of the same judge configuration on the
same case (resume, larger ``--limit``) and is never reused when the case text or image changed.
Every batch is committed as soon as it is written: a crash or kill loses only what was in flight.

Why one module of this size: the results store owns all of its SQL (schema, migrations, queries);
keeping it in one module is what makes that rule checkable.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import Annotation, Case
from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS, Order, Winner
from medrewardbench.errors import StoreError
from medrewardbench.utils.secrets import register_secret_env, scrub, scrub_value
from medrewardbench.utils.sqlitedb import (
    BUSY_TIMEOUT_S,
    MIGRATION_PREFIX,
    applied_migrations,
    open_database,
    transaction,
)

__all__ = [
    "BUSY_TIMEOUT_S",
    "MIGRATIONS",
    "MIGRATION_PREFIX",
    "SCHEMA_VERSION",
    "STORE_FILENAME",
    "BatchSubmission",
    "RunRecord",
    "Store",
    "StoredCase",
    "StoredJudgment",
    "as_jsonable",
    "find_stores",
    "judgment_fingerprint",
    "make_run_id",
    "summed_usage",
]

log = logging.getLogger(__name__)

_SORTED_JSON = json.JSONEncoder(sort_keys=True).encode
"""``json.dumps(value, sort_keys=True)``, without making an encoder per call (four a judgment)."""
_SORTED_JSON_STR = json.JSONEncoder(sort_keys=True, default=str).encode
"""``json.dumps(value, sort_keys=True, default=str)``, likewise."""


SCHEMA_VERSION = 1
"""The base layout (``_SCHEMA``). Later changes are named migrations (:data:`MIGRATIONS`)."""

MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "batch_api_batches",
        (
            # one row per request file submitted to a provider's Batch API (``sweep --batch-api``):
            # written before the batch is created, so that a killed process finds it and never
            # submits the same requests twice
            """CREATE TABLE batch_api_batches (
                submission_id TEXT PRIMARY KEY,
                judge_fingerprint TEXT NOT NULL,
                run_id TEXT NOT NULL,
                base_url TEXT,
                request_file TEXT NOT NULL,
                request_keys_json TEXT NOT NULL,
                input_file_id TEXT,
                batch_id TEXT UNIQUE,
                status TEXT NOT NULL,
                output_file_id TEXT,
                error_file_id TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )""",
            "CREATE INDEX batch_api_batches_by_judge ON batch_api_batches (judge_fingerprint, status)",
        ),
    ),
    (
        "cases_annotations",
        (
            # each case's per-annotator labels (canonical ``annotations`` objects, JSON; NULL when the
            # data has none), so that reports computed from stored runs show the human ceiling
            "ALTER TABLE cases ADD COLUMN annotations_json TEXT",
        ),
    ),
    (
        # where each data set's labels come from (medrewardbench.data.provenance), per data fingerprint
        "label_provenance",
        (
            """CREATE TABLE label_provenance (
                data_hash TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                raters INTEGER,
                description TEXT NOT NULL,
                declared_by TEXT NOT NULL
            )""",
        ),
    ),
    (
        # per dimension, the judge's probability that response_1 is better (source order; JSON,
        # NULL when the back end gave none): the confidences of selective judging
        "judgment_preferences",
        ("ALTER TABLE judgments ADD COLUMN preferences_json TEXT",),
    ),
)
"""Named schema changes, applied in order to every store after the base layout.

Each is ``(name, statements)`` and is recorded in ``meta`` as ``migration:<name>`` once applied, in
the same transaction as its statements. Names, not numbers, so that changes made side by side do
not collide; append new ones at the end and never edit one that has shipped. A store that records
a migration this version does not know was written by a newer medrewardbench and is refused.
"""
STORE_FILENAME = "medrewardbench.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    judge_spec TEXT NOT NULL,
    judge_fingerprint TEXT NOT NULL,
    data_hash TEXT NOT NULL,
    dataset_name TEXT NOT NULL,
    dataset_source TEXT NOT NULL,
    orders TEXT NOT NULL,
    config_json TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    n_cases INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    data_hash TEXT NOT NULL,
    position INTEGER NOT NULL,
    case_id TEXT NOT NULL,
    case_hash TEXT NOT NULL,
    labels_json TEXT NOT NULL,
    groups_json TEXT NOT NULL,
    len_1 INTEGER NOT NULL,
    len_2 INTEGER NOT NULL,
    PRIMARY KEY (data_hash, case_id)
);
CREATE TABLE IF NOT EXISTS judgments (
    judge_fingerprint TEXT NOT NULL,
    case_id TEXT NOT NULL,
    order_ TEXT NOT NULL,
    case_hash TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    verdicts_json TEXT NOT NULL,
    raw_output TEXT,
    failure TEXT,
    dimension_failures_json TEXT NOT NULL,
    latency_s REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    scores_json TEXT,
    extra_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (judge_fingerprint, case_id, order_)
);
"""


@dataclass(frozen=True)
class RunRecord:
    """One row of the ``runs`` table."""

    run_id: str
    judge_spec: str
    judge_fingerprint: str
    data_hash: str
    dataset_name: str
    dataset_source: str
    orders: tuple[Order, ...]
    config: dict[str, Any]
    metadata: dict[str, Any]
    n_cases: int
    created_at: float | None = field(default=None, compare=False)
    """when the run was first registered (seconds since the epoch; None for a record not read from a store)"""
    updated_at: float | None = field(default=None, compare=False)
    """when an eval last registered it (its judgments may be older: they are reused)"""


@dataclass(frozen=True)
class BatchSubmission:
    """One request file sent to a provider's Batch API, as the ``batch_api_batches`` table keeps it.

    Attributes:
        submission_id: the local id, made before anything is uploaded.
        judge_fingerprint: the judge configuration whose requests the file holds.
        run_id: the run they belong to.
        base_url: the endpoint (no credentials).
        request_file: the request JSONL written beside the results.
        request_keys: ``(case_id, order, case_hash)`` of every request in the file, in file order.
        input_file_id: the provider's id of the uploaded file (None until uploaded).
        batch_id: the provider's batch id (None until the batch is created).
        status: ``uploading`` (recorded before the upload), ``uploaded`` (file uploaded, batch not
            known to be created), a provider status
            (``validating``, ``in_progress``, ``finalizing``, ``completed``, ``failed``, ``expired``,
            ``cancelling``, ``cancelled``), ``ingested`` (its answers are stored), or ``abandoned``
            (given up before its batch was created).
        output_file_id, error_file_id: the provider's result files, once known.
    """

    submission_id: str
    judge_fingerprint: str
    run_id: str
    base_url: str | None
    request_file: str
    request_keys: tuple[tuple[str, str, str], ...]
    input_file_id: str | None
    batch_id: str | None
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None


@dataclass(frozen=True)
class StoredCase:
    """What the store keeps of a case: enough for metrics without reloading the data."""

    case_id: str
    case_hash: str
    labels: dict[str, Winner]
    groups: dict[str, str]
    len_1: int
    len_2: int
    annotations: tuple[Annotation, ...] = ()
    """the per-annotator labels the case was registered with (empty when the data has none)"""


@dataclass(frozen=True)
class StoredJudgment:
    """One judgment as stored, verdicts in source order."""

    case_id: str
    order: Order
    case_hash: str
    fingerprint: str
    verdicts: dict[str, Winner]
    raw_output: str | None
    failure: str | None
    dimension_failures: dict[str, str]
    latency_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    scores: Any
    extra: dict[str, Any]
    preferences: dict[str, float] = field(default_factory=dict)
    """dimension -> probability that ``response_1`` is better (source order); empty when none was given"""


EARLIER_USAGE_KEY = "earlier_usage"
"""A judgment's ``extra`` entry: token usage of the requests it replaced (each was billed)."""


_StoredUsage = tuple[int | None, int | None, str | None]


def _stored_usage(
    db: sqlite3.Connection, judge_fingerprint: str, judgments: Sequence[StoredJudgment]
) -> dict[tuple[str, str], _StoredUsage]:
    """(case id, order) -> usage and extras of the stored judgments that ``judgments`` replace (one query a part)."""
    found: dict[tuple[str, str], _StoredUsage] = {}
    for part in _parts(list(dict.fromkeys(j.case_id for j in judgments))):
        marks = ",".join("?" * len(part))
        for case_id, order, prompt, completion, extra in db.execute(
            "SELECT case_id, order_, prompt_tokens, completion_tokens, extra_json FROM judgments "
            f"WHERE judge_fingerprint=? AND case_id IN ({marks})",
            (judge_fingerprint, *part),
        ):
            found[(case_id, order)] = (prompt, completion, extra)
    return found


def _with_earlier_usage(row: _StoredUsage | None, judgment: StoredJudgment) -> dict[str, Any]:
    """``judgment.extra`` plus the usage of the stored judgment it replaces (``row``), if that used tokens."""
    if row is None:
        return judgment.extra
    try:
        old_extra = json.loads(row[2] or "{}")
    except ValueError:
        old_extra = {}
    earlier = dict(old_extra.get(EARLIER_USAGE_KEY) or {}) if isinstance(old_extra, dict) else {}
    if row[0] is None and row[1] is None and not earlier:
        return judgment.extra
    batch = isinstance(old_extra, dict) and bool(old_extra.get("batch_id"))
    prefix = "batch_" if batch else ""
    earlier["requests"] = int(earlier.get("requests", 0)) + 1
    for name, value in (("prompt_tokens", row[0]), ("completion_tokens", row[1])):
        earlier[prefix + name] = int(earlier.get(prefix + name, 0)) + int(value or 0)
    return {**judgment.extra, EARLIER_USAGE_KEY: earlier}


def make_run_id(judge_spec: str, judge_fingerprint: str, data_hash: str) -> str:
    """A readable, stable run id: a slug of the spec plus a short hash of judge and data."""
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in judge_spec).strip("-")
    slug = "-".join(part for part in slug.split("-") if part)[:60]
    digest = hashlib.sha256(f"{judge_fingerprint}:{data_hash}".encode()).hexdigest()[:10]
    return f"{slug}-{digest}"


def judgment_fingerprint(judge_fingerprint: str, case_hash: str, order: Order) -> str:
    """The identity of one stored judgment.

    Args:
        judge_fingerprint: the judge's fingerprint.
        case_hash: the case's hash.
        order: the order the case was shown in.

    Returns:
        24 hex digits of a SHA-256 over the three.
    """
    return hashlib.sha256(f"{judge_fingerprint}:{case_hash}:{order.value}".encode()).hexdigest()[:24]


class Store:
    """A results store in one SQLite file. Use as a context manager or call :meth:`close`.

    Args:
        path: the SQLite file (created with its schema when missing).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        # MIGRATIONS is read here, not bound at import, so that a test can extend it
        self._db = open_database(self.path, _SCHEMA, SCHEMA_VERSION, MIGRATIONS, what="results store")

    def applied_migrations(self) -> list[str]:
        """The names of the migrations this store has, in the order they were applied."""
        return applied_migrations(self._db)

    @classmethod
    def in_dir(cls, out_dir: str | Path) -> Store:
        """The store of an output directory (``medrewardbench.sqlite`` in it)."""
        return cls(Path(out_dir) / STORE_FILENAME)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with transaction(self._db) as db:
            yield db

    # ---- runs and cases -------------------------------------------------------------------
    def register_run(self, run: RunRecord, cases: Iterable[Case], data_hash: str) -> None:
        """Record a run and the cases it covers (idempotent: re-registering updates config).

        The cases are written as they come, in one transaction: any iterable works, and a long
        stream of cases (a benchmark read from its source chunk by chunk) is never held whole.
        Pass no cases when the store already has them (:meth:`count_cases`).

        Args:
            run: the run.
            cases: the cases, in order (their positions are their indices).
            data_hash: the data fingerprint they were hashed into.
        """
        now = time.time()
        case_rows = _case_rows(data_hash, cases, 0)
        with self._transaction() as db:
            db.execute(
                """INSERT INTO runs(run_id, judge_spec, judge_fingerprint, data_hash, dataset_name,
                       dataset_source, orders, config_json, metadata_json, n_cases, created_at, updated_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(run_id) DO UPDATE SET orders=excluded.orders,
                       metadata_json=excluded.metadata_json, updated_at=excluded.updated_at""",
                (
                    run.run_id,
                    run.judge_spec,
                    run.judge_fingerprint,
                    run.data_hash,
                    run.dataset_name,
                    run.dataset_source,
                    ",".join(o.value for o in run.orders),
                    _scrubbed_json(json.dumps(run.config, sort_keys=True, default=str)),
                    _scrubbed_json(json.dumps(run.metadata, sort_keys=True, default=str)),
                    run.n_cases,
                    now,
                    now,
                ),
            )
            db.executemany(_INSERT_CASE, case_rows)

    def add_cases(self, data_hash: str, cases: Iterable[Case], start: int) -> None:
        """Record some of a data set's cases (a chunk of them) and commit at once.

        The run itself is recorded with :meth:`register_run` (no cases) once every chunk is in.

        Args:
            data_hash: the data fingerprint they were hashed into.
            cases: the cases, in order.
            start: the position of the first of them in the data set.
        """
        with self._transaction() as db:
            db.executemany(_INSERT_CASE, _case_rows(data_hash, cases, start))

    def count_cases(self, data_hash: str) -> int:
        """How many cases the store holds for a data fingerprint.

        Args:
            data_hash: the data fingerprint.

        Returns:
            The number of case rows.
        """
        row = self._db.execute("SELECT COUNT(*) FROM cases WHERE data_hash=?", (data_hash,)).fetchone()
        return int(row[0])

    def set_label_provenance(self, data_hash: str, labels: LabelProvenance) -> None:
        """Record where the labels of a data set come from.

        A provenance that something declared (a dataset card, ``eval --labels``, a built-in source)
        replaces what is stored; an undeclared one (``unknown``, nothing said) never replaces a
        declared one, so a later ``eval`` without ``--labels`` keeps what an earlier one declared.

        Args:
            data_hash: the data fingerprint.
            labels: the provenance.
        """
        with self._transaction() as db:
            db.execute(
                """INSERT INTO label_provenance(data_hash, kind, raters, description, declared_by)
                   VALUES (?,?,?,?,?)
                   ON CONFLICT(data_hash) DO UPDATE SET kind=excluded.kind, raters=excluded.raters,
                       description=excluded.description, declared_by=excluded.declared_by
                   WHERE excluded.declared_by != 'nothing' OR label_provenance.declared_by = 'nothing'""",
                (data_hash, labels.kind, labels.raters, labels.description, labels.declared_by),
            )

    def label_provenance(self, data_hash: str) -> LabelProvenance:
        """Where the labels of a data set come from, as recorded; unknown when nothing was recorded.

        Args:
            data_hash: the data fingerprint.

        Returns:
            The provenance.
        """
        row = self._db.execute(
            "SELECT kind, raters, description, declared_by FROM label_provenance WHERE data_hash=?", (data_hash,)
        ).fetchone()
        if row is None:
            return UNKNOWN_LABELS
        return LabelProvenance.from_json(
            {"kind": row[0], "raters": row[1], "description": row[2], "declared_by": row[3]}
        )

    def runs(self) -> list[RunRecord]:
        """Every run in the store, oldest first."""
        rows = self._db.execute(
            """SELECT run_id, judge_spec, judge_fingerprint, data_hash, dataset_name, dataset_source,
                      orders, config_json, metadata_json, n_cases, created_at, updated_at
               FROM runs ORDER BY created_at, run_id"""
        ).fetchall()
        return [_run_from_row(r) for r in rows]

    def runs_on_data(self, data_hash: str) -> list[RunRecord]:
        """The runs made on one data set (what a report of this store shows for that data).

        Args:
            data_hash: the data fingerprint (:meth:`Benchmark.data_hash`).

        Returns:
            The runs in creation order.
        """
        return [run for run in self.runs() if run.data_hash == data_hash]

    def run(self, run_id: str) -> RunRecord:
        """One run by its id.

        Args:
            run_id: the run id.

        Returns:
            The run.

        Raises:
            StoreError: no run has that id.
        """
        row = self._db.execute(
            """SELECT run_id, judge_spec, judge_fingerprint, data_hash, dataset_name, dataset_source,
                      orders, config_json, metadata_json, n_cases, created_at, updated_at
               FROM runs WHERE run_id=?""",
            (run_id,),
        ).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run_id!r}")
        return _run_from_row(row)

    def cases(self, data_hash: str) -> list[StoredCase]:
        """Every case of a data fingerprint, in order, with its per-annotator labels (for small data).

        Args:
            data_hash: the data fingerprint.

        Returns:
            The cases; :meth:`iter_case_rows` reads them without building them all.
        """
        return [
            StoredCase(
                r[0],
                r[1],
                {k: int(v) for k, v in json.loads(r[2]).items()},  # type: ignore[misc]
                json.loads(r[3]),
                r[4],
                r[5],
                _annotations_from_json(r[7]),
            )
            for r in self.iter_case_rows(data_hash)
        ]

    def iter_case_rows(self, data_hash: str, case_ids: Sequence[str] | None = None) -> Iterator[tuple[Any, ...]]:
        """The stored rows of a data fingerprint's cases, in order, read a few thousand at a time.

        Args:
            data_hash: the data fingerprint.
            case_ids: only these cases (None: all of them).

        Yields:
            ``(case_id, case_hash, labels_json, groups_json, len_1, len_2, position, annotations_json)``.
        """
        query = """SELECT case_id, case_hash, labels_json, groups_json, len_1, len_2, position, annotations_json
                   FROM cases WHERE data_hash=?"""
        if case_ids is None:
            yield from _fetch_all(self._db.execute(query + " ORDER BY position", (data_hash,)))
            return
        for part in _parts(list(case_ids)):
            marks = ",".join("?" * len(part))
            yield from self._db.execute(query + f" AND case_id IN ({marks}) ORDER BY position", (data_hash, *part))

    # ---- judgments ------------------------------------------------------------------------
    def completed(self, judge_fingerprint: str, *, include_failures: bool = True) -> dict[tuple[str, str], str]:
        """(case_id, order) -> case_hash of every stored judgment of a judge configuration.

        It holds one entry per judgment: the runner asks :meth:`done_for_cases` chunk by chunk
        instead.

        Args:
            judge_fingerprint: the judge's fingerprint.
            include_failures: when False, judgments that failed as a whole are left out, so that
                a caller can judge them again.
        """
        query = "SELECT case_id, order_, case_hash FROM judgments WHERE judge_fingerprint=?"
        if not include_failures:
            query += " AND failure IS NULL"
        return {(r[0], r[1]): r[2] for r in self._db.execute(query, (judge_fingerprint,))}

    def done_for_cases(
        self, judge_fingerprint: str, data_hash: str, case_ids: Sequence[str], *, include_failures: bool = True
    ) -> dict[str, tuple[str, set[str]]]:
        """For some registered cases: their stored content hash and the orders already judged on it.

        Args:
            judge_fingerprint: the judge's fingerprint.
            data_hash: the data fingerprint the cases were registered under.
            case_ids: the cases (a chunk of them).
            include_failures: when False, judgments that failed as a whole do not count as done.

        Returns:
            case id -> (case hash, orders whose judgment of that content is stored); a case that is
            not registered under ``data_hash`` is absent.
        """
        failure = "" if include_failures else " AND j.failure IS NULL"
        found: dict[str, tuple[str, set[str]]] = {}
        for part in _parts(list(case_ids)):
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"""SELECT c.case_id, c.case_hash, j.order_ FROM cases c LEFT JOIN judgments j
                      ON j.judge_fingerprint=? AND j.case_id=c.case_id AND j.case_hash=c.case_hash{failure}
                    WHERE c.data_hash=? AND c.case_id IN ({marks})""",
                (judge_fingerprint, data_hash, *part),
            )
            for case_id, case_hash, order in rows:
                orders = found.setdefault(case_id, (case_hash, set()))[1]
                if order is not None:
                    orders.add(order)
        return found

    def has_judgments(self, judge_fingerprint: str) -> bool:
        """Whether any judgment of a judge configuration is stored (on any data).

        Args:
            judge_fingerprint: the judge's fingerprint.

        Returns:
            True when at least one is.
        """
        row = self._db.execute("SELECT 1 FROM judgments WHERE judge_fingerprint=? LIMIT 1", (judge_fingerprint,))
        return row.fetchone() is not None

    def count_done(
        self, judge_fingerprint: str, data_hash: str, orders: Sequence[Order], *, include_failures: bool = True
    ) -> int:
        """How many of a data set's requests a judge configuration has stored, on the cases' current content.

        Args:
            judge_fingerprint: the judge's fingerprint.
            data_hash: the data fingerprint (its cases must be registered).
            orders: the orders that count.
            include_failures: when False, judgments that failed as a whole are not counted.

        Returns:
            The number of stored (case, order) judgments whose case hash matches the registered case.
        """
        failure = "" if include_failures else " AND j.failure IS NULL"
        marks = ",".join("?" * len(orders))
        row = self._db.execute(
            f"""SELECT COUNT(*) FROM cases c JOIN judgments j
                  ON j.judge_fingerprint=? AND j.case_id=c.case_id AND j.case_hash=c.case_hash{failure}
                WHERE c.data_hash=? AND j.order_ IN ({marks})""",
            (judge_fingerprint, data_hash, *(o.value for o in orders)),
        ).fetchone()
        return int(row[0])

    def write_judgments(self, judge_fingerprint: str, rows: Iterable[StoredJudgment], *, replacing: bool = True) -> int:
        """Insert (or replace) judgments and commit at once. Returns how many were written.

        Every text (raw output, failure reasons, extras) passes through
        :func:`~medrewardbench.utils.secrets.scrub` first, whatever judge produced it, so that a key echoed
        by an endpoint never reaches the file. A judgment that replaces one asked before (a failure
        asked again with ``--retry-failures``) keeps the token usage of the one it replaces under
        ``extra["earlier_usage"]``: that request was paid for too (:mod:`medrewardbench.metrics.cost`).
        A writer that knows no stored judgment of this judge exists (``replacing=False``: a run
        planned on a store without any, in a locked directory) skips looking for them.
        """
        now = time.time()
        rows = list(rows)
        with self._transaction() as db:
            replaced = _stored_usage(db, judge_fingerprint, rows) if replacing else {}
            values = [
                (
                    judge_fingerprint,
                    j.case_id,
                    j.order.value,
                    j.case_hash,
                    j.fingerprint,
                    _SORTED_JSON(j.verdicts),
                    None if j.raw_output is None else scrub(j.raw_output),
                    None if j.failure is None else scrub(j.failure),
                    _scrubbed_json(_SORTED_JSON(j.dimension_failures)),
                    j.latency_s,
                    j.prompt_tokens,
                    j.completion_tokens,
                    None if j.scores is None else _SORTED_JSON(j.scores),
                    _scrubbed_json(_SORTED_JSON_STR(_with_earlier_usage(replaced.get((j.case_id, j.order.value)), j))),
                    now,
                    _SORTED_JSON(j.preferences) if j.preferences else None,
                )
                for j in rows
            ]
            db.executemany(
                """INSERT OR REPLACE INTO judgments(judge_fingerprint, case_id, order_, case_hash,
                       fingerprint, verdicts_json, raw_output, failure, dimension_failures_json,
                       latency_s, prompt_tokens, completion_tokens, scores_json, extra_json, created_at,
                       preferences_json)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                values,
            )
        return len(values)

    def delete_judgments(self, judge_fingerprint: str) -> int:
        """Delete every judgment of one judge.

        Args:
            judge_fingerprint: the judge's fingerprint.

        Returns:
            How many judgments were deleted.
        """
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM judgments WHERE judge_fingerprint=?", (judge_fingerprint,))
        return cursor.rowcount

    def judgments_for_run(self, run: RunRecord) -> list[StoredJudgment]:
        """The judgments that belong to a run: its judge, its cases (matching hashes), its orders.

        Builds one object per judgment: :meth:`iter_judgments_for_run` streams them, and metrics read
        :meth:`iter_verdict_rows`.
        """
        return list(self.iter_judgments_for_run(run))

    def iter_judgments_for_run(
        self, run: RunRecord, case_ids: Sequence[str] | None = None, *, extras: bool = True
    ) -> Iterator[StoredJudgment]:
        """A run's judgments in case order, read a few thousand rows at a time.

        Args:
            run: the run.
            case_ids: only these cases (None: every case of the run).
            extras: whether to read each judgment's ``extra`` (False leaves it empty: a reader
                that does not use it, such as ``judgments.jsonl``, skips decoding it).

        Yields:
            The run's judgments in case order, then order.
        """
        query = """SELECT j.case_id, j.order_, j.case_hash, j.fingerprint, j.verdicts_json, j.raw_output,
                      j.failure, j.dimension_failures_json, j.latency_s, j.prompt_tokens,
                      j.completion_tokens, j.scores_json, j.extra_json, j.preferences_json
               FROM cases c JOIN judgments j
                 ON j.case_id = c.case_id AND j.case_hash = c.case_hash AND j.judge_fingerprint = ?
               WHERE c.data_hash = ?"""
        wanted = {o.value for o in run.orders}
        # stores written before the scrubber existed, or keys registered only now (the variable the
        # run names is set in this process): texts are scrubbed on the way out as well
        register_secret_env(run.metadata.get("api_key_env"))
        if case_ids is None:
            ordered = query + " ORDER BY c.position, j.order_"
            cursors: Iterable[Iterable[Sequence[Any]]] = [
                _fetch_all(self._db.execute(ordered, (run.judge_fingerprint, run.data_hash)))
            ]
        else:
            cursors = (
                self._db.execute(
                    query + f" AND c.case_id IN ({','.join('?' * len(part))}) ORDER BY c.position, j.order_",
                    (run.judge_fingerprint, run.data_hash, *part),
                )
                for part in _parts(list(case_ids))
            )
        for cursor in cursors:
            for r in cursor:
                if r[1] not in wanted:
                    continue
                yield StoredJudgment(
                    case_id=r[0],
                    order=Order(r[1]),
                    case_hash=r[2],
                    fingerprint=r[3],
                    verdicts={k: int(v) for k, v in json.loads(r[4]).items()},  # type: ignore[misc]
                    raw_output=None if r[5] is None else scrub(r[5]),
                    failure=None if r[6] is None else scrub(r[6]),
                    dimension_failures=json.loads(_scrubbed_json(r[7])),
                    latency_s=r[8],
                    prompt_tokens=r[9],
                    completion_tokens=r[10],
                    scores=None if r[11] is None else json.loads(r[11]),
                    extra=json.loads(_scrubbed_json(r[12])) if extras else {},
                    preferences={} if r[13] is None else {str(k): float(v) for k, v in json.loads(r[13]).items()},
                )

    def iter_verdict_rows(self, run: RunRecord, rows_at_a_time: int = 65_536) -> Iterator[list[tuple[int, ...]]]:
        """A run's verdicts packed into small integers, a block of rows at a time (what metrics read).

        Few columns per row, so that millions of judgments cross into Python quickly.

        Args:
            run: the run.
            rows_at_a_time: rows per block.

        Yields:
            Lists of ``(key, code, prompt_tokens, completion_tokens, latency_s)``: ``key`` is the
            case's position times 2, plus 1 for the swapped order; ``code`` is 1 for a judgment that
            failed as a whole, plus 2 times the verdicts in base 3 (the ``d``-th dimension of
            :data:`~medrewardbench.dimensions.DIMENSIONS` times ``3**d``; each 1, 2 or 0 for no
            verdict); then the usage (0 when unknown), so that one pass gives what :meth:`usage`
            sums.
        """
        packed = " + ".join(
            f"{3**d} * coalesce(json_extract(j.verdicts_json, '$.{dim}'), 0)" for d, dim in enumerate(DIMENSIONS)
        )
        marks = ",".join("?" * len(run.orders))
        cursor = self._db.execute(
            f"""SELECT c.position * 2 + (j.order_ = 'swapped'), (j.failure IS NOT NULL) + 2 * ({packed}),
                       coalesce(j.prompt_tokens, 0), coalesce(j.completion_tokens, 0), coalesce(j.latency_s, 0.0)
                FROM cases c JOIN judgments j
                  ON j.case_id = c.case_id AND j.case_hash = c.case_hash AND j.judge_fingerprint = ?
                WHERE c.data_hash = ? AND j.order_ IN ({marks})""",
            (run.judge_fingerprint, run.data_hash, *(o.value for o in run.orders)),
        )
        while True:
            block = cursor.fetchmany(rows_at_a_time)
            if not block:
                return
            yield block

    def iter_preference_rows(
        self, run: RunRecord, rows_at_a_time: int = 65_536
    ) -> Iterator[list[tuple[int, float | None]]]:
        """A run's stored probabilities, only the judgments that have some (what confidences read).

        Kept apart from :meth:`iter_verdict_rows`, so that the verdicts' path does not pay for them;
        the JSON is taken apart by SQLite, so that numbers, not texts, cross into Python.

        Args:
            run: the run.
            rows_at_a_time: rows per block.

        Yields:
            Lists of ``(key, p_1, ..., p_d)``: ``key`` as in :meth:`iter_verdict_rows`, then per
            dimension of :data:`~medrewardbench.dimensions.DIMENSIONS` the probability that
            ``response_1`` is better, None where the judgment has none.
        """
        values = ", ".join(f"json_extract(j.preferences_json, '$.{dim}')" for dim in DIMENSIONS)
        marks = ",".join("?" * len(run.orders))
        cursor = self._db.execute(
            f"""SELECT c.position * 2 + (j.order_ = 'swapped'), {values}
                FROM cases c JOIN judgments j
                  ON j.case_id = c.case_id AND j.case_hash = c.case_hash AND j.judge_fingerprint = ?
                WHERE c.data_hash = ? AND j.order_ IN ({marks}) AND j.preferences_json IS NOT NULL
                  AND j.failure IS NULL""",
            (run.judge_fingerprint, run.data_hash, *(o.value for o in run.orders)),
        )
        while True:
            block = cursor.fetchmany(rows_at_a_time)
            if not block:
                return
            yield block

    def failure_counts(self, run: RunRecord) -> dict[str, int]:
        """How often each failure reason occurs in a run (first line of the reason, at most 80 characters).

        Args:
            run: the run.

        Returns:
            reason -> count, most common first (ties by reason).
        """
        marks = ",".join("?" * len(run.orders))
        rows = self._db.execute(
            f"""SELECT j.failure, COUNT(*) FROM cases c JOIN judgments j
                  ON j.case_id = c.case_id AND j.case_hash = c.case_hash AND j.judge_fingerprint = ?
                WHERE c.data_hash = ? AND j.failure IS NOT NULL AND j.order_ IN ({marks})
                GROUP BY j.failure""",
            (run.judge_fingerprint, run.data_hash, *(o.value for o in run.orders)),
        )
        counts: dict[str, int] = {}
        for failure, count in rows:
            text = scrub(failure)
            key = text.splitlines()[0][:80] if text else "failure"
            counts[key] = counts.get(key, 0) + int(count)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def update_run_metadata(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        """Replace a run's metadata (facts that do not change outputs, such as its cost).

        Args:
            run_id: the run.
            metadata: the new metadata (JSON-serialisable; secrets are scrubbed).

        Raises:
            StoreError: no such run.
        """
        text = _scrubbed_json(json.dumps(dict(metadata), sort_keys=True, default=str))
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET metadata_json=?, updated_at=? WHERE run_id=?", (text, time.time(), run_id)
            )
        if cursor.rowcount == 0:
            raise StoreError(f"{self.path}: no run {run_id!r}")

    # ---- Batch API submissions ------------------------------------------------------------
    def add_batch_submission(self, submission: BatchSubmission) -> None:
        """Record a request file sent (or about to be sent) to a Batch API; committed at once."""
        now = time.time()
        with self._transaction() as db:
            db.execute(
                """INSERT INTO batch_api_batches(submission_id, judge_fingerprint, run_id, base_url,
                       request_file, request_keys_json, input_file_id, batch_id, status, output_file_id,
                       error_file_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    submission.submission_id,
                    submission.judge_fingerprint,
                    submission.run_id,
                    submission.base_url,
                    submission.request_file,
                    json.dumps([list(key) for key in submission.request_keys]),
                    submission.input_file_id,
                    submission.batch_id,
                    submission.status,
                    submission.output_file_id,
                    submission.error_file_id,
                    now,
                    now,
                ),
            )

    def update_batch_submission(self, submission_id: str, **changes: str | None) -> None:
        """Change some of ``batch_id``, ``input_file_id``, ``status``, ``output_file_id``, ``error_file_id``.

        Raises:
            ValueError: another field is named.
            StoreError: no such submission.
        """
        allowed = {"batch_id", "input_file_id", "status", "output_file_id", "error_file_id"}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise ValueError(f"cannot change {', '.join(unknown)} of a batch submission")
        if not changes:
            return
        names = sorted(changes)
        assignments = ", ".join(f"{name}=?" for name in names)
        with self._transaction() as db:
            cursor = db.execute(
                f"UPDATE batch_api_batches SET {assignments}, updated_at=? WHERE submission_id=?",
                (*(changes[name] for name in names), time.time(), submission_id),
            )
        if cursor.rowcount == 0:
            raise StoreError(f"{self.path}: no batch submission {submission_id!r}")

    def batch_submissions(self, judge_fingerprint: str, *, open_only: bool = False) -> list[BatchSubmission]:
        """The Batch API submissions of a judge configuration, oldest first.

        Args:
            judge_fingerprint: the judge.
            open_only: leave out those whose answers are stored (``ingested``) and those given up
                before anything was submitted (``abandoned``).

        Returns:
            The submissions.
        """
        query = """SELECT submission_id, judge_fingerprint, run_id, base_url, request_file, request_keys_json,
                          input_file_id, batch_id, status, output_file_id, error_file_id
                   FROM batch_api_batches WHERE judge_fingerprint=?"""
        if open_only:
            query += " AND status NOT IN ('ingested', 'abandoned')"
        rows = self._db.execute(query + " ORDER BY created_at, submission_id", (judge_fingerprint,)).fetchall()
        return [
            BatchSubmission(
                submission_id=r[0],
                judge_fingerprint=r[1],
                run_id=r[2],
                base_url=r[3],
                request_file=r[4],
                request_keys=tuple((str(k[0]), str(k[1]), str(k[2])) for k in json.loads(r[5])),
                input_file_id=r[6],
                batch_id=r[7],
                status=r[8],
                output_file_id=r[9],
                error_file_id=r[10],
            )
            for r in rows
        ]

    def count_judgments(self, judge_fingerprint: str) -> int:
        """How many judgments one judge (by fingerprint) has in the store."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM judgments WHERE judge_fingerprint=?", (judge_fingerprint,)
        ).fetchone()
        return int(row[0])

    def usage(self, run: RunRecord) -> dict[str, Any]:
        """Summed token usage and latency over a run's judgments (unknown values count as zero)."""
        marks = ",".join("?" * len(run.orders))
        prompt, completion, latency = self._db.execute(
            f"""SELECT COALESCE(SUM(j.prompt_tokens), 0), COALESCE(SUM(j.completion_tokens), 0), TOTAL(j.latency_s)
                FROM cases c JOIN judgments j
                  ON j.case_id = c.case_id AND j.case_hash = c.case_hash AND j.judge_fingerprint = ?
                WHERE c.data_hash = ? AND j.order_ IN ({marks})""",
            (run.judge_fingerprint, run.data_hash, *(o.value for o in run.orders)),
        ).fetchone()
        return {"prompt_tokens": int(prompt), "completion_tokens": int(completion), "latency_s": float(latency)}


def summed_usage(judgments: Iterable[StoredJudgment]) -> dict[str, Any]:
    """Token counts and latency summed over judgments (unknown values count as zero)."""
    totals: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0}
    for j in judgments:
        totals["prompt_tokens"] += j.prompt_tokens or 0
        totals["completion_tokens"] += j.completion_tokens or 0
        totals["latency_s"] += j.latency_s or 0.0
    return totals


_INSERT_CASE = """INSERT OR REPLACE INTO cases(data_hash, position, case_id, case_hash, labels_json,
       groups_json, len_1, len_2, annotations_json) VALUES (?,?,?,?,?,?,?,?,?)"""


def _case_rows(data_hash: str, cases: Iterable[Case], start: int) -> Iterator[tuple[Any, ...]]:
    for position, case in enumerate(cases, start):
        yield (
            data_hash,
            position,
            case.case_id,
            case.content_hash(),
            json.dumps({d: case.labels[d] for d in DIMENSIONS if d in case.labels}),
            json.dumps(case.grouping_metadata(), sort_keys=True, ensure_ascii=False),
            len(case.response_1),
            len(case.response_2),
            _annotations_json(case.annotations),
        )


def _run_from_row(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        judge_spec=row[1],
        judge_fingerprint=row[2],
        data_hash=row[3],
        dataset_name=row[4],
        dataset_source=row[5],
        orders=tuple(Order(o) for o in row[6].split(",") if o),
        config=json.loads(_scrubbed_json(row[7])),
        metadata=json.loads(_scrubbed_json(row[8])),
        n_cases=row[9],
        created_at=row[10],
        updated_at=row[11],
    )


_SQL_PARAMETERS = 900
"""Most values bound in one statement (SQLite allows 999 in old builds)."""


def _parts(values: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), _SQL_PARAMETERS):
        yield values[start : start + _SQL_PARAMETERS]


def _fetch_all(cursor: sqlite3.Cursor, rows_at_a_time: int = 4096) -> Iterator[Any]:
    """A cursor's rows, fetched a block at a time (never all at once)."""
    while True:
        block = cursor.fetchmany(rows_at_a_time)
        if not block:
            return
        yield from block


def find_stores(paths: Sequence[str | Path]) -> list[Path]:
    """Every store file under the given run directories or files (recursively)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            direct = p / STORE_FILENAME
            if direct.is_file():
                found.append(direct)
            else:
                found.extend(sorted(p.rglob(STORE_FILENAME)))
        else:
            raise StoreError(f"{p}: no such run directory or store file")
    return found


def _annotations_json(annotations: Sequence[Annotation]) -> str | None:
    """A case's annotations as stored: canonical ``annotations`` objects (labels as 1/2), or NULL."""
    if not annotations:
        return None
    records = []
    for annotation in annotations:
        record: dict[str, Any] = {
            "annotator": annotation.annotator,
            "labels": {d: int(annotation.labels[d]) for d in DIMENSIONS if d in annotation.labels},
        }
        if annotation.order_shown is not None:
            record["order_shown"] = annotation.order_shown
        if annotation.seconds is not None:
            record["seconds"] = annotation.seconds
        records.append(record)
    return json.dumps(records, ensure_ascii=False, sort_keys=True)


def _annotations_from_json(text: str | None) -> tuple[Annotation, ...]:
    if not text:
        return ()
    return tuple(
        Annotation(
            annotator=str(record["annotator"]),
            labels={str(d): int(v) for d, v in record["labels"].items()},  # type: ignore[misc]
            order_shown=record.get("order_shown"),
            seconds=record.get("seconds"),
        )
        for record in json.loads(text)
    )


def as_jsonable(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``mapping`` that JSON can hold (anything else as its ``str``)."""
    plain: dict[str, Any] = json.loads(json.dumps(mapping, default=str))
    return plain


def _scrubbed_json(text: str) -> str:
    """A JSON text with every secret removed from its strings (the text itself when it holds none).

    Scrubbing the encoded text finds a key as long as JSON does not escape its characters, which
    holds for API keys (letters, digits, ``-``, ``_``, ``.``); the rare text that changes is decoded
    and scrubbed string by string, so that the result stays valid JSON.
    """
    if scrub(text) == text:
        return text
    return json.dumps(scrub_value(json.loads(text)), sort_keys=True)

"""Opening the package's SQLite files: WAL, a busy timeout, a base layout and named migrations.

The results store (:mod:`medrewardbench.evaluation.store`) and the build project store
(:mod:`medrewardbench.curation.store`) open their files the same way, through :func:`open_database`:

* the busy timeout is :data:`BUSY_TIMEOUT_S`, so that a statement waits for another process's
  write instead of failing with "database is locked";
* the journal is WAL with ``synchronous=NORMAL``: readers never block the writer, and a commit
  survives a crash of the process (not necessarily of the machine);
* the base layout (``CREATE TABLE IF NOT EXISTS ...``) is applied, and a new file is stamped with
  its schema version in a ``meta`` table; a file of another version is refused;
* named migrations are applied once each, in order, each in one write transaction together with
  its mark ``migration:<name>`` in ``meta``; a file that records a migration this version does not
  know was written by a newer medrewardbench and is refused.

Both stores write through one helper, :func:`transaction`: ``BEGIN IMMEDIATE`` (the write lock is
taken at the start, so a block that reads before it writes waits for another writer through the
busy timeout instead of failing with "database is locked" when it upgrades its lock), commit at
the end, roll back on any exception.

Every failure is a :class:`~medrewardbench.errors.StoreError` whose message names the file and says
why in words (permission, read-only, not a database), not "corrupt".
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from medrewardbench.errors import StoreError
from medrewardbench.utils.outdir import unwritable_reason

log = logging.getLogger(__name__)

__all__ = [
    "BUSY_TIMEOUT_S",
    "MIGRATION_PREFIX",
    "Migration",
    "applied_migrations",
    "open_database",
    "retry_busy",
    "transaction",
]

BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for another process's write before giving up."""
MIGRATION_PREFIX = "migration:"
"""Applied migrations are recorded in ``meta`` under this prefix and their name."""

Migration = tuple[str, tuple[str, ...]]
"""``(name, statements)``: one named schema change."""

_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"


def open_database(
    path: str | Path,
    schema: str,
    schema_version: int,
    migrations: Sequence[Migration],
    *,
    what: str = "results store",
) -> sqlite3.Connection:
    """Open (creating when new) one SQLite file with the package's settings, layout and migrations.

    Args:
        path: the file; its directory is created when missing.
        schema: the base layout, ``CREATE TABLE IF NOT EXISTS`` statements (a ``meta`` table with
            ``key`` and ``value`` columns is added when the schema does not create one).
        schema_version: the base layout's version, stamped into a new file and required of an old one.
        migrations: named changes applied after the base layout, in order (see the module docstring).
        what: how messages name the file (``"results store"``, ``"build project store"``).

    Returns:
        An open connection (the caller closes it).

    Raises:
        StoreError: the directory cannot be created, the file cannot be opened or written, is not
            a database, has another schema version or records a migration this version does not know.
    """
    file = Path(path)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{file}: cannot create its directory: {exc.strerror or exc}") from exc
    try:
        db = sqlite3.connect(file, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise open_error(file, exc, what) from exc
    try:
        _prepare(db, file, schema, schema_version, migrations, what)
    except BaseException:
        db.close()
        raise
    return db


def _prepare(
    db: sqlite3.Connection,
    path: Path,
    schema: str,
    schema_version: int,
    migrations: Sequence[Migration],
    what: str,
) -> None:
    try:
        # sqlite3.connect's timeout is the busy timeout; set it explicitly too, so that every
        # statement waits for another process's write instead of failing with "database is locked"
        db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        retry_busy(lambda: db.execute("PRAGMA journal_mode=WAL").fetchone())
        db.execute("PRAGMA synchronous=NORMAL")
        retry_busy(lambda: db.executescript(_META + schema))

        def stamp_version() -> None:
            # OR IGNORE: two processes creating the same new file both get here
            with transaction(db):
                db.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(schema_version),)
                )

        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:  # a new file (an existing one is not written to: it may be read-only)
            retry_busy(stamp_version)
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if int(row[0]) != schema_version:
            raise StoreError(
                f"{path}: {what} schema version {row[0]} is not supported (this version reads {schema_version})"
            )
        _migrate(db, path, migrations)
    except sqlite3.OperationalError as exc:
        raise open_error(path, exc, what) from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable {what}: {exc}") from exc


def applied_migrations(db: sqlite3.Connection) -> list[str]:
    """The names of the migrations a file has, in the order they were applied.

    Args:
        db: an open connection.

    Returns:
        The names.
    """
    rows = db.execute("SELECT key FROM meta WHERE key LIKE ? ORDER BY rowid", (MIGRATION_PREFIX + "%",)).fetchall()
    return [row[0][len(MIGRATION_PREFIX) :] for row in rows]


def _migrate(db: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> None:
    known = [name for name, _ in migrations]
    unknown = [name for name in applied_migrations(db) if name not in known]
    if unknown:
        raise StoreError(
            f"{path}: written by a newer medrewardbench (schema changes {', '.join(unknown)} are unknown "
            "to this version); upgrade medrewardbench to use it"
        )
    for name, statements in migrations:
        if name in applied_migrations(db):
            continue
        retry_busy(functools.partial(_apply_migration, db, path, name, statements))


def _apply_migration(db: sqlite3.Connection, path: Path, name: str, statements: Sequence[str]) -> None:
    """One migration in one write transaction; a no-op when another process applied it first."""
    with transaction(db):
        done = db.execute("SELECT 1 FROM meta WHERE key=?", (MIGRATION_PREFIX + name,)).fetchone()
        if done is None:
            for statement in statements:
                db.execute(statement)
            db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (MIGRATION_PREFIX + name, str(time.time())))
    if done is None:
        log.info("%s: applied schema change %s", path, name)


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: ``BEGIN IMMEDIATE``, then commit, or roll back when the block raises (Ctrl-C included).

    Inside a transaction the connection already holds (statements a caller ran without committing),
    the block joins it: nothing is begun, and the end of the block commits both.

    Args:
        db: an open connection.

    Yields:
        The same connection.
    """
    if not db.in_transaction:
        db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.commit()
    except BaseException:
        db.rollback()
        raise


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_busy(action: Callable[[], object]) -> None:
    """Run a statement, retrying while another process holds a lock the busy handler cannot wait out.

    Switching a brand-new file to WAL needs an exclusive lock, and SQLite answers ``database is
    locked`` at once (without calling the busy handler) when two processes try it together.

    Args:
        action: the statement(s) to run.

    Raises:
        sqlite3.OperationalError: any other error, or still locked after :data:`BUSY_TIMEOUT_S`.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.002
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def open_error(path: Path, exc: sqlite3.Error, what: str = "results store") -> StoreError:
    """A file that SQLite cannot open or write: say why in words (permission, read-only), not "corrupt".

    Args:
        path: the file.
        exc: SQLite's error.
        what: how the message names the file.

    Returns:
        The error to raise.
    """
    text = str(exc)
    lowered = text.lower()
    if not any(word in lowered for word in ("unable to open", "readonly", "read-only", "permission", "disk i/o")):
        return StoreError(f"{path}: cannot use the {what}: {text}")
    directory = path.parent
    why = unwritable_reason(directory) if directory.is_dir() else "no such directory"
    if why is not None:
        detail = f"cannot create files in {directory}: {why}"
    elif path.exists() and not os.access(path, os.R_OK | os.W_OK):
        detail = f"permission denied: {path.name} is not both readable and writable for this user"
    else:
        detail = text
    return StoreError(f"{path}: cannot open the {what} ({detail})")

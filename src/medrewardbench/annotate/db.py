"""The project database: SQLAlchemy models, engines and migrations.

SQLite is the default (one file in the project directory, WAL journal, a busy timeout, full
fsync on commit); PostgreSQL is used by URL (``postgresql+psycopg://user@host/db``). The schema is
created and upgraded by the Alembic migrations shipped in ``annotate/migrations`` (run with
:func:`migrate`), so a project survives upgrades of this package.

Writes go through :meth:`Database.write`, which commits before it returns: a request that was
answered has reached the disk. On SQLite a write transaction starts with ``BEGIN IMMEDIATE`` and
the writers of one process queue on a lock, so a write never fails half-way on a lock upgrade
and waits in order rather than in the driver's sleep-and-retry loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MAX_ROW_ID = 2**31 - 1
"""The largest id a row can have on every supported database (PostgreSQL's ``integer``): ids from
outside (URLs, forms, the command line) beyond it name nothing and are refused before any query."""

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time in UTC, timezone-aware.

    Returns:
        ``datetime.now(timezone.utc)``.
    """
    return datetime.now(timezone.utc)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Store ``value`` in UTC; a naive datetime is taken to be UTC already."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        """Read ``value`` back as a timezone-aware UTC datetime."""
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base with deterministic constraint names (migrations rely on them)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ProjectRow(Base):
    """The project's settings (one row)."""

    __tablename__ = "project"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    mode: Mapped[str] = mapped_column(String(16))
    """``pairs`` (label pairs on the six dimensions) or ``screening`` (accept or reject questions)."""
    per_case: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    repeat_share: Mapped[float] = mapped_column(Float)
    guidelines: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class User(Base):
    """A person who logs in: an annotator (doctor) or an admin (organiser)."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str] = mapped_column(String(255))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ApiToken(Base):
    """A personal API token; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class WebSession(Base):
    """A logged-in browser; the cookie holds a random token whose SHA-256 is stored here."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())


class LoginAttempt(Base):
    """One login attempt, for rate limiting and the audit trail."""

    __tablename__ = "login_attempts"
    __table_args__ = (
        Index("ix_login_attempts_username_at", "username", "at"),
        Index("ix_login_attempts_client_at", "client", "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64))
    client: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    success: Mapped[bool] = mapped_column(Boolean)


class ImageBlob(Base):
    """An image's bytes, stored once per content hash, so a project does not depend on its source files."""

    __tablename__ = "images"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    builtin: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """For an image an installed package ships (``pydicom:CT_small.dcm``): its name, kept on export."""
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Item(Base):
    """A pair to label or a question to screen."""

    __tablename__ = "items"
    __table_args__ = (UniqueConstraint("role", "external_id", name="uq_items_role_external_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    public_id: Mapped[str] = mapped_column(String(32), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    """``pair`` or ``question``."""
    role: Mapped[str] = mapped_column(String(16))
    """``primary`` (to be labelled) or ``gold`` (a pair with known labels, for quality control)."""
    external_id: Mapped[str] = mapped_column(String(500))
    """The case or question id of the source file (may name a source; never shown to annotators)."""
    image_id: Mapped[int | None] = mapped_column(ForeignKey("images.id"), nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Texts and metadata as read from the source (canonical case fields, or question fields)."""
    gold_labels: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Assignment(Base):
    """One item in one user's queue."""

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("user_id", "item_id", "purpose", name="uq_assignments_user_item_purpose"),
        Index("ix_assignments_user_id_sort_key", "user_id", "sort_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    public_id: Mapped[str] = mapped_column(String(32), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), index=True)
    purpose: Mapped[str] = mapped_column(String(16))
    """``primary``, ``gold`` or ``repeat`` (a second showing in the swapped order)."""
    order_shown: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """``original`` (response_1 shown as A) or ``swapped``; None for questions."""
    sort_key: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Submission(Base):
    """What a user answered for one assignment (the latest version; the audit log keeps the others)."""

    __tablename__ = "submissions"

    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id"), primary_key=True)
    choices: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Dimension -> 1|2, the better response in source order."""
    shown_choices: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Dimension -> "A"|"B", as the user clicked it."""
    cannot_judge: Mapped[bool] = mapped_column(Boolean, default=False)
    cannot_judge_reason: Mapped[str] = mapped_column(Text, default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    decision: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """Screening: ``accept`` or ``reject``."""
    reasons: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    """Screening: the reasons ticked (relevance, accuracy, complexity, image_quality)."""
    harm: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """Pairs: the answers flagged as harmful, response in source order (``"1"``/``"2"``) -> severity
    (:data:`medrewardbench.cases.HARM_SEVERITIES`); None or empty when nothing is flagged."""
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    """Time spent on the assignment, summed over every time it was submitted."""
    revision: Mapped[int] = mapped_column(Integer, default=1)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class Adjudication(Base):
    """An admin's decision on a dimension the annotators left without a strict majority."""

    __tablename__ = "adjudications"
    __table_args__ = (UniqueConstraint("item_id", "dimension", name="uq_adjudications_item_dimension"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"))
    dimension: Mapped[str] = mapped_column(String(32))
    value: Mapped[str] = mapped_column(String(16))
    """``1``/``2`` for a pair dimension; ``accept``/``reject`` for a screened question."""
    note: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(64))
    """Who decided: an admin's name, or ``cli:<os user>``."""
    at: Mapped[datetime] = mapped_column(UTCDateTime())


class AuditEntry(Base):
    """One write: who, when, what, the old value and the new one."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    actor: Mapped[str] = mapped_column(String(64))
    """A user name, or ``cli:<os user>`` for the command line."""
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(200))
    old: Mapped[Any] = mapped_column(JSON, nullable=True)
    new: Mapped[Any] = mapped_column(JSON, nullable=True)
    client: Mapped[str | None] = mapped_column(String(64), nullable=True)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # the driver's own transaction handling is switched off; transactions begin in _sqlite_on_begin
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = FULL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def make_engine(url: str, *, immediate: bool = False) -> Engine:
    """An engine for a project database.

    Args:
        url: the SQLAlchemy URL.
        immediate: SQLite only: transactions start with ``BEGIN IMMEDIATE`` (for writers).

    Returns:
        The engine; SQLite connections are in WAL mode with a busy timeout and foreign keys on.
    """
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=8,
            max_overflow=32,
        )
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        if immediate:
            engine = engine.execution_options(sqlite_begin="IMMEDIATE")
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=30)


class Database:
    """A project database: short read transactions, and write transactions that commit on exit.

    Args:
        url: the SQLAlchemy URL.
    """

    def __init__(self, url: str):
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.engine = make_engine(url)
        write_engine = make_engine(url, immediate=True) if self.is_sqlite else self.engine
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(write_engine, expire_on_commit=False)
        self._write_engine = write_engine
        self._write_lock = threading.Lock() if self.is_sqlite else None

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reading; nothing it does is committed.

        Closing the session ends its transaction without expiring what was loaded, so objects
        read inside the block keep their loaded attributes after it.

        Yields:
            The session.
        """
        with self._read() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session whose changes are committed when the block ends without an exception.

        Yields:
            The session.
        """
        lock = self._write_lock
        if lock is not None:
            lock.acquire()
        try:
            with self._write() as session, session.begin():
                yield session
        finally:
            if lock is not None:
                lock.release()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
        if self._write_engine is not self.engine:
            self._write_engine.dispose()


def migrate(url: str, revision: str = "head") -> None:
    """Create or upgrade a database's schema with the shipped Alembic migrations.

    Args:
        url: the SQLAlchemy URL.
        revision: the target revision (``head`` for the newest).
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The schema revision a database is at.

    Args:
        url: the SQLAlchemy URL.

    Returns:
        The Alembic revision id, or None for a database without the schema.
    """
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()

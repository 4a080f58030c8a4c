"""The project directory: where the database is, and the key that signs cookies and forms.

A project directory holds ``annotate.json`` (the database URL, or null for the SQLite file
``annotate.db`` next to it), ``secret.key`` (random bytes, readable by the owner only) and, by
default, the database. Only the standard library is used here, so the command line can find a
project before it imports anything heavy.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.errors import MedRewardBenchError

CONFIG_FILE = "annotate.json"
DB_FILE = "annotate.db"
SECRET_FILE = "secret.key"
DB_URL_ENV = "MEDREWARDBENCH_ANNOTATE_DB"
"""Overrides the project's database URL (keeps a PostgreSQL password out of the project file)."""
PROJECT_ENV = "MEDREWARDBENCH_ANNOTATE_PROJECT"
"""The project directory used when a command is given none."""


class AnnotateError(MedRewardBenchError):
    """A problem with an annotation project or a request to it; the message is meant for people."""


class ProjectNotFound(AnnotateError):
    """The directory holds no annotation project."""


class NotFound(AnnotateError):
    """The thing asked for does not exist, or belongs to someone else (the two look the same)."""


class Forbidden(AnnotateError):
    """The user may not do this."""


class InvalidInput(AnnotateError):
    """A submitted form or API body is not acceptable; the message says why."""


class ServerBusy(AnnotateError):
    """The server is at its bound for expensive work (password hashes); try again after ``retry_after`` seconds.

    Args:
        message: what happened, for the caller.
        retry_after: seconds to wait before trying again.
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ProjectConfig:
    """Where a project's data lives."""

    directory: Path
    db_url: str
    """The SQLAlchemy URL (``sqlite:///...`` or ``postgresql+psycopg://...``)."""
    stored_url: str | None
    """The URL as written in ``annotate.json`` (None: the default SQLite file)."""


def default_project_dir() -> Path:
    """The project directory used when none is given: ``$MEDREWARDBENCH_ANNOTATE_PROJECT`` or the cwd.

    Returns:
        The directory.
    """
    return Path(os.environ.get(PROJECT_ENV) or ".")


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of an SQLite file.

    Args:
        path: the database file.

    Returns:
        ``sqlite:////absolute/path``.
    """
    return f"sqlite:///{path.absolute()}"


def write_config(directory: Path, db_url: str | None) -> ProjectConfig:
    """Create a project directory's configuration and secret key.

    Args:
        directory: the project directory (created if needed).
        db_url: a database URL, or None for ``annotate.db`` in the directory.

    Returns:
        The configuration.

    Raises:
        AnnotateError: the directory already holds a project.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / CONFIG_FILE
    if config_path.exists():
        raise AnnotateError(f"{directory} already holds an annotation project ({CONFIG_FILE} exists)")
    if db_url is None and (directory / DB_FILE).exists():
        raise AnnotateError(f"{directory / DB_FILE} already exists; remove it or choose another directory")
    _write_private(config_path, json.dumps({"db_url": db_url, "format": 1}, indent=2) + "\n")
    secret_key(directory)
    return read_config(directory)


def read_config(directory: Path) -> ProjectConfig:
    """Read a project directory's configuration; ``$MEDREWARDBENCH_ANNOTATE_DB`` overrides the URL.

    Args:
        directory: the project directory.

    Returns:
        The configuration.

    Raises:
        ProjectNotFound: there is no ``annotate.json``.
        AnnotateError: it is unreadable.
    """
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise ProjectNotFound(
            f"{directory} is not an annotation project (no {CONFIG_FILE}); create one with "
            "'medrewardbench annotate init'"
        )
    try:
        stored = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise AnnotateError(f"{config_path}: unreadable project file ({exc})") from exc
    stored_url = stored.get("db_url") if isinstance(stored, dict) else None
    if stored_url is not None and not isinstance(stored_url, str):
        raise AnnotateError(f"{config_path}: 'db_url' must be a string or null")
    url = os.environ.get(DB_URL_ENV) or stored_url or sqlite_url(directory / DB_FILE)
    return ProjectConfig(directory=directory, db_url=url, stored_url=stored_url)


def secret_key(directory: Path) -> bytes:
    """The project's secret key, created (64 random bytes, mode 0600) when missing.

    Args:
        directory: the project directory.

    Returns:
        The key bytes.
    """
    path = directory / SECRET_FILE
    if not path.exists():
        _write_private(path, secrets.token_hex(64) + "\n")
    return path.read_text(encoding="ascii").strip().encode("ascii")


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)

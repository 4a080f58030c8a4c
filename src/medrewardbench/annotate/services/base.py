"""What every service shares: the caller's identity, the open project, the access checks and the audit log.

A service is built on a :class:`ProjectContext` (the database, the signing key, the fixed
settings) and every method that reads or writes on someone's behalf takes the caller's
:class:`Identity`. Access is checked in the service, whichever door the call came through (a
page, the API, the command line): :func:`require_admin` for admin functions, and
:func:`own_assignment` finds only the caller's own assignments (someone else's id gives
:class:`NotFound`, exactly like an id that does not exist). Every write is committed before the
method returns, together with its audit log entry (:func:`audit`: who, when, the old value and
the new one).
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from medrewardbench.annotate.config import (
    AnnotateError,
    Forbidden,
    InvalidInput,
    NotFound,
    ProjectConfig,
    secret_key,
)
from medrewardbench.annotate.db import (
    ApiToken,
    Assignment,
    AuditEntry,
    Database,
    Item,
    ProjectRow,
    User,
    migrate,
    utcnow,
)
from medrewardbench.annotate.security import Signer
from medrewardbench.dimensions import DIMENSIONS

ROLES: tuple[str, ...] = ("annotator", "admin")
MODES: tuple[str, ...] = ("pairs", "screening")
DECISIONS: tuple[str, ...] = ("accept", "reject")
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
PUBLIC_ID = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""The shape of the opaque ids in URLs; anything else names nothing and is not looked up."""
MAX_COMMENT = 5000
MAX_REASON = 1000
MAX_SECONDS = 86_400.0
MAX_TOKEN_LABEL = 100
MAX_GUIDELINES = 100_000
UNKNOWN_USER = "unknown user"
"""How the audit log names the author of a failed login with a name that is no user's."""


class LoginRefused(InvalidInput):
    """Wrong name or password (the message never says which)."""


class StaleSubmission(AnnotateError):
    """A save based on an older revision of the answer than the one stored (another tab saved since).

    Args:
        message: what happened, for the caller.
        revision: the revision stored now.
    """

    def __init__(self, message: str, revision: int):
        super().__init__(message)
        self.revision = revision


class RateLimited(AnnotateError):
    """Too many failed logins; ``retry_after`` seconds until the next attempt is allowed.

    Args:
        message: what happened, for the caller.
        retry_after: seconds until the next attempt is allowed.
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Identity:
    """Who is calling: a logged-in user (browser session or API token), or the command line."""

    user_id: int | None
    name: str
    role: str
    csrf: str | None = None
    via: str = "session"

    @property
    def is_admin(self) -> bool:
        """Whether the caller may use admin functions."""
        return self.role == "admin"

    @classmethod
    def command_line(cls) -> Identity:
        """The identity of the shell user running a command (an admin, named ``cli:<os user>``)."""
        try:
            who = getpass.getuser()
        except Exception:
            who = "unknown"
        return cls(None, f"cli:{who}", "admin", via="cli")


@dataclass(frozen=True)
class Settings:
    """A project's fixed settings."""

    name: str
    mode: str
    per_case: int
    seed: int
    repeat_share: float
    created_at: datetime


class ProjectContext:
    """An open project's database, signing key and fixed settings: what every service is built on.

    Args:
        config: where its data lives.
        upgrade: bring the database schema to the newest migration first.

    Raises:
        AnnotateError: the database holds no project.
    """

    def __init__(self, config: ProjectConfig, *, upgrade: bool = True):
        self.config = config
        if upgrade:
            migrate(config.db_url)
        self.db = Database(config.db_url)
        self.signer = Signer(secret_key(config.directory))
        with self.db.read() as s:
            row = s.get(ProjectRow, 1)
            if row is None:
                raise AnnotateError(f"{config.directory}: the database holds no project (was 'init' interrupted?)")
            self.settings = Settings(row.name, row.mode, row.per_case, row.seed, row.repeat_share, row.created_at)

    def close(self) -> None:
        """Release the database connections."""
        self.db.dispose()

    @property
    def is_pairs(self) -> bool:
        """Whether the project labels pairs (else it screens questions)."""
        return self.settings.mode == "pairs"

    @property
    def dimensions(self) -> tuple[str, ...]:
        """What an item is labelled on: the six dimensions of a pair, or a question's ``decision``."""
        return DIMENSIONS if self.is_pairs else ("decision",)

    def guidelines_text(self) -> str:
        """The guidelines (markdown), for everyone who may work on the project.

        Returns:
            The text.
        """
        with self.db.read() as s:
            return s.scalar(select(ProjectRow.guidelines).where(ProjectRow.id == 1)) or ""


def require_admin(actor: Identity) -> None:
    """Refuse a caller who is not an admin (the command line is one).

    Args:
        actor: the caller.

    Raises:
        Forbidden: not an admin.
    """
    if not actor.is_admin:
        raise Forbidden("this needs an admin")


def require_self_or_admin(actor: Identity, name: str, what: str) -> None:
    """Refuse a caller who acts on another user's account without being an admin.

    Args:
        actor: the caller.
        name: the account's user.
        what: what is refused, for the message (``set another user's password``).

    Raises:
        Forbidden: someone else's account, and the caller is no admin.
    """
    if not actor.is_admin and actor.name != name:
        raise Forbidden(f"only an admin can {what}")


def own_assignment(
    s: Session, identity: Identity, assignment_id: str, *, lock: bool = False
) -> tuple[Assignment, Item]:
    """One of the caller's own assignments and its item; anyone else's is not found.

    Args:
        s: an open session.
        identity: the caller.
        assignment_id: the assignment's public id.
        lock: lock the assignment's row for the rest of the transaction.

    Returns:
        The assignment and its item.

    Raises:
        NotFound: no such assignment in the caller's queue.
    """
    query = (
        select(Assignment, Item)
        .join(Item, Item.id == Assignment.item_id)
        .where(Assignment.public_id == assignment_id, Assignment.user_id == identity.user_id)
    )
    if lock:
        query = query.with_for_update(of=Assignment)
    known = identity.user_id is not None and PUBLIC_ID.match(assignment_id) is not None
    found = s.execute(query).first() if known else None
    if found is None:
        raise NotFound("no such case in your queue")
    return found[0], found[1]


def user_by_name(s: Session, name: str) -> User:
    """A user by name.

    Raises:
        NotFound: no such user.
    """
    user = s.scalar(select(User).where(User.name == name)) if USER_NAME.match(name) else None
    if user is None:
        raise NotFound(f"no user named {name!r}")
    return user


def revoke_tokens(s: Session, user_id: int) -> int:
    """Revoke every live API token of a user; returns how many."""
    return rowcount(
        s.execute(
            update(ApiToken)
            .where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
    )


def rowcount(result: Any) -> int:
    """The rows an UPDATE or DELETE changed (a CursorResult's rowcount)."""
    return int(getattr(result, "rowcount", 0) or 0)


def checked_text(value: str, name: str, limit: int) -> str:
    """A text field as given, or InvalidInput naming the field: too long, or holding a NUL.

    PostgreSQL cannot store NUL in text; it is refused everywhere (rather than dropped), so that
    both databases keep exactly what was typed and nothing is changed without saying so.
    """
    if len(value) > limit:
        raise InvalidInput(f"{name}: limited to {limit:,} characters (this one has {len(value):,})")
    if "\x00" in value:
        raise InvalidInput(f"{name}: it contains a NUL character (\\0), which cannot be stored; remove it")
    return value


def audit(
    s: Session,
    actor: Identity,
    action: str,
    target: str,
    old: Any,
    new: Any,
    client: str | None = None,
) -> None:
    """Add an audit log entry to the transaction (committed with the change it records)."""
    s.add(
        AuditEntry(
            at=utcnow(), actor=actor.name[:64], action=action, target=target[:200], old=old, new=new, client=client
        )
    )

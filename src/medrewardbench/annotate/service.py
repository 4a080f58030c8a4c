"""Everything that is done to an annotation project: the pages, the API and the command line all call this.

Access control lives here, not in the routes: every function that reads or writes an assignment
takes the caller's :class:`Identity` and only ever finds that caller's own assignments (someone
else's id gives :class:`NotFound`, exactly like an id that does not exist). Admin functions
check the role. Every write is committed before the function returns, together with its audit
log entry (who, when, the old value and the new one).

Labels are stored in **source order** (1 = response_1): the A/B an annotator clicks is mapped
back through the order that annotator was shown (:func:`medrewardbench.dimensions.to_source`).
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.orm import Session

from medrewardbench.annotate import assign
from medrewardbench.annotate.config import (
    CONFIG_FILE,
    DB_FILE,
    SECRET_FILE,
    AnnotateError,
    Forbidden,
    InvalidInput,
    NotFound,
    ProjectConfig,
    read_config,
    secret_key,
    write_config,
)
from medrewardbench.annotate.db import (
    MAX_ROW_ID,
    Adjudication,
    ApiToken,
    Assignment,
    AuditEntry,
    Database,
    ImageBlob,
    Item,
    LoginAttempt,
    ProjectRow,
    Submission,
    User,
    WebSession,
    migrate,
    utcnow,
)
from medrewardbench.annotate.guidelines import SCREENING_REASONS, default_guidelines
from medrewardbench.annotate.security import (
    API_TOKEN_PREFIX,
    LOGIN_WINDOW,
    MAX_FAILURES_PER_CLIENT,
    MAX_FAILURES_PER_USER,
    SESSION_IDLE,
    SESSION_LIFETIME,
    Signer,
    check_password_strength,
    hash_password,
    needs_rehash,
    new_token,
    public_id,
    token_digest,
    verify_password,
)
from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order, to_position, to_source
from medrewardbench.errors import DataError, DataProblem, ImageError

logger = logging.getLogger(__name__)

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
_LAST_SEEN_EVERY = timedelta(minutes=5)
_LOGIN_LOCK_KEY = 0x6D72625F6C6F67
"""PostgreSQL advisory lock that serialises the login-attempt reservations of every process."""
_IMAGE_CACHE_BYTES = 128 * 1024 * 1024
_IMAGE_CACHE_ITEMS = 64


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


@dataclass(frozen=True)
class UserInfo:
    """A user as the user list shows them."""

    name: str
    role: str
    active: bool
    assigned: int
    done: int
    tokens: int
    created_at: datetime


@dataclass(frozen=True)
class TokenInfo:
    """An API token (never its value)."""

    token_id: int
    label: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool


@dataclass(frozen=True)
class QueueRow:
    """One line of an annotator's queue."""

    public_id: str
    position: int
    done: bool
    seconds: float | None
    updated_at: datetime | None


@dataclass(frozen=True)
class QueueView:
    """An annotator's queue and progress."""

    rows: tuple[QueueRow, ...]
    done: int
    total: int
    next_todo: str | None


@dataclass(frozen=True)
class ShownSubmission:
    """A saved answer as its author sees it (A/B in the order they were shown)."""

    choices: Mapping[str, str]
    cannot_judge: bool
    cannot_judge_reason: str
    comment: str
    decision: str | None
    reasons: tuple[str, ...]
    seconds: float
    revision: int
    updated_at: datetime


@dataclass(frozen=True)
class CaseView:
    """One assignment as its annotator sees it: nothing that names a source or a model."""

    public_id: str
    kind: str
    position: int
    total: int
    done: int
    question: str
    answer_a: str
    answer_b: str
    reference_answer: str | None
    answer_type: str | None
    has_image: bool
    dicom: Any
    """A :class:`medrewardbench.images.dicom.DicomDisplay` for DICOM images, else None."""
    previous_id: str | None
    next_id: str | None
    next_todo_id: str | None
    submission: ShownSubmission | None


@dataclass(frozen=True)
class PairAnswer:
    """What an annotator submits for a pair, in the order they were shown."""

    choices: Mapping[str, str] = field(default_factory=dict)
    """Dimension -> ``"A"`` or ``"B"``."""
    cannot_judge: bool = False
    cannot_judge_reason: str = ""
    comment: str = ""
    seconds: float | None = None
    expected_revision: int | None = None
    """The revision the answer was made on (0: none saved yet); None saves without the check."""


@dataclass(frozen=True)
class ScreeningAnswer:
    """What an annotator submits for a question."""

    decision: str = ""
    reasons: tuple[str, ...] = ()
    comment: str = ""
    seconds: float | None = None
    expected_revision: int | None = None
    """The revision the answer was made on (0: none saved yet); None saves without the check."""


class Project:
    """An open annotation project.

    Args:
        config: where its data lives.
        upgrade: bring the database schema to the newest migration first.
    """

    def __init__(self, config: ProjectConfig, *, upgrade: bool = True):
        self.config = config
        if upgrade:
            migrate(config.db_url)
        self.db = Database(config.db_url)
        self.signer = Signer(secret_key(config.directory))
        self._images: OrderedDict[tuple[int, float | None, float | None], tuple[bytes, str]] = OrderedDict()
        self._image_bytes = 0
        self._images_lock = threading.Lock()
        self._displays: dict[int, Any] = {}
        with self.db.read() as s:
            row = s.get(ProjectRow, 1)
            if row is None:
                raise AnnotateError(f"{config.directory}: the database holds no project (was 'init' interrupted?)")
            self.settings = Settings(row.name, row.mode, row.per_case, row.seed, row.repeat_share, row.created_at)

    @classmethod
    def open(cls, directory: str | Path, *, upgrade: bool = True) -> Project:
        """Open a project directory.

        Args:
            directory: the project directory.
            upgrade: run the migrations first.

        Returns:
            The project.

        Raises:
            ProjectNotFound: the directory holds no project.
        """
        return cls(read_config(Path(directory)), upgrade=upgrade)

    def close(self) -> None:
        """Release the database connections."""
        self.db.dispose()

    @property
    def is_pairs(self) -> bool:
        """Whether the project labels pairs (else it screens questions)."""
        return self.settings.mode == "pairs"

    # ----------------------------------------------------------------------------------------
    # Users
    # ----------------------------------------------------------------------------------------

    def add_user(self, actor: Identity, name: str, role: str, password: str) -> None:
        """Add a user; an annotator gets a share of the work at once.

        Args:
            actor: who does it (an admin or the command line).
            name: letters, digits, ``._@-``; up to 64 characters.
            role: ``annotator`` or ``admin``.
            password: at least 10 characters.

        Raises:
            Forbidden: the actor is not an admin.
            InvalidInput: a bad name, role or password, or the name is taken.
        """
        _require_admin(actor)
        if not USER_NAME.match(name):
            raise InvalidInput(
                "user names are 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit"
            )
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        encoded = hash_password(password)
        with self.db.write() as s:
            if s.scalar(select(User.id).where(User.name == name)) is not None:
                raise InvalidInput(f"a user named {name!r} exists already")
            s.add(User(name=name, role=role, password_hash=encoded, active=True, created_at=utcnow()))
            s.flush()
            _audit(s, actor, "user.add", f"user:{name}", None, {"role": role})
            if role == "annotator":
                self._rebalance(s, actor)

    def set_password(self, actor: Identity, name: str, password: str, client: str = "") -> None:
        """Set a user's password, end all their sessions and revoke their API tokens.

        Whoever knew the old password may have opened a session or made a token with it; a new
        password shuts them out, so both go (the user logs in again and makes new tokens).

        Args:
            actor: an admin, the command line, or the user themself.
            name: the user.
            password: the new password.
            client: the caller's address, for the audit log.

        Raises:
            Forbidden: someone else's password, and the actor is no admin.
            NotFound: no such user.
            InvalidInput: too short.
        """
        if not actor.is_admin and actor.name != name:
            raise Forbidden("only an admin can set another user's password")
        encoded = hash_password(password)
        with self.db.write() as s:
            user = _user_by_name(s, name)
            user.password_hash = encoded
            sessions = _rowcount(s.execute(delete(WebSession).where(WebSession.user_id == user.id)))
            tokens = _revoke_tokens(s, user.id)
            _audit(
                s,
                actor,
                "user.password",
                f"user:{name}",
                None,
                {"sessions_ended": sessions, "tokens_revoked": tokens},
                client or None,
            )

    def change_own_password(self, identity: Identity, current: str, new: str, client: str) -> None:
        """A user changes their own password, proving the current one (rate-limited like a login).

        Args:
            identity: the user.
            current: their current password.
            new: the new one.
            client: the caller's address.

        Raises:
            InvalidInput: the current password is wrong, or the new one too short.
            RateLimited: too many failed attempts.
            ServerBusy: too many password checks at once.
        """
        check_password_strength(new)
        try:
            self._authenticate(identity.name, current, client)
        except LoginRefused as exc:
            raise InvalidInput("the current password is wrong") from exc
        self.set_password(identity, identity.name, new, client)

    def set_active(self, actor: Identity, name: str, active: bool) -> None:
        """Deactivate a user (their unstarted work goes to others; their labels stay) or reactivate them.

        Args:
            actor: an admin or the command line.
            name: the user.
            active: the new state.

        Raises:
            Forbidden: the actor is not an admin.
            NotFound: no such user.
        """
        _require_admin(actor)
        with self.db.write() as s:
            user = _user_by_name(s, name)
            old = user.active
            user.active = active
            if not active:
                s.execute(delete(WebSession).where(WebSession.user_id == user.id))
                _revoke_tokens(s, user.id)
            s.flush()
            _audit(s, actor, "user.active", f"user:{name}", {"active": old}, {"active": active})
            if user.role == "annotator":
                self._rebalance(s, actor)

    def list_users(self) -> list[UserInfo]:
        """Every user with their workload.

        Returns:
            Users sorted by role then name.
        """
        with self.db.read() as s:
            assigned = dict(s.execute(select(Assignment.user_id, func.count()).group_by(Assignment.user_id)).all())
            done = dict(
                s.execute(
                    select(Assignment.user_id, func.count())
                    .join(Submission, Submission.assignment_id == Assignment.id)
                    .group_by(Assignment.user_id)
                ).all()
            )
            tokens = dict(
                s.execute(
                    select(ApiToken.user_id, func.count())
                    .where(ApiToken.revoked_at.is_(None))
                    .group_by(ApiToken.user_id)
                ).all()
            )
            users = s.scalars(select(User).order_by(User.role, User.name)).all()
            return [
                UserInfo(
                    u.name,
                    u.role,
                    u.active,
                    assigned.get(u.id, 0),
                    done.get(u.id, 0),
                    tokens.get(u.id, 0),
                    u.created_at,
                )
                for u in users
            ]

    def create_api_token(self, actor: Identity, name: str, label: str = "") -> str:
        """Create an API token for a user; the value is shown once and stored only as a hash.

        Args:
            actor: the user themself, an admin, or the command line.
            name: the user the token acts as.
            label: a note to recognise it by.

        Returns:
            The token (``mrb_...``), for ``Authorization: Bearer <token>``.

        Raises:
            Forbidden: a token for someone else, and the actor is no admin.
            NotFound: no such user (or an inactive one).
        """
        if not actor.is_admin and actor.name != name:
            raise Forbidden("only an admin can create a token for another user")
        label = _checked_text(label, "label", MAX_TOKEN_LABEL)
        token = new_token(API_TOKEN_PREFIX)
        with self.db.write() as s:
            user = _user_by_name(s, name)
            if not user.active:
                raise NotFound(f"user {name!r} is deactivated")
            row = ApiToken(user_id=user.id, token_hash=token_digest(token), label=label, created_at=utcnow())
            s.add(row)
            s.flush()
            _audit(s, actor, "token.create", f"user:{name}", None, {"token_id": row.id, "label": row.label})
        return token

    def list_api_tokens(self, actor: Identity, name: str) -> list[TokenInfo]:
        """A user's API tokens.

        Args:
            actor: the user themself or an admin.
            name: the user.

        Returns:
            Tokens, newest first.

        Raises:
            Forbidden: someone else's tokens, and the actor is no admin.
            NotFound: no such user.
        """
        if not actor.is_admin and actor.name != name:
            raise Forbidden("only an admin can list another user's tokens")
        with self.db.read() as s:
            user = _user_by_name(s, name)
            rows = s.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id.desc())).all()
            return [TokenInfo(t.id, t.label, t.created_at, t.last_used_at, t.revoked_at is not None) for t in rows]

    def revoke_api_token(self, actor: Identity, name: str, token_id: int) -> None:
        """Revoke one of a user's tokens.

        Args:
            actor: the user themself or an admin.
            name: the token's user.
            token_id: the token's id (from :meth:`list_api_tokens`).

        Raises:
            Forbidden: someone else's token, and the actor is no admin.
            NotFound: no such token for that user.
        """
        if not actor.is_admin and actor.name != name:
            raise Forbidden("only an admin can revoke another user's token")
        if not 1 <= token_id <= MAX_ROW_ID:
            raise NotFound("no such token")
        with self.db.write() as s:
            user = _user_by_name(s, name)
            token = s.scalar(select(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user.id))
            if token is None:
                raise NotFound("no such token")
            if token.revoked_at is None:
                token.revoked_at = utcnow()
                _audit(
                    s,
                    actor,
                    "token.revoke",
                    f"user:{name}",
                    {"token_id": token_id, "revoked": False},
                    {"revoked": True},
                )

    # ----------------------------------------------------------------------------------------
    # Authentication
    # ----------------------------------------------------------------------------------------

    def login(self, name: str, password: str, client: str) -> tuple[str, Identity]:
        """Check a name and password and open a browser session.

        Rate limits: :data:`MAX_FAILURES_PER_USER` failures for one name, or
        :data:`MAX_FAILURES_PER_CLIENT` from one address, within :data:`LOGIN_WINDOW` lock further
        attempts (right or wrong) until the window has passed. They hold under concurrency: see
        :meth:`_authenticate`.

        Args:
            name: the user name.
            password: the password.
            client: the caller's address, for rate limiting and the audit log.

        Returns:
            The session token for the cookie, and the identity (with the session's CSRF token).

        Raises:
            RateLimited: too many failures.
            LoginRefused: wrong name or password, or a deactivated user.
            InvalidInput: the name holds control characters (such as NUL).
            ServerBusy: too many password checks at once; retry shortly.
        """
        user_id, role, stored = self._authenticate(name, password, client)
        name = name.strip()
        now = utcnow()
        token = new_token()
        csrf = new_token()
        rehashed = None
        if needs_rehash(stored):
            try:
                rehashed = hash_password(password)
            except InvalidInput:  # a password from before the length rule: it still logs in, as it is
                rehashed = None
        with self.db.write() as s:
            s.add(
                WebSession(
                    token_hash=token_digest(token),
                    user_id=user_id,
                    csrf_token=csrf,
                    created_at=now,
                    expires_at=now + SESSION_LIFETIME,
                    last_seen_at=now,
                )
            )
            if rehashed is not None:
                s.execute(update(User).where(User.id == user_id).values(password_hash=rehashed))
            identity = Identity(user_id, name, role, csrf, "session")
            _audit(s, identity, "login", f"user:{name}", None, None, client[:64])
            s.execute(delete(WebSession).where(WebSession.expires_at < now))
        return token, identity

    def _authenticate(self, name: str, password: str, client: str) -> tuple[int, str, str]:
        """Check a password, counting the attempt against the rate limits before the hash is computed.

        The attempt is recorded as a failure (a reservation) in the same transaction that counts
        the earlier ones, and that transaction is serialised (SQLite: ``BEGIN IMMEDIATE``;
        PostgreSQL: an advisory lock), so parallel attempts cannot all pass the count: the limit
        holds however many arrive at once. Only then is the password hashed; a right one turns
        the reservation into a success. A name that is no user's is recorded as a keyed digest
        (it may be a password typed into the wrong box), never as typed.

        Args:
            name: the user name.
            password: the password.
            client: the caller's address.

        Returns:
            The user's id, role and stored hash.

        Raises:
            RateLimited: too many failures.
            LoginRefused: wrong name or password, or a deactivated user.
            InvalidInput: the name holds control characters (such as NUL).
            ServerBusy: too many password checks at once (the attempt is not counted).
        """
        name = name.strip()
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
            raise InvalidInput("user name: it contains a control character (such as NUL); type it again")
        client = client[:64]
        now = utcnow()
        with self.db.write() as s:
            if not self.db.is_sqlite:
                s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOGIN_LOCK_KEY})
            user = s.scalar(select(User).where(User.name == name)) if USER_NAME.match(name) else None
            key = user.name if user is not None else self.signer.unknown_name(name)
            self._check_rate(s, key, client, now)
            attempt = LoginAttempt(username=key, client=client, at=now, success=False)
            s.add(attempt)
            s.flush()
            attempt_id = attempt.id
            stored = user.password_hash if user is not None else None
            user_id = user.id if user is not None else None
            active = bool(user is not None and user.active)
            role = user.role if user is not None else ""
        try:
            ok = verify_password(stored, password) and active
        except BaseException:
            # not checked (the server is busy, or the request was cancelled): the attempt does not count
            with self.db.write() as s:
                s.execute(delete(LoginAttempt).where(LoginAttempt.id == attempt_id))
            raise
        with self.db.write() as s:
            if ok:
                s.execute(update(LoginAttempt).where(LoginAttempt.id == attempt_id).values(success=True))
            else:
                actor = name if user is not None else UNKNOWN_USER
                target = f"user:{name}" if user is not None else f"unknown-user:{key[1:]}"
                _audit(s, Identity(None, actor, "", via="login"), "login.failed", target, None, None, client)
        if not ok or user_id is None or stored is None:
            raise LoginRefused("wrong user name or password")
        return user_id, role, stored

    def _check_rate(self, s: Session, key: str, client: str, now: datetime) -> None:
        since = now - LOGIN_WINDOW
        last_ok = s.scalar(
            select(func.max(LoginAttempt.at)).where(LoginAttempt.username == key, LoginAttempt.success.is_(True))
        )
        user_since = max(since, last_ok) if last_ok is not None else since
        user_failures = s.scalars(
            select(LoginAttempt.at)
            .where(LoginAttempt.username == key, LoginAttempt.success.is_(False), LoginAttempt.at > user_since)
            .order_by(LoginAttempt.at)
        ).all()
        client_failures = s.scalars(
            select(LoginAttempt.at)
            .where(LoginAttempt.client == client, LoginAttempt.success.is_(False), LoginAttempt.at > since)
            .order_by(LoginAttempt.at)
        ).all()
        for failures, limit in ((user_failures, MAX_FAILURES_PER_USER), (client_failures, MAX_FAILURES_PER_CLIENT)):
            if len(failures) >= limit:
                unlock = failures[-limit] + LOGIN_WINDOW
                wait = max(1, int((unlock - now).total_seconds()) + 1)
                minutes = max(1, round(wait / 60))
                raise RateLimited(f"too many failed logins; try again in about {minutes} minute(s)", wait)

    def session_identity(self, token: str | None) -> Identity | None:
        """The identity behind a session cookie, or None when it is unknown, expired or idle too long.

        Args:
            token: the cookie value.

        Returns:
            The identity (with the session's CSRF token), or None.
        """
        if not token:
            return None
        now = utcnow()
        with self.db.read() as s:
            found = s.execute(
                select(WebSession, User)
                .join(User, User.id == WebSession.user_id)
                .where(WebSession.token_hash == token_digest(token))
            ).first()
            if found is None:
                return None
            session, user = found
            if not user.active or session.expires_at < now or session.last_seen_at + SESSION_IDLE < now:
                return None
            identity = Identity(user.id, user.name, user.role, session.csrf_token, "session")
            stale = session.last_seen_at + _LAST_SEEN_EVERY < now
            session_id = session.id
        if stale:
            with self.db.write() as s:
                s.execute(update(WebSession).where(WebSession.id == session_id).values(last_seen_at=now))
        return identity

    def logout(self, token: str | None, identity: Identity, client: str = "") -> None:
        """End a browser session.

        Args:
            token: the cookie value.
            identity: who is logging out.
            client: the caller's address, for the audit log.
        """
        if not token:
            return
        with self.db.write() as s:
            s.execute(delete(WebSession).where(WebSession.token_hash == token_digest(token)))
            _audit(s, identity, "logout", f"user:{identity.name}", None, None, client)

    def api_identity(self, token: str | None) -> Identity | None:
        """The identity behind an API token, or None for an unknown or revoked one.

        Args:
            token: the bearer token.

        Returns:
            The identity, or None.
        """
        if not token or not token.startswith(API_TOKEN_PREFIX):
            return None
        now = utcnow()
        with self.db.read() as s:
            found = s.execute(
                select(ApiToken, User)
                .join(User, User.id == ApiToken.user_id)
                .where(ApiToken.token_hash == token_digest(token))
            ).first()
            if found is None:
                return None
            row, user = found
            if row.revoked_at is not None or not user.active:
                return None
            stale = row.last_used_at is None or row.last_used_at + _LAST_SEEN_EVERY < now
            identity = Identity(user.id, user.name, user.role, None, "token")
            token_id = row.id
        if stale:
            with self.db.write() as s:
                s.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))
        return identity

    # ----------------------------------------------------------------------------------------
    # An annotator's work
    # ----------------------------------------------------------------------------------------

    def queue(self, identity: Identity) -> QueueView:
        """The caller's own queue, in their order, with their progress.

        Args:
            identity: the caller.

        Returns:
            The queue.
        """
        with self.db.read() as s:
            rows = s.execute(
                select(Assignment.public_id, Submission.seconds, Submission.updated_at)
                .outerjoin(Submission, Submission.assignment_id == Assignment.id)
                .where(Assignment.user_id == identity.user_id)
                .order_by(Assignment.sort_key, Assignment.id)
            ).all()
        out = tuple(
            QueueRow(pid, index, updated is not None, seconds, updated)
            for index, (pid, seconds, updated) in enumerate(rows, start=1)
        )
        todo = next((row.public_id for row in out if not row.done), None)
        return QueueView(out, sum(row.done for row in out), len(out), todo)

    def _own(
        self, s: Session, identity: Identity, assignment_id: str, *, lock: bool = False
    ) -> tuple[Assignment, Item]:
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

    def assignment_kind(self, identity: Identity, assignment_id: str) -> str:
        """Whether one of the caller's assignments is a ``pair`` or a ``question`` (a light query).

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.

        Returns:
            The item kind.

        Raises:
            NotFound: no such assignment in the caller's queue.
        """
        if not PUBLIC_ID.match(assignment_id):
            raise NotFound("no such case in your queue")
        with self.db.read() as s:
            kind = s.scalar(
                select(Item.kind)
                .join(Assignment, Assignment.item_id == Item.id)
                .where(Assignment.public_id == assignment_id, Assignment.user_id == identity.user_id)
            )
        if kind is None:
            raise NotFound("no such case in your queue")
        return kind

    def next_todo(self, identity: Identity, after: str | None = None) -> str | None:
        """The caller's next unfinished assignment after ``after`` in queue order (wrapping around).

        Args:
            identity: the caller.
            after: an assignment's public id, or None for the start of the queue.

        Returns:
            A public id, or None when everything is done.
        """
        rows = self.queue(identity).rows
        ids = [row.public_id for row in rows]
        start = ids.index(after) + 1 if after in ids else 0
        for row in (*rows[start:], *rows[:start]):
            if not row.done and row.public_id != after:
                return row.public_id
        return None

    def case_view(self, identity: Identity, assignment_id: str) -> CaseView:
        """One of the caller's assignments, as it is shown to them.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.

        Returns:
            The view: texts in the caller's A/B order and their saved answer, nothing else.

        Raises:
            NotFound: no such assignment in the caller's queue.
        """
        queue = self.queue(identity)
        with self.db.read() as s:
            assignment, item = self._own(s, identity, assignment_id)
            submission = s.get(Submission, assignment.id)
            payload = dict(item.payload)
            kind = item.kind
            order = Order(assignment.order_shown) if assignment.order_shown else Order.ORIGINAL
            saved = _shown(submission, order) if submission is not None else None
            has_image = item.image_id is not None
            dicom = self._dicom_display(s, item.image_id) if item.image_id is not None else None
        ids = [row.public_id for row in queue.rows]
        index = ids.index(assignment_id)
        later = [row.public_id for row in queue.rows[index + 1 :] if not row.done and row.public_id != assignment_id]
        earlier = [row.public_id for row in queue.rows[:index] if not row.done]
        if kind == "pair":
            first, second = (payload["response_1"], payload["response_2"])
            answer_a, answer_b = (first, second) if order is Order.ORIGINAL else (second, first)
        else:
            answer_a = answer_b = ""
        return CaseView(
            public_id=assignment_id,
            kind=kind,
            position=index + 1,
            total=queue.total,
            done=queue.done,
            question=payload.get("question", ""),
            answer_a=answer_a,
            answer_b=answer_b,
            reference_answer=payload.get("reference_answer"),
            answer_type=payload.get("answer_type"),
            has_image=has_image,
            dicom=dicom,
            previous_id=ids[index - 1] if index > 0 else None,
            next_id=ids[index + 1] if index + 1 < len(ids) else None,
            next_todo_id=next(iter(later + earlier), None),
            submission=saved,
        )

    def submit_pair(
        self, identity: Identity, assignment_id: str, answer: PairAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save (or change) the caller's labels for one pair; committed before returning.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            answer: A/B per dimension as shown, or "cannot judge" with a reason; an optional comment.
            client: the caller's address, for the audit log.

        Returns:
            The saved answer as the caller sees it.

        Raises:
            NotFound: no such assignment in the caller's queue.
            InvalidInput: a dimension without a choice (unless "cannot judge"), an unknown
                dimension or value, a missing reason, or an over-long text.
        """
        shown = _check_pair_answer(answer)
        with self.db.write() as s:
            assignment, item = self._own(s, identity, assignment_id, lock=True)
            if item.kind != "pair":
                raise InvalidInput("this case is a question to screen: accept or reject it")
            order = Order(assignment.order_shown) if assignment.order_shown else Order.ORIGINAL
            choices = {dim: int(to_source(shown[dim], order)) for dim in DIMENSIONS if dim in shown}  # type: ignore[arg-type]
            values = {
                "choices": choices,
                "shown_choices": dict(shown),
                "cannot_judge": answer.cannot_judge,
                "cannot_judge_reason": answer.cannot_judge_reason.strip() if answer.cannot_judge else "",
                "comment": answer.comment.strip(),
                "decision": None,
                "reasons": None,
            }
            submission = self._save(s, identity, assignment, values, answer, client)
            return _shown(submission, order)

    def submit_screening(
        self, identity: Identity, assignment_id: str, answer: ScreeningAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save (or change) the caller's decision on a question; committed before returning.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            answer: accept or reject, the reasons for a rejection, an optional comment.
            client: the caller's address, for the audit log.

        Returns:
            The saved answer.

        Raises:
            NotFound: no such assignment in the caller's queue.
            InvalidInput: no decision, an unknown reason, a rejection without a reason.
        """
        decision, reasons = _check_screening_answer(answer)
        with self.db.write() as s:
            assignment, item = self._own(s, identity, assignment_id, lock=True)
            if item.kind != "question":
                raise InvalidInput("this case is a pair: choose A or B")
            values = {
                "choices": {},
                "shown_choices": {},
                "cannot_judge": False,
                "cannot_judge_reason": "",
                "comment": answer.comment.strip(),
                "decision": decision,
                "reasons": list(reasons),
            }
            submission = self._save(s, identity, assignment, values, answer, client)
            return _shown(submission, Order.ORIGINAL)

    def _save(
        self,
        s: Session,
        identity: Identity,
        assignment: Assignment,
        values: dict[str, Any],
        answer: PairAnswer | ScreeningAnswer,
        client: str,
    ) -> Submission:
        """Store an answer (the assignment's row is locked by the caller).

        A save that stores exactly what is stored already (a retried request, a page saved
        twice) changes nothing: no seconds added, the same revision, no audit entry. A save made
        on an older revision than the stored one (``expected_revision``; another tab or client
        saved since) is refused with :class:`StaleSubmission`.
        """
        submission = s.get(Submission, assignment.id)
        if submission is not None and all(_stored_value(submission, key) == value for key, value in values.items()):
            return submission
        current = submission.revision if submission is not None else 0
        expected = answer.expected_revision
        if expected is not None and expected != current:
            raise StaleSubmission(
                f"this case was saved elsewhere (another tab or window) after you opened it: the saved answer is "
                f"revision {current}, yours was made on revision {expected}",
                current,
            )
        seconds = answer.seconds
        spent = 0.0 if seconds is None else round(min(max(float(seconds), 0.0), MAX_SECONDS), 1)
        now = utcnow()
        old = _submission_record(submission) if submission is not None else None
        if submission is None:
            submission = Submission(
                assignment_id=assignment.id, seconds=spent, revision=1, submitted_at=now, updated_at=now, **values
            )
            s.add(submission)
        else:
            for key, value in values.items():
                setattr(submission, key, value)
            submission.seconds = round((submission.seconds or 0.0) + spent, 1)
            submission.revision = (submission.revision or 0) + 1
            submission.updated_at = now
        s.flush()
        new = _submission_record(submission)
        new["seconds_added"] = spent
        _audit(s, identity, "submit", f"assignment:{assignment.public_id}", old, new, client)
        return submission

    # ----------------------------------------------------------------------------------------
    # Images
    # ----------------------------------------------------------------------------------------

    def assignment_image(
        self, identity: Identity, assignment_id: str, center: float | None = None, width: float | None = None
    ) -> tuple[bytes, str]:
        """The image of one of the caller's assignments, ready for a browser.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            center: DICOM window center (with ``width``); None for the default rendering.
            width: DICOM window width.

        Returns:
            (bytes, media type). DICOM and formats browsers cannot show are rendered to PNG.

        Raises:
            NotFound: no such assignment, or it has no image.
            InvalidInput: a window on an image that is not DICOM, or an invalid window.
        """
        with self.db.read() as s:
            _, item = self._own(s, identity, assignment_id)
            image_id = item.image_id
        if image_id is None:
            raise NotFound("this case has no image")
        return self._render(image_id, center, width)

    def item_image(
        self, identity: Identity, item_id: str, center: float | None = None, width: float | None = None
    ) -> tuple[bytes, str]:
        """An item's image, for an admin (adjudication).

        Args:
            identity: an admin.
            item_id: the item's public id.
            center: DICOM window center.
            width: DICOM window width.

        Returns:
            (bytes, media type).

        Raises:
            Forbidden: not an admin.
            NotFound: no such item, or it has no image.
        """
        _require_admin(identity)
        if not PUBLIC_ID.match(item_id):
            raise NotFound("no such item image")
        with self.db.read() as s:
            image_id = s.scalar(select(Item.image_id).where(Item.public_id == item_id))
        if image_id is None:
            raise NotFound("no such item image")
        return self._render(image_id, center, width)

    def _render(self, image_id: int, center: float | None, width: float | None) -> tuple[bytes, str]:
        from medrewardbench.annotate.media import pixels_only_png
        from medrewardbench.images import encode_png, is_dicom, load_image, render_dicom_window

        for value, name in ((center, "center"), (width, "width")):
            if value is not None and not math.isfinite(value):
                raise InvalidInput(f"{name}: the window {name} must be a finite number")
        key = (image_id, center, width)
        with self._images_lock:
            cached = self._images.get(key)
            if cached is not None:
                self._images.move_to_end(key)
                return cached
        with self.db.read() as s:
            blob = s.get(ImageBlob, image_id)
            if blob is None:
                raise NotFound("no such image")
            data, name = bytes(blob.data), blob.name
        ref = ImageRef.from_bytes(data, name)
        try:
            dicom = is_dicom(ref)
            if (center is None) != (width is None):
                raise InvalidInput("give both the window center and the window width")
            if center is not None and width is not None:
                if not dicom:
                    raise InvalidInput("window/level applies to DICOM images only")
                result = (encode_png(render_dicom_window(ref, center, width), compress_level=1), "image/png")
            elif dicom:
                result = (encode_png(load_image(ref), compress_level=1), "image/png")
            else:
                # never the stored bytes: their metadata (EXIF, XMP, text chunks) could unblind the review
                result = (pixels_only_png(data, f"image {name!r}"), "image/png")
        except ImageError as exc:
            raise InvalidInput(str(exc)) from exc
        except (OSError, ValueError, SyntaxError) as exc:  # PIL's header errors on a corrupt file
            raise InvalidInput(f"the image cannot be shown ({type(exc).__name__}: {exc})") from exc
        with self._images_lock:
            if key not in self._images:
                self._images[key] = result
                self._image_bytes += len(result[0])
            while len(self._images) > _IMAGE_CACHE_ITEMS or self._image_bytes > _IMAGE_CACHE_BYTES:
                _, (evicted, _media) = self._images.popitem(last=False)
                self._image_bytes -= len(evicted)
        return result

    def _dicom_display(self, s: Session, image_id: int) -> Any:
        from medrewardbench.images import dicom_display, is_dicom

        with self._images_lock:
            if image_id in self._displays:
                return self._displays[image_id]
        image = s.get(ImageBlob, image_id)
        if image is None:
            return None
        ref = ImageRef.from_bytes(image.data, image.name)
        try:
            found = dicom_display(ref) if is_dicom(ref) else None
        except ImageError:
            found = None
        with self._images_lock:
            self._displays[image_id] = found
        return found

    # ----------------------------------------------------------------------------------------
    # Guidelines and admin
    # ----------------------------------------------------------------------------------------

    def guidelines(self) -> str:
        """The guidelines (markdown).

        Returns:
            The text.
        """
        with self.db.read() as s:
            return s.scalar(select(ProjectRow.guidelines).where(ProjectRow.id == 1)) or ""

    def set_guidelines(self, actor: Identity, text: str, client: str = "") -> None:
        """Replace the guidelines.

        Args:
            actor: an admin.
            text: markdown (at most 100,000 characters).
            client: the caller's address, for the audit log.

        Raises:
            Forbidden: not an admin.
            InvalidInput: too long.
        """
        _require_admin(actor)
        text = _checked_text(text, "guidelines", MAX_GUIDELINES)
        with self.db.write() as s:
            row = s.get(ProjectRow, 1)
            assert row is not None
            old = row.guidelines
            row.guidelines = text.replace("\r\n", "\n")
            _audit(
                s, actor, "guidelines.update", "project", {"guidelines": old}, {"guidelines": row.guidelines}, client
            )

    def adjudicate(
        self, actor: Identity, item_id: str, values: Mapping[str, str], note: str = "", client: str = ""
    ) -> None:
        """Record an admin's decision for dimensions of an item (a pair: 1/2; a question: accept/reject).

        Args:
            actor: an admin.
            item_id: the item's public id.
            values: dimension (``decision`` for a question) -> value; an empty value removes a decision.
            note: why, for the record.
            client: the caller's address, for the audit log.

        Raises:
            Forbidden: not an admin.
            NotFound: no such item.
            InvalidInput: an unknown dimension or value.
        """
        _require_admin(actor)
        note = _checked_text(note, "note", MAX_COMMENT)
        if not PUBLIC_ID.match(item_id):
            raise NotFound("no such item")
        with self.db.write() as s:
            item = s.scalar(select(Item).where(Item.public_id == item_id, Item.role == "primary"))
            if item is None:
                raise NotFound("no such item")
            allowed = {dim: ("1", "2") for dim in DIMENSIONS} if item.kind == "pair" else {"decision": DECISIONS}
            for dim, value in values.items():
                if dim not in allowed:
                    raise InvalidInput(f"unknown dimension {dim[:40]!r}")
                if value and value not in allowed[dim]:
                    raise InvalidInput(f"{dim}: choose one of {', '.join(allowed[dim])}")
            for dim, value in values.items():
                existing = s.scalar(
                    select(Adjudication).where(Adjudication.item_id == item.id, Adjudication.dimension == dim)
                )
                old = {"value": existing.value, "note": existing.note} if existing is not None else None
                if not value:
                    if existing is not None:
                        s.delete(existing)
                        _audit(s, actor, "adjudicate", f"item:{item_id}:{dim}", old, None, client)
                    continue
                if existing is None:
                    s.add(
                        Adjudication(
                            item_id=item.id,
                            dimension=dim,
                            value=value,
                            note=note,
                            actor=actor.name[:64],
                            at=utcnow(),
                        )
                    )
                elif existing.value == value and existing.note == note:
                    continue
                else:
                    existing.value = value
                    existing.note = note
                    existing.actor = actor.name[:64]
                    existing.at = utcnow()
                _audit(s, actor, "adjudicate", f"item:{item_id}:{dim}", old, {"value": value, "note": note}, client)

    def record_export(self, actor: Identity, what: str, items: int, client: str = "") -> None:
        """Write an export to the audit log (who took which data, and when).

        Args:
            actor: who exported.
            what: the export's name.
            items: how many items it held.
            client: the caller's address.
        """
        with self.db.write() as s:
            _audit(s, actor, "export", f"export:{what}", None, {"items": items}, client)

    def audit_entries(self, actor: Identity, limit: int = 200, before: int | None = None) -> list[AuditEntry]:
        """The newest audit log entries.

        Args:
            actor: an admin.
            limit: how many.
            before: only entries with a smaller id (paging).

        Returns:
            Entries, newest first (detached copies).

        Raises:
            Forbidden: not an admin.
        """
        _require_admin(actor)
        with self.db.read() as s:
            query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(max(1, min(limit, 1000)))
            if before is not None and before <= MAX_ROW_ID:  # beyond it every entry is older
                query = query.where(AuditEntry.id < max(before, 0))
            rows = list(s.scalars(query).all())
            s.expunge_all()
            return rows

    def rebalance(self, actor: Identity) -> dict[str, int]:
        """Recompute the queues now (normally done when annotators are added or deactivated).

        Args:
            actor: an admin or the command line.

        Returns:
            How many assignments were added and removed.

        Raises:
            Forbidden: not an admin.
        """
        _require_admin(actor)
        with self.db.write() as s:
            return self._rebalance(s, actor)

    def _rebalance(self, s: Session, actor: Identity) -> dict[str, int]:
        settings = self.settings
        users = {u.id: u for u in s.scalars(select(User)).all()}
        annotators = [u.name for u in users.values() if u.role == "annotator" and u.active]
        items = s.scalars(select(Item)).all()
        key_of = {item.id: f"{item.role}:{item.external_id}" for item in items}
        item_by_key = {key: item_id for item_id, key in key_of.items()}
        started_ids = set(s.scalars(select(Submission.assignment_id)).all())
        existing = s.scalars(select(Assignment)).all()
        slots = [
            assign.Slot(
                users[a.user_id].name, key_of[a.item_id], a.purpose, a.order_shown, a.sort_key, a.id in started_ids
            )
            for a in existing
        ]
        plan = assign.plan_assignments(
            annotators,
            [key_of[i.id] for i in sorted(items, key=lambda i: i.id) if i.role == "primary"],
            per_case=settings.per_case,
            seed=settings.seed,
            gold_items=[key_of[i.id] for i in sorted(items, key=lambda i: i.id) if i.role == "gold"],
            repeat_share=settings.repeat_share,
            pairs=self.is_pairs,
            existing=slots,
        )
        wanted = {slot.key: slot for slot in plan}
        have = {slot.key: (slot, assignment) for slot, assignment in zip(slots, existing, strict=True)}
        removed = 0
        for key, (slot, assignment) in have.items():
            if key not in wanted:
                if slot.started:  # the planner never drops started work; refuse to lose labels if it did
                    raise AnnotateError(f"internal error: the plan would drop started work {key}")
                s.delete(assignment)
                removed += 1
        user_ids = {u.name: u.id for u in users.values()}
        now = utcnow()
        added = 0
        for key, slot in wanted.items():
            if key in have:
                continue
            s.add(
                Assignment(
                    public_id=public_id(),
                    user_id=user_ids[slot.user],
                    item_id=item_by_key[slot.item],
                    purpose=slot.purpose,
                    order_shown=slot.order_shown,
                    sort_key=slot.sort_key,
                    created_at=now,
                )
            )
            added += 1
        s.flush()
        counts = {"added": added, "removed": removed, "annotators": len(annotators)}
        if added or removed:
            _audit(s, actor, "assignments.rebalance", "project", None, counts)
        return counts


# --------------------------------------------------------------------------------------------
# Creating a project
# --------------------------------------------------------------------------------------------


def create_project(
    directory: str | Path,
    *,
    cases: str | None = None,
    questions: str | Path | None = None,
    per_case: int = 3,
    db_url: str | None = None,
    gold: str | None = None,
    repeat_share: float = 0.0,
    seed: int = 0,
    name: str | None = None,
    guidelines: str | None = None,
) -> Project:
    """Create an annotation project from canonical cases (pairs) or a questions file (screening).

    Every image is read and decoded once, so a broken one is reported now rather than in front
    of a doctor; all problems are reported together. Images are copied into the database, so the
    project does not depend on the source files afterwards.

    Args:
        directory: the project directory (created; must not hold a project).
        cases: a data source of canonical cases (any ``--data`` source works).
        questions: a questions file (screening mode).
        per_case: K, annotators per item.
        db_url: a database URL; None for SQLite in the directory.
        gold: canonical cases with labels, mixed into every annotator's queue.
        repeat_share: share of each annotator's pairs shown to them again, swapped.
        seed: seed of every random choice (orders, queues).
        name: the project's display name (default: the directory name).
        guidelines: markdown to start from (default: built-in guidelines with the six definitions).

    Returns:
        The open project.

    Raises:
        InvalidInput: both or neither of cases and questions, or bad numbers.
        DataError: a problem in the input files, or a file without any case (cases, gold).
        AnnotateError: the directory already holds a project.
    """
    from medrewardbench.annotate.questions import read_questions
    from medrewardbench.data import load_benchmark

    if (cases is None) == (questions is None):
        raise InvalidInput("give either --cases (pairs to label) or --questions (questions to screen)")
    if per_case < 1:
        raise InvalidInput("--per-case must be at least 1")
    if not 0.0 <= repeat_share <= 1.0:
        raise InvalidInput("--repeat-share must be between 0 and 1")
    mode = "pairs" if cases is not None else "screening"
    if mode == "screening" and (gold is not None or repeat_share > 0):
        raise InvalidInput("gold cases and repeats apply to pairs, not to question screening")
    items: list[tuple[str, str, str, ImageRef, dict[str, Any], dict[str, Any] | None]] = []
    problems: list[DataProblem] = []
    if cases is not None:
        for role, source in (("primary", cases), ("gold", gold)):
            if source is None:
                continue
            benchmark = load_benchmark(source)
            if not benchmark.cases:
                what = "gold cases" if role == "gold" else "cases to label"
                problems.append(DataProblem(source, f"holds no {what}"))
            for case in benchmark.cases:
                gold_labels = {dim: int(v) for dim, v in case.labels.items()} if role == "gold" else None
                if role == "gold" and not gold_labels:
                    problems.append(
                        DataProblem(source, "a gold case needs labels", case_id=case.case_id, field="labels")
                    )
                items.append((role, "pair", case.case_id, case.image, _case_payload(case), gold_labels))
    else:
        assert questions is not None
        for question in read_questions(questions):
            items.append(("primary", "question", question.question_id, question.image, question.payload(), None))
    primary_ids = {external for role, _, external, *_ in items if role == "primary"}
    for role, _, external, *_ in items:
        if role == "gold" and external in primary_ids:
            problems.append(
                DataProblem(
                    str(gold), "a gold case has the id of a case to label; give it another id", case_id=external
                )
            )
    blobs = _read_images(items, problems, cases if cases is not None else str(questions))
    if problems:
        raise DataError(problems)
    root = Path(directory)
    config = write_config(root, db_url)
    try:
        migrate(config.db_url)
        db = Database(config.db_url)
        try:
            with db.write() as s:
                if s.get(ProjectRow, 1) is not None:
                    raise AnnotateError(f"the database {config.db_url.split('@')[-1]} already holds a project")
                s.add(
                    ProjectRow(
                        id=1,
                        name=name or root.absolute().name,
                        mode=mode,
                        per_case=per_case,
                        seed=seed,
                        repeat_share=repeat_share,
                        guidelines=guidelines if guidelines is not None else default_guidelines(mode),
                        created_at=utcnow(),
                    )
                )
                image_ids: dict[str, int] = {}
                for digest, (blob_name, builtin, data) in blobs.items():
                    row = ImageBlob(sha256=digest, name=blob_name, builtin=builtin, data=data)
                    s.add(row)
                    s.flush()
                    image_ids[digest] = row.id
                now = utcnow()
                for role, kind, external, image, payload, gold_labels in items:
                    image_digest = _image_digest(image)
                    s.add(
                        Item(
                            public_id=public_id(),
                            kind=kind,
                            role=role,
                            external_id=external,
                            image_id=image_ids[image_digest] if image_digest is not None else None,
                            payload=payload,
                            gold_labels=gold_labels,
                            created_at=now,
                        )
                    )
                _audit(
                    s,
                    Identity.command_line(),
                    "project.create",
                    "project",
                    None,
                    {
                        "mode": mode,
                        "items": sum(1 for i in items if i[0] == "primary"),
                        "gold": sum(1 for i in items if i[0] == "gold"),
                        "per_case": per_case,
                        "repeat_share": repeat_share,
                        "seed": seed,
                    },
                )
        finally:
            db.dispose()
    except BaseException:
        # a half-made project must not block a second try
        leftovers = [CONFIG_FILE, SECRET_FILE]
        if config.stored_url is None:
            leftovers += [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"]
        for leftover in leftovers:
            (root / leftover).unlink(missing_ok=True)
        raise
    return Project(config, upgrade=False)


def _case_payload(case: Case) -> dict[str, Any]:
    return {
        "question": case.question,
        "response_1": case.response_1,
        "response_2": case.response_2,
        "organ_system": case.organ_system,
        "department": case.department,
        "modality": case.modality,
        "source_dataset": case.source_dataset,
        "question_type": case.question_type,
        "body_part": case.body_part,
        "metadata": dict(case.metadata),
    }


def _image_digest(image: ImageRef) -> str | None:
    return None if image.kind == "none" else image.content_hash()


def _read_images(
    items: Sequence[tuple[str, str, str, ImageRef, dict[str, Any], dict[str, Any] | None]],
    problems: list[DataProblem],
    source: str,
) -> dict[str, tuple[str, str | None, bytes]]:
    from medrewardbench.images import load_image

    blobs: dict[str, tuple[str, str | None, bytes]] = {}
    for _role, _kind, external, image, _payload, _gold in items:
        if image.kind == "none":
            continue
        try:
            data = image.raw_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest not in blobs:
                load_image(image)
                if image.kind == "builtin":
                    blob_name, builtin = image.location.split(":", 1)[1], image.location
                elif image.kind == "path":
                    blob_name, builtin = os.path.basename(image.location), None
                else:
                    blob_name, builtin = image.location, None
                blobs[digest] = (blob_name[:255], builtin, data)
        except ImageError as exc:
            problems.append(DataProblem(source, str(exc), case_id=external, field="image"))
    return blobs


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _require_admin(actor: Identity) -> None:
    if not actor.is_admin:
        raise Forbidden("this needs an admin")


def _user_by_name(s: Session, name: str) -> User:
    user = s.scalar(select(User).where(User.name == name)) if USER_NAME.match(name) else None
    if user is None:
        raise NotFound(f"no user named {name!r}")
    return user


def _revoke_tokens(s: Session, user_id: int) -> int:
    """Revoke every live API token of a user; returns how many."""
    return _rowcount(
        s.execute(
            update(ApiToken)
            .where(ApiToken.user_id == user_id, ApiToken.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
    )


def _rowcount(result: Any) -> int:
    """The rows an UPDATE or DELETE changed (a CursorResult's rowcount)."""
    return int(getattr(result, "rowcount", 0) or 0)


def _checked_text(value: str, name: str, limit: int) -> str:
    """A text field as given, or InvalidInput naming the field: too long, or holding a NUL.

    PostgreSQL cannot store NUL in text; it is refused everywhere (rather than dropped), so that
    both databases keep exactly what was typed and nothing is changed without saying so.
    """
    if len(value) > limit:
        raise InvalidInput(f"{name}: limited to {limit:,} characters (this one has {len(value):,})")
    if "\x00" in value:
        raise InvalidInput(f"{name}: it contains a NUL character (\\0), which cannot be stored; remove it")
    return value


def _audit(
    s: Session,
    actor: Identity,
    action: str,
    target: str,
    old: Any,
    new: Any,
    client: str | None = None,
) -> None:
    s.add(
        AuditEntry(
            at=utcnow(), actor=actor.name[:64], action=action, target=target[:200], old=old, new=new, client=client
        )
    )


def _stored_value(submission: Submission, key: str) -> Any:
    """A submission's stored value as the values a save compares it with (JSON lists, not None)."""
    value = getattr(submission, key)
    if key in ("choices", "shown_choices"):
        return {str(k): v for k, v in (value or {}).items()}
    return list(value) if isinstance(value, (list, tuple)) else value


def _submission_record(submission: Submission) -> dict[str, Any]:
    return {
        "choices": dict(submission.choices or {}),
        "shown_choices": dict(submission.shown_choices or {}),
        "cannot_judge": submission.cannot_judge,
        "cannot_judge_reason": submission.cannot_judge_reason,
        "comment": submission.comment,
        "decision": submission.decision,
        "reasons": list(submission.reasons or []),
        "seconds": submission.seconds,
        "revision": submission.revision,
    }


def _shown(submission: Submission, order: Order) -> ShownSubmission:
    choices = {
        dim: to_position(int(value), order)  # type: ignore[arg-type]
        for dim, value in (submission.choices or {}).items()
        if dim in DIMENSIONS
    }
    return ShownSubmission(
        choices={dim: choices[dim] for dim in DIMENSIONS if dim in choices},
        cannot_judge=submission.cannot_judge,
        cannot_judge_reason=submission.cannot_judge_reason,
        comment=submission.comment,
        decision=submission.decision,
        reasons=tuple(submission.reasons or ()),
        seconds=submission.seconds,
        revision=submission.revision,
        updated_at=submission.updated_at,
    )


def _check_pair_answer(answer: PairAnswer) -> dict[str, str]:
    shown: dict[str, str] = {}
    for key, value in answer.choices.items():
        if key not in DIMENSIONS:
            raise InvalidInput(f"unknown criterion {key[:40]!r}")
        if value in (None, ""):
            continue
        letter = str(value).strip().upper()
        if letter not in ("A", "B"):
            raise InvalidInput(f"{key}: choose A or B, got {str(value)[:40]!r}")
        shown[key] = letter
    _checked_text(answer.comment, "comment", MAX_COMMENT)
    if answer.cannot_judge:
        _checked_text(answer.cannot_judge_reason, "cannot_judge_reason", MAX_REASON)
        if not answer.cannot_judge_reason.strip():
            raise InvalidInput("say why the case cannot be judged")
        return {}
    missing = [dim for dim in DIMENSIONS if dim not in shown]
    if missing:
        raise InvalidInput(f"choose A or B for every criterion (missing: {', '.join(missing)})")
    return shown


def _check_screening_answer(answer: ScreeningAnswer) -> tuple[str, tuple[str, ...]]:
    if answer.decision not in DECISIONS:
        raise InvalidInput("accept or reject the question")
    unknown = [reason for reason in answer.reasons if reason not in SCREENING_REASONS]
    if unknown:
        raise InvalidInput(f"unknown reason(s) {', '.join(unknown)}; use {', '.join(SCREENING_REASONS)}")
    _checked_text(answer.comment, "comment", MAX_COMMENT)
    reasons = tuple(reason for reason in SCREENING_REASONS if reason in answer.reasons)
    if answer.decision == "reject" and not reasons:
        raise InvalidInput("tick at least one reason for rejecting the question")
    return answer.decision, reasons if answer.decision == "reject" else ()

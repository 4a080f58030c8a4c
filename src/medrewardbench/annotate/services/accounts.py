"""Users and their API tokens: adding, deactivating, passwords, tokens.

An admin (or the command line) manages every account; a user may set their own password and
manage their own tokens. A new annotator gets a share of the work at once, and a deactivated
one gives their unstarted work back (their labels stay): see :meth:`AssignmentService.rebalance_in`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select

from medrewardbench.annotate.config import InvalidInput, NotFound
from medrewardbench.annotate.db import MAX_ROW_ID, ApiToken, Assignment, Submission, User, WebSession, utcnow
from medrewardbench.annotate.security import API_TOKEN_PREFIX, hash_password, new_token, token_digest
from medrewardbench.annotate.services.assignments import AssignmentService
from medrewardbench.annotate.services.base import (
    MAX_TOKEN_LABEL,
    ROLES,
    USER_NAME,
    Identity,
    ProjectContext,
    audit,
    checked_text,
    require_admin,
    require_self_or_admin,
    revoke_tokens,
    rowcount,
    user_by_name,
)


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


class AccountService:
    """The project's users and their API tokens.

    Args:
        context: the open project.
        assignments: rebalances the queues when annotators come and go.
    """

    def __init__(self, context: ProjectContext, assignments: AssignmentService):
        self.context = context
        self.assignments = assignments

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
        require_admin(actor)
        if not USER_NAME.match(name):
            raise InvalidInput(
                "user names are 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit"
            )
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        encoded = hash_password(password)
        with self.context.db.write() as s:
            if s.scalar(select(User.id).where(User.name == name)) is not None:
                raise InvalidInput(f"a user named {name!r} exists already")
            s.add(User(name=name, role=role, password_hash=encoded, active=True, created_at=utcnow()))
            s.flush()
            audit(s, actor, "user.add", f"user:{name}", None, {"role": role})
            if role == "annotator":
                self.assignments.rebalance_in(s, actor)

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
        require_self_or_admin(actor, name, "set another user's password")
        encoded = hash_password(password)
        with self.context.db.write() as s:
            user = user_by_name(s, name)
            user.password_hash = encoded
            sessions = rowcount(s.execute(delete(WebSession).where(WebSession.user_id == user.id)))
            tokens = revoke_tokens(s, user.id)
            audit(
                s,
                actor,
                "user.password",
                f"user:{name}",
                None,
                {"sessions_ended": sessions, "tokens_revoked": tokens},
                client or None,
            )

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
        require_admin(actor)
        with self.context.db.write() as s:
            user = user_by_name(s, name)
            old = user.active
            user.active = active
            if not active:
                s.execute(delete(WebSession).where(WebSession.user_id == user.id))
                revoke_tokens(s, user.id)
            s.flush()
            audit(s, actor, "user.active", f"user:{name}", {"active": old}, {"active": active})
            if user.role == "annotator":
                self.assignments.rebalance_in(s, actor)

    def list_users(self, actor: Identity) -> list[UserInfo]:
        """Every user with their workload.

        Args:
            actor: an admin or the command line.

        Returns:
            Users sorted by role then name.

        Raises:
            Forbidden: not an admin.
        """
        require_admin(actor)
        with self.context.db.read() as s:
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
        require_self_or_admin(actor, name, "create a token for another user")
        label = checked_text(label, "label", MAX_TOKEN_LABEL)
        token = new_token(API_TOKEN_PREFIX)
        with self.context.db.write() as s:
            user = user_by_name(s, name)
            if not user.active:
                raise NotFound(f"user {name!r} is deactivated")
            row = ApiToken(user_id=user.id, token_hash=token_digest(token), label=label, created_at=utcnow())
            s.add(row)
            s.flush()
            audit(s, actor, "token.create", f"user:{name}", None, {"token_id": row.id, "label": row.label})
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
        require_self_or_admin(actor, name, "list another user's tokens")
        with self.context.db.read() as s:
            user = user_by_name(s, name)
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
        require_self_or_admin(actor, name, "revoke another user's token")
        if not 1 <= token_id <= MAX_ROW_ID:
            raise NotFound("no such token")
        with self.context.db.write() as s:
            user = user_by_name(s, name)
            token = s.scalar(select(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user.id))
            if token is None:
                raise NotFound("no such token")
            if token.revoked_at is None:
                token.revoked_at = utcnow()
                audit(
                    s,
                    actor,
                    "token.revoke",
                    f"user:{name}",
                    {"token_id": token_id, "revoked": False},
                    {"revoked": True},
                )

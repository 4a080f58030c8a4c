"""Authentication: logins (rate-limited under concurrency), browser sessions and API tokens.

Rate limits: :data:`~medrewardbench.annotate.security.MAX_FAILURES_PER_USER` failures for one
name, or :data:`~medrewardbench.annotate.security.MAX_FAILURES_PER_CLIENT` from one address,
within :data:`~medrewardbench.annotate.security.LOGIN_WINDOW` lock further attempts (right or
wrong) until the window has passed. Each attempt is counted before its password is hashed, in a
serialised transaction, so parallel attempts cannot all pass the count (see
:meth:`AuthService.authenticate`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.orm import Session

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import ApiToken, LoginAttempt, User, WebSession, utcnow
from medrewardbench.annotate.security import (
    API_TOKEN_PREFIX,
    LOGIN_WINDOW,
    MAX_FAILURES_PER_CLIENT,
    MAX_FAILURES_PER_USER,
    SESSION_IDLE,
    SESSION_LIFETIME,
    check_password_strength,
    hash_password,
    needs_rehash,
    new_token,
    token_digest,
    verify_password,
)
from medrewardbench.annotate.services.accounts import AccountService
from medrewardbench.annotate.services.base import (
    UNKNOWN_USER,
    USER_NAME,
    Identity,
    LoginRefused,
    ProjectContext,
    RateLimited,
    audit,
)

_LAST_SEEN_EVERY = timedelta(minutes=5)
_LOGIN_LOCK_KEY = 0x6D72625F6C6F67
"""PostgreSQL advisory lock that serialises the login-attempt reservations of every process."""


class AuthService:
    """Who is calling: passwords, sessions and API tokens turned into an :class:`Identity`.

    Args:
        context: the open project.
        accounts: sets the new password when a user changes their own.
    """

    def __init__(self, context: ProjectContext, accounts: AccountService):
        self.context = context
        self.accounts = accounts

    def login(self, name: str, password: str, client: str) -> tuple[str, Identity]:
        """Check a name and password and open a browser session (rate-limited: see the module).

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
        user_id, role, stored = self.authenticate(name, password, client)
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
        with self.context.db.write() as s:
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
            audit(s, identity, "login", f"user:{name}", None, None, client[:64])
            s.execute(delete(WebSession).where(WebSession.expires_at < now))
        return token, identity

    def authenticate(self, name: str, password: str, client: str) -> tuple[int, str, str]:
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
        db = self.context.db
        with db.write() as s:
            if not db.is_sqlite:
                s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOGIN_LOCK_KEY})
            user = s.scalar(select(User).where(User.name == name)) if USER_NAME.match(name) else None
            key = user.name if user is not None else self.context.signer.unknown_name(name)
            _check_rate(s, key, client, now)
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
            with db.write() as s:
                s.execute(delete(LoginAttempt).where(LoginAttempt.id == attempt_id))
            raise
        with db.write() as s:
            if ok:
                s.execute(update(LoginAttempt).where(LoginAttempt.id == attempt_id).values(success=True))
            else:
                actor = name if user is not None else UNKNOWN_USER
                target = f"user:{name}" if user is not None else f"unknown-user:{key[1:]}"
                audit(s, Identity(None, actor, "", via="login"), "login.failed", target, None, None, client)
        if not ok or user_id is None or stored is None:
            raise LoginRefused("wrong user name or password")
        return user_id, role, stored

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
            self.authenticate(identity.name, current, client)
        except LoginRefused as exc:
            raise InvalidInput("the current password is wrong") from exc
        self.accounts.set_password(identity, identity.name, new, client)

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
        with self.context.db.read() as s:
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
            with self.context.db.write() as s:
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
        with self.context.db.write() as s:
            s.execute(delete(WebSession).where(WebSession.token_hash == token_digest(token)))
            audit(s, identity, "logout", f"user:{identity.name}", None, None, client)

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
        with self.context.db.read() as s:
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
            with self.context.db.write() as s:
                s.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))
        return identity


def _check_rate(s: Session, key: str, client: str, now: datetime) -> None:
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

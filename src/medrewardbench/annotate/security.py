"""Passwords, tokens and signatures.

* Passwords are hashed with argon2id (argon2-cffi's defaults: 64 MiB and three passes per hash).
  Checking a login for a user that does not exist still costs one hash, so timing does not tell
  which names exist. At most :data:`MAX_HASHES_IN_FLIGHT` hashes run at once (:class:`HashGate`),
  so a burst of logins cannot take the server's memory; the rest wait a little, then are told to
  come back (:class:`~medrewardbench.annotate.config.ServerBusy`).
  The test suite alone sets :data:`FAST_HASHING_ENV`, which swaps in argon2's cheapest parameters
  so its thousands of logins take microseconds; a server that meets such a hash rehashes it with
  the defaults at the next login (:func:`needs_rehash`).
* Session cookies and API tokens are 256-bit random strings; only their SHA-256 is stored, so a
  copy of the database does not let anyone log in.
* Each session has its own CSRF token, compared in constant time. The login form, which comes
  before any session, carries a token signed with the project's key (itsdangerous) and bound to
  a cookie (double submit).
* Page renders carry a signed timestamp, so the server can tell how long a case was open even
  when the browser runs no JavaScript.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from itsdangerous import BadSignature, URLSafeTimedSerializer

from medrewardbench.annotate.config import InvalidInput, ServerBusy

SESSION_COOKIE = "mrb_session"
LOGIN_COOKIE = "mrb_login"
SESSION_LIFETIME = timedelta(hours=12)
SESSION_IDLE = timedelta(hours=4)
LOGIN_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_USER = 5
"""Failed logins for one name within :data:`LOGIN_WINDOW` (since its last success) before it is locked."""
MAX_FAILURES_PER_CLIENT = 20
"""Failed logins from one address within :data:`LOGIN_WINDOW` before it is locked."""
MIN_PASSWORD_LENGTH = 10
API_TOKEN_PREFIX = "mrb_"
MAX_HASHES_IN_FLIGHT = 4
"""Password hashes computed at once (each takes 64 MiB for a fraction of a second)."""
HASH_WAIT_SECONDS = 30.0
"""How long a login waits for a free hash slot before it is answered "busy, retry"."""


class HashGate:
    """Bounds the password hashes in flight: a semaphore whose waiters give up after a while.

    Args:
        slots: hashes allowed at once.
        wait_seconds: how long a caller waits for a slot.
    """

    def __init__(self, slots: int = MAX_HASHES_IN_FLIGHT, wait_seconds: float = HASH_WAIT_SECONDS):
        self.slots = slots
        self.wait_seconds = wait_seconds
        self._semaphore = threading.BoundedSemaphore(slots)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the block.

        Yields:
            Nothing; the slot is held until the block ends.

        Raises:
            ServerBusy: no slot came free within ``wait_seconds``.
        """
        if not self._semaphore.acquire(timeout=self.wait_seconds):
            raise ServerBusy(
                "the server is checking too many passwords at once; try again in a few seconds",
                retry_after=max(1, round(self.wait_seconds)),
            )
        try:
            yield
        finally:
            self._semaphore.release()


HASH_GATE = HashGate()
"""The process's gate; every hash and every check goes through it."""

FAST_HASHING_ENV = "MEDREWARDBENCH_ANNOTATE_TEST_ONLY_FAST_HASHING"
"""Set to ``1`` by the test suite only (tests/conftest.py): passwords are hashed with 8 KiB and one
pass instead of 64 MiB and three. Such hashes are cheap to crack; never set it for a real server."""

_STRONG_HASHER = PasswordHasher()
_FAST_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def password_hasher() -> PasswordHasher:
    """The hasher in use: argon2-cffi's defaults, or the cheap one when :data:`FAST_HASHING_ENV` is ``1``.

    Returns:
        The hasher; read on every call, so a test can switch within a running process.
    """
    return _FAST_HASHER if os.environ.get(FAST_HASHING_ENV) == "1" else _STRONG_HASHER


@functools.cache
def _dummy_hash(hasher: PasswordHasher) -> str:
    """A hash of a random password, checked when the user does not exist (one per hasher)."""
    return hasher.hash(secrets.token_hex(16))


def hash_password(password: str) -> str:
    """Hash a password with argon2id.

    Args:
        password: the password.

    Returns:
        The encoded hash (algorithm, parameters, salt and digest).

    Raises:
        InvalidInput: the password is shorter than :data:`MIN_PASSWORD_LENGTH`.
    """
    check_password_strength(password)
    hasher = password_hasher()
    with HASH_GATE.slot():
        return hasher.hash(password)


def check_password_strength(password: str) -> None:
    """Refuse passwords that are too short.

    Args:
        password: the candidate.

    Raises:
        InvalidInput: shorter than :data:`MIN_PASSWORD_LENGTH` characters.
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")


def verify_password(encoded: str | None, password: str) -> bool:
    """Check a password against a stored hash (None: no such user, checked against a dummy).

    Args:
        encoded: the stored hash, or None.
        password: the password given.

    Returns:
        Whether it matches.

    Raises:
        ServerBusy: no hash slot came free in time (see :class:`HashGate`).
    """
    hasher = password_hasher()
    with HASH_GATE.slot():
        try:
            ok = hasher.verify(encoded or _dummy_hash(hasher), password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
    return ok and encoded is not None


def needs_rehash(encoded: str) -> bool:
    """Whether a stored hash uses older parameters than the current ones.

    Args:
        encoded: the stored hash.

    Returns:
        True when it should be replaced by a fresh hash at the next successful login.
    """
    return password_hasher().check_needs_rehash(encoded)


def new_token(prefix: str = "") -> str:
    """A fresh random token (256 bits).

    Args:
        prefix: put in front (``mrb_`` for API tokens, so they are recognisable in logs and leaks).

    Returns:
        The token.
    """
    return prefix + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """The SHA-256 (hex) under which a token is stored.

    Args:
        token: the raw token.

    Returns:
        64 hex characters.
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time string comparison.

    Args:
        a: one string.
        b: the other.

    Returns:
        Whether they are equal (in time that does not depend on where they differ).
    """
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def public_id() -> str:
    """An opaque identifier for URLs (96 random bits): never a case id, which may name a source.

    Returns:
        16 URL-safe characters.
    """
    return secrets.token_urlsafe(12)


class Signer:
    """Signs short values with the project's key (login CSRF tokens, page timestamps).

    Args:
        key: the project's secret key.
    """

    def __init__(self, key: bytes):
        self._login = URLSafeTimedSerializer(key, salt="medrewardbench.annotate.login")
        self._opened = URLSafeTimedSerializer(key, salt="medrewardbench.annotate.opened")
        self._names = hmac.new(key, b"medrewardbench.annotate.unknown-name", hashlib.sha256).digest()

    def unknown_name(self, name: str) -> str:
        """A keyed digest standing for a login name that is no user's (it may be a mistyped password).

        The same text always gives the same digest, so repeated attempts on one name are counted
        and can be told apart in the audit log, but the text itself is never stored.

        Args:
            name: the name as typed.

        Returns:
            ``?`` and 24 hex characters.
        """
        digest = hmac.new(self._names, name.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return "?" + digest[:24]

    def login_token(self, nonce: str) -> str:
        """The signed form value for a login nonce (the same nonce goes in a cookie).

        Args:
            nonce: a fresh random value.

        Returns:
            The signed, timestamped token.
        """
        return self._login.dumps(nonce)

    def check_login_token(self, token: str, nonce: str | None, max_age: int = 3600) -> bool:
        """Whether a login form's token is valid, fresh and bound to the cookie's nonce.

        Args:
            token: the form's token.
            nonce: the cookie's nonce (None when the cookie is missing).
            max_age: seconds the token stays valid.

        Returns:
            True only for a genuine token of this nonce.
        """
        if not nonce or not token:
            return False
        try:
            value = self._login.loads(token, max_age=max_age)
        except BadSignature:
            return False
        return isinstance(value, str) and same(value, nonce)

    def opened_token(self, assignment: str) -> str:
        """A signed (assignment, time) pair put in a case page when it is rendered.

        Args:
            assignment: the assignment's public id.

        Returns:
            The token.
        """
        return self._opened.dumps([assignment, time.time()])

    def seconds_open(self, token: str, assignment: str, max_seconds: float = 86_400.0) -> float | None:
        """How long ago a case page was rendered, if the token is valid for this assignment.

        Args:
            token: the page's token.
            assignment: the assignment the form was posted for.
            max_seconds: older tokens are refused.

        Returns:
            Seconds since the page was rendered, or None for an invalid, foreign or expired token.
        """
        try:
            value = self._opened.loads(token, max_age=int(max_seconds))
        except BadSignature:
            return None
        if not isinstance(value, list) or len(value) != 2 or value[0] != assignment:
            return None
        return max(0.0, time.time() - float(value[1]))

"""Retries of the API judge: backoff with full jitter, and the server's ``Retry-After``."""

from __future__ import annotations

import email.utils
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

RETRYABLE_STATUS: frozenset[int] = frozenset({408, 409, 429})
"""HTTP statuses retried besides 5xx."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait between attempts, and how many retries to allow.

    Attributes:
        max_retries: retries after the first attempt (0 = one attempt only).
        backoff_base_s: the first backoff ceiling; it doubles per retry.
        backoff_max_s: the largest backoff ceiling.
        retry_after_max_s: the longest server-requested wait honoured.
    """

    max_retries: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 60.0

    def delay(self, retry_index: int, retry_after_s: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based).

        A server's ``Retry-After`` wins (plus up to 10% jitter, so that clients told the same
        time do not return together); otherwise full jitter: uniform in
        ``[0, min(backoff_max_s, backoff_base_s * 2**retry_index)]``.
        """
        draw = (rng or random).random
        if retry_after_s is not None:
            wait = min(max(retry_after_s, 0.0), self.retry_after_max_s)
            return wait + 0.1 * wait * draw()
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2.0 ** min(retry_index, 62)))
        return ceiling * draw()


def parse_retry_after(headers: Mapping[str, str] | Any, now: datetime | None = None) -> float | None:
    """Seconds a server asks the client to wait, from ``Retry-After`` or ``retry-after-ms``.

    Args:
        headers: response headers (case-insensitive mapping, or a plain dict).
        now: the current time for HTTP-date values (default: now, UTC).

    Returns:
        Non-negative seconds, or None when absent or unreadable.
    """

    def header(name: str) -> str | None:
        value = headers.get(name)
        if value is None:
            value = headers.get(name.title())
        return None if value is None else str(value).strip()

    millis = header("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = header("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = now or datetime.now(timezone.utc)
    return max((when - current).total_seconds(), 0.0)


def root_is_timeout(exc: BaseException) -> bool:
    """False when a client "timeout" was caused by the server hanging up (aiohttp reports it so).

    Args:
        exc: the exception the HTTP client raised (its causes and contexts are walked).

    Returns:
        True for a real timeout, False for a dropped connection.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError) or "disconnected" in type(current).__name__.lower():
            return False
        current = current.__cause__ or current.__context__
    return True


@dataclass
class Attempt:
    """How one HTTP attempt ended, whatever the backend: one of a payload, a status, a problem or a malformed body.

    Attributes:
        payload: the parsed JSON of a 2xx answer.
        status: the HTTP status of an error answer.
        message: that answer's error message.
        retry_after: seconds the server asked to wait.
        problem: ``"timeout"`` or ``"connection error"``.
        cause: for a connection error, what met it (``Type: message``).
        malformed: why a 2xx answer could not be read.
    """

    payload: Any = None
    status: int | None = None
    message: str = ""
    retry_after: float | None = None
    problem: str | None = None
    cause: str | None = None
    malformed: str | None = None

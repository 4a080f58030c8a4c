"""One scrubber for every text that is stored, reported or logged: API keys never land anywhere.

An endpoint or a proxy may echo the key inside a completion or an error message, so the judge
cannot promise on its own that results are clean. Every text therefore passes through
:func:`scrub` at the boundaries: the store (raw outputs, failure reasons, dimension failure
reasons, extras, run config and metadata, on write and on read), and the log handlers of the
command line (:func:`install_log_scrubber`).

:func:`scrub` replaces

* the actual values of the keys in use, registered by the code that reads them
  (:func:`register_secret`, :func:`register_secret_env`) or passed by the caller, and
* anything shaped like a credential: ``Bearer <token>`` and ``sk-...`` keys.

Values shorter than :data:`MIN_SECRET_CHARS` are not treated as secrets (replacing every ``"test"``
of a text would corrupt it, and such a value protects nothing); values shorter than
:data:`PLAIN_MATCH_CHARS` are replaced only where they stand alone, not inside a longer word.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "***"
"""What a secret is replaced with."""
MIN_SECRET_CHARS = 8
"""Shorter values are not treated as secrets: they are the dummy keys of local servers (``"test"``,
``"local"``), and replacing them would corrupt judges' texts while protecting nothing."""
PLAIN_MATCH_CHARS = 12
"""Values at least this long are replaced wherever they occur; shorter ones only as whole tokens."""
TRUNCATED_PREFIX_CHARS = 8
"""A long secret's first this many characters, and whatever follows them that matches it, are
replaced too: a message cut short must not keep most of a key."""
PLACEHOLDER_VALUES: frozenset[str] = frozenset({"EMPTY", "none", "None", "dummy", "sk-no-key-required"})
"""Conventional non-secret keys sent to local servers; never worth redacting."""

_CREDENTIAL_PATTERN = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}|\bsk-[A-Za-z0-9_-]{8,}")

_lock = threading.Lock()
_registered: tuple[str, ...] = ()
"""Longest first; replaced whole on each registration, so readers need no lock."""


def _usable(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS or value in PLACEHOLDER_VALUES:
        return None
    return value


def register_secret(value: str | None) -> None:
    """Remember a secret value so that every later :func:`scrub` in this process removes it.

    Args:
        value: the secret (an API key); None, placeholders and values shorter than
            :data:`MIN_SECRET_CHARS` are ignored.
    """
    global _registered
    usable = _usable(value)
    if usable is not None and usable not in _registered:
        with _lock:
            _registered = tuple(sorted({*_registered, usable}, key=lambda s: (-len(s), s)))


def register_secret_env(name: str | None) -> None:
    """Register the value of an environment variable that holds a key (when it is set).

    Args:
        name: the variable's name, e.g. ``"OPENAI_API_KEY"``; None does nothing.
    """
    if name:
        register_secret(os.environ.get(name))


def registered_secrets() -> tuple[str, ...]:
    """The secret values registered in this process, longest first.

    Returns:
        The values (longest first, so that a key containing another is replaced whole).
    """
    return _registered


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove secrets from a text.

    Args:
        text: any text about to be stored, reported or logged.
        secrets: more values to remove besides the registered ones.

    Returns:
        The text with every known secret value and every credential-shaped token replaced by
        :data:`REDACTED` (a ``Bearer`` prefix is kept, so the text still says what was there).
    """
    values = _registered
    extra = [usable for usable in map(_usable, secrets) if usable is not None and usable not in values]
    if extra:
        values = tuple(sorted({*values, *extra}, key=lambda s: (-len(s), s)))
    for value in values:
        if len(value) >= PLAIN_MATCH_CHARS:
            if value[:TRUNCATED_PREFIX_CHARS] in text:
                text = _replace_prefixes(text, value)
        elif value in text:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", REDACTED, text)
    if "sk-" not in text and "bearer" not in text.lower():
        return text  # the common case: nothing credential-shaped, skip the regular expression
    return _CREDENTIAL_PATTERN.sub(lambda m: (m.group(1) or "") + REDACTED, text)


def _replace_prefixes(text: str, value: str) -> str:
    """Replace the value wherever it occurs, and any run of at least its first characters.

    The latter catches a key cut short by a truncated message (``"sk-abc..."``).
    """
    head = value[:TRUNCATED_PREFIX_CHARS]
    pieces = []
    position = 0
    while (start := text.find(head, position)) >= 0:
        end = start + len(head)
        while end < len(text) and end - start < len(value) and text[end] == value[end - start]:
            end += 1
        pieces.append(text[position:start])
        pieces.append(REDACTED)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def scrub_value(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """:func:`scrub` applied to every string inside a JSON-like value (dicts, lists, tuples).

    Args:
        value: a string, number, None, or a container of them.
        secrets: more values to remove besides the registered ones.

    Returns:
        A value of the same shape with every string (keys included) scrubbed.
    """
    extra = tuple(secrets)
    if isinstance(value, str):
        return scrub(value, extra)
    if isinstance(value, dict):
        return {scrub_value(k, extra): scrub_value(v, extra) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_value(v, extra) for v in value]
    return value


class ScrubbingFilter(logging.Filter):
    """A logging filter that renders each record's message and scrubs it (arguments included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message with its scrubbed rendering; never drops a record."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let the handler report it as it would
            return True
        cleaned = scrub(message)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        record.msg, record.args = cleaned, None
        return True


def install_log_scrubber(logger: logging.Logger | None = None) -> None:
    """Add a :class:`ScrubbingFilter` to every handler of a logger (the root logger by default).

    Filters on handlers see the records of every child logger that propagates to them, which a
    filter on the logger itself would not.

    Args:
        logger: the logger whose handlers to guard.
    """
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter())

"""The ASGI layers around the annotation app: trusted proxies, a cap on request bodies, security headers.

They wrap the app itself (not the server), so they hold however it is served: by ``annotate serve``,
by a test's background server, or by another ASGI server.

* :class:`TrustedProxies` believes ``X-Forwarded-For`` and ``X-Forwarded-Proto`` only from the
  configured proxy addresses; from anyone else they are ignored, so a client cannot pick the address
  that rate limits and the audit log see.
* :class:`BodyLimit` refuses a request body over the cap with 413 before the app reads it: at once
  when ``Content-Length`` says so, and as soon as a chunked body crosses it.
* :class:`SecurityHeaders` adds :data:`SECURITY_HEADERS` to every response that passes through it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from fastapi import HTTPException
from starlette.datastructures import MutableHeaders

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("cache-control", "no-store"),
)
"""Headers every response carries (a response may set its own Cache-Control, as images do)."""

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
"""The default cap on a request body. The largest legitimate body is the guidelines form: 100,000
characters, which URL-encoded take up to 12 bytes each (a four-byte UTF-8 character as %XX
escapes), about 1.2 MB; everything else is far smaller."""


def parse_trusted(value: str | Sequence[str]) -> tuple[bool, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]]:
    """Parse a list of trusted proxies: addresses or networks, comma-separated, or ``*`` for any.

    Args:
        value: ``"127.0.0.1"``, ``"10.0.0.0/8, ::1"``, ``"*"``, an empty string (none), or a sequence.

    Returns:
        (whether every address is trusted, the networks).

    Raises:
        ValueError: an entry is neither ``*`` nor an address or network; the message names it.
    """
    items = [item.strip() for item in (value.split(",") if isinstance(value, str) else value)]
    trust_all = False
    networks = []
    for item in items:
        if not item:
            continue
        if item == "*":
            trust_all = True
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ValueError(f"{item!r} is not an IP address or network (or '*')") from exc
    return trust_all, tuple(networks)


class TrustedProxies:
    """Take the client address and scheme from ``X-Forwarded-For``/``-Proto`` sent by trusted proxies only.

    The client is the right-most address of ``X-Forwarded-For`` that is not itself a trusted proxy
    (a proxy appends the address it saw, so entries to its left could be anything the client wrote).

    Args:
        app: the ASGI app.
        trusted: see :func:`parse_trusted`.
    """

    def __init__(self, app: ASGIApp, trusted: str | Sequence[str] = "127.0.0.1"):
        self.app = app
        self.trust_all, self.networks = parse_trusted(trusted)

    def trusts(self, host: str | None) -> bool:
        """Whether an address belongs to a trusted proxy.

        Args:
            host: an address as text (None or a non-address: no).

        Returns:
            True for a trusted proxy.
        """
        if self.trust_all:
            return True
        if not host:
            return False
        try:
            address = ipaddress.ip_address(host.strip().strip("[]"))
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped  # a dual-stack socket shows 127.0.0.1 as ::ffff:127.0.0.1
        return any(address in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Rewrite the scope's client and scheme from a trusted proxy's headers, then call the app."""
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            if self.trusts(client[0] if client else None):
                forwarded_for: list[str] = []
                proto = None
                for name, value in scope.get("headers", ()):
                    if name == b"x-forwarded-for":
                        forwarded_for.extend(part.strip() for part in value.decode("latin-1").split(","))
                    elif name == b"x-forwarded-proto":
                        proto = value.decode("latin-1").strip().lower()
                if proto in ("http", "https"):
                    scope["scheme"] = proto
                chain = [entry for entry in forwarded_for if entry]
                if chain:
                    host = next((entry for entry in reversed(chain) if not self.trusts(entry)), chain[0])
                    scope["client"] = (host[:64], 0)
        await self.app(scope, receive, send)


class BodyTooLarge(HTTPException):
    """A request body over the cap (raised from ``receive``; the app's handlers answer 413).

    Args:
        limit: the cap in bytes.
    """

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=too_large_message(limit))


def too_large_message(limit: int) -> str:
    """The message of a 413.

    Args:
        limit: the cap in bytes.

    Returns:
        The text.
    """
    size = f"{limit / 1024 / 1024:.1f} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
    return f"the request body is larger than this server accepts ({size}; see --max-body-bytes)"


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, before the app reads them.

    Args:
        app: the ASGI app.
        max_bytes: the cap.
        respond: makes the 413 response for a scope and a message (an ASGI app to call); None for plain text.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, respond: Callable[[Scope, str], Any] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.respond = respond

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = too_large_message(self.max_bytes)
        if self.respond is not None:
            response = self.respond(scope, message)
        else:
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse(message, status_code=413)
        response.headers["connection"] = "close"
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 413 for a declared or streamed body over the cap; otherwise call the app."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False
        limit = self.max_bytes

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response that does not set them itself.

    Args:
        app: the ASGI app.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Call the app, adding the headers to its response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                add_security_headers(MutableHeaders(scope=message))
            await send(message)

        await self.app(scope, receive, send_with_headers)


def add_security_headers(headers: MutableHeaders) -> None:
    """Set each of :data:`SECURITY_HEADERS` that is not set yet.

    Args:
        headers: a response's headers (changed in place).
    """
    for name, value in SECURITY_HEADERS:
        if name not in headers:
            headers[name] = value

"""One Chat Completions POST over a plain ``aiohttp`` session: what the ``openai`` client does, for less CPU.

The API judge's aiohttp backend used to go through ``openai.AsyncOpenAI`` over its aiohttp
transport: per request the client builds an httpx request (URL parsing, header models, option
copies), the transport turns it into an aiohttp request and the answer back into an httpx
response. At dozens of requests in flight that work was most of the client's CPU, and importing
``openai`` was most of the ``eval`` command's start-up. Here the request goes to aiohttp directly,
and every way it can end is read as the ``openai`` client reads it, so that
:meth:`~medrewardbench.models.api.chat.ChatClient.call` gives the same outcome, reason and retry
decision on either backend:

* an HTTP status outside 2xx is a status error with the message ``openai`` would give
  (:func:`status_message`) and the ``Retry-After`` headers;
* timeouts and dropped connections are problems (``timeout`` or ``connection error``, told apart
  as :func:`~medrewardbench.models.api.retry.root_is_timeout` tells them apart for ``openai``);
* an unreadable 2xx body is malformed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp

from medrewardbench.models.api.images import DataUrl
from medrewardbench.models.api.retry import Attempt, parse_retry_after, root_is_timeout

__all__ = ["encode_body", "make_session", "post", "request_headers", "status_message"]

KEEPALIVE_S = 5.0
"""How long an idle connection is kept (httpx's default, which the ``openai`` client used)."""


def request_headers(api_key: str) -> dict[str, str]:
    """The headers the ``openai`` client sends that a server may act on: key, organisation, project.

    Args:
        api_key: the key (or the placeholder for a local server).

    Returns:
        ``Authorization`` and ``Accept``, with ``OpenAI-Organization`` and ``OpenAI-Project`` when
        ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` are set.
    """
    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
    for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
        value = os.environ.get(variable)
        if value:
            headers[header] = value
    return headers


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:  # pragma: no cover - certifi comes with openai
        return ssl.create_default_context()


def make_session(connections: int, url: str) -> aiohttp.ClientSession:
    """A session with a pool of ``connections`` (made inside the event loop that will use it).

    Args:
        connections: the most connections open at once.
        url: the endpoint; an ``https`` one verifies certificates against certifi's roots, as the
            ``openai`` client does (loading them takes a noticeable part of a second, so a plain
            ``http`` endpoint skips it).

    Returns:
        The session.
    """
    ssl_context = _ssl_context() if url.lower().startswith("https:") else True
    connector = aiohttp.TCPConnector(limit=connections, keepalive_timeout=KEEPALIVE_S, ssl=ssl_context)
    return aiohttp.ClientSession(connector=connector)


async def post(
    session: aiohttp.ClientSession, url: str, headers: Mapping[str, str], body: Mapping[str, Any], timeout_s: float
) -> Attempt:
    """POST one JSON body and read the answer; never raises except on cancellation.

    Args:
        session: the loop's session (:func:`make_session`).
        url: the endpoint.
        headers: the request headers (key and the like; the JSON content type is added).
        body: the JSON body.
        timeout_s: the connect and read timeout, as the ``openai`` client applied it.

    Returns:
        How the attempt ended.
    """
    timeout = _timeout(timeout_s)
    data = encode_body(body)
    try:
        async with session.post(url, data=data, headers=_json_headers(headers), timeout=timeout) as response:
            raw = await response.read()
            status = response.status
            charset = response.charset or "utf-8"
            retry_after = parse_retry_after(response.headers) if status >= 400 else None
    except aiohttp.ClientPayloadError as exc:  # openai: httpx ReadError, a connection error
        return Attempt(problem="connection error", cause=f"ReadError: {exc}")
    except (aiohttp.ClientConnectionError, TimeoutError) as exc:  # openai: a timeout exception
        return Attempt(problem="timeout" if root_is_timeout(exc) else "connection error")
    except Exception as exc:  # anything else on the way: openai calls it a connection error
        return Attempt(problem="connection error", cause=f"{type(exc).__name__}: {exc}")
    if not 200 <= status < 300:
        return Attempt(
            status=status,
            message=status_message(status, raw.decode(charset, errors="replace")),
            retry_after=retry_after,
        )
    try:
        return Attempt(payload=json.loads(raw))
    except Exception as exc:  # invalid JSON, a body cut short: the answer is unusable
        return Attempt(malformed=f"{type(exc).__name__}: {exc}")


@functools.lru_cache(maxsize=16)
def _timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    """The connect and read timeouts of a request (one object per value: it is immutable)."""
    return aiohttp.ClientTimeout(sock_connect=timeout_s, sock_read=timeout_s, connect=timeout_s)


_JSON_HEADERS: dict[int, tuple[Mapping[str, str], dict[str, str]]] = {}
"""id(headers) -> (those headers, a copy with the JSON content type): a client's headers are merged once."""


def _json_headers(headers: Mapping[str, str]) -> dict[str, str]:
    entry = _JSON_HEADERS.get(id(headers))
    if entry is not None and entry[0] is headers:
        return entry[1]
    merged = {**headers, "Content-Type": "application/json"}
    if len(_JSON_HEADERS) >= 64:
        _JSON_HEADERS.clear()
    _JSON_HEADERS[id(headers)] = (headers, merged)  # holding the headers keeps their id unique
    return merged


SPLICE_MIN_CHARS = 4096
"""Image URLs at least this long are spliced into the encoded body instead of going through the encoder."""


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_SPLICED: dict[int, tuple[str, bytes | None]] = {}
"""id(url) -> (the URL, its JSON form as bytes or None when the encoder must take it), for URLs seen lately.

Both orders of a case send the same URL object (the client's image cache hands it out), so its
check and its encoding happen once, found by identity without hashing tens of kilobytes; the entry
holds the URL, so that its id cannot be reused while the entry lives.
"""
_SPLICED_MAX = 256


def _spliced(url: str) -> bytes | None:
    """The JSON form of a long base64 ``data:`` URL as bytes (nothing to escape), or None for the encoder."""
    if len(url) < SPLICE_MIN_CHARS:
        return None
    entry = _SPLICED.get(id(url))
    if entry is not None and entry[0] is url:
        return entry[1]
    # a URL the image module made is base64 by construction; any other is checked
    encoded = f'"{url}"'.encode("ascii") if isinstance(url, DataUrl) or _check_splice(url) else None
    if len(_SPLICED) >= _SPLICED_MAX:
        _SPLICED.clear()
    _SPLICED[id(url)] = (url, encoded)
    return encoded


def _check_splice(url: str) -> bool:
    """Whether ``json.dumps`` (``ensure_ascii=False``) would give ``"`` + url + ``"``: no character to escape.

    The encoder escapes only quotes, backslashes and control characters; an ASCII text of printable
    characters without quote or backslash (as every base64 ``data:`` URL is) comes out as it is.
    These are scans in C; checking the payload against the base64 alphabet cost a copy and a
    translation of the whole URL.
    """
    return url.isascii() and ";base64," in url[:300] and url.isprintable() and '"' not in url and "\\" not in url


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The request body as compact JSON, the same bytes as ``json.dumps`` gives, for less CPU.

    A data URL of an image is most of a request's bytes, and the JSON encoder scans every one of
    them for characters to escape, though base64 has none. The URLs are set aside, the rest is
    encoded, and each URL's bytes (made once per URL) go back in its place as they are.

    Args:
        body: the request body (``messages`` with ``image_url`` parts).

    Returns:
        The UTF-8 JSON bytes.
    """
    messages = body.get("messages")
    urls: list[bytes] = []
    if isinstance(messages, list):
        shown = []
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                parts = []
                for part in content:
                    image = part.get("image_url") if isinstance(part, dict) else None
                    url = image.get("url") if isinstance(image, dict) else None
                    spliced = _spliced(url) if isinstance(url, str) else None
                    if spliced is not None and isinstance(image, dict):
                        parts.append({**part, "image_url": {**image, "url": f"\x00mrb-image-{len(urls)}\x00"}})
                        urls.append(spliced)
                    else:
                        parts.append(part)
                message = {**message, "content": parts}
            shown.append(message)
    if not urls:
        return _encode(body).encode("utf-8")
    text = _encode({**body, "messages": shown})
    pieces: list[bytes] = []
    for index, spliced in enumerate(urls):
        before, marker, text = text.partition(_encode(f"\x00mrb-image-{index}\x00"))
        if not marker or marker in text:  # the marker's text occurs elsewhere: encode it all the usual way
            return _encode(body).encode("utf-8")
        pieces += (before.encode("utf-8"), spliced)
    pieces.append(text.encode("utf-8"))
    return b"".join(pieces)


def status_message(status: int, text: str) -> str:
    """The message of an error answer, as the API judge reads it from an ``openai`` status error.

    Args:
        status: the HTTP status.
        text: the answer's body.

    Returns:
        The error's ``message`` (with its ``param``) when the body is JSON that has one, else
        ``Error code: <status>``.
    """
    text = text.strip()
    body: Any = text
    with contextlib.suppress(Exception):  # else a plain-text error body
        body = json.loads(text)
    data = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict) and inner.get("message"):
            param = inner.get("param")
            return f"{inner['message']}" + (f" (param: {param})" if param else "")
    return f"Error code: {status}"

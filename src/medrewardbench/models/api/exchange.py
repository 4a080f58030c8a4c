"""One request through a :class:`~medrewardbench.models.api.chat.ChatClient`, the path every ``api:`` model takes.

The API judge and the API generator differ only in their prompt and in how they read the answer;
the rest is here: a batch's requests go out together, each admitted by the client
(:func:`each_admitted`); a request's messages are prepared (an unreadable image fails that request
only, ``could not prepare the request: ...``) and sent with retries, and its wall time is measured
from the start of the preparation (:func:`exchange`). :func:`api_config` is what the model part of
such a back end's fingerprint holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from medrewardbench.models.api.chat import CallOutcome, ChatClient, public_url
from medrewardbench.models.options import JudgeOptions

__all__ = ["Exchange", "api_config", "each_admitted", "exchange"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Exchange:
    """How one request ended.

    Attributes:
        outcome: the call's end (the completion or the reason it failed); None when the request
            could not be prepared.
        failure: why the request could not be prepared (None when it was sent).
        latency_s: wall time from the start of the preparation to the end of the call.
    """

    outcome: CallOutcome | None
    failure: str | None
    latency_s: float


async def exchange(
    chat: ChatClient,
    render: Callable[[], Sequence[Mapping[str, Any]]],
    response_format: Mapping[str, Any] | None = None,
) -> Exchange:
    """Prepare one request's messages and send it with retries; never raises except on cancellation.

    Args:
        chat: the client.
        render: makes the template's messages (image parts holding an image reference).
        response_format: a ``response_format`` to ask for, until the server refuses one.

    Returns:
        The exchange: its outcome, or why it could not be prepared, and its latency.
    """
    started = time.perf_counter()
    try:
        messages = await chat.api_messages(render())
    except Exception as exc:  # an unreadable image fails this request only
        reason = chat.reason(f"could not prepare the request: {type(exc).__name__}: {exc}")
        return Exchange(None, reason, time.perf_counter() - started)
    outcome = await chat.call(messages, response_format)
    return Exchange(outcome, None, time.perf_counter() - started)


async def each_admitted(
    chat: ChatClient, items: Sequence[Item], one: Callable[[Item], Awaitable[Answer]]
) -> list[Answer]:
    """Handle every item concurrently, each once the client admits it (:meth:`ChatClient.admission`).

    Args:
        chat: the client whose admission bounds the requests in progress.
        items: the batch.
        one: handles one item.

    Returns:
        The answers, in the items' order.
    """

    async def admitted(item: Item) -> Answer:
        async with chat.admission():
            return await one(item)

    if len(items) == 1:
        return [await admitted(items[0])]
    return list(await asyncio.gather(*(admitted(item) for item in items)))


def api_config(
    chat: ChatClient, options: JudgeOptions, *, spec: str, kind: str, template: Any, **more: Any
) -> dict[str, Any]:
    """What can change an ``api:`` back end's outputs, in the key order stored configurations have.

    Args:
        chat: the client (its model and public endpoint).
        options: the sampling settings and seed.
        spec: the back end's spec.
        kind: its kind.
        template: its prompt (``name`` and ``sha256`` are read).
        **more: further settings, placed after the template's (a judge's ``structured``).

    Returns:
        ``spec, kind, model, base_url, template, template_sha256, **more, temperature, top_p,
        max_tokens, seed``; no credentials, no query strings.
    """
    return {
        "spec": spec,
        "kind": kind,
        "model": chat.model,
        "base_url": public_url(chat.base_url),
        "template": template.name,
        "template_sha256": template.sha256,
        **more,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "max_tokens": options.max_tokens,
        "seed": options.seed,
    }

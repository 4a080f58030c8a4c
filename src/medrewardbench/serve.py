"""Serve a local transformers vision-language model behind an OpenAI-compatible API.

``medrewardbench serve hf:PATH`` (see :func:`run_server`) exposes:

* ``POST /v1/chat/completions``: ``messages`` whose content is a string or a list of ``text`` and
  ``image_url`` parts. Images must be inline ``data:`` URLs (``data:image/png;base64,...``; DICOM
  and every format Pillow reads are accepted); ``http(s)`` URLs are refused with a 400, since the
  server fetches nothing from the network. ``max_tokens`` (or ``max_completion_tokens``),
  ``temperature``, ``top_p``, ``seed`` and ``n`` are honoured; ``stream`` is refused with a 400;
  a ``response_format`` other than ``{"type": "text"}`` is refused with a 400 that names it and
  says what to do instead (serve ``hf:MODEL#constrained`` to get verdict JSON by construction; the
  API judge's ``--structured`` then falls back to plain requests, as with any server that lacks
  structured output); other fields are accepted and ignored. Two
  extensions, sent by the ``openai`` client through ``extra_body``: ``force_prefix`` (text the
  answer continues from) and ``constrained`` (the verdict JSON skeleton, see
  :mod:`medrewardbench.models.constraints`). ``logprobs: true`` (with ``top_logprobs``, 0 to 20)
  returns each generated token's log-probability and its most likely alternatives in
  ``choices[i].logprobs.content``, as OpenAI does, from the model's logits before constrained
  decoding and sampling change them; a forced prefix comes first as one token of log-probability 0
  (it was not chosen), so that the tokens, joined, are the content.
* ``GET /v1/models``: the one model served.

The answer carries ``choices[i].message.content``, ``finish_reason``, ``usage`` (prompt tokens
include image tokens) and ``model``. Errors are JSON in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``, with a 4xx status for a bad request.

Requests are generated one at a time (the model is not thread-safe; :class:`VLMGenerator` holds a
lock), in a worker thread so the event loop keeps accepting connections. The generation code is
the one the ``hf:`` judges use, so a model behind this server answers exactly as it does in-process.

:class:`BackgroundServer` (from :mod:`medrewardbench.utils.background_server`, the package's one
in-process server, which the test OpenAI server uses too) serves the app in a thread for tests
and notebooks: ``with BackgroundServer(create_app(generator)) as server: server.base_url``.

Needs the ``serve`` extra (FastAPI, uvicorn) and the ``hf`` extra (torch, transformers).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from medrewardbench.errors import MedRewardBenchError, require
from medrewardbench.models.constraints import CONSTRAINED_SUFFIX
from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, Generation, GenerationSettings, VLMGenerator
from medrewardbench.models.logprobs import MAX_TOP_LOGPROBS, TokenLogprob, openai_logprobs
from medrewardbench.models.options import JudgeOptions
from medrewardbench.utils.background_server import BackgroundServer

logger = logging.getLogger(__name__)

__all__ = [
    "BackgroundServer",
    "RequestError",
    "check_server_requirements",
    "create_app",
    "parse_chat_request",
    "run_server",
]

_ROLES: Mapping[str, str] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_N = 8


class RequestError(MedRewardBenchError, ValueError):
    """A chat completion request the server refuses (answered with a 4xx).

    Args:
        message: what is wrong with the request.
        param: the request field concerned, if any.
        status: the HTTP status to answer with.
    """

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param = param
        self.status = status


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat completion request, with images decoded to PIL."""

    conversation: list[dict[str, Any]]
    settings: GenerationSettings
    n: int = 1
    force_prefix: str = ""
    constrained: bool = False
    top_logprobs: int | None = None
    """None without ``logprobs``; else how many alternatives to list per token"""


def _decode_data_url(url: str, param: str) -> Any:
    """Decode a ``data:`` URL into an RGB PIL image (through the package's image loader)."""
    from medrewardbench.images import ImageRef, load_image

    header, sep, payload = url.partition(",")
    if not sep or not header.startswith("data:"):
        raise RequestError("a data URL must look like data:<mime>;base64,<payload>", param)
    if not header.endswith(";base64"):
        raise RequestError("only base64 data URLs are supported", param)
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(f"the image data URL is not valid base64: {exc}", param) from exc
    try:
        return load_image(ImageRef.from_bytes(data, name=header[5:].split(";")[0]))
    except Exception as exc:  # any decoding failure is the client's bad image
        raise RequestError(f"the image cannot be decoded: {exc}", param) from exc


def _image_part(part: Mapping[str, Any], param: str) -> dict[str, Any]:
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, Mapping) else value
    if not isinstance(url, str) or not url:
        raise RequestError("an image_url part needs image_url.url", param)
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("http", "https"):
        raise RequestError(
            "remote image URLs are not supported: this server has no network access; "
            "send the image inline as a data URL (data:image/png;base64,...)",
            param,
        )
    if scheme != "data":
        raise RequestError(f"unsupported image URL scheme {scheme!r}; send a data URL", param)
    return {"type": "image", "image": _decode_data_url(url, param)}


def _message(raw: Any, index: int) -> dict[str, Any]:
    param = f"messages[{index}]"
    if not isinstance(raw, Mapping):
        raise RequestError("each message must be an object with role and content", param)
    role = _ROLES.get(str(raw.get("role")))
    if role is None:
        raise RequestError(f"unsupported role {raw.get('role')!r}; expected one of {', '.join(_ROLES)}", param)
    content = raw.get("content")
    if content is None:
        content = ""
    if isinstance(content, str):
        return {"role": role, "content": [{"type": "text", "text": content}]}
    if not isinstance(content, list):
        raise RequestError("content must be a string or a list of parts", f"{param}.content")
    parts: list[dict[str, Any]] = []
    for part_index, part in enumerate(content):
        part_param = f"{param}.content[{part_index}]"
        if not isinstance(part, Mapping):
            raise RequestError("each content part must be an object", part_param)
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise RequestError("a text part needs a string text", part_param)
            parts.append({"type": "text", "text": text})
        elif kind == "image_url":
            parts.append(_image_part(part, part_param))
        else:
            raise RequestError(f"unsupported content part type {kind!r}; use text or image_url", part_param)
    return {"role": role, "content": parts}


def _number(body: Mapping[str, Any], key: str, kind: type, low: float | None = None, high: float | None = None) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise RequestError(f"{key} must be a{'n integer' if kind is int else ' number'}", key)
    if (low is not None and value < low) or (high is not None and value > high):
        raise RequestError(f"{key} must be between {low} and {high}, got {value}", key)
    return kind(value)


def parse_chat_request(
    body: Any, defaults: GenerationSettings = GenerationSettings(), *, constrained: bool = False
) -> ChatRequest:
    """Validate a chat completion request body and decode its images.

    Args:
        body: the decoded JSON body.
        defaults: settings for the fields the request leaves out.
        constrained: the default of the ``constrained`` extension.

    Returns:
        The request, ready for :meth:`VLMGenerator.generate`.

    Raises:
        RequestError: naming the offending parameter.
    """
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    if body.get("stream"):
        raise RequestError("streaming is not supported by this server", "stream")
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise RequestError(
            "response_format is not supported by this server: it cannot constrain answers to a JSON schema; "
            "serve the model as hf:MODEL#constrained to get the verdict JSON by construction",
            "response_format",
        )
    conversation = [_message(raw, index) for index, raw in enumerate(messages)]
    max_tokens = _number(body, "max_completion_tokens", int, 1, 1_000_000)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", int, 1, 1_000_000)
    temperature = _number(body, "temperature", float, 0, 2)
    top_p = _number(body, "top_p", float, 0, 1)
    seed = _number(body, "seed", int)
    n = _number(body, "n", int, 1, MAX_N) or 1
    force_prefix = body.get("force_prefix") or ""
    if not isinstance(force_prefix, str):
        raise RequestError("force_prefix must be a string", "force_prefix")
    constrained = body.get("constrained", constrained)
    if not isinstance(constrained, bool):
        raise RequestError("constrained must be a boolean", "constrained")
    logprobs = body.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise RequestError("logprobs must be a boolean", "logprobs")
    top_logprobs = _number(body, "top_logprobs", int, 0, MAX_TOP_LOGPROBS)
    if top_logprobs is not None and not logprobs:
        raise RequestError("top_logprobs needs logprobs set to true", "top_logprobs")
    temperature = defaults.temperature if temperature is None else temperature
    settings = GenerationSettings(
        max_new_tokens=max_tokens or defaults.max_new_tokens,
        temperature=temperature,
        top_p=top_p if top_p is not None else (defaults.top_p if temperature > 0 else None),
        seed=defaults.seed if seed is None else seed,
    )
    return ChatRequest(
        conversation,
        settings,
        n=n,
        force_prefix=force_prefix,
        constrained=constrained,
        top_logprobs=(top_logprobs or 0) if logprobs else None,
    )


def _logprobs(generation: Generation, chat: ChatRequest) -> dict[str, Any] | None:
    """The ``logprobs`` member of one choice (None when the request did not ask for it)."""
    if chat.top_logprobs is None or generation.tokens is None:
        return None
    tokens = list(generation.tokens)
    if chat.force_prefix:
        tokens.insert(0, TokenLogprob(chat.force_prefix, 0.0, ((chat.force_prefix, 0.0),)))
    return openai_logprobs(tokens, chat.top_logprobs)


def _error(status: int, message: str, *, param: str | None = None, kind: str | None = None) -> Any:
    responses: Any = require("fastapi.responses", "serve", "the OpenAI-compatible server")
    error_type = kind or ("invalid_request_error" if status < 500 else "server_error")
    payload = {"error": {"message": message, "type": error_type, "param": param, "code": None}}
    return responses.JSONResponse(payload, status_code=status)


def create_app(
    generator: VLMGenerator,
    *,
    model_name: str | None = None,
    defaults: GenerationSettings | None = None,
    constrained: bool = False,
) -> Any:
    """A FastAPI app that answers OpenAI chat completions with a local model.

    Args:
        generator: the loaded model (see :meth:`VLMGenerator.load`).
        model_name: the id reported in ``/v1/models`` and in answers; defaults to the model path.
        defaults: decoding settings for fields a request leaves out (greedy, 512 new tokens).
        constrained: constrain answers to the verdict skeleton unless a request says otherwise.

    Returns:
        The ``fastapi.FastAPI`` application.
    """
    fastapi: Any = require("fastapi", "serve", "the OpenAI-compatible server")
    served_name = model_name or generator.name
    base_settings = defaults or GenerationSettings(max_new_tokens=DEFAULT_MAX_NEW_TOKENS)
    created = int(time.time())
    app = fastapi.FastAPI(title="medrewardbench model server", version="1")

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": served_name, "object": "model", "created": created, "owned_by": "medrewardbench"}],
        }

    async def chat_completions(request: Any) -> Any:
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(400, f"the request body is not valid JSON: {exc}")
        try:
            chat = await asyncio.to_thread(parse_chat_request, body, base_settings, constrained=constrained)
        except RequestError as exc:
            return _error(exc.status, str(exc), param=exc.param)
        try:
            generations = await asyncio.to_thread(
                generator.generate,
                [chat.conversation] * chat.n,
                chat.settings,
                prefix=chat.force_prefix,
                constrained=chat.constrained,
                top_logprobs=chat.top_logprobs,
            )
        except ValueError as exc:
            return _error(400, str(exc))
        except Exception as exc:  # reported to the client as a server error
            logger.exception("generation failed")
            return _error(500, f"generation failed: {type(exc).__name__}: {exc}")
        prompt_tokens = generations[0].prompt_tokens if generations else 0
        completion_tokens = sum(g.completion_tokens for g in generations)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_name,
            "choices": [
                {
                    "index": index,
                    "message": {"role": "assistant", "content": generation.text},
                    "finish_reason": generation.finish_reason,
                    "logprobs": _logprobs(generation, chat),
                }
                for index, generation in enumerate(generations)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    # annotations are strings (PEP 563) and FastAPI resolves them in module globals, where the
    # lazily imported fastapi is absent: hand it the real class
    chat_completions.__annotations__["request"] = fastapi.Request
    app.post("/v1/chat/completions")(chat_completions)
    return app


SERVER_MODULES: tuple[tuple[str, str], ...] = (
    ("fastapi", "serve"),
    ("uvicorn", "serve"),
    ("torch", "hf"),
    ("transformers", "hf"),
)
"""(module, extra) that :func:`run_server` needs, checked before anything is loaded."""


def check_server_requirements(*, adapter: bool = False) -> None:
    """Import everything the server needs, so that a missing package is reported before any work.

    Args:
        adapter: a LoRA adapter will be loaded (peft is needed too).

    Raises:
        MissingExtraError: the first missing module, naming its extra and the command that installs it.
    """
    needed = [*SERVER_MODULES, *((("peft", "hf"),) if adapter else ())]
    for module, extra in needed:
        require(module, extra, "medrewardbench serve")


def run_server(
    spec_or_path: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    options: JudgeOptions = JudgeOptions(),
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Load a model and serve it until interrupted (blocking).

    Args:
        spec_or_path: ``hf:MODEL_OR_PATH`` or a bare Hub id / directory; a ``#constrained`` suffix
            makes constrained decoding the default for requests that do not say.
        host: interface to bind; the default serves this machine only.
        port: TCP port.
        options: ``local.device``, ``local.dtype``, ``local.adapter`` choose how the model loads
            (``local.constrained`` as the ``#constrained`` suffix); ``max_tokens``, ``temperature``,
            ``top_p``, ``seed`` are the defaults for requests that omit them.
        on_ready: told the base URL once the model is loaded, just before the server starts listening.

    Raises:
        MissingExtraError: FastAPI/uvicorn (``serve``) or torch/transformers (``hf``) missing.
        ModelLoadError: the model cannot be loaded or is not an image-text-to-text model.
    """
    check_server_requirements(adapter=options.local.adapter is not None)
    uvicorn: Any = require("uvicorn", "serve", "the OpenAI-compatible server")
    name = spec_or_path[len("hf:") :] if spec_or_path.startswith("hf:") else spec_or_path
    local = options.local
    constrained = local.constrained
    if name.endswith(CONSTRAINED_SUFFIX):
        name, constrained = name[: -len(CONSTRAINED_SUFFIX)], True
    generator = VLMGenerator.load(name, device=local.device, dtype=local.dtype, adapter=local.adapter)
    temperature = float(options.temperature or 0.0)
    defaults = GenerationSettings(
        max_new_tokens=options.max_tokens or DEFAULT_MAX_NEW_TOKENS,
        temperature=temperature,
        top_p=options.top_p if options.top_p is not None else (1.0 if temperature > 0 else None),
        seed=options.seed,
    )
    app = create_app(generator, model_name=name, defaults=defaults, constrained=constrained)
    base_url = f"http://{host}:{port}/v1"
    logger.info("serving %s on %s", name, base_url)
    if on_ready is not None:
        on_ready(base_url)
    uvicorn.run(app, host=host, port=port, log_level="info")

"""Model options: the settings every model back end shares, and one typed section per back-end kind.

:class:`JudgeOptions` (the name the command line and sweep files have always used) holds what any
judge or generator may read (seed, template, concurrency, batch size,
sampling) and two sections: :class:`ApiSettings` for judges behind an OpenAI-compatible API
(``api:``) and :class:`LocalSettings` for local models (``hf:``, ``rm:``, ``medrewardbench serve``).
Each section is a frozen dataclass that checks its values when it is made and names the one that
is wrong; :meth:`ApiSettings.from_mapping` (and the others) read a plain mapping, such as a section
of a YAML file, and refuse keys they do not know, naming them.

None of these settings is part of a judge's fingerprint by itself: each judge puts what can change
its outputs into :meth:`~medrewardbench.models.backend.Backend.config` (retries, timeouts and client
processes change how requests are sent, never what comes back).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

from medrewardbench.errors import JudgeSpecError
from medrewardbench.models.logprobs import MAX_TOP_LOGPROBS

__all__ = ["HTTP_BACKENDS", "ApiSettings", "JudgeOptions", "LocalSettings", "check_api_settings"]

HTTP_BACKENDS: tuple[str, ...] = ("auto", "aiohttp", "httpx")
"""HTTP libraries the API judge can send with (``auto``: aiohttp when installed, else httpx)."""


def check_api_settings(
    base_url: str | None, timeout_s: float, max_retries: int, *, base_url_source: str = "--base-url"
) -> None:
    """Refuse API settings that would fail on the first request or silently mean something else.

    Args:
        base_url: the endpoint, or None for the client's default.
        timeout_s: the per-request timeout in seconds.
        max_retries: retries after the first attempt.
        base_url_source: where the URL came from (``--base-url`` or ``OPENAI_BASE_URL``), for messages.

    Raises:
        JudgeSpecError: a base URL that is not an http(s) URL with a host, or that carries
            credentials; a timeout that is not a positive number; a negative retry count.
    """
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise JudgeSpecError(
            f"--timeout must be a number of seconds greater than 0, not {timeout_s!r} (0 does not mean no timeout)"
        )
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise JudgeSpecError(f"--max-retries must be a whole number >= 0, not {max_retries!r}")
    if base_url is None:
        return
    try:
        parts = urlsplit(base_url.strip())
        has_credentials = parts.username is not None or parts.password is not None
        host, _port = parts.hostname, parts.port
    except ValueError as exc:
        raise JudgeSpecError(f"{base_url_source} is not a valid URL ({exc})") from exc
    if has_credentials:
        # the URL is not repeated: it holds a secret
        raise JudgeSpecError(
            f"{base_url_source} must not carry credentials (user:password@host): put the key in an "
            "environment variable and name it with --api-key-env (default OPENAI_API_KEY)"
        )
    if parts.scheme.lower() not in ("http", "https"):
        raise JudgeSpecError(
            f"{base_url_source} must be an http:// or https:// URL, not {base_url!r} "
            "(for example http://localhost:8000/v1)"
        )
    if not host:
        raise JudgeSpecError(f"{base_url_source} {base_url!r} names no host (for example http://localhost:8000/v1)")


# ----------------------------------------------------------------------------------------- checks


def _flag(name: str, value: Any) -> bool:
    """A boolean that may arrive as text; anything unclear is refused, not guessed.

    Raises:
        JudgeSpecError: the text is not one of true/false, yes/no, on/off, 1/0.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
    raise JudgeSpecError(f"option {name} must be true or false, not {value!r}")


def _number_from_text(kind: type[int] | type[float]) -> Callable[[str, Any], Any]:
    """A converter that reads numeric text (``"0.5"``) and leaves anything else to the checks."""

    def convert(_name: str, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return kind(value.strip().replace("_", ""))
            except ValueError:
                return value
        return value

    return convert


def _check_whole(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise JudgeSpecError(f"{name} must be a whole number >= {minimum}, not {value!r}")


def _in_range(value: Any, low: float, high: float, *, low_open: bool) -> bool:
    """Whether ``value`` is a finite number (not a bool) in [low, high], or (low, high] when ``low_open``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return (low < value if low_open else low <= value) and value <= high


def _check_seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise JudgeSpecError(f"{name} must be a number of seconds >= 0, not {value!r}")


def _check_text(name: str, value: Any, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise JudgeSpecError(f"{name} must be a non-empty text{' or null' if optional else ''}, not {value!r}")


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise JudgeSpecError(f"option {name} must be true or false, not {value!r}")


_T = TypeVar("_T")


def _from_mapping(
    cls: type[_T],
    values: Mapping[str, Any],
    where: str,
    converters: Mapping[str, Callable[[str, Any], Any]],
) -> _T:
    """Build settings from a mapping, refusing keys the class does not have, naming them all."""
    if not isinstance(values, Mapping):
        raise JudgeSpecError(f"{where} must be a mapping of names to values, not {type(values).__name__}")
    known = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in values if key not in known)
    if unknown:
        raise JudgeSpecError(
            f"unknown {where} setting{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(known)}"
        )
    try:
        given = {str(key): value for key, value in values.items()}
        for name, convert in converters.items():
            if name in given:
                given[name] = convert(name, given[name])
        return cls(**given)
    except JudgeSpecError as exc:
        raise JudgeSpecError(f"{where}: {exc}") from exc


# --------------------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class ApiSettings:
    """How an ``api:`` judge reaches its server: endpoint, key, timeouts, retries, images, clients.

    Attributes:
        base_url: the OpenAI-compatible endpoint (``--base-url``); None: ``OPENAI_BASE_URL`` or the
            client's default.
        api_key_env: the environment variable that holds the key (``--api-key-env``; default
            ``OPENAI_API_KEY``). The key itself is never a setting.
        timeout_s: per-request timeout in seconds (``--timeout``), greater than 0.
        max_retries: retries after the first attempt (``--max-retries``).
        structured: ask for JSON-schema output (``--structured``); a server that refuses it gets
            the requests again without.
        client_processes: spread requests over this many client processes (``--client-processes``).
        backoff_base_s: the first backoff ceiling in seconds; it doubles per retry.
        backoff_max_s: the largest backoff ceiling in seconds.
        retry_after_max_s: the longest ``Retry-After`` honoured, in seconds.
        image_cache_size: image data URLs kept, by content.
        image_passthrough: send a PNG, JPEG or WebP file as it is when its pixels decode as the
            package decodes them (else every image is decoded and sent as PNG).
        http_backend: ``auto`` (aiohttp when installed, else httpx), ``aiohttp`` or ``httpx``.
        logprobs: ask for the ``top_logprobs`` most likely alternatives of every token (``--logprobs
            N``, 1 to 20), from which each verdict's probability is read
            (:mod:`medrewardbench.models.logprobs`); 0 (the default) asks for none.

    Raises:
        JudgeSpecError: a value that is out of range or of the wrong kind (the message names it).
    """

    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 6
    structured: bool = False
    client_processes: int = 1
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 60.0
    image_cache_size: int = 32
    image_passthrough: bool = True
    http_backend: str = "auto"
    logprobs: int = 0

    def __post_init__(self) -> None:
        if self.base_url is not None and not isinstance(self.base_url, str):
            raise JudgeSpecError(f"--base-url must be a URL, not {self.base_url!r}")
        if self.api_key_env is not None and not isinstance(self.api_key_env, str):
            raise JudgeSpecError(f"--api-key-env must name an environment variable, not {self.api_key_env!r}")
        check_api_settings(self.base_url, self.timeout_s, self.max_retries)
        _check_flag("structured", self.structured)
        _check_whole("client_processes", self.client_processes, 1)
        for name in ("backoff_base_s", "backoff_max_s", "retry_after_max_s"):
            _check_seconds(name, getattr(self, name))
        _check_whole("image_cache_size", self.image_cache_size, 0)
        _check_flag("image_passthrough", self.image_passthrough)
        _check_whole("logprobs", self.logprobs, 0)
        if self.logprobs > MAX_TOP_LOGPROBS:
            raise JudgeSpecError(f"logprobs must be at most {MAX_TOP_LOGPROBS} (top_logprobs), got {self.logprobs}")
        if self.http_backend not in HTTP_BACKENDS:
            raise JudgeSpecError(
                f"unknown http_backend {self.http_backend!r}; expected {', '.join(HTTP_BACKENDS[:-1])} or "
                f"{HTTP_BACKENDS[-1]}"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "api") -> ApiSettings:
        """Read settings from a mapping (a YAML section, parsed flags); text values are read too.

        Args:
            values: setting name -> value; absent names keep their defaults.
            where: how messages name the section.

        Returns:
            The settings.

        Raises:
            JudgeSpecError: an unknown name (all of them are listed), or a value out of range.
        """
        return _from_mapping(cls, values, where, _API_CONVERTERS)


@dataclass(frozen=True)
class LocalSettings:
    """How a local model (``hf:``, ``rm:``, the server) is loaded and decoded.

    Attributes:
        device: ``auto`` (CUDA when visible, else CPU), ``cpu``, ``cuda``, ``cuda:N``, ``mps``...
        dtype: ``auto`` (bfloat16 on CUDA when supported, else float32), ``float32``, ``bf16``...
        adapter: a PEFT LoRA adapter directory (or, for ``rm:``, a reward model directory to put
            on the named base model).
        force_prefix: text the model's answer must start with (``hf:``).
        constrained: decode only the verdict JSON skeleton (``hf:``; the ``#constrained`` suffix
            of a spec switches it on too).

    Raises:
        JudgeSpecError: a value of the wrong kind (the message names it). Whether a device or
            dtype exists is checked when the model is loaded.
    """

    device: str = "auto"
    dtype: str = "auto"
    adapter: str | None = None
    force_prefix: str | None = None
    constrained: bool = False

    def __post_init__(self) -> None:
        _check_text("device", self.device, optional=False)
        _check_text("dtype", self.dtype, optional=False)
        _check_text("adapter", self.adapter, optional=True)
        if self.force_prefix is not None and not isinstance(self.force_prefix, str):
            raise JudgeSpecError(f"force_prefix must be a text or null, not {self.force_prefix!r}")
        _check_flag("constrained", self.constrained)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "local") -> LocalSettings:
        """Read settings from a mapping; ``constrained`` may be text (``"true"``).

        Args:
            values: setting name -> value; absent names keep their defaults.
            where: how messages name the section.

        Returns:
            The settings.

        Raises:
            JudgeSpecError: an unknown name (all of them are listed), or a value of the wrong kind.
        """
        return _from_mapping(cls, values, where, {"constrained": _flag})


_API_CONVERTERS: dict[str, Callable[[str, Any], Any]] = {
    "timeout_s": _number_from_text(float),
    "max_retries": _number_from_text(int),
    "structured": _flag,
    "client_processes": _number_from_text(int),
    "backoff_base_s": _number_from_text(float),
    "backoff_max_s": _number_from_text(float),
    "retry_after_max_s": _number_from_text(float),
    "image_cache_size": _number_from_text(int),
    "image_passthrough": _flag,
    "logprobs": _number_from_text(int),
}


# ------------------------------------------------------------------------------------ the options


@dataclass(frozen=True)
class JudgeOptions:
    """Settings shared by judge builders, with one typed section per backend kind.

    Attributes:
        seed: seed of every random choice (sampling, random baselines); sent to API servers.
        template: ``pairwise``, ``pairwise-cot`` or a template file.
        concurrency: batches (API: requests) in flight at once; None for the backend's default.
        batch_size: requests per batch; None for the backend's default.
        temperature: sampling temperature; None leaves it to the backend (local: greedy).
        top_p: nucleus sampling; None leaves it to the backend.
        max_tokens: longest answer; None leaves it to the backend.
        api: settings of ``api:`` judges.
        local: settings of local models (``hf:``, ``rm:``).
    """

    seed: int = 0
    template: str = "pairwise"
    concurrency: int | None = None
    batch_size: int | None = None
    # sampling
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    # per backend kind
    api: ApiSettings = field(default_factory=ApiSettings)
    local: LocalSettings = field(default_factory=LocalSettings)

    def __post_init__(self) -> None:
        if not isinstance(self.api, ApiSettings):
            raise JudgeSpecError(f"api must be ApiSettings, not {type(self.api).__name__}")
        if not isinstance(self.local, LocalSettings):
            raise JudgeSpecError(f"local must be LocalSettings, not {type(self.local).__name__}")
        # checked here, before any request: an endpoint would refuse every one of them
        if self.temperature is not None and not _in_range(self.temperature, 0.0, math.inf, low_open=False):
            raise JudgeSpecError(f"--temperature must be a number >= 0, not {self.temperature!r}")
        if self.top_p is not None and not _in_range(self.top_p, 0.0, 1.0, low_open=True):
            raise JudgeSpecError(f"--top-p must be a number in (0, 1], not {self.top_p!r}")
        sizes = (
            ("--max-tokens", self.max_tokens),
            ("--concurrency", self.concurrency),
            ("--batch-size", self.batch_size),
        )
        for name, value in sizes:
            if value is not None:
                _check_whole(name, value, 1)

    def with_changes(self, **changes: Any) -> JudgeOptions:
        """These options with some shared fields (or whole sections) replaced.

        Args:
            changes: field name -> new value.

        Returns:
            New options.
        """
        return replace(self, **changes)

    def with_api(self, **changes: Any) -> JudgeOptions:
        """These options with some :class:`ApiSettings` replaced (checked again).

        Args:
            changes: setting name -> new value.

        Returns:
            New options.
        """
        return replace(self, api=replace(self.api, **changes))

    def with_local(self, **changes: Any) -> JudgeOptions:
        """These options with some :class:`LocalSettings` replaced (checked again).

        Args:
            changes: setting name -> new value.

        Returns:
            New options.
        """
        return replace(self, local=replace(self.local, **changes))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "judge options") -> JudgeOptions:
        """Read options from a mapping whose ``api`` and ``local`` entries are mappings too.

        Args:
            values: shared option name -> value, plus optional ``api`` and ``local`` sections.
            where: how messages name the mapping.

        Returns:
            The options.

        Raises:
            JudgeSpecError: an unknown name in any section (all of them are listed), or a value
                out of range.
        """
        if not isinstance(values, Mapping):
            raise JudgeSpecError(f"{where} must be a mapping of names to values, not {type(values).__name__}")
        converted = dict(values)
        if "api" in converted:
            converted["api"] = ApiSettings.from_mapping(converted["api"], f"{where}: api")
        if "local" in converted:
            converted["local"] = LocalSettings.from_mapping(converted["local"], f"{where}: local")
        return _from_mapping(cls, converted, where, {})

"""Judges behind an OpenAI-compatible Chat Completions API (``api:MODEL``).

One request per comparison: the template's messages with the image as a base64 data URL, sent
through the official async ``openai`` client. The request machinery described below lives in
:class:`~medrewardbench.models.api.chat.ChatClient`, which the free-text generators of
``medrewardbench build`` use as well. The client's own retries are off; this module retries
by itself so that every attempt is visible and bounded:

* retried: HTTP 429, 408, 409 and 5xx, timeouts and connection errors, up to
  ``options.api.max_retries`` times, waiting the server's ``Retry-After`` (seconds or an HTTP-date,
  capped) or else an exponential backoff with full jitter;
* not retried: other 4xx (a failure at once) and malformed answers (invalid JSON, no choices);
* with ``options.api.structured`` the request carries a JSON-schema ``response_format``; a server that
  answers 400/422 about it gets the request again without it, and the judge stops sending it for the
  rest of the run (recorded in :meth:`ApiJudge.metadata` and each result's ``extra``).

A request that still fails becomes ``JudgeResult.failed(reason)``; nothing is raised per request.
The API key never appears in config, metadata, results, logs or messages: texts that leave this
module pass through :func:`medrewardbench.utils.secrets.scrub`, and the key is registered there, so the
store and the command's log handlers remove it too when an endpoint echoes it back. Settings that
would fail on the first request (a base URL that is not http(s) or carries credentials, a timeout
of 0 or less, negative retries) are refused when the settings are made (:func:`check_api_settings`).

Settings: :class:`~medrewardbench.models.options.ApiSettings` in ``JudgeOptions.api``: the endpoint,
key variable, timeout, retries and structured output of the command line, and the tuning
``backoff_base_s`` (default 0.5), ``backoff_max_s`` (30), ``retry_after_max_s`` (60, the longest
``Retry-After`` honoured), ``image_cache_size`` (32 data URLs), ``image_passthrough`` (true),
``http_backend`` (``auto``: aiohttp when installed, else httpx; or ``aiohttp``/``httpx``) and
``client_processes`` (1).

Images: a PNG, JPEG or WebP file whose 8-bit pixels decode as :func:`~medrewardbench.images.load_image`
would decode them goes out as it is (:func:`~medrewardbench.models.api.images.passthrough_data_url`).
Files up to 1 MiB are read and encoded on the event loop, because a hop to a worker thread costs
more than that work. Any other image (DICOM, 16-bit, alpha, EXIF rotation, other formats) is
decoded to RGB and sent as a PNG at zlib level 1, in a worker thread. Re-encoding every image as
a PNG at the default level took 70–600 ms per megapixel-class scan and made JPEG requests several
times larger; with ``image_passthrough`` false, every image takes that decode-and-PNG path.

Throughput: requests go through the client's generic ``post`` (the official client's documented way
to call any endpoint) rather than ``chat.completions.create``, whose per-request parameter transform
and response model construction cost more CPU than the HTTP exchange itself; the answer JSON is read
here, which also lets a malformed answer be named precisely.
"""

from __future__ import annotations

from medrewardbench.judges.api.client import (
    BASE_URL_ENV,
    DEFAULT_API_KEY_ENV,
    DEFAULT_CONCURRENCY,
    PLACEHOLDER_API_KEY,
    STRUCTURED_SCHEMA_NAME,
    ApiJudge,
    public_url,
)
from medrewardbench.judges.api.pool import ProcessPoolApiJudge
from medrewardbench.judges.base import Judge
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.models.api.retry import RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from medrewardbench.models.options import ApiSettings, check_api_settings

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONCURRENCY",
    "PLACEHOLDER_API_KEY",
    "RETRYABLE_STATUS",
    "STRUCTURED_SCHEMA_NAME",
    "ApiJudge",
    "ApiSettings",
    "ProcessPoolApiJudge",
    "RetryPolicy",
    "build",
    "check_api_settings",
    "parse_retry_after",
    "public_url",
]


def build(name: str, options: JudgeOptions) -> Judge:
    """Build the judge for ``api:MODEL``.

    Args:
        name: the model name as the server knows it.
        options: shared judge settings (base URL, key variable, sampling, retries, template).

    Returns:
        A ready :class:`ApiJudge`.

    Raises:
        JudgeSpecError: no model name, no API key where one is needed, or a bad base URL, timeout
            or retry count.
        MissingExtraError: the ``openai`` package is not installed.
        TemplateError: the template cannot be loaded.

    With ``options.api.client_processes > 1`` the requests run in that many client processes
    (:mod:`medrewardbench.judges.api.pool`), for rates one Python process cannot send.
    """
    processes = options.api.client_processes
    if processes > 1:
        return ProcessPoolApiJudge(name, options, processes)
    return ApiJudge(name, options)

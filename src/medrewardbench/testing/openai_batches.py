"""The Batch API of the local test server: ``/v1/files`` and ``/v1/batches`` over real HTTP.

Enough of OpenAI's Files and Batches APIs for ``sweep --batch-api`` and its tests, through the
official ``openai`` client:

* ``POST /v1/files`` (multipart: ``file``, ``purpose``), ``GET /v1/files/{id}``,
  ``GET /v1/files/{id}/content``;
* ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window``, ``metadata``),
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches`` (``limit``,
  ``after``; newest first).

A batch is ``validating``, then ``in_progress`` for :meth:`BatchState.set_delay` seconds, then
answered line by line with the live route's answer logic (scripted outputs, responder, default;
the same usage counts and ``response_format`` checks), and ``completed`` with an output file
(answers) and an error file (requests that failed). Knobs on :class:`BatchState`
(``server.control.batches``):

* :meth:`~BatchState.set_delay`: seconds from creation to completion;
* :meth:`~BatchState.fail_requests`: these ``custom_id`` fail with an HTTP status (500 default);
* :meth:`~BatchState.set_failure_rate`: requests fail at random with this probability (seeded);
* :meth:`~BatchState.set_outcome`: end as ``expired`` or ``failed`` instead, answering only the
  first ``answered`` lines;
* observation: :attr:`~BatchState.files`, :attr:`~BatchState.batches`, :attr:`~BatchState.counters`
  (uploads, batches created, cancels).

Every processed line is recorded with the server's requests (method ``BATCH``, path
``/v1/batches/{id}``), so tests can count what a batch answered apart from live requests.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.parser
import email.policy
import itertools
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["BatchState", "StoredFile", "add_batch_routes"]

BATCH_ENDPOINTS = ("/v1/chat/completions",)
"""Endpoints a batch may name."""
TERMINAL = ("completed", "failed", "expired", "cancelled")

Answer = Callable[[Any], tuple[int, dict[str, Any]]]
"""The live route's answer logic: request body -> (HTTP status, response body)."""
Record = Callable[[Any, "dict[str, Any] | None"], None]


@dataclass
class StoredFile:
    """A file the server holds."""

    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def to_json(self) -> dict[str, Any]:
        """The file object as ``/v1/files`` answers it."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    created_at: int
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    times: dict[str, int] = field(default_factory=dict)
    task: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + 86400,
            "in_progress_at": self.times.get("in_progress"),
            "finalizing_at": self.times.get("finalizing"),
            "completed_at": self.times.get("completed"),
            "failed_at": self.times.get("failed"),
            "expired_at": self.times.get("expired"),
            "cancelling_at": self.times.get("cancelling"),
            "cancelled_at": self.times.get("cancelled"),
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        }


class BatchState:
    """The files, the batches and the knobs of the Batch API routes; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        """No file, no batch, no delay, no failure; counters zero. Batches still running are cancelled."""
        with self._lock:
            running = [b for b in getattr(self, "_batches", {}).values() if b.task is not None]
            self._files: dict[str, StoredFile] = {}
            self._batches: dict[str, _Batch] = {}
            self._delay_s = 0.0
            self._failing: dict[str, int] = {}
            self._rate = 0.0
            self._rate_status = 500
            self._rng = random.Random(0)
            self._outcome = "completed"
            self._answered: int | None = None
            self._counters: collections.Counter[str] = collections.Counter()
        for batch in running:
            loop = getattr(batch.task, "get_loop", lambda: None)()
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(batch.task.cancel)

    # knobs ------------------------------------------------------------------------------
    def set_delay(self, seconds: float) -> None:
        """Seconds a batch stays ``in_progress`` before it is answered."""
        if seconds < 0:
            raise ValueError(f"delay must be >= 0, not {seconds}")
        with self._lock:
            self._delay_s = seconds

    def fail_requests(self, *custom_ids: str, status: int = 500) -> None:
        """Answer these ``custom_id`` with an error of this HTTP status (they go to the error file)."""
        with self._lock:
            self._failing.update(dict.fromkeys(custom_ids, status))

    def set_failure_rate(self, rate: float, *, seed: int = 0, status: int = 500) -> None:
        """Fail each request with this probability (drawn from a generator seeded ``seed``)."""
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be in [0, 1], not {rate}")
        with self._lock:
            self._rate, self._rate_status, self._rng = rate, status, random.Random(seed)

    def set_outcome(self, status: str = "completed", *, answered: int | None = None) -> None:
        """End batches ``completed`` (default), ``expired`` or ``failed``.

        Args:
            status: the outcome.
            answered: answer only this many first lines (the rest get no answer, as when a batch
                expires part way); None answers every line.

        Raises:
            ValueError: an unknown outcome.
        """
        if status not in ("completed", "expired", "failed"):
            raise ValueError(f"unknown outcome {status!r}")
        with self._lock:
            self._outcome, self._answered = status, answered

    # observation ------------------------------------------------------------------------
    @property
    def files(self) -> dict[str, StoredFile]:
        """File id -> file, uploads and batch results alike."""
        with self._lock:
            return dict(self._files)

    @property
    def batches(self) -> dict[str, dict[str, Any]]:
        """Batch id -> its JSON, as ``GET /v1/batches/{id}`` answers."""
        with self._lock:
            return {key: batch.to_json() for key, batch in self._batches.items()}

    @property
    def counters(self) -> dict[str, int]:
        """``uploads`` (files clients sent), ``batches_created``, ``cancels``, ``lines_answered``, ``lines_failed``."""
        with self._lock:
            return dict(self._counters)

    # used by the routes -----------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def add_file(self, filename: str, purpose: str, content: bytes, *, uploaded: bool = True) -> StoredFile:
        """Keep a file; ``uploaded`` counts it among the clients' uploads."""
        with self._lock:
            stored = StoredFile(self._new_id("file"), filename, purpose, content, int(time.time()))
            self._files[stored.id] = stored
            if uploaded:
                self._counters["uploads"] += 1
            return stored

    def file(self, file_id: str) -> StoredFile | None:
        """A file by id, or None."""
        with self._lock:
            return self._files.get(file_id)

    def add_batch(self, batch: _Batch) -> None:
        """Keep a new batch."""
        with self._lock:
            self._batches[batch.id] = batch
            self._counters["batches_created"] += 1

    def batch(self, batch_id: str) -> _Batch | None:
        """A batch by id, or None."""
        with self._lock:
            return self._batches.get(batch_id)

    def listed(self) -> list[_Batch]:
        """Every batch, newest first (as ``GET /v1/batches`` lists them)."""
        with self._lock:
            batches = list(self._batches.values())
        return sorted(batches, key=lambda b: (b.created_at, int(b.id.rsplit("-", 1)[1])), reverse=True)

    def _plan_for(self, custom_id: str) -> int | None:
        """The error status a request gets, or None to answer it."""
        with self._lock:
            if custom_id in self._failing:
                return self._failing[custom_id]
            if self._rate and self._rng.random() < self._rate:
                return self._rate_status
            return None

    def _settings(self) -> tuple[float, str, int | None]:
        with self._lock:
            return self._delay_s, self._outcome, self._answered

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] += n


def _parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart/form-data body: name -> (filename, bytes)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: dict[str, tuple[str | None, bytes]] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _error(message: str, kind: str = "invalid_request_error", param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def _lines(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The requests of an input file, and the validation errors (OpenAI fails such a batch)."""
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            errors.append({"code": "invalid_json_line", "message": "not JSON", "line": number, "param": None})
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            errors.append({"code": "missing_custom_id", "message": "custom_id is required", "line": number})
            continue
        if line["custom_id"] in seen:
            errors.append({"code": "duplicate_custom_id", "message": "custom_id must be unique", "line": number})
            continue
        seen.add(line["custom_id"])
        if line.get("method") != "POST" or line.get("url") != endpoint:
            errors.append({"code": "invalid_url", "message": f"url must be {endpoint} with POST", "line": number})
            continue
        requests.append(line)
    return requests, errors


async def _process(state: BatchState, batch: _Batch, answer: Answer, record: Callable[[dict[str, Any]], None]) -> None:
    """Validate, wait, answer every line, write the output and error files."""
    stored = state.file(batch.input_file_id)
    requests, errors = _lines(stored.content if stored else b"", batch.endpoint)
    now = int(time.time())
    batch.total = len(requests)
    if errors or not requests:
        batch.errors = errors or [{"code": "empty_file", "message": "the input file has no request", "line": None}]
        batch.status, batch.times["failed"] = "failed", now
        return
    batch.status, batch.times["in_progress"] = "in_progress", now
    delay, outcome, answered = state._settings()
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        batch.status, batch.times["cancelled"] = "cancelled", int(time.time())
        raise
    batch.status, batch.times["finalizing"] = "finalizing", int(time.time())
    output: list[str] = []
    failures: list[str] = []
    limit = len(requests) if outcome == "completed" else min(answered or 0, len(requests))
    for index, line in enumerate(requests[:limit]):
        body = line.get("body")
        record(body if isinstance(body, dict) else {})
        status = state._plan_for(line["custom_id"])
        if status is not None:
            payload: dict[str, Any] = _error("The server had an error (injected).", "server_error")
        else:
            status, payload = answer(body)
        result = {
            "id": f"batch_req_{batch.id}_{index}",
            "custom_id": line["custom_id"],
            "response": {"status_code": status, "request_id": f"req_{batch.id}_{index}", "body": payload},
            "error": None,
        }
        (output if status == 200 else failures).append(json.dumps(result))
    batch.completed, batch.failed = len(output), len(failures)
    state._count("lines_answered", len(output))
    state._count("lines_failed", len(failures))
    if output:
        batch.output_file_id = state.add_file(
            f"{batch.id}_output.jsonl", "batch_output", _joined(output), uploaded=False
        ).id
    if failures:
        batch.error_file_id = state.add_file(
            f"{batch.id}_error.jsonl", "batch_output", _joined(failures), uploaded=False
        ).id
    batch.status = outcome
    batch.times[outcome] = int(time.time())


def _joined(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def add_batch_routes(app: Any, state: BatchState, *, answer: Answer, record: Record) -> None:
    """Add the Files and Batches routes to the test server's app.

    Args:
        app: the FastAPI application.
        state: the files, batches and knobs.
        answer: the live route's answer logic (body -> status, response body).
        record: records a request (the HTTP request, its JSON body or None).
    """
    from starlette.requests import Request
    from starlette.responses import Response

    def reply(payload: Any, status: int = 200) -> Response:
        return Response(json.dumps(payload), status_code=status, media_type="application/json")

    async def upload(request: Request) -> Response:
        raw = await request.body()
        record(request, None)
        fields = _parse_multipart(request.headers.get("content-type", ""), raw)
        if "file" not in fields:
            return reply(_error("a multipart field 'file' is required", param="file"), 400)
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose not in ("batch", "fine-tune", "assistants", "user_data"):
            return reply(_error(f"unknown purpose {purpose!r}", param="purpose"), 400)
        filename, content = fields["file"]
        return reply(state.add_file(filename or "upload.jsonl", purpose, content).to_json())

    async def file_info(request: Request) -> Response:
        record(request, None)
        stored = state.file(request.path_params["file_id"])
        if stored is None:
            return reply(_error("No such file"), 404)
        return reply(stored.to_json())

    async def file_content(request: Request) -> Response:
        record(request, None)
        stored = state.file(request.path_params["file_id"])
        if stored is None:
            return reply(_error("No such file"), 404)
        return Response(stored.content, media_type="application/octet-stream")

    async def create(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        record(request, body if isinstance(body, dict) else None)
        if not isinstance(body, dict):
            return reply(_error("the request body must be a JSON object"), 400)
        stored = state.file(str(body.get("input_file_id")))
        if stored is None:
            return reply(_error("input_file_id names no file", param="input_file_id"), 400)
        if stored.purpose != "batch":
            return reply(_error("the input file's purpose must be batch", param="input_file_id"), 400)
        endpoint = body.get("endpoint")
        if endpoint not in BATCH_ENDPOINTS:
            return reply(_error(f"endpoint must be one of {', '.join(BATCH_ENDPOINTS)}", param="endpoint"), 400)
        if body.get("completion_window") != "24h":
            return reply(_error("completion_window must be 24h", param="completion_window"), 400)
        metadata = body.get("metadata")
        batch = _Batch(
            id=state._new_id("batch"),
            input_file_id=stored.id,
            endpoint=endpoint,
            completion_window="24h",
            metadata=metadata if isinstance(metadata, dict) else None,
            created_at=int(time.time()),
        )
        state.add_batch(batch)

        def record_line(line_body: dict[str, Any]) -> None:
            record(_BatchLine(batch.id), line_body)

        batch.task = asyncio.get_running_loop().create_task(_process(state, batch, answer, record_line))
        return reply(batch.to_json())

    async def retrieve(request: Request) -> Response:
        record(request, None)
        batch = state.batch(request.path_params["batch_id"])
        if batch is None:
            return reply(_error("No such batch"), 404)
        return reply(batch.to_json())

    async def cancel(request: Request) -> Response:
        record(request, None)
        batch = state.batch(request.path_params["batch_id"])
        if batch is None:
            return reply(_error("No such batch"), 404)
        if batch.status in TERMINAL:
            return reply(_error(f"cannot cancel a batch that is {batch.status}"), 409)
        state._count("cancels")
        batch.status, batch.times["cancelling"] = "cancelling", int(time.time())
        if batch.task is not None and not batch.task.done():
            batch.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await batch.task
        batch.status = "cancelled"
        batch.times.setdefault("cancelled", int(time.time()))
        return reply(batch.to_json())

    async def listing(request: Request) -> Response:
        record(request, None)
        batches = state.listed()
        after = request.query_params.get("after")
        if after:
            ids = [b.id for b in batches]
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        try:
            limit = max(1, min(100, int(request.query_params.get("limit", "20"))))
        except ValueError:
            limit = 20
        page = batches[:limit]
        return reply(
            {
                "object": "list",
                "data": [b.to_json() for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(batches) > limit,
            }
        )

    app.add_route("/v1/files", upload, methods=["POST"])
    app.add_route("/v1/files/{file_id}", file_info, methods=["GET"])
    app.add_route("/v1/files/{file_id}/content", file_content, methods=["GET"])
    app.add_route("/v1/batches", create, methods=["POST"])
    app.add_route("/v1/batches", listing, methods=["GET"])
    app.add_route("/v1/batches/{batch_id}", retrieve, methods=["GET"])
    app.add_route("/v1/batches/{batch_id}/cancel", cancel, methods=["POST"])


class _BatchLine:
    """Stands for an HTTP request when a batch line is recorded (method ``BATCH``, path of its batch)."""

    def __init__(self, batch_id: str) -> None:
        self.method = "BATCH"
        self.headers: dict[str, str] = {}
        self.url = _Url(f"/v1/batches/{batch_id}")


@dataclass(frozen=True)
class _Url:
    path: str

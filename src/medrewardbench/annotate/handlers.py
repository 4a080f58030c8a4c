"""Errors as answers: JSON under ``/api/``, an error page elsewhere, the security headers on both.

Every answer names what was wrong (the field, for a malformed request), never echoing the input
back; an unexpected error answers 500 and is logged with its details.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from medrewardbench.annotate.config import AnnotateError, Forbidden, InvalidInput, NotFound, ServerBusy
from medrewardbench.annotate.deps import CsrfFailed, LoginRequired, root
from medrewardbench.annotate.middleware import add_security_headers
from medrewardbench.annotate.rendering import redirect, render
from medrewardbench.annotate.service import RateLimited, StaleSubmission

logger = logging.getLogger(__name__)

_SERVER_FAILED = "the server could not do this; the organisers have the details in the log"


def is_api(request: Request) -> bool:
    """Whether the request is for the JSON API (errors answer in JSON)."""
    return request.url.path.startswith(root(request) + "/api/")


def error_response(
    request: Request,
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """An error answer: ``{"error": message, **extra}`` for the API, the error page otherwise.

    Args:
        request: the request.
        status: the status code.
        message: what was wrong, for people.
        headers: extra response headers (``retry-after``).
        extra: extra JSON fields (the API only).

    Returns:
        The response, with the security headers.
    """
    if is_api(request):
        response: Response = JSONResponse({"error": message, **(extra or {})}, status_code=status)
    else:
        identity = getattr(request.state, "identity", None)
        response = render(request, "error.html", status=status, message=message, status_code=status, me=identity)
    for key, value in (headers or {}).items():
        response.headers[key] = value
    # also here, not only in the middleware: the 500 handler answers from outside it
    add_security_headers(response.headers)
    return response


async def _on_login_required(request: Request, exc: Exception) -> Response:
    if is_api(request):
        return JSONResponse(
            {"error": "authentication required: send 'Authorization: Bearer <token>'"},
            status_code=401,
            headers={"www-authenticate": "Bearer"},
        )
    target = request.url.path[len(root(request)) :] or "/"
    if request.method != "GET":
        target = "/"
    return redirect(request, f"/login?next={quote(target, safe='/')}")


async def _on_csrf(request: Request, exc: Exception) -> Response:
    return error_response(request, 403, "the form has expired or did not come from this site; reload and try again")


async def _on_not_found(request: Request, exc: Exception) -> Response:
    return error_response(request, 404, str(exc) or "not found")


async def _on_forbidden(request: Request, exc: Exception) -> Response:
    return error_response(request, 403, str(exc) or "forbidden")


async def _on_invalid(request: Request, exc: Exception) -> Response:
    return error_response(request, 422 if is_api(request) else 400, str(exc))


async def _on_rate(request: Request, exc: Exception) -> Response:
    retry = exc.retry_after if isinstance(exc, RateLimited) else 60
    return error_response(request, 429, str(exc), {"retry-after": str(retry)})


async def _on_busy(request: Request, exc: Exception) -> Response:
    retry = exc.retry_after if isinstance(exc, ServerBusy) else 5
    return error_response(request, 503, str(exc), {"retry-after": str(retry)})


async def _on_stale(request: Request, exc: Exception) -> Response:
    revision = exc.revision if isinstance(exc, StaleSubmission) else 0
    message = f"{exc}; fetch the case again (its submission has the revision) and resend"
    return error_response(request, 409, message, extra={"revision": revision})


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    messages = {404: "not found", 405: "this address does not take that method"}
    detail = exc.detail if isinstance(exc.detail, str) and exc.status_code not in messages else None
    message = detail or messages.get(exc.status_code, "the request cannot be handled")
    return error_response(request, exc.status_code, message, dict(exc.headers or {}))


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(request, 422 if is_api(request) else 400, field_errors(exc))


async def _on_project(request: Request, exc: Exception) -> Response:
    logger.error("annotate error on %s: %s", request.url.path, exc)
    return error_response(request, 500, _SERVER_FAILED)


async def _on_crash(request: Request, exc: Exception) -> Response:
    logger.error("unexpected error on %s", request.url.path, exc_info=exc)
    return error_response(request, 500, _SERVER_FAILED)


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error the app raises (the most specific handler wins).

    Args:
        app: the app.
    """
    app.add_exception_handler(LoginRequired, _on_login_required)
    app.add_exception_handler(CsrfFailed, _on_csrf)
    app.add_exception_handler(NotFound, _on_not_found)
    app.add_exception_handler(Forbidden, _on_forbidden)
    app.add_exception_handler(InvalidInput, _on_invalid)
    app.add_exception_handler(RateLimited, _on_rate)
    app.add_exception_handler(ServerBusy, _on_busy)
    app.add_exception_handler(StaleSubmission, _on_stale)
    app.add_exception_handler(AnnotateError, _on_project)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(Exception, _on_crash)


def field_errors(exc: RequestValidationError) -> str:
    """A validation error as ``field: problem`` lines, naming fields and never echoing the input."""
    parts = []
    for error in exc.errors()[:5]:
        if error.get("type") == "json_invalid":
            parts.append("the request body is not valid JSON")
            continue
        location = [str(part) for part in error.get("loc", ()) if part not in ("body", "path", "query", "header")]
        where = ".".join(location) or "the request body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "the request is malformed"

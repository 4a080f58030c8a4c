"""The web app: server-rendered pages for doctors and organisers, and the JSON API under ``/api/v1``.

Every route needs a logged-in user, except the login form itself and ``/static`` (the app's own
CSS and JavaScript, which hold no data). The routes live in routers (:mod:`.routes.login`,
:mod:`.routes.pages`, :mod:`.routes.admin`, :mod:`.routes.api`) with shared dependencies in
:mod:`.deps`; :func:`create_app` configures the middleware and error handlers and includes them.
Pages use a session cookie (HttpOnly, SameSite=Strict, Secure behind HTTPS) and every form
carries the session's CSRF token; the API uses per-user bearer tokens instead of the cookie, so
it needs no CSRF token. Access rules live in the services (:mod:`.services`), which check the
caller's identity whichever route called them: an annotator only ever finds their own
assignments, by opaque ids that never name a case or a source; admin pages and API routes need
the admin role.

Responses carry a strict Content-Security-Policy (scripts, styles and images from the app
itself only), ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and ``Cache-Control:
no-store`` (images: private caching only), error responses included. Templates escape everything
they show. Request bodies are capped before anything reads them, and ``X-Forwarded-*`` headers
count only from trusted proxies (:mod:`.middleware`). Errors answer with a message that names
what was wrong (the field, for a malformed request), never with the input echoed back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles

from medrewardbench.annotate.deps import WebOptions
from medrewardbench.annotate.handlers import add_error_handlers, error_response
from medrewardbench.annotate.middleware import (
    DEFAULT_MAX_BODY_BYTES,
    SECURITY_HEADERS,
    BodyLimit,
    SecurityHeaders,
    TrustedProxies,
)
from medrewardbench.annotate.rendering import PACKAGE_DIR, template_environment
from medrewardbench.annotate.routes import admin, api, login, pages
from medrewardbench.annotate.routes.login import PUBLIC_PATHS
from medrewardbench.annotate.security import FAST_HASHING_ENV
from medrewardbench.annotate.service import Project

__all__ = ["PUBLIC_PATHS", "SECURITY_HEADERS", "create_app"]


def create_app(
    project: Project,
    *,
    secure_cookies: bool | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    forwarded_allow_ips: str | Sequence[str] = "127.0.0.1",
) -> FastAPI:
    """Build the web app for an open project.

    Args:
        project: the project to serve.
        secure_cookies: mark cookies Secure; None decides per request (Secure when the request
            came over HTTPS, as a reverse proxy that sets X-Forwarded-Proto reports it).
        max_body_bytes: the largest request body accepted (413 beyond, before it is read).
        forwarded_allow_ips: proxies whose X-Forwarded-For/-Proto are believed (addresses or
            networks, comma-separated; ``*`` for any; empty for none).

    Returns:
        The ASGI app.

    Raises:
        ValueError: a trusted proxy entry is not an address or network.
    """
    if os.environ.get(FAST_HASHING_ENV) == "1":
        logging.getLogger(__name__).warning(
            "%s=1: passwords are hashed with test-only cheap parameters; unset it for a real server",
            FAST_HASHING_ENV,
        )
    app = FastAPI(
        title="medrewardbench annotate",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.mount("/static", StaticFiles(directory=str(PACKAGE_DIR / "static")), name="static")
    app.state.project = project
    app.state.templates = template_environment()
    app.state.web_options = WebOptions(secure_cookies=secure_cookies, max_body_bytes=max_body_bytes)
    app.state.api_schemas = {}
    add_error_handlers(app)
    # outermost last: headers on everything, then the proxy's view of the client, then the body cap
    app.add_middleware(
        BodyLimit,
        max_bytes=max_body_bytes,
        respond=lambda scope, message: error_response(Request(scope), 413, message),
    )
    app.add_middleware(TrustedProxies, trusted=forwarded_allow_ips)
    app.add_middleware(SecurityHeaders)
    for router in (login.router, pages.router, admin.router, api.router):
        # the routes themselves, not include_router: newer FastAPI nests an included router as one
        # lazy entry, and the role-filtered OpenAPI schema (and the route audits) walk app.routes
        app.router.routes.extend(router.routes)
    return app

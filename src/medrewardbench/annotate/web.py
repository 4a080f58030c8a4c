"""The web app: server-rendered pages for doctors and organisers, and the JSON API under ``/api/v1``.

Every route needs a logged-in user, except the login form itself and ``/static`` (the app's own
CSS and JavaScript, which hold no data). Pages use a session cookie (HttpOnly, SameSite=Strict,
Secure behind HTTPS) and every form carries the session's CSRF token; the API uses per-user
bearer tokens instead of the cookie, so it needs no CSRF token. Access rules live in
:mod:`.service`: an annotator only ever finds their own assignments, by opaque ids that never
name a case or a source; admin pages and API routes need the admin role.

Responses carry a strict Content-Security-Policy (scripts, styles and images from the app
itself only), ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and ``Cache-Control:
no-store`` (images: private caching only), error responses included. Templates escape everything
they show. Request bodies are capped before anything reads them, and ``X-Forwarded-*`` headers
count only from trusted proxies (:mod:`.middleware`). Errors answer with a message that names
what was wrong (the field, for a malformed request), never with the input echoed back.
"""

from __future__ import annotations

import inspect
import io
import logging
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException

from medrewardbench.annotate.config import AnnotateError, Forbidden, InvalidInput, NotFound, ServerBusy
from medrewardbench.annotate.db import MAX_ROW_ID
from medrewardbench.annotate.guidelines import (
    SCREENING_REASON_LABELS,
    SCREENING_REASONS,
    definitions_from_guidelines,
    render_markdown,
)
from medrewardbench.annotate.middleware import (
    DEFAULT_MAX_BODY_BYTES,
    SECURITY_HEADERS,
    BodyLimit,
    SecurityHeaders,
    TrustedProxies,
    add_security_headers,
)
from medrewardbench.annotate.security import LOGIN_COOKIE, SESSION_COOKIE, SESSION_LIFETIME, new_token, same
from medrewardbench.annotate.service import (
    PUBLIC_ID,
    CaseView,
    Identity,
    LoginRefused,
    PairAnswer,
    Project,
    RateLimited,
    ScreeningAnswer,
    ShownSubmission,
    StaleSubmission,
)
from medrewardbench.dimensions import DIMENSIONS

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
WINDOW_PRESETS: dict[str, tuple[float, float]] = {
    "lung": (-600.0, 1500.0),
    "mediastinum": (50.0, 350.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
    "abdomen": (40.0, 400.0),
}
"""Window presets (center, width) in Hounsfield units."""
PUBLIC_PATHS: frozenset[str] = frozenset({"/login"})
"""Routes that need no session (besides /static)."""
__all__ = ["PUBLIC_PATHS", "SECURITY_HEADERS", "create_app"]
DIMENSION_LABELS = {dim: dim.capitalize() for dim in DIMENSIONS}


class LoginRequired(Exception):
    """No valid session: pages redirect to the login form, the API answers 401."""


class CsrfFailed(Exception):
    """A form post without the right CSRF token."""


class SubmissionBody(BaseModel):
    """An API submission: a pair (``choices`` as shown, A/B) or a question (``decision``)."""

    choices: dict[str, str] = Field(default_factory=dict, description="criterion -> 'A' or 'B', as shown")
    cannot_judge: bool = False
    cannot_judge_reason: str = ""
    comment: str = ""
    seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    decision: str | None = Field(default=None, description="screening: 'accept' or 'reject'")
    reasons: list[str] = Field(default_factory=list, description="screening: reasons for a rejection")
    expected_revision: int | None = Field(
        default=None,
        ge=0,
        le=MAX_ROW_ID,
        description="the revision this answer was made on (0: none saved yet); a save on an older one "
        "answers 409. Leave it out (and If-Match) to save whatever is stored.",
    )


class AdjudicationBody(BaseModel):
    """An admin's decision: dimension -> value ('1'/'2' for pairs, 'accept'/'reject' for questions)."""

    values: dict[str, str]
    note: str = ""


_FORM_TAKES_PART_SIZE = "max_part_size" in inspect.signature(Request.form).parameters
"""Starlette from 0.40 limits each form field (1 MiB by default) and takes a larger limit."""
RowId = Annotated[int, PathParam(ge=1, le=MAX_ROW_ID)]
Before = Annotated[int | None, Query(ge=1, le=MAX_ROW_ID, description="only entries with a smaller id")]
Window = Annotated[float | None, Query(allow_inf_nan=False)]


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _field_errors(exc: RequestValidationError) -> str:
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


def _if_match(value: str | None) -> int | None:
    """The revision in an If-Match header (``"3"``, ``W/"3"`` or ``3``), or None when absent."""
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"').strip()
    if not text.isdigit() or int(text) > MAX_ROW_ID:
        raise InvalidInput('If-Match: give the revision the answer was made on, as in If-Match: "3"')
    return int(text)


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
    app = FastAPI(
        title="medrewardbench annotate",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    templates = Environment(
        loader=FileSystemLoader(str(PACKAGE_DIR / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters.update(
        pct=_pct, fixed=_fixed, band=_band, band_label=_band_label, seconds=_seconds_text, pooled=_pooled
    )
    app.mount("/static", StaticFiles(directory=str(PACKAGE_DIR / "static")), name="static")
    app.state.project = project

    def root(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def secure(request: Request) -> bool:
        return secure_cookies if secure_cookies is not None else request.url.scheme == "https"

    def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        base = root(request)
        html = templates.get_template(name).render(
            request=request,
            url=lambda path: base + path,
            project=project.settings,
            dimension_labels=DIMENSION_LABELS,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def redirect(request: Request, path: str) -> RedirectResponse:
        return RedirectResponse(root(request) + path, status_code=303)

    async def read_form(request: Request) -> FormData:
        # one field may fill the whole body (the guidelines, URL-encoded, exceed Starlette's default
        # of 1 MiB per field): the body cap is the only size limit
        if _FORM_TAKES_PART_SIZE:
            return await request.form(max_part_size=max_body_bytes)  # type: ignore[call-arg,unused-ignore]
        return await request.form()

    # ----- authentication dependencies ------------------------------------------------------

    async def page_user(request: Request) -> Identity:
        identity = await run_in_threadpool(project.session_identity, request.cookies.get(SESSION_COOKIE))
        if identity is None:
            raise LoginRequired()
        return identity

    async def page_admin(identity: Identity = Depends(page_user)) -> Identity:
        if not identity.is_admin:
            raise Forbidden("this page is for admins")
        return identity

    async def form_user(request: Request, identity: Identity = Depends(page_user)) -> tuple[Identity, FormData]:
        form = await read_form(request)
        token = form.get("csrf_token")
        if not isinstance(token, str) or identity.csrf is None or not same(token, identity.csrf):
            raise CsrfFailed()
        return identity, form

    async def form_admin(pair: tuple[Identity, FormData] = Depends(form_user)) -> tuple[Identity, FormData]:
        if not pair[0].is_admin:
            raise Forbidden("this needs an admin")
        return pair

    async def api_user(request: Request) -> Identity:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        identity = await run_in_threadpool(project.api_identity, token.strip()) if scheme.lower() == "bearer" else None
        if identity is None:
            raise LoginRequired()
        return identity

    async def api_admin(identity: Identity = Depends(api_user)) -> Identity:
        if not identity.is_admin:
            raise Forbidden("this needs an admin")
        return identity

    # ----- errors -----------------------------------------------------------------------------

    def is_api(request: Request) -> bool:
        return request.url.path.startswith(root(request) + "/api/")

    def error_response(
        request: Request,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Response:
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

    async def on_login_required(request: Request, exc: Exception) -> Response:
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

    async def on_csrf(request: Request, exc: Exception) -> Response:
        return error_response(request, 403, "the form has expired or did not come from this site; reload and try again")

    async def on_not_found(request: Request, exc: Exception) -> Response:
        return error_response(request, 404, str(exc) or "not found")

    async def on_forbidden(request: Request, exc: Exception) -> Response:
        return error_response(request, 403, str(exc) or "forbidden")

    async def on_invalid(request: Request, exc: Exception) -> Response:
        return error_response(request, 422 if is_api(request) else 400, str(exc))

    async def on_rate(request: Request, exc: Exception) -> Response:
        retry = exc.retry_after if isinstance(exc, RateLimited) else 60
        return error_response(request, 429, str(exc), {"retry-after": str(retry)})

    async def on_busy(request: Request, exc: Exception) -> Response:
        retry = exc.retry_after if isinstance(exc, ServerBusy) else 5
        return error_response(request, 503, str(exc), {"retry-after": str(retry)})

    async def on_stale(request: Request, exc: Exception) -> Response:
        revision = exc.revision if isinstance(exc, StaleSubmission) else 0
        message = f"{exc}; fetch the case again (its submission has the revision) and resend"
        return error_response(request, 409, message, extra={"revision": revision})

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        messages = {404: "not found", 405: "this address does not take that method"}
        detail = exc.detail if isinstance(exc.detail, str) and exc.status_code not in messages else None
        message = detail or messages.get(exc.status_code, "the request cannot be handled")
        return error_response(request, exc.status_code, message, dict(exc.headers or {}))

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(request, 422 if is_api(request) else 400, _field_errors(exc))

    async def on_project(request: Request, exc: Exception) -> Response:
        logger.error("annotate error on %s: %s", request.url.path, exc)
        return error_response(request, 500, "the server could not do this; the organisers have the details in the log")

    async def on_crash(request: Request, exc: Exception) -> Response:
        logger.error("unexpected error on %s", request.url.path, exc_info=exc)
        return error_response(request, 500, "the server could not do this; the organisers have the details in the log")

    app.add_exception_handler(LoginRequired, on_login_required)
    app.add_exception_handler(CsrfFailed, on_csrf)
    app.add_exception_handler(NotFound, on_not_found)
    app.add_exception_handler(Forbidden, on_forbidden)
    app.add_exception_handler(InvalidInput, on_invalid)
    app.add_exception_handler(RateLimited, on_rate)
    app.add_exception_handler(ServerBusy, on_busy)
    app.add_exception_handler(StaleSubmission, on_stale)
    app.add_exception_handler(AnnotateError, on_project)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_crash)

    # outermost last: headers on everything, then the proxy's view of the client, then the body cap
    app.add_middleware(
        BodyLimit,
        max_bytes=max_body_bytes,
        respond=lambda scope, message: error_response(Request(scope), 413, message),
    )
    app.add_middleware(TrustedProxies, trusted=forwarded_allow_ips)
    app.add_middleware(SecurityHeaders)

    # ----- login ----------------------------------------------------------------------------

    def safe_next(value: object) -> str:
        text = value if isinstance(value, str) else ""
        if not text.startswith("/") or text.startswith("//") or "\\" in text:
            return "/"
        return text

    def login_page(request: Request, status: int = 200, error: str | None = None, next_path: str = "/") -> Response:
        nonce = new_token()
        response = render(
            request,
            "login.html",
            status=status,
            csrf_token=project.signer.login_token(nonce),
            error=error,
            next_path=next_path,
            me=None,
        )
        response.set_cookie(
            LOGIN_COOKIE, nonce, max_age=3600, httponly=True, samesite="strict", secure=secure(request), path="/"
        )
        return response

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, next: str = "/") -> Response:
        return login_page(request, next_path=safe_next(next))

    @app.post("/login")
    async def login_submit(request: Request) -> Response:
        form = await read_form(request)
        next_path = safe_next(form.get("next"))
        token = form.get("csrf_token")
        if not isinstance(token, str) or not project.signer.check_login_token(token, request.cookies.get(LOGIN_COOKIE)):
            raise CsrfFailed()
        name = form.get("username")
        password = form.get("password")
        if not isinstance(name, str) or not isinstance(password, str):
            return login_page(request, 400, "enter your user name and password", next_path)
        try:
            session_token, identity = await run_in_threadpool(project.login, name, password, _client(request))
        except LoginRefused as exc:
            return login_page(request, 401, str(exc), next_path)
        except InvalidInput as exc:
            return login_page(request, 400, str(exc), next_path)
        except (RateLimited, ServerBusy) as exc:
            response = login_page(request, 429 if isinstance(exc, RateLimited) else 503, str(exc), next_path)
            response.headers["retry-after"] = str(exc.retry_after)
            return response
        target = next_path if next_path != "/" else ("/admin" if identity.is_admin else "/queue")
        response = redirect(request, target)
        response.set_cookie(
            SESSION_COOKIE,
            session_token,
            max_age=int(SESSION_LIFETIME.total_seconds()),
            httponly=True,
            samesite="strict",
            secure=secure(request),
            path="/",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/")
        return response

    @app.post("/logout")
    def logout(request: Request, pair: tuple[Identity, FormData] = Depends(form_user)) -> Response:
        project.logout(request.cookies.get(SESSION_COOKIE), pair[0], _client(request))
        response = redirect(request, "/login")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.get("/")
    def home(request: Request, me: Identity = Depends(page_user)) -> Response:
        return redirect(request, "/admin" if me.is_admin else "/queue")

    # ----- annotator pages ------------------------------------------------------------------

    @app.get("/queue", response_class=HTMLResponse)
    def queue_page(request: Request, me: Identity = Depends(page_user)) -> Response:
        queue = project.queue(me)
        return render(request, "queue.html", me=me, queue=queue)

    @app.get("/queue/next")
    def queue_next(request: Request, me: Identity = Depends(page_user)) -> Response:
        queue = project.queue(me)
        return redirect(request, f"/a/{queue.next_todo}" if queue.next_todo else "/queue")

    def case_page(
        request: Request,
        me: Identity,
        view: CaseView,
        status: int = 200,
        error: str | None = None,
        entered: ShownSubmission | None = None,
        revision: int | None = None,
        stale: bool = False,
    ) -> Response:
        definitions = definitions_from_guidelines(project.guidelines())
        dicom = view.dicom
        current = view.submission.revision if view.submission else 0
        return render(
            request,
            "pair.html" if view.kind == "pair" else "question.html",
            status=status,
            me=me,
            view=view,
            saved=entered or view.submission,
            revision=current if revision is None else revision,
            error=error,
            stale=stale,
            definitions=definitions,
            dimensions=DIMENSIONS,
            reasons=SCREENING_REASONS,
            reason_labels=SCREENING_REASON_LABELS,
            presets=WINDOW_PRESETS,
            dicom=dicom,
            opened=project.signer.opened_token(view.public_id),
            image_url=f"/a/{view.public_id}/image",
        )

    @app.get("/a/{assignment_id}", response_class=HTMLResponse)
    def case_get(request: Request, assignment_id: str, me: Identity = Depends(page_user)) -> Response:
        return case_page(request, me, project.case_view(me, assignment_id))

    @app.post("/a/{assignment_id}")
    def case_post(
        request: Request, assignment_id: str, pair: tuple[Identity, FormData] = Depends(form_user)
    ) -> Response:
        me, form = pair
        seconds = _seconds(form, project, assignment_id)
        comment = str(form.get("comment") or "")
        expected: int | None = None
        try:
            expected = _form_revision(form)
            # the service checks the kind too: a question posted as a pair is refused, and so on
            if "decision" not in form:
                answer = PairAnswer(
                    choices={dim: str(form.get(f"dim_{dim}") or "") for dim in DIMENSIONS},
                    cannot_judge=form.get("cannot_judge") == "on",
                    cannot_judge_reason=str(form.get("cannot_judge_reason") or ""),
                    comment=comment,
                    seconds=seconds,
                    expected_revision=expected,
                )
                project.submit_pair(me, assignment_id, answer, _client(request))
            else:
                project.submit_screening(
                    me,
                    assignment_id,
                    ScreeningAnswer(
                        decision=str(form.get("decision") or ""),
                        reasons=tuple(key for key in SCREENING_REASONS if form.get(f"reason_{key}") == "on"),
                        comment=comment,
                        seconds=seconds,
                        expected_revision=expected,
                    ),
                    _client(request),
                )
        except StaleSubmission as exc:
            # keep what the doctor entered on screen; saving again (now on the current revision) replaces
            view = project.case_view(me, assignment_id)
            message = (
                "This case was saved in another tab or window after you opened it, so your answer below was "
                "not saved. Reload the case to see the saved answer, or save again to replace it with yours."
            )
            return case_page(request, me, view, 409, message, _entered(form, view), revision=exc.revision, stale=True)
        except InvalidInput as exc:
            view = project.case_view(me, assignment_id)
            entered = _entered(form, view)
            return case_page(request, me, view, status=400, error=str(exc), entered=entered, revision=expected)
        if form.get("action") == "stay":
            return redirect(request, f"/a/{assignment_id}")
        following = project.next_todo(me, assignment_id)
        return redirect(request, f"/a/{following}" if following else "/queue?done=1")

    @app.get("/a/{assignment_id}/image")
    def case_image(
        request: Request,
        assignment_id: str,
        center: Window = None,
        width: Window = None,
        me: Identity = Depends(page_user),
    ) -> Response:
        data, media = project.assignment_image(me, assignment_id, center, width)
        return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})

    @app.get("/guidelines", response_class=HTMLResponse)
    def guidelines_page(request: Request, me: Identity = Depends(page_user)) -> Response:
        return render(request, "guidelines.html", me=me, body=render_markdown(project.guidelines()))

    @app.get("/account", response_class=HTMLResponse)
    def account_page(request: Request, me: Identity = Depends(page_user)) -> Response:
        tokens = project.list_api_tokens(me, me.name)
        return render(request, "account.html", me=me, tokens=tokens, new_token=None, message=None)

    @app.post("/account/password")
    def account_password(request: Request, pair: tuple[Identity, FormData] = Depends(form_user)) -> Response:
        me, form = pair
        current = str(form.get("current_password") or "")
        new = str(form.get("new_password") or "")
        if new != str(form.get("repeat_password") or ""):
            raise InvalidInput("the two new passwords differ")
        # every session (this one too) ends and every API token is revoked: log in again
        project.change_own_password(me, current, new, _client(request))
        response = redirect(request, "/login")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.post("/account/tokens", response_class=HTMLResponse)
    def account_token(request: Request, pair: tuple[Identity, FormData] = Depends(form_user)) -> Response:
        me, form = pair
        token = project.create_api_token(me, me.name, str(form.get("label") or ""))
        tokens = project.list_api_tokens(me, me.name)
        return render(request, "account.html", me=me, tokens=tokens, new_token=token, message=None)

    @app.post("/account/tokens/{token_id}/revoke")
    def account_revoke(
        request: Request, token_id: RowId, pair: tuple[Identity, FormData] = Depends(form_user)
    ) -> Response:
        project.revoke_api_token(pair[0], pair[0].name, token_id)
        return redirect(request, "/account")

    # ----- admin pages ----------------------------------------------------------------------

    @app.get("/admin", response_class=HTMLResponse)
    def admin_page(request: Request, me: Identity = Depends(page_admin)) -> Response:
        from medrewardbench.annotate.stats import dashboard

        return render(request, "admin.html", me=me, board=dashboard(project))

    @app.get("/admin/adjudication", response_class=HTMLResponse)
    def adjudication_page(request: Request, me: Identity = Depends(page_admin)) -> Response:
        from medrewardbench.annotate.stats import dashboard

        return render(request, "adjudication.html", me=me, board=dashboard(project))

    @app.get("/admin/items/{item_id}", response_class=HTMLResponse)
    def item_page(request: Request, item_id: str, me: Identity = Depends(page_admin)) -> Response:
        from medrewardbench.annotate.stats import item_review

        return render(request, "item.html", me=me, review=item_review(project, _item_id(item_id)), error=None)

    @app.post("/admin/items/{item_id}")
    def item_post(request: Request, item_id: str, pair: tuple[Identity, FormData] = Depends(form_admin)) -> Response:
        me, form = pair
        dims = DIMENSIONS if project.is_pairs else ("decision",)
        values = {dim: str(form.get(f"adj_{dim}")) for dim in dims if form.get(f"adj_{dim}") is not None}
        project.adjudicate(me, item_id, values, str(form.get("note") or ""), _client(request))
        return redirect(request, "/admin/adjudication")

    @app.get("/admin/items/{item_id}/image")
    def item_image(
        request: Request,
        item_id: str,
        center: Window = None,
        width: Window = None,
        me: Identity = Depends(page_admin),
    ) -> Response:
        data, media = project.item_image(me, item_id, center, width)
        return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})

    @app.get("/admin/users", response_class=HTMLResponse)
    def users_page(request: Request, me: Identity = Depends(page_admin)) -> Response:
        return render(request, "users.html", me=me, users=project.list_users(), error=None)

    @app.post("/admin/users")
    def users_add(request: Request, pair: tuple[Identity, FormData] = Depends(form_admin)) -> Response:
        me, form = pair
        try:
            project.add_user(
                me, str(form.get("name") or "").strip(), str(form.get("role") or ""), str(form.get("password") or "")
            )
        except InvalidInput as exc:
            return render(request, "users.html", status=400, me=me, users=project.list_users(), error=str(exc))
        return redirect(request, "/admin/users")

    @app.post("/admin/users/{name}/active")
    def users_active(request: Request, name: str, pair: tuple[Identity, FormData] = Depends(form_admin)) -> Response:
        me, form = pair
        project.set_active(me, name, form.get("active") == "1")
        return redirect(request, "/admin/users")

    @app.get("/admin/guidelines", response_class=HTMLResponse)
    def guidelines_edit(request: Request, me: Identity = Depends(page_admin)) -> Response:
        text = project.guidelines()
        return render(request, "guidelines_edit.html", me=me, text=text, preview=render_markdown(text))

    @app.post("/admin/guidelines")
    def guidelines_save(request: Request, pair: tuple[Identity, FormData] = Depends(form_admin)) -> Response:
        me, form = pair
        text = str(form.get("text") or "")
        try:
            project.set_guidelines(me, text, _client(request))
        except InvalidInput as exc:  # the edit stays in the box, with the reason
            preview = render_markdown(text.replace("\x00", ""))
            return render(
                request, "guidelines_edit.html", status=400, me=me, text=text, preview=preview, error=str(exc)
            )
        return redirect(request, "/admin/guidelines")

    @app.get("/admin/audit", response_class=HTMLResponse)
    def audit_page(request: Request, before: Before = None, me: Identity = Depends(page_admin)) -> Response:
        entries = project.audit_entries(me, 200, before)
        return render(request, "audit.html", me=me, entries=entries)

    @app.get("/admin/export/{filename}")
    def export_download(request: Request, filename: str, me: Identity = Depends(page_admin)) -> Response:
        return _export_response(project, me, filename, _client(request))

    # ----- JSON API -------------------------------------------------------------------------

    @app.get("/api/v1/me")
    def api_me(me: Identity = Depends(api_user)) -> dict[str, Any]:
        queue = project.queue(me)
        return {
            "name": me.name,
            "role": me.role,
            "done": queue.done,
            "total": queue.total,
            "project": _settings(project),
        }

    @app.get("/api/v1/queue")
    def api_queue(me: Identity = Depends(api_user)) -> dict[str, Any]:
        queue = project.queue(me)
        return {
            "done": queue.done,
            "total": queue.total,
            "next": queue.next_todo,
            "assignments": [
                {"id": row.public_id, "position": row.position, "done": row.done, "seconds": row.seconds}
                for row in queue.rows
            ],
        }

    @app.get("/api/v1/assignments/{assignment_id}")
    def api_assignment(request: Request, assignment_id: str, me: Identity = Depends(api_user)) -> Response:
        view = project.case_view(me, assignment_id)
        revision = view.submission.revision if view.submission else 0
        return JSONResponse(_case_json(view, root(request)), headers={"etag": f'"{revision}"'})

    @app.put("/api/v1/assignments/{assignment_id}/submission")
    def api_submit(
        request: Request,
        assignment_id: str,
        body: SubmissionBody,
        me: Identity = Depends(api_user),
        if_match: Annotated[str | None, Header(description="the revision the answer was made on")] = None,
    ) -> dict[str, Any] | None:
        expected = body.expected_revision
        from_header = _if_match(if_match)
        if expected is not None and from_header is not None and expected != from_header:
            raise InvalidInput("expected_revision and If-Match name different revisions; send one")
        expected = expected if expected is not None else from_header
        if project.assignment_kind(me, assignment_id) == "pair":
            saved = project.submit_pair(
                me,
                assignment_id,
                PairAnswer(
                    body.choices, body.cannot_judge, body.cannot_judge_reason, body.comment, body.seconds, expected
                ),
                _client(request),
            )
        else:
            saved = project.submit_screening(
                me,
                assignment_id,
                ScreeningAnswer(body.decision or "", tuple(body.reasons), body.comment, body.seconds, expected),
                _client(request),
            )
        return _submission_json(saved)

    @app.get("/api/v1/assignments/{assignment_id}/image")
    def api_image(
        assignment_id: str, center: Window = None, width: Window = None, me: Identity = Depends(api_user)
    ) -> Response:
        data, media = project.assignment_image(me, assignment_id, center, width)
        return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})

    @app.get("/api/v1/guidelines")
    def api_guidelines(me: Identity = Depends(api_user)) -> dict[str, Any]:
        text = project.guidelines()
        return {"markdown": text, "definitions": definitions_from_guidelines(text)}

    @app.get("/api/v1/admin/dashboard")
    def api_dashboard(me: Identity = Depends(api_admin)) -> dict[str, Any]:
        from medrewardbench.annotate.stats import dashboard

        return dashboard(project).as_dict()

    @app.get("/api/v1/admin/items/{item_id}")
    def api_item(item_id: str, me: Identity = Depends(api_admin)) -> dict[str, Any]:
        from medrewardbench.annotate.stats import item_review

        review = item_review(project, _item_id(item_id))
        return {
            "id": review.public_id,
            "kind": review.kind,
            "question": review.question,
            "response_1": review.response_1,
            "response_2": review.response_2,
            "votes": review.votes,
            "majority": review.majority,
            "unresolved": list(review.unresolved),
            "adjudicated": review.adjudicated,
            "pending": review.pending,
            "labels": [
                {"annotator": name, "labels": labels, "cannot_judge": cannot, "reason": reason, "comment": comment}
                for name, labels, cannot, reason, comment in review.labels
            ],
        }

    @app.put("/api/v1/admin/items/{item_id}/adjudication")
    def api_adjudicate(
        request: Request, item_id: str, body: AdjudicationBody, me: Identity = Depends(api_admin)
    ) -> dict[str, Any]:
        project.adjudicate(me, item_id, body.values, body.note, _client(request))
        return {"ok": True}

    @app.get("/api/v1/admin/users")
    def api_users(me: Identity = Depends(api_admin)) -> list[dict[str, Any]]:
        return [
            {"name": u.name, "role": u.role, "active": u.active, "assigned": u.assigned, "done": u.done}
            for u in project.list_users()
        ]

    @app.get("/api/v1/admin/audit")
    def api_audit(
        before: Before = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
        me: Identity = Depends(api_admin),
    ) -> list[dict[str, Any]]:
        return [
            {
                "id": e.id,
                "at": e.at.isoformat(),
                "actor": e.actor,
                "action": e.action,
                "target": e.target,
                "old": e.old,
                "new": e.new,
                "client": e.client,
            }
            for e in project.audit_entries(me, limit, before)
        ]

    @app.get("/api/v1/admin/export/{filename}")
    def api_export(request: Request, filename: str, me: Identity = Depends(api_admin)) -> Response:
        return _export_response(project, me, filename, _client(request))

    schemas: dict[bool, dict[str, Any]] = {}

    @app.get("/api/v1/openapi.json")
    def api_schema(me: Identity = Depends(api_user)) -> dict[str, Any]:
        # the caller's own view: the API routes their role may use, nothing of the pages or (for an
        # annotator) of the admin API
        if me.is_admin not in schemas:
            allowed = [
                route
                for route in app.routes
                if isinstance(route, APIRoute)
                and route.path.startswith("/api/v1/")
                and (me.is_admin or not route.path.startswith("/api/v1/admin"))
            ]
            schemas[me.is_admin] = get_openapi(title=app.title, version=app.version, routes=allowed)
        return schemas[me.is_admin]

    return app


def _missing(value: float | None) -> bool:
    return value is None or value != value


def _pct(value: float | None) -> str:
    return "\u2014" if _missing(value) else f"{100 * float(value):.0f}%"  # type: ignore[arg-type]


def _fixed(value: float | None) -> str:
    return "\u2014" if _missing(value) else f"{float(value):.2f}"  # type: ignore[arg-type]


_BANDS = ((0.0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial"))


def _band(value: float | None) -> str:
    """Landis and Koch's band of a kappa, as a CSS class."""
    if _missing(value):
        return "band-none"
    name = "almost"
    for upper, band in _BANDS:
        if float(value) < upper:  # type: ignore[arg-type]
            name = band
            break
    return f"band-{name}"


def _band_label(value: float | None) -> str:
    labels = {
        "band-poor": "poor",
        "band-slight": "slight",
        "band-fair": "fair",
        "band-moderate": "moderate",
        "band-substantial": "substantial",
        "band-almost": "almost perfect",
    }
    return labels.get(_band(value), "")


def _seconds_text(value: float | None) -> str:
    if _missing(value):
        return "\u2014"
    seconds = float(value)  # type: ignore[arg-type]
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _pooled(cells: dict[str, tuple[float, int]]) -> float | None:
    total = sum(n for _, n in cells.values())
    if not total:
        return None
    return sum(v * n for v, n in cells.values() if n) / total


def _seconds(form: FormData, project: Project, assignment_id: str) -> float | None:
    """Time on the case: the browser's active time when plausible, else the server's measure."""
    opened = form.get("opened")
    server = project.signer.seconds_open(opened, assignment_id) if isinstance(opened, str) else None
    raw = form.get("seconds")
    try:
        client = float(raw) if isinstance(raw, str) and raw.strip() else None
    except ValueError:
        client = None
    if client is not None and client >= 0 and (server is None or client <= server + 5.0):
        return client
    return server


def _item_id(value: str) -> str:
    """An item's public id from a URL, or NotFound before any query when it cannot be one."""
    if not PUBLIC_ID.match(value):
        raise NotFound("no such item")
    return value


def _form_revision(form: FormData) -> int | None:
    """The revision a case form was rendered with; None for a form without one (saves regardless)."""
    raw = form.get("revision")
    if not isinstance(raw, str) or not raw.strip():
        return None
    if not raw.strip().isdigit() or int(raw) > MAX_ROW_ID:
        raise InvalidInput("revision: the form's revision is not a number; reload the case")
    return int(raw)


def _entered(form: FormData, view: CaseView) -> ShownSubmission:
    """What the user typed, to show again with an error message."""
    from medrewardbench.annotate.db import utcnow

    choices = {dim: str(form.get(f"dim_{dim}")) for dim in DIMENSIONS if form.get(f"dim_{dim}") in ("A", "B")}
    return ShownSubmission(
        choices=choices,
        cannot_judge=form.get("cannot_judge") == "on",
        cannot_judge_reason=str(form.get("cannot_judge_reason") or ""),
        comment=str(form.get("comment") or ""),
        decision=str(form.get("decision")) if form.get("decision") else None,
        reasons=tuple(key for key in SCREENING_REASONS if form.get(f"reason_{key}") == "on"),
        seconds=view.submission.seconds if view.submission else 0.0,
        revision=view.submission.revision if view.submission else 0,
        updated_at=view.submission.updated_at if view.submission else utcnow(),
    )


def _settings(project: Project) -> dict[str, Any]:
    s = project.settings
    return {"name": s.name, "mode": s.mode, "per_case": s.per_case}


def _submission_json(saved: ShownSubmission | None) -> dict[str, Any] | None:
    if saved is None:
        return None
    return {
        "choices": dict(saved.choices),
        "cannot_judge": saved.cannot_judge,
        "cannot_judge_reason": saved.cannot_judge_reason,
        "comment": saved.comment,
        "decision": saved.decision,
        "reasons": list(saved.reasons),
        "seconds": saved.seconds,
        "revision": saved.revision,
        "updated_at": saved.updated_at.isoformat(),
    }


def _case_json(view: CaseView, base: str) -> dict[str, Any]:
    dicom = view.dicom
    return {
        "id": view.public_id,
        "kind": view.kind,
        "position": view.position,
        "total": view.total,
        "question": view.question,
        "answer_a": view.answer_a if view.kind == "pair" else None,
        "answer_b": view.answer_b if view.kind == "pair" else None,
        "reference_answer": view.reference_answer,
        "answer_type": view.answer_type,
        "image": f"{base}/api/v1/assignments/{view.public_id}/image" if view.has_image else None,
        "dicom": None
        if dicom is None
        else {
            "monochrome": dicom.monochrome,
            "units": dicom.units,
            "center": dicom.center,
            "width": dicom.width,
            "minimum": dicom.minimum,
            "maximum": dicom.maximum,
        },
        "previous": view.previous_id,
        "next": view.next_id,
        "submission": _submission_json(view.submission),
    }


EXPORT_FILES: dict[str, tuple[str, str]] = {
    "canonical.jsonl": ("canonical", "application/x-ndjson"),
    "canonical.parquet": ("canonical", "application/vnd.apache.parquet"),
    "reference.zip": ("reference", "application/zip"),
    "release.zip": ("canonical", "application/zip"),
    "questions.jsonl": ("questions", "application/x-ndjson"),
}
"""Downloads: the file name -> (export format, media type). ``release.zip`` is the canonical export with
its dataset card (``labelled.jsonl`` and ``dataset.json``): unzipped, ``eval --data`` reads it with its
provenance."""


def _export_response(project: Project, me: Identity, filename: str, client: str) -> Response:
    from medrewardbench.annotate.export import export_project

    if filename not in EXPORT_FILES:
        raise NotFound(f"no export named {filename!r}; use one of {', '.join(EXPORT_FILES)}")
    fmt, media = EXPORT_FILES[filename]
    zipped = filename.endswith(".zip")
    with tempfile.TemporaryDirectory(prefix="mrb-export-") as tmp:
        folder = Path(tmp) / "export"
        target = folder if fmt == "reference" else (folder / "labelled.jsonl" if zipped else Path(tmp) / filename)
        summary = export_project(project, fmt, target)
        if zipped:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(folder.rglob("*")):
                    if path.is_file():
                        archive.write(path, path.relative_to(folder).as_posix())
            data = buffer.getvalue()
        else:
            data = target.read_bytes()
    project.record_export(me, filename, summary.items, client)
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in project.settings.name) or "project"
    return Response(
        data,
        media_type=media,
        headers={"content-disposition": f'attachment; filename="{stem}-{filename}"'},
    )

"""Logging in and out: the only page without a session, guarded by a signed form token and rate limits."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from medrewardbench.annotate.config import InvalidInput, ServerBusy
from medrewardbench.annotate.deps import CsrfFailed, FormUser, PageUser, ProjectDep, client, read_form, secure
from medrewardbench.annotate.rendering import redirect, render
from medrewardbench.annotate.security import LOGIN_COOKIE, SESSION_COOKIE, SESSION_LIFETIME, new_token
from medrewardbench.annotate.service import LoginRefused, Project, RateLimited

PUBLIC_PATHS: frozenset[str] = frozenset({"/login"})
"""Routes that need no session (besides /static)."""

router = APIRouter()


def safe_next(value: object) -> str:
    """Where to go after the login: a path of this app, never another site."""
    text = value if isinstance(value, str) else ""
    if not text.startswith("/") or text.startswith("//") or "\\" in text:
        return "/"
    return text


def _login_page(
    request: Request, project: Project, status: int = 200, error: str | None = None, next_path: str = "/"
) -> Response:
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


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, project: ProjectDep, next: str = "/") -> Response:
    """The login form."""
    return _login_page(request, project, next_path=safe_next(next))


@router.post("/login")
async def login_submit(request: Request, project: ProjectDep) -> Response:
    """Check the name and password and open a session (rate-limited)."""
    form = await read_form(request)
    next_path = safe_next(form.get("next"))
    token = form.get("csrf_token")
    if not isinstance(token, str) or not project.signer.check_login_token(token, request.cookies.get(LOGIN_COOKIE)):
        raise CsrfFailed()
    name = form.get("username")
    password = form.get("password")
    if not isinstance(name, str) or not isinstance(password, str):
        return _login_page(request, project, 400, "enter your user name and password", next_path)
    try:
        session_token, identity = await run_in_threadpool(project.auth.login, name, password, client(request))
    except LoginRefused as exc:
        return _login_page(request, project, 401, str(exc), next_path)
    except InvalidInput as exc:
        return _login_page(request, project, 400, str(exc), next_path)
    except (RateLimited, ServerBusy) as exc:
        response = _login_page(request, project, 429 if isinstance(exc, RateLimited) else 503, str(exc), next_path)
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


@router.post("/logout")
def logout(request: Request, pair: FormUser, project: ProjectDep) -> Response:
    """End the session."""
    project.auth.logout(request.cookies.get(SESSION_COOKIE), pair[0], client(request))
    response = redirect(request, "/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/")
def home(request: Request, me: PageUser) -> Response:
    """Admins to the dashboard, annotators to their queue."""
    return redirect(request, "/admin" if me.is_admin else "/queue")

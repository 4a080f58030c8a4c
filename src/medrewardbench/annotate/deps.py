"""What the routes share: the open project, who is calling and what they may do, the CSRF check, the form.

Pages use the session cookie (:data:`PageUser`, :data:`PageAdmin`) and their forms carry the
session's CSRF token (:data:`FormUser`, :data:`FormAdmin` read the form and check it); the JSON
API uses per-user bearer tokens (:data:`ApiUser`, :data:`ApiAdmin`) and needs no CSRF token. No
valid session raises :class:`LoginRequired` (pages redirect to the login form, the API answers
401). These checks decide which routes a caller reaches; the services check the caller again,
whatever the route did.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Query, Request
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from medrewardbench.annotate.config import Forbidden
from medrewardbench.annotate.db import MAX_ROW_ID
from medrewardbench.annotate.security import SESSION_COOKIE, same
from medrewardbench.annotate.service import Identity, Project


class LoginRequired(Exception):
    """No valid session: pages redirect to the login form, the API answers 401."""


class CsrfFailed(Exception):
    """A form post without the right CSRF token."""


@dataclass(frozen=True)
class WebOptions:
    """How the app was configured (see :func:`medrewardbench.annotate.web.create_app`)."""

    secure_cookies: bool | None
    """Mark cookies Secure; None decides per request (Secure when the request came over HTTPS)."""
    max_body_bytes: int
    """The largest request body accepted."""


_FORM_TAKES_PART_SIZE = "max_part_size" in inspect.signature(Request.form).parameters
"""Starlette from 0.40 limits each form field (1 MiB by default) and takes a larger limit."""
RowId = Annotated[int, PathParam(ge=1, le=MAX_ROW_ID)]
Before = Annotated[int | None, Query(ge=1, le=MAX_ROW_ID, description="only entries with a smaller id")]
Window = Annotated[float | None, Query(allow_inf_nan=False)]


def get_project(request: Request) -> Project:
    """The project the app serves."""
    return cast(Project, request.app.state.project)


def web_options(request: Request) -> WebOptions:
    """The app's configuration."""
    return cast(WebOptions, request.app.state.web_options)


def client(request: Request) -> str:
    """The caller's address (the proxy's view of it when the proxy is trusted), for the audit log."""
    return request.client.host if request.client else "unknown"


def root(request: Request) -> str:
    """The path the app is mounted under ('' at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def secure(request: Request) -> bool:
    """Whether cookies set in this response are marked Secure."""
    configured = web_options(request).secure_cookies
    return configured if configured is not None else request.url.scheme == "https"


async def read_form(request: Request) -> FormData:
    """The posted form; one field may fill the whole body (the body cap is the only size limit)."""
    # the guidelines, URL-encoded, exceed Starlette's default of 1 MiB per field
    if _FORM_TAKES_PART_SIZE:
        return await request.form(max_part_size=web_options(request).max_body_bytes)  # type: ignore[call-arg,unused-ignore]
    return await request.form()


async def page_user(request: Request) -> Identity:
    """The user of the session cookie."""
    project = get_project(request)
    identity = await run_in_threadpool(project.auth.session_identity, request.cookies.get(SESSION_COOKIE))
    if identity is None:
        raise LoginRequired()
    return identity


PageUser = Annotated[Identity, Depends(page_user)]


async def page_admin(identity: PageUser) -> Identity:
    """The user of the session cookie, an admin."""
    if not identity.is_admin:
        raise Forbidden("this page is for admins")
    return identity


async def form_user(request: Request, identity: PageUser) -> tuple[Identity, FormData]:
    """The user of the session cookie and their posted form, whose CSRF token is the session's."""
    form = await read_form(request)
    token = form.get("csrf_token")
    if not isinstance(token, str) or identity.csrf is None or not same(token, identity.csrf):
        raise CsrfFailed()
    return identity, form


async def form_admin(pair: Annotated[tuple[Identity, FormData], Depends(form_user)]) -> tuple[Identity, FormData]:
    """An admin's posted form, its CSRF token checked."""
    if not pair[0].is_admin:
        raise Forbidden("this needs an admin")
    return pair


async def api_user(request: Request) -> Identity:
    """The user of the bearer token."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    project = get_project(request)
    identity = await run_in_threadpool(project.auth.api_identity, token.strip()) if scheme.lower() == "bearer" else None
    if identity is None:
        raise LoginRequired()
    return identity


ApiUser = Annotated[Identity, Depends(api_user)]


async def api_admin(identity: ApiUser) -> Identity:
    """The user of the bearer token, an admin."""
    if not identity.is_admin:
        raise Forbidden("this needs an admin")
    return identity


ProjectDep = Annotated[Project, Depends(get_project)]
PageAdmin = Annotated[Identity, Depends(page_admin)]
FormUser = Annotated[tuple[Identity, FormData], Depends(form_user)]
FormAdmin = Annotated[tuple[Identity, FormData], Depends(form_admin)]
ApiAdmin = Annotated[Identity, Depends(api_admin)]

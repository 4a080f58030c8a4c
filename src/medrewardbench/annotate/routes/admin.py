"""The organisers' pages: the dashboard, adjudication, users, guidelines, the audit log, exports.

Every page needs an admin's session (:data:`PageAdmin`, :data:`FormAdmin`); the services check
the role again.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.deps import Before, FormAdmin, PageAdmin, ProjectDep, Window, client
from medrewardbench.annotate.guidelines import render_markdown
from medrewardbench.annotate.rendering import redirect, render
from medrewardbench.annotate.routes.downloads import export_response
from medrewardbench.annotate.services.quality import MIN_INTERVAL_ITEMS, RESAMPLES

router = APIRouter(prefix="/admin")


@router.get("", response_class=HTMLResponse)
def admin_page(request: Request, me: PageAdmin, project: ProjectDep) -> Response:
    """The dashboard: progress, agreement, time, gold accuracy, position consistency."""
    board = project.quality.dashboard(me, intervals=True)
    return render(
        request, "admin.html", me=me, board=board, resamples=f"{RESAMPLES:,}", min_interval_items=MIN_INTERVAL_ITEMS
    )


@router.get("/adjudication", response_class=HTMLResponse)
def adjudication_page(request: Request, me: PageAdmin, project: ProjectDep) -> Response:
    """The adjudication queue: items whose annotators have no strict majority."""
    return render(request, "adjudication.html", me=me, board=project.quality.dashboard(me))


@router.get("/items/{item_id}", response_class=HTMLResponse)
def item_page(request: Request, item_id: str, me: PageAdmin, project: ProjectDep) -> Response:
    """One item with every vote, to adjudicate."""
    return render(request, "item.html", me=me, review=project.quality.item_review(me, item_id), error=None)


@router.post("/items/{item_id}")
def item_post(request: Request, item_id: str, pair: FormAdmin, project: ProjectDep) -> Response:
    """Record the admin's decision on an item."""
    me, form = pair
    values = {dim: str(form.get(f"adj_{dim}")) for dim in project.dimensions if form.get(f"adj_{dim}") is not None}
    project.adjudication.adjudicate(me, item_id, values, str(form.get("note") or ""), client(request))
    return redirect(request, "/admin/adjudication")


@router.get("/items/{item_id}/image")
def item_image(
    item_id: str, me: PageAdmin, project: ProjectDep, center: Window = None, width: Window = None
) -> Response:
    """An item's image (DICOM windowed on request)."""
    data, media = project.images.item_image(me, item_id, center, width)
    return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})


@router.get("/users", response_class=HTMLResponse)
def users_page(request: Request, me: PageAdmin, project: ProjectDep) -> Response:
    """The users and their workload."""
    return render(request, "users.html", me=me, users=project.accounts.list_users(me), error=None)


@router.post("/users")
def users_add(request: Request, pair: FormAdmin, project: ProjectDep) -> Response:
    """Add a user."""
    me, form = pair
    name = str(form.get("name") or "").strip()
    try:
        project.accounts.add_user(me, name, str(form.get("role") or ""), str(form.get("password") or ""))
    except InvalidInput as exc:
        users = project.accounts.list_users(me)
        return render(request, "users.html", status=400, me=me, users=users, error=str(exc))
    return redirect(request, "/admin/users")


@router.post("/users/{name}/active")
def users_active(request: Request, name: str, pair: FormAdmin, project: ProjectDep) -> Response:
    """Deactivate or reactivate a user."""
    me, form = pair
    project.accounts.set_active(me, name, form.get("active") == "1")
    return redirect(request, "/admin/users")


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines_edit(request: Request, me: PageAdmin, project: ProjectDep) -> Response:
    """The guidelines editor with a preview."""
    text = project.records.guidelines()
    return render(request, "guidelines_edit.html", me=me, text=text, preview=render_markdown(text))


@router.post("/guidelines")
def guidelines_save(request: Request, pair: FormAdmin, project: ProjectDep) -> Response:
    """Replace the guidelines."""
    me, form = pair
    text = str(form.get("text") or "")
    try:
        project.records.set_guidelines(me, text, client(request))
    except InvalidInput as exc:  # the edit stays in the box, with the reason
        preview = render_markdown(text.replace("\x00", ""))
        return render(request, "guidelines_edit.html", status=400, me=me, text=text, preview=preview, error=str(exc))
    return redirect(request, "/admin/guidelines")


@router.get("/audit", response_class=HTMLResponse)
def audit_page(request: Request, me: PageAdmin, project: ProjectDep, before: Before = None) -> Response:
    """The newest audit log entries."""
    entries = project.records.audit_entries(me, 200, before)
    return render(request, "audit.html", me=me, entries=entries)


@router.get("/export/{filename}")
def export_download(request: Request, filename: str, me: PageAdmin, project: ProjectDep) -> Response:
    """Download an export (recorded in the audit log)."""
    return export_response(project, me, filename, client(request))

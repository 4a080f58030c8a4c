"""The JSON API under ``/api/v1``: an annotator's queue and submissions, and the admin API.

Callers authenticate with a per-user bearer token (:data:`ApiUser`, :data:`ApiAdmin`), so no CSRF
token is needed. ``/api/v1/openapi.json`` describes the routes the caller's role may use.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import MAX_ROW_ID
from medrewardbench.annotate.deps import ApiAdmin, ApiUser, Before, ProjectDep, Window, client, root
from medrewardbench.annotate.guidelines import definitions_from_guidelines
from medrewardbench.annotate.routes.downloads import export_response
from medrewardbench.annotate.service import CaseView, PairAnswer, Project, ScreeningAnswer, ShownSubmission

router = APIRouter(prefix="/api/v1")


class SubmissionBody(BaseModel):
    """An API submission: a pair (``choices`` as shown, A/B) or a question (``decision``)."""

    choices: dict[str, str] = Field(default_factory=dict, description="criterion -> 'A' or 'B', as shown")
    cannot_judge: bool = False
    cannot_judge_reason: str = ""
    comment: str = ""
    seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    decision: str | None = Field(default=None, description="screening: 'accept' or 'reject'")
    reasons: list[str] = Field(default_factory=list, description="screening: reasons for a rejection")
    harm: dict[str, str] = Field(
        default_factory=dict,
        description="pairs: answer as shown ('A'/'B') -> harm severity (minor, moderate, severe, critical)",
    )
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


@router.get("/me")
def api_me(me: ApiUser, project: ProjectDep) -> dict[str, Any]:
    """Who the token belongs to, their progress and the project."""
    queue = project.assignments.queue(me)
    return {"name": me.name, "role": me.role, "done": queue.done, "total": queue.total, "project": _settings(project)}


@router.get("/queue")
def api_queue(me: ApiUser, project: ProjectDep) -> dict[str, Any]:
    """The caller's queue, in their order."""
    queue = project.assignments.queue(me)
    return {
        "done": queue.done,
        "total": queue.total,
        "next": queue.next_todo,
        "counts": {"cases": queue.cases, "repeats": queue.repeats, "gold": queue.gold},
        "assignments": [
            {
                "id": row.public_id,
                "position": row.position,
                "done": row.done,
                "cannot_judge": row.cannot_judge,
                "seconds": row.seconds,
            }
            for row in queue.rows
        ],
    }


@router.get("/assignments/{assignment_id}")
def api_assignment(request: Request, assignment_id: str, me: ApiUser, project: ProjectDep) -> Response:
    """One of the caller's cases as shown to them; the ETag is its revision."""
    view = project.assignments.case_view(me, assignment_id)
    revision = view.submission.revision if view.submission else 0
    return JSONResponse(_case_json(view, root(request)), headers={"etag": f'"{revision}"'})


@router.put("/assignments/{assignment_id}/submission")
def api_submit(
    request: Request,
    assignment_id: str,
    body: SubmissionBody,
    me: ApiUser,
    project: ProjectDep,
    if_match: Annotated[str | None, Header(description="the revision the answer was made on")] = None,
) -> dict[str, Any] | None:
    """Save the caller's answer (If-Match or expected_revision: refuse a stale save with 409)."""
    expected = body.expected_revision
    from_header = _if_match(if_match)
    if expected is not None and from_header is not None and expected != from_header:
        raise InvalidInput("expected_revision and If-Match name different revisions; send one")
    expected = expected if expected is not None else from_header
    if project.assignments.assignment_kind(me, assignment_id) == "pair":
        answer = PairAnswer(
            body.choices, body.cannot_judge, body.cannot_judge_reason, body.comment, body.seconds, expected, body.harm
        )
        saved = project.labelling.submit_pair(me, assignment_id, answer, client(request))
    else:
        screening = ScreeningAnswer(body.decision or "", tuple(body.reasons), body.comment, body.seconds, expected)
        saved = project.labelling.submit_screening(me, assignment_id, screening, client(request))
    return _submission_json(saved)


@router.get("/assignments/{assignment_id}/image")
def api_image(
    assignment_id: str, me: ApiUser, project: ProjectDep, center: Window = None, width: Window = None
) -> Response:
    """The image of one of the caller's cases (DICOM windowed on request)."""
    data, media = project.images.assignment_image(me, assignment_id, center, width)
    return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})


@router.get("/guidelines")
def api_guidelines(me: ApiUser, project: ProjectDep) -> dict[str, Any]:
    """The guidelines (markdown) and the definitions of the criteria."""
    text = project.records.guidelines()
    return {"markdown": text, "definitions": definitions_from_guidelines(text)}


@router.get("/admin/dashboard")
def api_dashboard(me: ApiAdmin, project: ProjectDep) -> dict[str, Any]:
    """Every dashboard figure."""
    return project.quality.dashboard(me).as_dict()


@router.get("/admin/items/{item_id}")
def api_item(item_id: str, me: ApiAdmin, project: ProjectDep) -> dict[str, Any]:
    """One item with every vote, to adjudicate."""
    review = project.quality.item_review(me, item_id)
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
            {
                "annotator": name,
                "labels": labels,
                "cannot_judge": cannot,
                "reason": reason,
                "comment": comment,
                "harm": review.harm[index] if index < len(review.harm) else {},
            }
            for index, (name, labels, cannot, reason, comment) in enumerate(review.labels)
        ],
    }


@router.put("/admin/items/{item_id}/adjudication")
def api_adjudicate(
    request: Request, item_id: str, body: AdjudicationBody, me: ApiAdmin, project: ProjectDep
) -> dict[str, Any]:
    """Record the admin's decision on an item."""
    project.adjudication.adjudicate(me, item_id, body.values, body.note, client(request))
    return {"ok": True}


@router.get("/admin/users")
def api_users(me: ApiAdmin, project: ProjectDep) -> list[dict[str, Any]]:
    """The users and their workload."""
    return [
        {"name": u.name, "role": u.role, "active": u.active, "assigned": u.assigned, "done": u.done}
        for u in project.accounts.list_users(me)
    ]


@router.get("/admin/audit")
def api_audit(
    me: ApiAdmin,
    project: ProjectDep,
    before: Before = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[dict[str, Any]]:
    """The newest audit log entries."""
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
        for e in project.records.audit_entries(me, limit, before)
    ]


@router.get("/admin/export/{filename}")
def api_export(request: Request, filename: str, me: ApiAdmin, project: ProjectDep) -> Response:
    """Download an export (recorded in the audit log)."""
    return export_response(project, me, filename, client(request))


@router.get("/openapi.json")
def api_schema(request: Request, me: ApiUser) -> dict[str, Any]:
    """The OpenAPI schema of the routes the caller's role may use."""
    # the caller's own view: the API routes their role may use, nothing of the pages or (for an
    # annotator) of the admin API
    app = request.app
    schemas: dict[bool, dict[str, Any]] = app.state.api_schemas
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


def _if_match(value: str | None) -> int | None:
    """The revision in an If-Match header (``"3"``, ``W/"3"`` or ``3``), or None when absent."""
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"').strip()
    if not text.isdigit() or int(text) > MAX_ROW_ID:
        raise InvalidInput('If-Match: give the revision the answer was made on, as in If-Match: "3"')
    return int(text)


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
        "harm": dict(saved.harm),
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

"""An annotator's pages: the queue, a case (its form and image), the guidelines, the account.

Every page needs a session; every form post carries the session's CSRF token. The services find
only the caller's own assignments, by opaque ids that never name a case or a source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import MAX_ROW_ID, utcnow
from medrewardbench.annotate.deps import FormUser, PageUser, ProjectDep, RowId, Window, client
from medrewardbench.annotate.guidelines import (
    HARM_LABELS,
    SCREENING_REASON_LABELS,
    SCREENING_REASONS,
    definitions_from_guidelines,
    render_markdown,
)
from medrewardbench.annotate.rendering import redirect, render
from medrewardbench.annotate.security import SESSION_COOKIE
from medrewardbench.annotate.service import (
    CaseView,
    Identity,
    PairAnswer,
    Project,
    ScreeningAnswer,
    ShownSubmission,
    StaleSubmission,
)
from medrewardbench.cases import HARM_SEVERITIES
from medrewardbench.dimensions import DIMENSIONS

if TYPE_CHECKING:
    from medrewardbench.images.dicom import DicomDisplay

WINDOW_PRESETS: dict[str, tuple[float, float]] = {
    "lung": (-600.0, 1500.0),
    "mediastinum": (50.0, 350.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
    "abdomen": (40.0, 400.0),
}
"""Window presets (center, width) in Hounsfield units: offered for CT (and images in HU) only."""


@dataclass(frozen=True)
class WindowPreset:
    """A window button of the case viewer."""

    key: str
    label: str
    center: float
    width: float
    title: str


def window_presets(dicom: DicomDisplay | None) -> tuple[WindowPreset, ...]:
    """The window presets that fit an image: CT's in HU, else windows from its own value percentiles.

    MR and other modalities have no fixed value scale, so a CT window in HU would show them as a
    black or white box; their presets span percentiles of the shown frame's values instead.

    Args:
        dicom: the image's display facts (None: not DICOM, no presets).

    Returns:
        The presets, in button order (the file's own window comes first, separately).
    """
    if dicom is None or not dicom.monochrome:
        return ()
    if dicom.units == "HU":
        return tuple(
            WindowPreset(name, name.capitalize(), c, w, f"center {int(c)}, width {int(w)} HU")
            for name, (c, w) in WINDOW_PRESETS.items()
        )
    return tuple(
        WindowPreset(
            f"p{index}",
            name.capitalize(),
            c,
            w,
            f"{name} of this image's values: center {round(c)}, width {round(w)}",
        )
        for index, (name, c, w) in enumerate(dicom.percentile_windows)
    )


_STALE_MESSAGE = (
    "This case was saved in another tab or window after you opened it, so your answer below was "
    "not saved. Reload the case to see the saved answer, or save again to replace it with yours."
)

router = APIRouter()


@router.get("/queue", response_class=HTMLResponse)
def queue_page(request: Request, me: PageUser, project: ProjectDep) -> Response:
    """The caller's queue and progress."""
    queue = project.assignments.queue(me)
    return render(request, "queue.html", me=me, queue=queue)


@router.get("/queue/next")
def queue_next(request: Request, me: PageUser, project: ProjectDep) -> Response:
    """The caller's next unfinished case."""
    queue = project.assignments.queue(me)
    return redirect(request, f"/a/{queue.next_todo}" if queue.next_todo else "/queue")


def _case_page(
    request: Request,
    project: Project,
    me: Identity,
    view: CaseView,
    status: int = 200,
    error: str | None = None,
    entered: ShownSubmission | None = None,
    revision: int | None = None,
    stale: bool = False,
) -> Response:
    definitions = definitions_from_guidelines(project.records.guidelines())
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
        harm_levels=HARM_LABELS,
        presets=window_presets(view.dicom),
        dicom=view.dicom,
        opened=project.signer.opened_token(view.public_id),
        image_url=f"/a/{view.public_id}/image",
    )


@router.get("/a/{assignment_id}", response_class=HTMLResponse)
def case_get(request: Request, assignment_id: str, me: PageUser, project: ProjectDep) -> Response:
    """One of the caller's cases, with their saved answer."""
    return _case_page(request, project, me, project.assignments.case_view(me, assignment_id))


@router.post("/a/{assignment_id}")
def case_post(request: Request, assignment_id: str, pair: FormUser, project: ProjectDep) -> Response:
    """Save the caller's answer, then go on to their next unfinished case."""
    me, form = pair
    seconds = _seconds(form, project, assignment_id)
    expected: int | None = None
    try:
        expected = _form_revision(form)
        # the service checks the kind too: a question posted as a pair is refused, and so on
        if "decision" not in form:
            project.labelling.submit_pair(me, assignment_id, _pair_answer(form, seconds, expected), client(request))
        else:
            project.labelling.submit_screening(
                me, assignment_id, _screening_answer(form, seconds, expected), client(request)
            )
    except StaleSubmission as exc:
        # keep what the doctor entered on screen; saving again (now on the current revision) replaces
        view = project.assignments.case_view(me, assignment_id)
        entered = _entered(form, view)
        return _case_page(request, project, me, view, 409, _STALE_MESSAGE, entered, revision=exc.revision, stale=True)
    except InvalidInput as exc:
        view = project.assignments.case_view(me, assignment_id)
        entered = _entered(form, view)
        return _case_page(request, project, me, view, status=400, error=str(exc), entered=entered, revision=expected)
    if form.get("action") == "stay":
        return redirect(request, f"/a/{assignment_id}")
    following = project.assignments.next_todo(me, assignment_id)
    return redirect(request, f"/a/{following}" if following else "/queue?done=1")


@router.get("/a/{assignment_id}/image")
def case_image(
    assignment_id: str,
    me: PageUser,
    project: ProjectDep,
    center: Window = None,
    width: Window = None,
    size: Literal["thumb"] | None = None,
) -> Response:
    """The image of one of the caller's cases (DICOM windowed on request; ``size=thumb``: the queue's)."""
    data, media = project.images.assignment_image(me, assignment_id, center, width, thumbnail=size == "thumb")
    return Response(data, media_type=media, headers={"cache-control": "private, max-age=600"})


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines_page(request: Request, me: PageUser, project: ProjectDep) -> Response:
    """The guidelines."""
    return render(request, "guidelines.html", me=me, body=render_markdown(project.records.guidelines()))


@router.get("/account", response_class=HTMLResponse)
def account_page(request: Request, me: PageUser, project: ProjectDep) -> Response:
    """The caller's account: password and API tokens."""
    tokens = project.accounts.list_api_tokens(me, me.name)
    return render(request, "account.html", me=me, tokens=tokens, new_token=None, message=None)


@router.post("/account/password")
def account_password(request: Request, pair: FormUser, project: ProjectDep) -> Response:
    """Change the own password (every session ends, every token is revoked)."""
    me, form = pair
    current = str(form.get("current_password") or "")
    new = str(form.get("new_password") or "")
    if new != str(form.get("repeat_password") or ""):
        raise InvalidInput("the two new passwords differ")
    # every session (this one too) ends and every API token is revoked: log in again
    project.auth.change_own_password(me, current, new, client(request))
    response = redirect(request, "/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.post("/account/tokens", response_class=HTMLResponse)
def account_token(request: Request, pair: FormUser, project: ProjectDep) -> Response:
    """Create an API token (shown once)."""
    me, form = pair
    token = project.accounts.create_api_token(me, me.name, str(form.get("label") or ""))
    tokens = project.accounts.list_api_tokens(me, me.name)
    return render(request, "account.html", me=me, tokens=tokens, new_token=token, message=None)


@router.post("/account/tokens/{token_id}/revoke")
def account_revoke(request: Request, token_id: RowId, pair: FormUser, project: ProjectDep) -> Response:
    """Revoke one of the own API tokens."""
    project.accounts.revoke_api_token(pair[0], pair[0].name, token_id)
    return redirect(request, "/account")


def _pair_answer(form: FormData, seconds: float | None, expected: int | None) -> PairAnswer:
    return PairAnswer(
        choices={dim: str(form.get(f"dim_{dim}") or "") for dim in DIMENSIONS},
        cannot_judge=form.get("cannot_judge") == "on",
        cannot_judge_reason=str(form.get("cannot_judge_reason") or ""),
        comment=str(form.get("comment") or ""),
        seconds=seconds,
        expected_revision=expected,
        harm={letter: str(form.get(f"harm_{letter}") or "") for letter in ("A", "B")},
    )


def _screening_answer(form: FormData, seconds: float | None, expected: int | None) -> ScreeningAnswer:
    return ScreeningAnswer(
        decision=str(form.get("decision") or ""),
        reasons=tuple(key for key in SCREENING_REASONS if form.get(f"reason_{key}") == "on"),
        comment=str(form.get("comment") or ""),
        seconds=seconds,
        expected_revision=expected,
    )


def _seconds(form: FormData, project: Project, assignment_id: str) -> float | None:
    """Time on the case: the browser's active time when plausible, else the server's measure."""
    opened = form.get("opened")
    server = project.signer.seconds_open(opened, assignment_id) if isinstance(opened, str) else None
    raw = form.get("seconds")
    try:
        browser = float(raw) if isinstance(raw, str) and raw.strip() else None
    except ValueError:
        browser = None
    if browser is not None and browser >= 0 and (server is None or browser <= server + 5.0):
        return browser
    return server


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
        harm={
            letter: str(form.get(f"harm_{letter}"))
            for letter in ("A", "B")
            if form.get(f"harm_{letter}") in HARM_SEVERITIES
        },
    )

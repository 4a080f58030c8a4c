"""Who labels what, and an annotator's own queue: the assignments, in each annotator's order.

:meth:`AssignmentService.rebalance` turns the plan of :mod:`medrewardbench.annotate.assign` into
assignment rows (added when annotators join, taken back from those who leave, never once started).
The queue and case views show the caller only their own assignments, by opaque ids, and a case
only in the A/B order its annotator was shown: nothing that names a source or a model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from medrewardbench.annotate import assign
from medrewardbench.annotate.config import AnnotateError, NotFound
from medrewardbench.annotate.db import Assignment, Item, Submission, User, utcnow
from medrewardbench.annotate.security import public_id
from medrewardbench.annotate.services.base import (
    PUBLIC_ID,
    Identity,
    ProjectContext,
    audit,
    own_assignment,
    require_admin,
)
from medrewardbench.annotate.services.images import ImageService
from medrewardbench.dimensions import DIMENSIONS, Order, to_position


@dataclass(frozen=True)
class QueueRow:
    """One line of an annotator's queue."""

    public_id: str
    position: int
    done: bool
    seconds: float | None
    updated_at: datetime | None
    cannot_judge: bool = False
    """The saved answer says the case cannot be judged (pairs)."""
    question_start: str = ""
    """The question's first words, so the annotator can tell the cases apart."""
    has_image: bool = False


@dataclass(frozen=True)
class QueueView:
    """An annotator's queue and progress."""

    rows: tuple[QueueRow, ...]
    done: int
    total: int
    next_todo: str | None
    cases: int = 0
    """Items of the study itself; ``total`` also counts repeats and gold checks."""
    repeats: int = 0
    """Items shown a second time (position consistency); which ones is never said."""
    gold: int = 0
    """Gold checks (items with a known answer); which ones is never said."""

    @property
    def composition(self) -> str:
        """What ``total`` counts, as totals only: never which item is a repeat or a gold check."""
        parts = [_counted(self.cases, "case")]
        if self.repeats:
            parts.append(_counted(self.repeats, "repeat"))
        if self.gold:
            parts.append(_counted(self.gold, "gold check"))
        return f"{_counted(self.total, 'item')}: {', '.join(parts)}"


QUESTION_WORDS = 10
"""How many words of the question a queue row shows."""


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def question_start(question: str, words: int = QUESTION_WORDS) -> str:
    """The first ``words`` words of a question, with an ellipsis when there are more.

    Args:
        question: the question's text.
        words: how many words to keep.

    Returns:
        The shortened text, whitespace collapsed.
    """
    split = question.split()
    return " ".join(split[:words]) + (" …" if len(split) > words else "")


@dataclass(frozen=True)
class ShownSubmission:
    """A saved answer as its author sees it (A/B in the order they were shown)."""

    choices: Mapping[str, str]
    cannot_judge: bool
    cannot_judge_reason: str
    comment: str
    decision: str | None
    reasons: tuple[str, ...]
    seconds: float
    revision: int
    updated_at: datetime
    harm: Mapping[str, str] = field(default_factory=dict)
    """Answer as shown (``"A"``/``"B"``) -> severity, for the answers flagged as harmful."""


@dataclass(frozen=True)
class CaseView:
    """One assignment as its annotator sees it: nothing that names a source or a model."""

    public_id: str
    kind: str
    position: int
    total: int
    done: int
    question: str
    answer_a: str
    answer_b: str
    reference_answer: str | None
    answer_type: str | None
    has_image: bool
    dicom: Any
    """A :class:`medrewardbench.images.dicom.DicomDisplay` for DICOM images, else None."""
    previous_id: str | None
    next_id: str | None
    next_todo_id: str | None
    submission: ShownSubmission | None


def shown(submission: Submission, order: Order) -> ShownSubmission:
    """A stored submission (source order) as its author saw it (``order``)."""
    choices = {
        dim: to_position(int(value), order)  # type: ignore[arg-type]
        for dim, value in (submission.choices or {}).items()
        if dim in DIMENSIONS
    }
    return ShownSubmission(
        choices={dim: choices[dim] for dim in DIMENSIONS if dim in choices},
        cannot_judge=submission.cannot_judge,
        cannot_judge_reason=submission.cannot_judge_reason,
        comment=submission.comment,
        decision=submission.decision,
        reasons=tuple(submission.reasons or ()),
        seconds=submission.seconds,
        revision=submission.revision,
        updated_at=submission.updated_at,
        harm={
            to_position(int(response), order): severity  # type: ignore[arg-type]
            for response, severity in sorted((submission.harm or {}).items())
            if response in ("1", "2")
        },
    )


class AssignmentService:
    """The assignments of a project and each annotator's view of their own.

    Args:
        context: the open project.
        images: the image service (a case view says whether its image is DICOM).
    """

    def __init__(self, context: ProjectContext, images: ImageService):
        self.context = context
        self.images = images

    def queue(self, identity: Identity) -> QueueView:
        """The caller's own queue, in their order, with their progress.

        Args:
            identity: the caller.

        Returns:
            The queue.
        """
        with self.context.db.read() as s:
            rows = s.execute(
                select(
                    Assignment.public_id,
                    Assignment.purpose,
                    Submission.seconds,
                    Submission.updated_at,
                    Submission.cannot_judge,
                    Item.payload,
                    Item.image_id,
                )
                .join(Item, Item.id == Assignment.item_id)
                .outerjoin(Submission, Submission.assignment_id == Assignment.id)
                .where(Assignment.user_id == identity.user_id)
                .order_by(Assignment.sort_key, Assignment.id)
            ).all()
        out = tuple(
            QueueRow(
                pid,
                index,
                updated is not None,
                seconds,
                updated,
                cannot_judge=bool(cannot),
                question_start=question_start(str((payload or {}).get("question", ""))),
                has_image=image_id is not None,
            )
            for index, (pid, _purpose, seconds, updated, cannot, payload, image_id) in enumerate(rows, start=1)
        )
        purposes = Counter(row.purpose for row in rows)
        todo = next((row.public_id for row in out if not row.done), None)
        return QueueView(
            out,
            sum(row.done for row in out),
            len(out),
            todo,
            cases=purposes["primary"],
            repeats=purposes["repeat"],
            gold=purposes["gold"],
        )

    def assignment_kind(self, identity: Identity, assignment_id: str) -> str:
        """Whether one of the caller's assignments is a ``pair`` or a ``question`` (a light query).

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.

        Returns:
            The item kind.

        Raises:
            NotFound: no such assignment in the caller's queue.
        """
        if not PUBLIC_ID.match(assignment_id):
            raise NotFound("no such case in your queue")
        with self.context.db.read() as s:
            kind = s.scalar(
                select(Item.kind)
                .join(Assignment, Assignment.item_id == Item.id)
                .where(Assignment.public_id == assignment_id, Assignment.user_id == identity.user_id)
            )
        if kind is None:
            raise NotFound("no such case in your queue")
        return kind

    def next_todo(self, identity: Identity, after: str | None = None) -> str | None:
        """The caller's next unfinished assignment after ``after`` in queue order (wrapping around).

        Args:
            identity: the caller.
            after: an assignment's public id, or None for the start of the queue.

        Returns:
            A public id, or None when everything is done.
        """
        rows = self.queue(identity).rows
        ids = [row.public_id for row in rows]
        start = ids.index(after) + 1 if after in ids else 0
        for row in (*rows[start:], *rows[:start]):
            if not row.done and row.public_id != after:
                return row.public_id
        return None

    def case_view(self, identity: Identity, assignment_id: str) -> CaseView:
        """One of the caller's assignments, as it is shown to them.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.

        Returns:
            The view: texts in the caller's A/B order and their saved answer, nothing else.

        Raises:
            NotFound: no such assignment in the caller's queue.
        """
        queue = self.queue(identity)
        with self.context.db.read() as s:
            assignment, item = own_assignment(s, identity, assignment_id)
            submission = s.get(Submission, assignment.id)
            payload = dict(item.payload)
            kind = item.kind
            order = Order(assignment.order_shown) if assignment.order_shown else Order.ORIGINAL
            saved = shown(submission, order) if submission is not None else None
            has_image = item.image_id is not None
            dicom = self.images.dicom_display(s, item.image_id) if item.image_id is not None else None
        ids = [row.public_id for row in queue.rows]
        index = ids.index(assignment_id)
        later = [row.public_id for row in queue.rows[index + 1 :] if not row.done and row.public_id != assignment_id]
        earlier = [row.public_id for row in queue.rows[:index] if not row.done]
        if kind == "pair":
            first, second = (payload["response_1"], payload["response_2"])
            answer_a, answer_b = (first, second) if order is Order.ORIGINAL else (second, first)
        else:
            answer_a = answer_b = ""
        return CaseView(
            public_id=assignment_id,
            kind=kind,
            position=index + 1,
            total=queue.total,
            done=queue.done,
            question=payload.get("question", ""),
            answer_a=answer_a,
            answer_b=answer_b,
            reference_answer=payload.get("reference_answer"),
            answer_type=payload.get("answer_type"),
            has_image=has_image,
            dicom=dicom,
            previous_id=ids[index - 1] if index > 0 else None,
            next_id=ids[index + 1] if index + 1 < len(ids) else None,
            next_todo_id=next(iter(later + earlier), None),
            submission=saved,
        )

    def rebalance(self, actor: Identity) -> dict[str, int]:
        """Recompute the queues now (normally done when annotators are added or deactivated).

        Args:
            actor: an admin or the command line.

        Returns:
            How many assignments were added and removed.

        Raises:
            Forbidden: not an admin.
        """
        require_admin(actor)
        with self.context.db.write() as s:
            return self.rebalance_in(s, actor)

    def rebalance_in(self, s: Session, actor: Identity) -> dict[str, int]:
        """Recompute the queues inside the caller's transaction (the caller has checked the actor).

        Args:
            s: the open write transaction.
            actor: who caused it, for the audit log.

        Returns:
            How many assignments were added and removed, and how many annotators are active.

        Raises:
            AnnotateError: the plan would drop started work (a planner bug; nothing is changed).
        """
        settings = self.context.settings
        users = {u.id: u for u in s.scalars(select(User)).all()}
        annotators = [u.name for u in users.values() if u.role == "annotator" and u.active]
        items = sorted(s.scalars(select(Item)).all(), key=lambda i: i.id)
        key_of = {item.id: f"{item.role}:{item.external_id}" for item in items}
        item_by_key = {key: item_id for item_id, key in key_of.items()}
        started_ids = set(s.scalars(select(Submission.assignment_id)).all())
        existing = s.scalars(select(Assignment)).all()
        slots = [
            assign.Slot(
                users[a.user_id].name, key_of[a.item_id], a.purpose, a.order_shown, a.sort_key, a.id in started_ids
            )
            for a in existing
        ]
        plan = assign.plan_assignments(
            annotators,
            [key_of[i.id] for i in items if i.role == "primary"],
            per_case=settings.per_case,
            seed=settings.seed,
            gold_items=[key_of[i.id] for i in items if i.role == "gold"],
            repeat_share=settings.repeat_share,
            pairs=self.context.is_pairs,
            existing=slots,
        )
        wanted = {slot.key: slot for slot in plan}
        have = {slot.key: (slot, assignment) for slot, assignment in zip(slots, existing, strict=True)}
        removed = 0
        for key, (slot, assignment) in have.items():
            if key not in wanted:
                if slot.started:  # the planner never drops started work; refuse to lose labels if it did
                    raise AnnotateError(f"internal error: the plan would drop started work {key}")
                s.delete(assignment)
                removed += 1
        user_ids = {u.name: u.id for u in users.values()}
        now = utcnow()
        added = 0
        for key, slot in wanted.items():
            if key in have:
                continue
            s.add(
                Assignment(
                    public_id=public_id(),
                    user_id=user_ids[slot.user],
                    item_id=item_by_key[slot.item],
                    purpose=slot.purpose,
                    order_shown=slot.order_shown,
                    sort_key=slot.sort_key,
                    created_at=now,
                )
            )
            added += 1
        s.flush()
        counts = {"added": added, "removed": removed, "annotators": len(annotators)}
        if added or removed:
            audit(s, actor, "assignments.rebalance", "project", None, counts)
        return counts

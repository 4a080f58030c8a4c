"""Labelling: an annotator saves (and changes) their answer to one of their own assignments.

Labels are stored in **source order** (1 = response_1): the A/B an annotator clicks is mapped
back through the order that annotator was shown (:func:`medrewardbench.dimensions.to_source`).
A save is committed with its audit entry (the old answer and the new one); a save made on an
older revision than the stored one is refused (:class:`StaleSubmission`), and a save that
changes nothing (a retried request) records nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import Assignment, Submission, utcnow
from medrewardbench.annotate.guidelines import SCREENING_REASONS
from medrewardbench.annotate.services.assignments import ShownSubmission, shown
from medrewardbench.annotate.services.base import (
    DECISIONS,
    MAX_COMMENT,
    MAX_REASON,
    MAX_SECONDS,
    Identity,
    ProjectContext,
    StaleSubmission,
    audit,
    checked_text,
    own_assignment,
)
from medrewardbench.cases import HARM_SEVERITIES
from medrewardbench.dimensions import DIMENSIONS, Order, to_source


@dataclass(frozen=True)
class PairAnswer:
    """What an annotator submits for a pair, in the order they were shown."""

    choices: Mapping[str, str] = field(default_factory=dict)
    """Dimension -> ``"A"`` or ``"B"``."""
    cannot_judge: bool = False
    cannot_judge_reason: str = ""
    comment: str = ""
    seconds: float | None = None
    expected_revision: int | None = None
    """The revision the answer was made on (0: none saved yet); None saves without the check."""
    harm: Mapping[str, str] = field(default_factory=dict)
    """Answer as shown (``"A"``/``"B"``) -> severity (:data:`~medrewardbench.cases.HARM_SEVERITIES`),
    for the answers flagged as harmful; an empty severity (or ``"none"``) flags nothing."""


@dataclass(frozen=True)
class ScreeningAnswer:
    """What an annotator submits for a question."""

    decision: str = ""
    reasons: tuple[str, ...] = ()
    comment: str = ""
    seconds: float | None = None
    expected_revision: int | None = None
    """The revision the answer was made on (0: none saved yet); None saves without the check."""


class LabellingService:
    """Saving an annotator's answers to their own assignments.

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context

    def submit_pair(
        self, identity: Identity, assignment_id: str, answer: PairAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save (or change) the caller's labels for one pair; committed before returning.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            answer: A/B per dimension as shown, or "cannot judge" with a reason; an optional comment.
            client: the caller's address, for the audit log.

        Returns:
            The saved answer as the caller sees it.

        Raises:
            NotFound: no such assignment in the caller's queue.
            InvalidInput: a dimension without a choice (unless "cannot judge"), an unknown
                dimension or value, a missing reason, or an over-long text.
            StaleSubmission: the answer was made on an older revision than the stored one.
        """
        chosen = _check_pair_answer(answer)
        flagged = _check_harm(answer.harm)
        with self.context.db.write() as s:
            assignment, item = own_assignment(s, identity, assignment_id, lock=True)
            if item.kind != "pair":
                raise InvalidInput("this case is a question to screen: accept or reject it")
            order = Order(assignment.order_shown) if assignment.order_shown else Order.ORIGINAL
            choices = {dim: int(to_source(chosen[dim], order)) for dim in DIMENSIONS if dim in chosen}  # type: ignore[arg-type]
            harm = {str(int(to_source(letter, order))): flagged[letter] for letter in flagged}  # type: ignore[arg-type]
            values = {
                "choices": choices,
                "shown_choices": dict(chosen),
                "cannot_judge": answer.cannot_judge,
                "cannot_judge_reason": answer.cannot_judge_reason.strip() if answer.cannot_judge else "",
                "comment": answer.comment.strip(),
                "decision": None,
                "reasons": None,
                "harm": {key: harm[key] for key in sorted(harm)} or None,
            }
            submission = _save(s, identity, assignment, values, answer, client)
            return shown(submission, order)

    def submit_screening(
        self, identity: Identity, assignment_id: str, answer: ScreeningAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save (or change) the caller's decision on a question; committed before returning.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            answer: accept or reject, the reasons for a rejection, an optional comment.
            client: the caller's address, for the audit log.

        Returns:
            The saved answer.

        Raises:
            NotFound: no such assignment in the caller's queue.
            InvalidInput: no decision, an unknown reason, a rejection without a reason.
            StaleSubmission: the answer was made on an older revision than the stored one.
        """
        decision, reasons = _check_screening_answer(answer)
        with self.context.db.write() as s:
            assignment, item = own_assignment(s, identity, assignment_id, lock=True)
            if item.kind != "question":
                raise InvalidInput("this case is a pair: choose A or B")
            values = {
                "choices": {},
                "shown_choices": {},
                "cannot_judge": False,
                "cannot_judge_reason": "",
                "comment": answer.comment.strip(),
                "decision": decision,
                "reasons": list(reasons),
                "harm": None,
            }
            submission = _save(s, identity, assignment, values, answer, client)
            return shown(submission, Order.ORIGINAL)


def _save(
    s: Session,
    identity: Identity,
    assignment: Assignment,
    values: dict[str, Any],
    answer: PairAnswer | ScreeningAnswer,
    client: str,
) -> Submission:
    """Store an answer (the assignment's row is locked by the caller).

    A save that stores exactly what is stored already (a retried request, a page saved
    twice) changes nothing: no seconds added, the same revision, no audit entry. A save made
    on an older revision than the stored one (``expected_revision``; another tab or client
    saved since) is refused with :class:`StaleSubmission`.
    """
    submission = s.get(Submission, assignment.id)
    if submission is not None and all(_stored_value(submission, key) == value for key, value in values.items()):
        return submission
    current = submission.revision if submission is not None else 0
    expected = answer.expected_revision
    if expected is not None and expected != current:
        raise StaleSubmission(
            f"this case was saved elsewhere (another tab or window) after you opened it: the saved answer is "
            f"revision {current}, yours was made on revision {expected}",
            current,
        )
    seconds = answer.seconds
    spent = 0.0 if seconds is None else round(min(max(float(seconds), 0.0), MAX_SECONDS), 1)
    now = utcnow()
    old = _submission_record(submission) if submission is not None else None
    if submission is None:
        submission = Submission(
            assignment_id=assignment.id, seconds=spent, revision=1, submitted_at=now, updated_at=now, **values
        )
        s.add(submission)
    else:
        for key, value in values.items():
            setattr(submission, key, value)
        submission.seconds = round((submission.seconds or 0.0) + spent, 1)
        submission.revision = (submission.revision or 0) + 1
        submission.updated_at = now
    s.flush()
    new = _submission_record(submission)
    new["seconds_added"] = spent
    audit(s, identity, "submit", f"assignment:{assignment.public_id}", old, new, client)
    return submission


def _stored_value(submission: Submission, key: str) -> Any:
    """A submission's stored value as the values a save compares it with (JSON lists, not None)."""
    value = getattr(submission, key)
    if key in ("choices", "shown_choices"):
        return {str(k): v for k, v in (value or {}).items()}
    if key == "harm":
        return {str(k): v for k, v in sorted(value.items())} if value else None
    return list(value) if isinstance(value, (list, tuple)) else value


def _submission_record(submission: Submission) -> dict[str, Any]:
    return {
        "choices": dict(submission.choices or {}),
        "shown_choices": dict(submission.shown_choices or {}),
        "cannot_judge": submission.cannot_judge,
        "cannot_judge_reason": submission.cannot_judge_reason,
        "comment": submission.comment,
        "decision": submission.decision,
        "reasons": list(submission.reasons or []),
        "harm": dict(submission.harm or {}),
        "seconds": submission.seconds,
        "revision": submission.revision,
    }


def _check_pair_answer(answer: PairAnswer) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for key, value in answer.choices.items():
        if key not in DIMENSIONS:
            raise InvalidInput(f"unknown criterion {key[:40]!r}")
        if value in (None, ""):
            continue
        letter = str(value).strip().upper()
        if letter not in ("A", "B"):
            raise InvalidInput(f"{key}: choose A or B, got {str(value)[:40]!r}")
        chosen[key] = letter
    checked_text(answer.comment, "comment", MAX_COMMENT)
    if answer.cannot_judge:
        checked_text(answer.cannot_judge_reason, "cannot_judge_reason", MAX_REASON)
        if not answer.cannot_judge_reason.strip():
            raise InvalidInput("say why the case cannot be judged")
        return {}
    missing = [dim for dim in DIMENSIONS if dim not in chosen]
    if missing:
        raise InvalidInput(f"choose A or B for every criterion (missing: {', '.join(missing)})")
    return chosen


def _check_harm(harm: Mapping[str, str]) -> dict[str, str]:
    """The flagged answers as shown (``A``/``B``) -> severity; an empty value or ``none`` flags nothing."""
    flagged: dict[str, str] = {}
    for key, value in harm.items():
        letter = str(key).strip().upper()
        if letter not in ("A", "B"):
            raise InvalidInput(f"harm: flag answer A or B, got {str(key)[:40]!r}")
        severity = str(value or "").strip().lower()
        if severity in ("", "none"):
            continue
        if severity not in HARM_SEVERITIES:
            raise InvalidInput(f"harm {letter}: choose none, {', '.join(HARM_SEVERITIES)}, got {str(value)[:40]!r}")
        flagged[letter] = severity
    return flagged


def _check_screening_answer(answer: ScreeningAnswer) -> tuple[str, tuple[str, ...]]:
    if answer.decision not in DECISIONS:
        raise InvalidInput("accept or reject the question")
    unknown = [reason for reason in answer.reasons if reason not in SCREENING_REASONS]
    if unknown:
        raise InvalidInput(f"unknown reason(s) {', '.join(unknown)}; use {', '.join(SCREENING_REASONS)}")
    checked_text(answer.comment, "comment", MAX_COMMENT)
    reasons = tuple(reason for reason in SCREENING_REASONS if reason in answer.reasons)
    if answer.decision == "reject" and not reasons:
        raise InvalidInput("tick at least one reason for rejecting the question")
    return answer.decision, reasons if answer.decision == "reject" else ()

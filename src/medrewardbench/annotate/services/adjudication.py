"""Adjudication: an admin decides the dimensions of an item where the annotators have no strict majority."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from medrewardbench.annotate.config import InvalidInput, NotFound
from medrewardbench.annotate.db import Adjudication, Item, utcnow
from medrewardbench.annotate.services.base import (
    DECISIONS,
    MAX_COMMENT,
    PUBLIC_ID,
    Identity,
    ProjectContext,
    audit,
    checked_text,
    require_admin,
)
from medrewardbench.dimensions import DIMENSIONS


class AdjudicationService:
    """Admin decisions on items, each with its audit entry.

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context

    def adjudicate(
        self, actor: Identity, item_id: str, values: Mapping[str, str], note: str = "", client: str = ""
    ) -> None:
        """Record an admin's decision for dimensions of an item (a pair: 1/2; a question: accept/reject).

        Args:
            actor: an admin.
            item_id: the item's public id.
            values: dimension (``decision`` for a question) -> value; an empty value removes a decision.
            note: why, for the record.
            client: the caller's address, for the audit log.

        Raises:
            Forbidden: not an admin.
            NotFound: no such item.
            InvalidInput: an unknown dimension or value.
        """
        require_admin(actor)
        note = checked_text(note, "note", MAX_COMMENT)
        if not PUBLIC_ID.match(item_id):
            raise NotFound("no such item")
        with self.context.db.write() as s:
            item = s.scalar(select(Item).where(Item.public_id == item_id, Item.role == "primary"))
            if item is None:
                raise NotFound("no such item")
            allowed = {dim: ("1", "2") for dim in DIMENSIONS} if item.kind == "pair" else {"decision": DECISIONS}
            for dim, value in values.items():
                if dim not in allowed:
                    raise InvalidInput(f"unknown dimension {dim[:40]!r}")
                if value and value not in allowed[dim]:
                    raise InvalidInput(f"{dim}: choose one of {', '.join(allowed[dim])}")
            for dim, value in values.items():
                _decide(s, actor, item, item_id, dim, value, note, client)


def _decide(
    s: Session, actor: Identity, item: Item, item_id: str, dim: str, value: str, note: str, client: str
) -> None:
    """Store, change or remove (an empty value) one dimension's decision; unchanged ones record nothing."""
    existing = s.scalar(select(Adjudication).where(Adjudication.item_id == item.id, Adjudication.dimension == dim))
    old = {"value": existing.value, "note": existing.note} if existing is not None else None
    if not value:
        if existing is not None:
            s.delete(existing)
            audit(s, actor, "adjudicate", f"item:{item_id}:{dim}", old, None, client)
        return
    if existing is None:
        s.add(Adjudication(item_id=item.id, dimension=dim, value=value, note=note, actor=actor.name[:64], at=utcnow()))
    elif existing.value == value and existing.note == note:
        return
    else:
        existing.value = value
        existing.note = note
        existing.actor = actor.name[:64]
        existing.at = utcnow()
    audit(s, actor, "adjudicate", f"item:{item_id}:{dim}", old, {"value": value, "note": note}, client)

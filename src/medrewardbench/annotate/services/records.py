"""The project's guidelines and its audit log: what annotators read, and who did what."""

from __future__ import annotations

from sqlalchemy import select

from medrewardbench.annotate.db import MAX_ROW_ID, AuditEntry, ProjectRow
from medrewardbench.annotate.services.base import (
    MAX_GUIDELINES,
    Identity,
    ProjectContext,
    audit,
    checked_text,
    require_admin,
)


class RecordService:
    """The guidelines (everyone reads them, admins edit them) and the audit log (admins read it).

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context

    def guidelines(self) -> str:
        """The guidelines (markdown), for every user.

        Returns:
            The text.
        """
        return self.context.guidelines_text()

    def set_guidelines(self, actor: Identity, text: str, client: str = "") -> None:
        """Replace the guidelines.

        Args:
            actor: an admin.
            text: markdown (at most 100,000 characters).
            client: the caller's address, for the audit log.

        Raises:
            Forbidden: not an admin.
            InvalidInput: too long.
        """
        require_admin(actor)
        text = checked_text(text, "guidelines", MAX_GUIDELINES)
        with self.context.db.write() as s:
            row = s.get(ProjectRow, 1)
            assert row is not None
            old = row.guidelines
            row.guidelines = text.replace("\r\n", "\n")
            audit(s, actor, "guidelines.update", "project", {"guidelines": old}, {"guidelines": row.guidelines}, client)

    def record_export(self, actor: Identity, what: str, items: int, client: str = "") -> None:
        """Write an export to the audit log (who took which data, and when).

        Args:
            actor: who exported.
            what: the export's name.
            items: how many items it held.
            client: the caller's address.
        """
        with self.context.db.write() as s:
            audit(s, actor, "export", f"export:{what}", None, {"items": items}, client)

    def audit_entries(self, actor: Identity, limit: int = 200, before: int | None = None) -> list[AuditEntry]:
        """The newest audit log entries.

        Args:
            actor: an admin.
            limit: how many.
            before: only entries with a smaller id (paging).

        Returns:
            Entries, newest first (detached copies).

        Raises:
            Forbidden: not an admin.
        """
        require_admin(actor)
        with self.context.db.read() as s:
            query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(max(1, min(limit, 1000)))
            if before is not None and before <= MAX_ROW_ID:  # beyond it every entry is older
                query = query.where(AuditEntry.id < max(before, 0))
            rows = list(s.scalars(query).all())
            s.expunge_all()
            return rows

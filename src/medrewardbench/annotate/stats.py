"""The dashboard's figures for the command line (``annotate init`` and ``annotate status``).

The figures and their access check live in :mod:`medrewardbench.annotate.services.quality`; the
web app asks :class:`~medrewardbench.annotate.services.quality.QualityService` with the caller's
identity. These two functions ask it as the command line, an admin: whoever can read the project
directory can read its database anyway.
"""

from __future__ import annotations

from medrewardbench.annotate.services.base import Identity, ProjectContext
from medrewardbench.annotate.services.quality import (
    DECISION_CODES,
    AnnotatorStats,
    Dashboard,
    ItemReview,
    PendingItem,
    QualityService,
)

__all__ = ["DECISION_CODES", "AnnotatorStats", "Dashboard", "ItemReview", "PendingItem", "dashboard", "item_review"]


def dashboard(project: ProjectContext) -> Dashboard:
    """Every dashboard figure, as the command line sees them.

    Args:
        project: the open project.

    Returns:
        The figures.
    """
    return QualityService(project).dashboard(Identity.command_line())


def item_review(project: ProjectContext, item_public_id: str) -> ItemReview:
    """Everything about one primary item, as the command line sees it.

    Args:
        project: the open project.
        item_public_id: the item's public id.

    Returns:
        The review.

    Raises:
        NotFound: no such primary item.
    """
    return QualityService(project).item_review(Identity.command_line(), item_public_id)

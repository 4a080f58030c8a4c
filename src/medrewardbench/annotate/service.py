"""An open annotation project: its services put together, and the command line's and tests' way in.

The work is done by the services of :mod:`medrewardbench.annotate.services`, one per concern,
each checking its caller's :class:`Identity` itself (the web app's routes call them directly).
:class:`Project` opens the database once, builds every service on it, and keeps the short
methods the command line, the exporter and the tests call; each forwards to its service
unchanged, access checks included.

Labels are stored in **source order** (1 = response_1): the A/B an annotator clicks is mapped
back through the order that annotator was shown (:func:`medrewardbench.dimensions.to_source`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from medrewardbench.annotate.config import ProjectConfig, read_config
from medrewardbench.annotate.db import AuditEntry
from medrewardbench.annotate.export import ExportService
from medrewardbench.annotate.services.accounts import AccountService, TokenInfo, UserInfo
from medrewardbench.annotate.services.adjudication import AdjudicationService
from medrewardbench.annotate.services.assignments import (
    AssignmentService,
    CaseView,
    QueueRow,
    QueueView,
    ShownSubmission,
)
from medrewardbench.annotate.services.auth import AuthService
from medrewardbench.annotate.services.base import (
    DECISIONS,
    MAX_COMMENT,
    MAX_GUIDELINES,
    MAX_REASON,
    MAX_SECONDS,
    MAX_TOKEN_LABEL,
    MODES,
    PUBLIC_ID,
    ROLES,
    UNKNOWN_USER,
    USER_NAME,
    Identity,
    LoginRefused,
    ProjectContext,
    RateLimited,
    Settings,
    StaleSubmission,
)
from medrewardbench.annotate.services.creation import create_project_database
from medrewardbench.annotate.services.images import ImageService
from medrewardbench.annotate.services.labelling import LabellingService, PairAnswer, ScreeningAnswer
from medrewardbench.annotate.services.quality import Dashboard, ItemReview, QualityService
from medrewardbench.annotate.services.records import RecordService

__all__ = [
    "DECISIONS",
    "MAX_COMMENT",
    "MAX_GUIDELINES",
    "MAX_REASON",
    "MAX_SECONDS",
    "MAX_TOKEN_LABEL",
    "MODES",
    "PUBLIC_ID",
    "ROLES",
    "UNKNOWN_USER",
    "USER_NAME",
    "CaseView",
    "Identity",
    "LoginRefused",
    "PairAnswer",
    "Project",
    "QueueRow",
    "QueueView",
    "RateLimited",
    "ScreeningAnswer",
    "Settings",
    "ShownSubmission",
    "StaleSubmission",
    "TokenInfo",
    "UserInfo",
    "create_project",
]


class Project(ProjectContext):
    """An open annotation project and its services.

    Args:
        config: where its data lives.
        upgrade: bring the database schema to the newest migration first.

    Raises:
        AnnotateError: the database holds no project.
    """

    def __init__(self, config: ProjectConfig, *, upgrade: bool = True):
        super().__init__(config, upgrade=upgrade)
        self.images = ImageService(self)
        self.assignments = AssignmentService(self, self.images)
        self.accounts = AccountService(self, self.assignments)
        self.auth = AuthService(self, self.accounts)
        self.labelling = LabellingService(self)
        self.quality = QualityService(self)
        self.adjudication = AdjudicationService(self)
        self.records = RecordService(self)
        self.exports = ExportService(self)

    @classmethod
    def open(cls, directory: str | Path, *, upgrade: bool = True) -> Project:
        """Open a project directory.

        Args:
            directory: the project directory.
            upgrade: run the migrations first.

        Returns:
            The project.

        Raises:
            ProjectNotFound: the directory holds no project.
        """
        return cls(read_config(Path(directory)), upgrade=upgrade)

    # accounts and authentication (see AccountService and AuthService)

    def add_user(self, actor: Identity, name: str, role: str, password: str) -> None:
        """Add a user: :meth:`AccountService.add_user`."""
        self.accounts.add_user(actor, name, role, password)

    def set_password(self, actor: Identity, name: str, password: str, client: str = "") -> None:
        """Set a user's password: :meth:`AccountService.set_password`."""
        self.accounts.set_password(actor, name, password, client)

    def set_active(self, actor: Identity, name: str, active: bool) -> None:
        """Deactivate or reactivate a user: :meth:`AccountService.set_active`."""
        self.accounts.set_active(actor, name, active)

    def list_users(self, actor: Identity | None = None) -> list[UserInfo]:
        """Every user with their workload: :meth:`AccountService.list_users` (None: the command line)."""
        return self.accounts.list_users(actor if actor is not None else Identity.command_line())

    def create_api_token(self, actor: Identity, name: str, label: str = "") -> str:
        """Create an API token: :meth:`AccountService.create_api_token`."""
        return self.accounts.create_api_token(actor, name, label)

    def list_api_tokens(self, actor: Identity, name: str) -> list[TokenInfo]:
        """A user's API tokens: :meth:`AccountService.list_api_tokens`."""
        return self.accounts.list_api_tokens(actor, name)

    def revoke_api_token(self, actor: Identity, name: str, token_id: int) -> None:
        """Revoke a token: :meth:`AccountService.revoke_api_token`."""
        self.accounts.revoke_api_token(actor, name, token_id)

    def login(self, name: str, password: str, client: str) -> tuple[str, Identity]:
        """Log in: :meth:`AuthService.login`."""
        return self.auth.login(name, password, client)

    def change_own_password(self, identity: Identity, current: str, new: str, client: str) -> None:
        """Change one's own password: :meth:`AuthService.change_own_password`."""
        self.auth.change_own_password(identity, current, new, client)

    def session_identity(self, token: str | None) -> Identity | None:
        """The identity behind a session cookie: :meth:`AuthService.session_identity`."""
        return self.auth.session_identity(token)

    def api_identity(self, token: str | None) -> Identity | None:
        """The identity behind an API token: :meth:`AuthService.api_identity`."""
        return self.auth.api_identity(token)

    # an annotator's work (see AssignmentService, LabellingService and ImageService)

    def queue(self, identity: Identity) -> QueueView:
        """The caller's own queue: :meth:`AssignmentService.queue`."""
        return self.assignments.queue(identity)

    def next_todo(self, identity: Identity, after: str | None = None) -> str | None:
        """The caller's next unfinished assignment: :meth:`AssignmentService.next_todo`."""
        return self.assignments.next_todo(identity, after)

    def case_view(self, identity: Identity, assignment_id: str) -> CaseView:
        """One of the caller's assignments as shown to them: :meth:`AssignmentService.case_view`."""
        return self.assignments.case_view(identity, assignment_id)

    def submit_pair(
        self, identity: Identity, assignment_id: str, answer: PairAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save the caller's labels for a pair: :meth:`LabellingService.submit_pair`."""
        return self.labelling.submit_pair(identity, assignment_id, answer, client)

    def submit_screening(
        self, identity: Identity, assignment_id: str, answer: ScreeningAnswer, client: str = ""
    ) -> ShownSubmission:
        """Save the caller's decision on a question: :meth:`LabellingService.submit_screening`."""
        return self.labelling.submit_screening(identity, assignment_id, answer, client)

    def assignment_image(
        self, identity: Identity, assignment_id: str, center: float | None = None, width: float | None = None
    ) -> tuple[bytes, str]:
        """The image of one of the caller's assignments: :meth:`ImageService.assignment_image`."""
        return self.images.assignment_image(identity, assignment_id, center, width)

    # admin (see QualityService, AdjudicationService, RecordService and AssignmentService)

    def dashboard(self, actor: Identity) -> Dashboard:
        """Every dashboard figure: :meth:`QualityService.dashboard`."""
        return self.quality.dashboard(actor)

    def item_review(self, actor: Identity, item_id: str) -> ItemReview:
        """One item for adjudication: :meth:`QualityService.item_review`."""
        return self.quality.item_review(actor, item_id)

    def adjudicate(
        self, actor: Identity, item_id: str, values: Mapping[str, str], note: str = "", client: str = ""
    ) -> None:
        """Record an admin's decision: :meth:`AdjudicationService.adjudicate`."""
        self.adjudication.adjudicate(actor, item_id, values, note, client)

    def guidelines(self) -> str:
        """The guidelines (markdown): :meth:`RecordService.guidelines`."""
        return self.records.guidelines()

    def set_guidelines(self, actor: Identity, text: str, client: str = "") -> None:
        """Replace the guidelines: :meth:`RecordService.set_guidelines`."""
        self.records.set_guidelines(actor, text, client)

    def record_export(self, actor: Identity, what: str, items: int, client: str = "") -> None:
        """Write an export to the audit log: :meth:`RecordService.record_export`."""
        self.records.record_export(actor, what, items, client)

    def audit_entries(self, actor: Identity, limit: int = 200, before: int | None = None) -> list[AuditEntry]:
        """The newest audit log entries: :meth:`RecordService.audit_entries`."""
        return self.records.audit_entries(actor, limit, before)

    def rebalance(self, actor: Identity) -> dict[str, int]:
        """Recompute the queues now: :meth:`AssignmentService.rebalance`."""
        return self.assignments.rebalance(actor)


def create_project(
    directory: str | Path,
    *,
    cases: str | None = None,
    questions: str | Path | None = None,
    per_case: int = 3,
    db_url: str | None = None,
    gold: str | None = None,
    repeat_share: float = 0.0,
    seed: int = 0,
    name: str | None = None,
    guidelines: str | None = None,
) -> Project:
    """Create an annotation project from canonical cases (pairs) or a questions file (screening).

    Every image is read and decoded once, so a broken one is reported now rather than in front
    of a doctor; all problems are reported together. Images are copied into the database, so the
    project does not depend on the source files afterwards.

    Args:
        directory: the project directory (created; must not hold a project).
        cases: a data source of canonical cases (any ``--data`` source works).
        questions: a questions file (screening mode).
        per_case: K, annotators per item.
        db_url: a database URL; None for SQLite in the directory.
        gold: canonical cases with labels, mixed into every annotator's queue.
        repeat_share: share of each annotator's pairs shown to them again, swapped.
        seed: seed of every random choice (orders, queues).
        name: the project's display name (default: the directory name).
        guidelines: markdown to start from (default: built-in guidelines with the six definitions).

    Returns:
        The open project.

    Raises:
        InvalidInput: both or neither of cases and questions, or bad numbers.
        DataError: a problem in the input files, or a file without any case (cases, gold).
        AnnotateError: the directory already holds a project.
    """
    config = create_project_database(
        directory,
        cases=cases,
        questions=questions,
        per_case=per_case,
        db_url=db_url,
        gold=gold,
        repeat_share=repeat_share,
        seed=seed,
        name=name,
        guidelines=guidelines,
    )
    return Project(config, upgrade=False)

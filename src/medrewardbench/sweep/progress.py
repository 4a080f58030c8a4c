"""What a sweep reports while it runs: entries, requests per node, servers, workers, notes.

The CLI implements :class:`SweepProgress` with rich progress bars; tests record the calls (and may
act on them, for example kill a worker once some judgments are stored). Every method is called on
the driver's event loop thread and must return quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EntryOutcome", "SweepProgress"]


@dataclass
class EntryOutcome:
    """How one judge entry of a sweep ended.

    Attributes:
        name: the entry's name.
        spec: its judge spec.
        run_id: its run (None when it never got as far as planning).
        status: ``done``, ``budget`` (stopped before the budget would be exceeded), ``failed``
            (its server or worker failed; ``error`` says why) or ``interrupted``.
        total: requests of the run (cases x orders).
        reused: requests found in the store.
        judged: requests judged and stored now.
        failed: of those, the ones stored as failures.
        error: why the entry failed.
        nodes: node -> requests judged there now.
        wall_s: seconds from its start to its end.
        batch_ids: Batch API batches whose answers it stored.
    """

    name: str
    spec: str
    run_id: str | None = None
    status: str = "done"
    total: int = 0
    reused: int = 0
    judged: int = 0
    failed: int = 0
    error: str | None = None
    nodes: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    batch_ids: list[str] = field(default_factory=list)

    @property
    def stored(self) -> int:
        """Requests of the run in the store now."""
        return self.reused + self.judged


class SweepProgress:
    """Receives a sweep's progress; every method does nothing unless overridden."""

    def stage(self, text: str) -> None:
        """A step that may take a while (``"hashing 1000 cases"``, ``"connecting to Ray"``)."""

    def entry_started(self, name: str, total: int, already_done: int) -> None:
        """An entry begins: ``total`` requests, ``already_done`` of them found in the store."""

    def advance(self, name: str, n: int, node: str | None = None) -> None:
        """``n`` more requests of an entry are stored; ``node`` judged them (None: this process)."""

    def entry_finished(self, outcome: EntryOutcome) -> None:
        """An entry ended (see :attr:`EntryOutcome.status`)."""

    def server_started(self, name: str, pid: int, port: int, log_path: str) -> None:
        """An entry's model server was started (it is not ready yet)."""

    def worker_started(self, name: str, node: str, pid: int) -> None:
        """An entry's Ray worker is up on ``node`` as process ``pid`` (again after a restart)."""

    def note(self, text: str) -> None:
        """Something worth a line: a budget stop, a worker restart, a Batch API status."""

    def warning(self, text: str) -> None:
        """Something the user must see even with ``--quiet`` (processes of an earlier sweep stopped)."""
        self.note(text)

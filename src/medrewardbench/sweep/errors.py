"""The typed errors of a sweep: a bad sweep file, a model server that fails, a worker on other data."""

from __future__ import annotations

from pathlib import Path

from medrewardbench.errors import MedRewardBenchError


class SweepFileError(MedRewardBenchError, ValueError):
    """A sweep (or prices) file is invalid; the message names the file, the line and the key.

    Args:
        path: the file.
        line: 1-based line of the offending node, or None.
        message: what is wrong.

    Attributes:
        path: the file.
        line: 1-based line of the offending node, or None for a problem with the whole file.
    """

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = Path(path)
        self.line = line


class ServerError(MedRewardBenchError):
    """A model server of a sweep entry failed; the message names the entry and its log file."""


class ServerStartError(ServerError):
    """The server exited, or did not answer ``/v1/models`` within its ``ready_timeout``."""


class ServerDiedError(ServerError):
    """The server exited while its entry was being judged; what finished is stored."""


class EntryFailed(MedRewardBenchError):
    """One sweep entry could not finish (its server died, its worker kept dying); the others go on."""


class DataMismatchError(MedRewardBenchError):
    """A worker loaded data whose fingerprint differs from the driver's."""

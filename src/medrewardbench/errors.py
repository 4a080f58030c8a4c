"""Typed exceptions shared by the package."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass


class MedRewardBenchError(Exception):
    """Base class of every error this package raises on purpose."""


@dataclass(frozen=True)
class DataProblem:
    """One problem found in a data source, located as precisely as possible."""

    file: str
    message: str
    row: int | None = None
    """1-based row (line for JSONL, record for parquet); None for file-level problems."""
    field: str | None = None
    case_id: str | None = None
    kind: str | None = dataclasses.field(default=None, compare=False)
    """A short tag for problems that come in numbers (``"unlabeled"``, ``"null_label"``,
    ``"orphan_labels"``), so that they can be counted in summaries; None for the rest."""

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
        if self.case_id is not None:
            where += f" (case {self.case_id})"
        if self.field is not None:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class DataError(MedRewardBenchError):
    """A data source is invalid. Carries every problem found, not only the first.

    Args:
        problems: every problem found (the message lists the first 50).
    """

    def __init__(self, problems: Sequence[DataProblem]):
        self.problems = list(problems)
        if len(self.problems) == 1:  # one problem, one line
            super().__init__(str(self.problems[0]))
            return
        lines = [str(p) for p in self.problems[:50]]
        more = len(self.problems) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more problems")
        super().__init__(f"{len(self.problems)} problem(s) in the data:\n" + "\n".join(lines))


class ImageError(MedRewardBenchError):
    """An image could not be read, or was refused (for example a decompression bomb)."""


class MissingExtraError(MedRewardBenchError, ImportError):
    """An optional dependency is missing; the message names the extra to install.

    Args:
        module: the module that could not be imported.
        extra: the pip extra that provides it.
        purpose: what needs it.
    """

    def __init__(self, module: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the optional dependency {module!r}. "
            f"Install it with: pip install 'medrewardbench[{extra}]'"
        )
        self.module = module
        self.extra = extra


class JudgeSpecError(MedRewardBenchError, ValueError):
    """A judge spec string cannot be turned into a judge."""


class StoreError(MedRewardBenchError):
    """The results store is unusable or would mix incompatible results."""


class ResultsFormatError(MedRewardBenchError, ValueError):
    """A results document (analysis.json, metrics.json) is not of the schema this version reads."""


class OutputDirError(MedRewardBenchError):
    """An output directory cannot be used: a file, below a file, or not writable."""


class OutputLockedError(OutputDirError):
    """Another process is working in the same output directory.

    Args:
        pid: the process holding the lock, if known.
        directory: the output directory.
    """

    def __init__(self, pid: int | None, directory: str):
        holder = f"another medrewardbench process (pid {pid})" if pid is not None else "another medrewardbench process"
        super().__init__(
            f"{holder} is using {directory}; wait for it to finish, or rerun with --wait to start when it does"
        )
        self.pid = pid
        self.directory = directory


class EvaluationInterrupted(KeyboardInterrupt):
    """An evaluation stopped by Ctrl-C after storing what had finished.

    A ``KeyboardInterrupt``, so that code which does not know it still stops as it would; the CLI
    prints its message, which says how far it got and how to resume.

    Attributes:
        stored: requests of this evaluation (every judge, every order) found in the store, or None
            when it stopped before sending any request (``stage`` says where).
        total: requests the evaluation asked for.
        stage: what it was doing when it stopped before sending requests.
    """

    def __init__(self, stored: int | None, total: int, stage: str | None = None):
        if stored is not None:
            message = f"interrupted: {stored} of {total} requests stored; rerun the same command to resume"
        else:
            message = f"interrupted while {stage or 'starting'}: no request was sent; rerun the same command to resume"
        super().__init__(message)
        self.stored = stored
        self.total = total
        self.stage = stage


def require(module: str, extra: str, purpose: str) -> object:
    """Import an optional module or raise :class:`MissingExtraError` naming the extra.

    Args:
        module: dotted module name, e.g. ``"torch"``.
        extra: the pip extra that provides it, e.g. ``"hf"``.
        purpose: what needs it, for the error message.

    Returns:
        The imported module.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(module, extra, purpose) from exc

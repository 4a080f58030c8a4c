"""Typed exceptions shared by the package."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.metadata and urllib cost ~15 ms at start-up and serve only install hints
    import importlib.metadata


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


DISTRIBUTION = "medrewardbench"
"""The name pip knows this package by."""


def _source_checkout(distribution: importlib.metadata.Distribution | None) -> tuple[Path, bool] | None:
    """Where the package was installed from, when that was a local directory: (directory, editable).

    Args:
        distribution: the installed distribution; None when none is installed (the code then runs
            from a source tree on ``PYTHONPATH``, recognised by the ``pyproject.toml`` two levels
            above the package).

    Returns:
        The checkout and whether the install is editable, or None for an install from an index
        (or from a wheel or an archive).
    """
    if distribution is None:
        root = Path(__file__).resolve().parent.parent.parent
        return (root, True) if (root / "pyproject.toml").is_file() else None
    # PEP 610: pip records a direct install (a directory, an archive, a VCS URL) in direct_url.json
    text = distribution.read_text("direct_url.json")
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    url = record.get("url", "") if isinstance(record, dict) else ""
    if not url.startswith("file:") or not isinstance(record.get("dir_info"), dict):
        return None
    from urllib.parse import urlparse
    from urllib.request import url2pathname

    directory = Path(url2pathname(urlparse(url).path))
    return directory, bool(record["dir_info"].get("editable", False))


def install_command(extra: str | None = None, distribution: importlib.metadata.Distribution | None = None) -> str:
    """The pip command that installs medrewardbench, or one of its extras, the way this copy was installed.

    From a source checkout (PEP 610: the installed distribution's ``direct_url.json`` points at a
    local directory) it is ``pip install '.[api]'`` run in that directory (``-e`` for an editable
    install; the directory's path instead of ``.`` when the current directory is another one); from
    an index it is ``pip install 'medrewardbench[api]'``.

    Args:
        extra: the extra (``"api"``, ``"serve"``, ``"hf"``, ``"train"``...), or None for the package alone.
        distribution: the installed distribution to describe; None looks up the installed one.

    Returns:
        The command, quoted for a POSIX shell.
    """
    import importlib.metadata

    if distribution is None:
        try:
            distribution = importlib.metadata.distribution(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            distribution = None
    suffix = f"[{extra}]" if extra else ""
    checkout = _source_checkout(distribution)
    if checkout is None:
        return f"pip install '{DISTRIBUTION}{suffix}'"
    directory, editable = checkout
    try:
        here = Path.cwd().resolve() == directory.resolve()
    except OSError:
        here = False
    target = "." if here else str(directory)
    return f"pip install {'-e ' if editable else ''}'{target}{suffix}'"


class MissingExtraError(MedRewardBenchError, ImportError):
    """An optional dependency is missing; the message names the extra and the command that installs it.

    Args:
        module: the module that could not be imported.
        extra: the pip extra that provides it.
        purpose: what needs it.
    """

    def __init__(self, module: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the optional dependency {module!r} (the {extra!r} extra). "
            f"Install it with: {install_command(extra)}"
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
